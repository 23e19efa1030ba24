"""Admin: a read-only journal and the projections' checkpoints (with lag and rebuild)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db.models import BigIntegerField as BigIntegerOutput
from django.db.models import ExpressionWrapper, F, Model, Q, QuerySet, Subquery
from django.http import HttpRequest
from django.utils.functional import cached_property
from django.utils.html import format_html

from .conf import get_settings
from .errors import ActivityError, InvalidActivity
from .models import Checkpoint, Entry
from .projections import registry
from .reading import verb_prefix_q
from .rebuilding import rebuild

if TYPE_CHECKING:
    # django-stubs makes these classes generic; Django's own take no subscript at run time.
    _EntryPaginator = Paginator[Entry]
    _EntryAdminBase = admin.ModelAdmin[Entry]
    _CheckpointAdminBase = admin.ModelAdmin[Checkpoint]
else:
    _EntryPaginator = Paginator
    _EntryAdminBase = _CheckpointAdminBase = admin.ModelAdmin

_M = TypeVar("_M", bound=Model)


class CappedPaginator(_EntryPaginator):
    """Counts at most ``CAP + 1`` rows: a large journal never pays for ``COUNT(*)``."""

    CAP = 10_000

    @cached_property
    def count(self) -> int:
        object_list = self.object_list
        if isinstance(object_list, QuerySet):
            return object_list[: self.CAP + 1].count()
        return len(object_list)


class VerbPrefixFilter(admin.SimpleListFilter):
    """Verbs starting with a prefix, compared exactly (``?verb_prefix=order.`` works for any
    prefix; the choices are the first segments of recent verbs)."""

    title = "verb prefix"
    parameter_name = "verb_prefix"
    SAMPLE = 500

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        recent = (
            model_admin.get_queryset(request)
            .order_by("-position")
            .values_list("verb", flat=True)[: self.SAMPLE]
        )
        prefixes = {verb.split(".", 1)[0] + "." for verb in recent if "." in verb}
        if self.value():
            prefixes.add(self.value())
        return [(prefix, prefix) for prefix in sorted(prefixes)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Entry]) -> QuerySet[Entry]:
        value = self.value()
        if not value:
            return queryset
        try:
            return queryset.filter(verb_prefix_q(value))
        except InvalidActivity:
            return queryset.none()


def _on_journal_database(queryset: QuerySet[_M]) -> QuerySet[_M]:
    """Read (and write) through ``TILTTEK_ACTIVITY["DATABASE"]``, wherever routers point."""
    return queryset.using(get_settings().DATABASE)


@admin.register(Entry)
class EntryAdmin(_EntryAdminBase):
    list_display = (
        "position",
        "kind",
        "verb",
        "member",
        "object",
        "quantity",
        "occurred_at",
        "recorded_at",
    )
    list_filter = ("kind", VerbPrefixFilter, ("occurred_at", admin.DateFieldListFilter))
    search_fields = ("member", "object")
    search_help_text = "An exact member or object reference, e.g. auth.user:42"
    ordering = ("-position",)
    show_full_result_count = False
    paginator = CappedPaginator
    list_per_page = 100
    fields = (
        "position",
        "kind",
        "idempotency_key",
        "member",
        "verb",
        "object",
        "quantity",
        "context_json",
        "occurred_at",
        "recorded_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Entry]:
        return _on_journal_database(super().get_queryset(request))

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Entry], search_term: str
    ) -> tuple[QuerySet[Entry], bool]:
        """Exact reference match, so the member and object indexes serve it."""
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(Q(member=term) | Q(object=term)), False

    @admin.display(description="context")
    def context_json(self, entry: Entry) -> str:
        try:
            text = json.dumps(entry.context, indent=2, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError):
            text = repr(entry.context)
        return format_html("<pre>{}</pre>", text)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Checkpoint)
class CheckpointAdmin(_CheckpointAdminBase):
    list_display = ("projection", "position", "lag", "registered", "updated_at")
    ordering = ("projection",)
    readonly_fields = ("projection", "position", "updated_at")
    actions = ("rebuild_projections",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Checkpoint]:
        newest = Entry.objects.order_by("-position").values("position")[:1]
        return (
            _on_journal_database(super().get_queryset(request))
            .annotate(head=Subquery(newest))
            .annotate(
                lag_positions=ExpressionWrapper(
                    F("head") - F("position"), output_field=BigIntegerOutput()
                )
            )
        )

    @admin.display(description="lag (positions)", ordering="lag_positions")
    def lag(self, checkpoint: Any) -> int:
        return max(int(checkpoint.lag_positions or 0), 0)

    @admin.display(description="registered", boolean=True)
    def registered(self, checkpoint: Checkpoint) -> bool:
        return checkpoint.projection in registry

    @admin.action(description="Rebuild the selected projections", permissions=["rebuild"])
    def rebuild_projections(self, request: HttpRequest, queryset: QuerySet[Checkpoint]) -> None:
        for name in queryset.values_list("projection", flat=True):
            try:
                count = rebuild(name, using=get_settings().DATABASE)
            except (ActivityError, NotImplementedError) as exc:
                self.message_user(request, f"{name}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{name}: rebuilt from {count} entries")

    def has_rebuild_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("tilttek_activity.change_checkpoint"))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
