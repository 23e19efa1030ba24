"""The admin over shards (``SOLID_OBJECTS["DATABASES"]``): every page reads one alias.

A change list cannot page and sort rows of several databases as one queryset, so each
``solid_objects`` change list shows one alias at a time, chosen by the ``shard`` query
parameter (a "shard" list filter offers every alias; without it, ``DATABASE``). The choice
travels the way Django's admin carries list filters (``_changelist_filters``), so an
object page, its actions (retry, pause, resume) and the redirects after them read and
write the row's own shard: row ids are per alias, and ``/deadletter/5/change/?shard=b`` is
another row than the same id on the first shard. The overview page
(:mod:`solid_objects.overview_views`) adds up every shard and links to each one's lists.

Unsharded nothing shows: the filter has no choices and every page reads ``DATABASE``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from django.contrib import admin
from django.core.exceptions import BadRequest
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from .errors import UnknownDatabase
from .routers import actor_aliases, require_actor_alias

#: The query parameter naming the alias a page reads.
SHARD_PARAMETER = "shard"
#: Django's admin keeps a change list's filters under this parameter on the pages it links.
PRESERVED = "_changelist_filters"

if TYPE_CHECKING:
    from django.contrib.admin.filters import _ListFilterChoices

    _ModelAdmin = admin.ModelAdmin[Any]
    _Inline = admin.TabularInline[Any, Any]
else:
    _ModelAdmin = admin.ModelAdmin
    _Inline = admin.TabularInline


def requested_shard(request: HttpRequest) -> str | None:
    """The alias a request names (``?shard=`` or in its preserved change list filters)."""
    named = request.GET.get(SHARD_PARAMETER)
    if named is None:
        preserved = dict(parse_qsl(request.GET.get(PRESERVED, "")))
        named = preserved.get(SHARD_PARAMETER)
    return named


def shard_of(request: HttpRequest) -> str:
    """The alias a page reads: the one the request names, else ``DATABASE``. An alias that
    holds no ``solid_objects`` tables answers 400 (nothing is read)."""
    try:
        return require_actor_alias(requested_shard(request))
    except UnknownDatabase as exc:
        raise BadRequest(str(exc)) from exc


def shard_query(alias: str) -> dict[str, str]:
    """The query parameters of a change list link on ``alias`` (none when unsharded)."""
    return {SHARD_PARAMETER: alias} if len(actor_aliases()) > 1 else {}


class ShardFilter(admin.SimpleListFilter):
    """The "shard" list filter: one choice per alias (no "All": a change list reads one
    database), the current one selected, ``DATABASE`` when none is named."""

    title = "shard"
    parameter_name = SHARD_PARAMETER

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        aliases = actor_aliases()
        return [(alias, alias) for alias in aliases] if len(aliases) > 1 else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset  # ShardedAdmin.get_queryset already reads the chosen alias

    def choices(self, changelist: Any) -> Iterator[_ListFilterChoices]:
        current = self.value() or require_actor_alias(None)
        for alias, title in self.lookup_choices:
            yield {
                "selected": alias == current,
                "query_string": changelist.get_query_string({self.parameter_name: alias}),
                "display": title,
            }


class ShardedAdmin(_ModelAdmin):
    """A ``solid_objects`` model admin that reads and acts on the requested shard."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).using(shard_of(request))

    def get_list_filter(self, request: HttpRequest) -> Any:
        # Always there (it consumes ``?shard=``); it shows only with more than one alias.
        return (ShardFilter, *super().get_list_filter(request))

    def get_preserved_filters(self, request: HttpRequest) -> str:
        """Django's preserved filters, and on a page opened with ``?shard=`` (a link from
        the overview) that shard, so the page's forms and redirects stay on it."""
        preserved = super().get_preserved_filters(request)
        named = request.GET.get(SHARD_PARAMETER)
        if preserved or named is None:
            return preserved
        return urlencode({PRESERVED: urlencode({SHARD_PARAMETER: named})})

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Model | None = None,
    ) -> Any:
        if obj is not None and len(actor_aliases()) > 1:
            context["subtitle"] = f"{obj} (shard {obj._state.db})"
        return super().render_change_form(request, context, add, change, form_url, obj)

    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        obj.save(using=shard_of(request))

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        obj.delete(using=shard_of(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        queryset.using(shard_of(request)).delete()


class ShardedInline(_Inline):
    """An inline of a sharded object page: its rows are read on the page's shard."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).using(shard_of(request))
