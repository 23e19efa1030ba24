"""The admin overview page (``admin/solid_objects/instance/overview/``, linked from the
app's admin index): what runs, what waits, what failed, at a glance.

Open to staff users who may view processes and messages (``solid_objects.view_process`` and
``solid_objects.view_message``); everyone else gets 403. Each figure links to the admin
list it summarises.

With shards the page adds up every alias and shows each one's figures in a table whose
links open that shard's change lists; ``?shard=ALIAS`` shows one alias only.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from .admin_shards import requested_shard, shard_of, shard_query
from .overview import build
from .overview_charts import bar_chart

PERMISSIONS = ("solid_objects.view_process", "solid_objects.view_message")


def may_view(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_active and user.is_staff and user.has_perms(PERMISSIONS))


def _changelist(site: admin.AdminSite, model: str, **filters: Any) -> str:
    url = reverse(f"admin:solid_objects_{model}_changelist", current_app=site.name)
    return f"{url}?{urlencode(filters)}" if filters else url


def _links(site: admin.AdminSite, alias: str) -> dict[str, str]:
    """The change lists the figures of ``alias`` summarise."""
    on = shard_query(alias)
    return {
        "processes": _changelist(site, "process", **on, shutdown_state__exact="running"),
        "effects_pending": _changelist(site, "effect", **on, status__exact="pending"),
        "effects_dead": _changelist(site, "effect", **on, status__exact="dead"),
        "broadcasts_pending": _changelist(site, "broadcast", **on, status__exact="pending"),
        "broadcasts_dead": _changelist(site, "broadcast", **on, status__exact="dead"),
        "reminders": _changelist(site, "reminder", **on, status__exact="scheduled"),
        "dead_letters": _changelist(site, "deadletter", **on),
        "instances": _changelist(site, "instance", **on),
        "overview": reverse("admin:solid_objects_overview", current_app=site.name)
        + (f"?{urlencode(on)}" if on else ""),
    }


ROLE_KINDS = ("worker", "effect", "reminder", "broadcast")


def _live_kinds(processes: dict[str, Any]) -> set[str]:
    return {p["kind"] for p in processes["live"] if not p["stale"] and not p["idle"]}


def _missing_roles(data: dict[str, Any]) -> list[str]:
    """The role kinds with no live process; with shards, per shard (a worker registers on
    each shard it serves, so a shard nobody serves shows here)."""
    shards = data.get("shards")
    if not shards:
        live = _live_kinds(data["processes"])
        return [kind for kind in ROLE_KINDS if kind not in live]
    return [
        f"{kind} on {alias}"
        for alias, part in shards.items()
        for live in [_live_kinds(part["processes"])]
        for kind in ROLE_KINDS
        if kind not in live
    ]


def overview_view(request: HttpRequest, site: admin.AdminSite) -> HttpResponse:
    if not may_view(request):
        raise PermissionDenied
    one = requested_shard(request)
    alias = shard_of(request)  # an unknown alias: 400
    data = build(alias if one is not None else None)
    links = _links(site, alias)
    shards = [
        {"alias": name, **part, "links": _links(site, name)}
        for name, part in data.get("shards", {}).items()
    ]
    for row in data["mailbox"]["by_actor_type"]:
        row["instances_url"] = _changelist(
            site, "instance", **shard_query(alias), actor_type=row["actor_type"]
        )
    for kind, counts in data["roles"].items():
        counts["url"] = _changelist(site, "process", **shard_query(alias), kind__exact=kind)
    for letter in data["dead_letters"]["latest"]:
        on = shard_query(letter["database"])
        letter["url"] = reverse(
            "admin:solid_objects_deadletter_change", args=[letter["id"]], current_app=site.name
        ) + (f"?{urlencode(on)}" if on else "")
    context = {
        **site.each_context(request),
        "title": "Actors overview",
        "overview": data,
        "charts": [(series, bar_chart(series)) for series in data["series"]],
        "links": links,
        "shards": shards,
        "shard": one and alias,
        "all_shards": reverse("admin:solid_objects_overview", current_app=site.name),
        "missing_roles": _missing_roles(data),
    }
    return TemplateResponse(request, "admin/solid_objects/overview.html", context)
