"""Django admin for operating actors: dead letters (retry), instances (pause/resume), and
read-only views of messages, reminders, outboxes and processes.

Change lists stay fast on large tables: no full counts (``show_full_result_count``), filters
on indexed columns, no per-row queries. State is never editable here. With shards every
page reads one alias, the ``shard`` choice (:mod:`solid_objects.admin_shards`), and the
object pages and actions act on the row's own shard.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from .admin_shards import ShardedAdmin, ShardedInline, shard_query
from .conf import get_settings
from .live.layers import default_layer, is_process_local
from .models import (
    Broadcast,
    ClaimedMessage,
    DeadLetter,
    DeadLetterQuerySet,
    Effect,
    EffectQuerySet,
    Instance,
    InstanceQuerySet,
    Message,
    Process,
    ReadyMessage,
    Reminder,
)
from .tasks.naming import operation_label


def pretty_json(value: Any) -> str:
    return format_html(
        '<pre style="white-space: pre-wrap; margin: 0">{}</pre>',
        json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False),
    )


class ReadOnlyAdmin(ShardedAdmin):
    """Operators look; the runtime writes."""

    show_full_result_count = False
    list_per_page = 50

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def may_operate(self, request: HttpRequest) -> bool:
        """Operator actions (retry, pause, resume) need the model's usual change permission,
        although the rows themselves are never edited here."""
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "actor",
        "operation_or_task",
        "attempts",
        "exception_name",
        "last_failed_at",
        "retried_message_id",
    )
    list_filter = ("actor_type",)
    search_fields = ("=actor_id", "operation", "exception_class")
    ordering = ("-last_failed_at",)
    actions = ("retry_selected",)
    readonly_fields = (
        "actor_type",
        "actor_id",
        "operation",
        "pretty_arguments",
        "attempts",
        "exception_class",
        "exception_message",
        "pretty_backtrace",
        "first_failed_at",
        "last_failed_at",
        "message_id",
        "retried_message_id",
        "created_at",
    )
    fields = readonly_fields
    change_form_template = "admin/solid_objects/deadletter/change_form.html"

    @admin.display(description="actor", ordering="actor_id")
    def actor(self, obj: DeadLetter) -> str:
        return f"{obj.actor_type}/{obj.actor_id}"

    @admin.display(description="operation", ordering="operation")
    def operation_or_task(self, obj: DeadLetter) -> str:
        return operation_label(obj.actor_type, obj.actor_id, obj.operation, obj.arguments)

    @admin.display(description="exception", ordering="exception_class")
    def exception_name(self, obj: DeadLetter) -> str:
        return obj.exception_class.rsplit(".", 1)[-1]

    @admin.display(description="arguments")
    def pretty_arguments(self, obj: DeadLetter) -> str:
        return pretty_json(obj.arguments)

    @admin.display(description="backtrace")
    def pretty_backtrace(self, obj: DeadLetter) -> str:
        lines = obj.backtrace if isinstance(obj.backtrace, list) else [str(obj.backtrace)]
        return format_html(
            '<pre style="white-space: pre-wrap; margin: 0">{}</pre>',
            "\n".join(str(line) for line in lines),
        )

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return self.may_operate(request)

    @admin.action(description="Retry selected dead letters", permissions=["retry"])
    def retry_selected(self, request: HttpRequest, queryset: DeadLetterQuerySet) -> None:
        retried = 0
        for dead_letter in queryset.only("id", "actor_type", "actor_id", "operation"):
            self._retry(request, dead_letter)
            retried += 1
        self.message_user(request, f"Retried {retried} dead letter(s).", messages.SUCCESS)

    def _retry(self, request: HttpRequest, dead_letter: DeadLetter) -> int:
        message = dead_letter.retry()  # on the row's own shard
        where = f" on {dead_letter._state.db}" if shard_query(str(dead_letter._state.db)) else ""
        self.log_change(
            request,
            dead_letter,
            f"Retried as message {message.id} (key dead-letter:{dead_letter.pk}){where}",
        )
        return message.id

    def get_urls(self) -> list[Any]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<int:object_id>/retry/",
                self.admin_site.admin_view(self.retry_view),
                name="{}_{}_retry".format(*info),
            ),
            *super().get_urls(),
        ]

    def retry_view(self, request: HttpRequest, object_id: int) -> HttpResponseRedirect:
        change_url = add_preserved_filters(
            {"preserved_filters": self.get_preserved_filters(request), "opts": self.opts},
            reverse(
                f"admin:{self.opts.app_label}_{self.opts.model_name}_change",
                args=[object_id],
                current_app=self.admin_site.name,
            ),
        )
        if request.method != "POST" or not self.has_retry_permission(request):
            return HttpResponseRedirect(change_url)
        dead_letter = self.get_object(request, str(object_id))
        if dead_letter is None:
            return HttpResponseRedirect(change_url)
        message_id = self._retry(request, dead_letter)
        self.message_user(request, f"Retried as message {message_id}.", messages.SUCCESS)
        return HttpResponseRedirect(change_url)


class ReadyInline(ShardedInline):
    model = ReadyMessage
    fields = ("sequence", "message_id", "available_at")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    ordering = ("sequence",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReadyMessage]:
        return super().get_queryset(request).order_by("sequence")


class ClaimedInline(ShardedInline):
    model = ClaimedMessage
    fields = ("message_id", "process_id", "activation_generation", "claimed_at")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False


@admin.register(Instance)
class InstanceAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "actor_type",
        "actor_id",
        "state_revision",
        "next_message_sequence",
        "lease",
        "paused_at",
        "last_used_at",
    )
    list_filter = ("actor_type",)
    search_fields = ("=actor_id",)
    ordering = ("-id",)
    actions = ("pause", "resume")
    inlines = (ClaimedInline, ReadyInline)

    def get_urls(self) -> list[Any]:
        from .overview_views import overview_view

        def overview(request: HttpRequest) -> HttpResponse:
            return overview_view(request, self.admin_site)

        return [
            path(
                "overview/",
                self.admin_site.admin_view(overview),
                name="solid_objects_overview",
            ),
            *super().get_urls(),
        ]

    readonly_fields = (
        "actor_type",
        "actor_id",
        "pretty_state",
        "state_version",
        "state_revision",
        "next_message_sequence",
        "activation_owner_id",
        "activation_generation",
        "activation_expires_at",
        "activated_at",
        "last_claimed_at",
        "last_used_at",
        "paused_at",
        "recent_messages",
        "created_at",
    )
    fields = readonly_fields

    @admin.display(description="lease")
    def lease(self, obj: Instance) -> str:
        if obj.activation_token is None:
            return "free"
        if obj.activation_expires_at and obj.activation_expires_at <= timezone.now():
            return "expired"
        return f"held by {str(obj.activation_owner_id)[:8]}…"

    @admin.display(description="state")
    def pretty_state(self, obj: Instance) -> str:
        return pretty_json(obj.state)

    @admin.display(description="recent messages")
    def recent_messages(self, obj: Instance) -> str:
        rows = (
            Message.objects.using(obj._state.db)
            .filter(instance_id=obj.pk)
            .order_by("-sequence")
            .values_list(
                "sequence",
                "operation",
                "delivery_mode",
                "attempt_count",
                "completed_at",
                "rejected_at",
            )[:20]
        )
        lines = [
            f"#{seq} {op} ({mode}, attempts {attempts})"
            f"{' rejected' if rejected else ' completed' if completed else ''}"
            for seq, op, mode, attempts, completed, rejected in rows
        ]
        return format_html('<pre style="margin: 0">{}</pre>', "\n".join(lines) or "—")

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return self.may_operate(request)

    @admin.action(description="Pause selected actors (no new turns)", permissions=["pause"])
    def pause(self, request: HttpRequest, queryset: InstanceQuerySet) -> None:
        count = queryset.pause()
        self.message_user(request, f"Paused {count} actor(s).", messages.SUCCESS)

    @admin.action(description="Resume selected actors", permissions=["pause"])
    def resume(self, request: HttpRequest, queryset: InstanceQuerySet) -> None:
        count = queryset.resume()
        self.message_user(request, f"Resumed {count} actor(s).", messages.SUCCESS)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "actor_type",
        "actor_id",
        "sequence",
        "operation_or_task",
        "delivery_mode",
        "attempt_count",
        "enqueued_at",
        "completed_at",
        "rejected_at",
    )
    list_filter = ("delivery_mode",)
    search_fields = ("=actor_id", "=request_id", "=idempotency_key")
    ordering = ("-id",)
    readonly_fields = (
        "instance_id",
        "actor_type",
        "actor_id",
        "sequence",
        "operation",
        "delivery_mode",
        "pretty_arguments",
        "attempt_count",
        "max_attempts",
        "request_id",
        "idempotency_key",
        "pretty_result",
        "pretty_error",
        "pretty_rejection",
        "enqueued_at",
        "available_at",
        "started_at",
        "completed_at",
        "rejected_at",
        "last_failed_at",
    )
    fields = readonly_fields

    @admin.display(description="operation", ordering="operation")
    def operation_or_task(self, obj: Message) -> str:
        return operation_label(obj.actor_type, obj.actor_id, obj.operation, obj.arguments)

    @admin.display(description="arguments")
    def pretty_arguments(self, obj: Message) -> str:
        return pretty_json(obj.arguments)

    @admin.display(description="result")
    def pretty_result(self, obj: Message) -> str:
        return pretty_json(obj.result)

    @admin.display(description="error")
    def pretty_error(self, obj: Message) -> str:
        return pretty_json(obj.error)

    @admin.display(description="rejection")
    def pretty_rejection(self, obj: Message) -> str:
        return pretty_json(obj.rejection)


@admin.register(Reminder)
class ReminderAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "actor_type",
        "actor_id",
        "name",
        "next_run_at",
        "interval_seconds",
        "cron",
        "time_zone",
        "missed_policy",
        "status",
        "occurrence",
    )
    list_filter = ("status", "missed_policy")
    search_fields = ("=actor_id", "name")
    ordering = ("next_run_at",)


@admin.register(Effect)
class EffectAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "effect_id",
        "name",
        "status",
        "attempt_count",
        "max_attempts",
        "available_at",
        "completed_at",
    )
    list_filter = ("status",)
    search_fields = ("=effect_id", "name")
    ordering = ("-id",)
    actions = ("retry_dead",)

    def has_retry_permission(self, request: HttpRequest) -> bool:
        return self.may_operate(request)

    @admin.action(description="Retry selected dead effects", permissions=["retry"])
    def retry_dead(self, request: HttpRequest, queryset: EffectQuerySet) -> None:
        # A handled effect's failure reached its actor's on_failure (a declined card): a
        # retry would run it again (charge the card again). retry_dead() leaves it alone;
        # say so rather than let it look like a dead effect that was retried.
        handled = queryset.filter(status=Effect.Status.HANDLED).count()
        count = queryset.retry_dead()
        if count or not handled:
            self.message_user(request, f"Retrying {count} dead effect(s).", messages.SUCCESS)
        if handled:
            self.message_user(
                request,
                f"{handled} handled effect(s) not retried: their failure was delivered to "
                "on_failure (a retry would run them again).",
                messages.WARNING,
            )


@admin.register(Broadcast)
class BroadcastAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "instance_id",
        "observable_name",
        "status",
        "attempt_count",
        "available_at",
        "delivered_at",
        "delivery",
    )
    list_filter = ("status",)
    ordering = ("-id",)

    @admin.display(description="delivery")
    def delivery(self, obj: Broadcast) -> str:
        """Where the row went, or why it waits (never "delivered" into a layer nobody reads:
        workers leave rows to the web process when the layer is in-memory)."""
        if obj.status == "delivered":
            return "sent to the actor's Channels group (pages subscribed then got it)"
        if obj.status == "dead":
            return "given up after MAX_ATTEMPTS failed sends"
        if obj.status == "processing":
            return "being sent"
        layer = default_layer()
        if layer is None:
            return "waits: no Channels layer is configured (nothing will send it)"
        if is_process_local(layer):
            return "waits for the web process (EmbeddedBroadcasts, in-memory layer)"
        return "waits for a broadcast role (run_actor_worker --all-roles)"


@admin.register(Process)
class ProcessAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "hostname", "pid", "shutdown_state", "last_heartbeat_at", "stale")
    list_filter = ("kind", "shutdown_state")
    ordering = ("-started_at",)

    @admin.display(boolean=True, description="stale")
    def stale(self, obj: Process) -> bool:
        threshold = get_settings().PROCESS_ALIVE_THRESHOLD
        return (
            obj.shutdown_state != "stopped"
            and obj.kind != "caller"  # a caller heartbeats only while it calls: idle is normal
            and (timezone.now() - obj.last_heartbeat_at).total_seconds() > threshold
        )
