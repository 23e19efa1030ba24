"""The admin overview page (``admin/solid_objects/instance/overview/``, linked from the
app's admin index): what runs, what waits, what failed, at a glance.

Open to staff users who may view processes and messages (``solid_objects.view_process`` and
``solid_objects.view_message``); everyone else gets 403. Each figure links to the admin
list it summarises.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from .overview import build
from .overview_charts import bar_chart

PERMISSIONS = ("solid_objects.view_process", "solid_objects.view_message")


def may_view(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_active and user.is_staff and user.has_perms(PERMISSIONS))


def _changelist(site: admin.AdminSite, model: str, **filters: Any) -> str:
    url = reverse(f"admin:solid_objects_{model}_changelist", current_app=site.name)
    return f"{url}?{urlencode(filters)}" if filters else url


def overview_view(request: HttpRequest, site: admin.AdminSite) -> HttpResponse:
    if not may_view(request):
        raise PermissionDenied
    data = build()
    links = {
        "processes": _changelist(site, "process", shutdown_state__exact="running"),
        "effects_pending": _changelist(site, "effect", status__exact="pending"),
        "effects_dead": _changelist(site, "effect", status__exact="dead"),
        "broadcasts_pending": _changelist(site, "broadcast", status__exact="pending"),
        "broadcasts_dead": _changelist(site, "broadcast", status__exact="dead"),
        "reminders": _changelist(site, "reminder", status__exact="scheduled"),
        "dead_letters": _changelist(site, "deadletter"),
    }
    for row in data["mailbox"]["by_actor_type"]:
        row["instances_url"] = _changelist(site, "instance", actor_type=row["actor_type"])
    for kind, counts in data["roles"].items():
        counts["url"] = _changelist(site, "process", kind__exact=kind)
    for letter in data["dead_letters"]["latest"]:
        letter["url"] = reverse(
            "admin:solid_objects_deadletter_change", args=[letter["id"]], current_app=site.name
        )
    context = {
        **site.each_context(request),
        "title": "Actors overview",
        "overview": data,
        "charts": [(series, bar_chart(series)) for series in data["series"]],
        "links": links,
        "missing_roles": [
            kind
            for kind in ("worker", "effect", "reminder", "broadcast")
            if not data["roles"].get(kind, {}).get("live")
        ],
    }
    return TemplateResponse(request, "admin/solid_objects/overview.html", context)
