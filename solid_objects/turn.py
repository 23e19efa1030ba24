"""Running one turn: a handler on in-memory state, outside any transaction.

A turn never touches the database. It produces a :class:`TurnOutcome`: the result or the
rejection or the error, plus what it staged (effects, actor messages, reminders, commit
actions) for the fenced commit to write atomically with the state.
"""

from __future__ import annotations

import math
import traceback
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from tilttek_activity.conf import get_settings as activity_settings
from tilttek_activity.staging import StagedActivities

from . import cron, payloads
from .conf import get_settings
from .db.outbox import ACTOR_MESSAGE, RECORD_ACTIVITY
from .errors import (
    ApplicationWriteForbidden,
    InvalidPayload,
    InvalidRejectionCode,
    Rejected,
    UnknownOperation,
    is_retryable,
)
from .mailbox import bind, validate_available_at, validate_identifier
from .registry import get_commit_action
from .shards import database_for
from .spec import REJECTION_CODE, ActorAddress, ActorInstance, ActorSpec
from .write_guard import handler_code, write_was_attempted

if TYPE_CHECKING:
    from .db.rows import MessageRow

MAX_EXCEPTION_MESSAGE = 8 * 1024
MAX_BACKTRACE_LINES = 50


@dataclass(frozen=True, slots=True)
class MessageContext:
    """``self.message`` inside a handler."""

    id: int
    request_id: str
    sequence: int
    attempt: int
    idempotency_key: str | None
    delivery_mode: str
    operation: str


@dataclass(slots=True)
class StagedEffect:
    effect_id: str
    name: str
    arguments: str  # JSON
    success_operation: str | None
    failure_operation: str | None
    available_at: datetime | None = None


@dataclass(slots=True)
class StagedReminder:
    name: str
    operation: str
    arguments: str  # JSON
    at: datetime | None
    delay: float | None
    interval_seconds: float | None
    missed_policy: str
    cancel: bool = False
    cron: str | None = None
    time_zone: str | None = None


@dataclass(slots=True)
class StagedCommitAction:
    name: str
    arguments: dict[str, Any]


@dataclass
class Staged:
    effects: list[StagedEffect] = field(default_factory=list)
    reminders: list[StagedReminder] = field(default_factory=list)
    commit_actions: list[StagedCommitAction] = field(default_factory=list)
    activities: StagedActivities = field(default_factory=StagedActivities)
    replaced_reminders: list[str] = field(default_factory=list)  # filled by the commit

    def __bool__(self) -> bool:
        return bool(self.effects or self.reminders or self.commit_actions or self.activities)

    @property
    def only_activities(self) -> bool:
        """Nothing staged but journal entries (which never touch the actor's mailbox)."""
        return not (self.effects or self.reminders or self.commit_actions)

    @property
    def only_joinable(self) -> bool:
        """Nothing staged but journal entries under derived keys: the fenced commit may
        embed them in its single statement where the database has one."""
        return not (self.effects or self.reminders or self.commit_actions) and (
            self.activities.reserved
        )


class EffectHandle:
    """Returned by ``self.emit``: the stable ``effect_id`` is the provider's idempotency key."""

    def __init__(self, effect_id: str, name: str) -> None:
        self.effect_id = effect_id
        self.name = name

    def __repr__(self) -> str:
        return f"<EffectHandle {self.name} {self.effect_id}>"


class _SendProxy:
    def __init__(
        self,
        context: TurnContext,
        ref: ActorAddress,
        available_at: Any,
        idempotency_key: str | None,
    ) -> None:
        if not isinstance(ref, ActorAddress):
            raise InvalidPayload(f"send_to() needs an actor reference, got {type(ref).__name__}")
        validate_available_at(available_at)
        if idempotency_key is not None:
            validate_identifier(idempotency_key, "idempotency_key")
        self._context = context
        self._ref = ref
        self._available_at = available_at
        self._idempotency_key = idempotency_key

    def __getattr__(self, operation: str) -> Any:
        if operation.startswith("_"):
            raise AttributeError(operation)
        spec_operation = self._ref.spec.operation(operation)

        def stage(*args: Any, **kwargs: Any) -> EffectHandle:
            arguments = bind(spec_operation, args, kwargs)
            body = {
                "actor_type": self._ref.actor_type,
                "actor_id": self._ref.actor_id,
                "operation": operation,
                "arguments": arguments,
                "idempotency_key": self._idempotency_key,
                "available_at": self._available_at.isoformat() if self._available_at else None,
            }
            return self._context._stage_effect(ACTOR_MESSAGE, body, None, None)

        return stage


class _ScheduleProxy:
    def __init__(
        self,
        context: TurnContext,
        at: Any,
        delay: Any,
        every: Any,
        missed: str,
        key: str | None,
        cron_expression: Any = None,
        tz: Any = None,
    ) -> None:
        self._cron: tuple[str, str] | None = None
        if cron_expression is not None:
            if every is not None:
                raise InvalidPayload("schedule() takes cron= or every=, not both")
            if at is not None or delay is not None:
                raise InvalidPayload("schedule(cron=...) takes no at= or delay=")
            self._cron = cron.validate(cron_expression, "UTC" if tz is None else tz)
            at = cron.next_after(*self._cron, timezone.now())
        elif tz is not None:
            raise InvalidPayload("schedule(tz=...) needs cron=")
        if (at is None) == (delay is None):
            raise InvalidPayload("schedule() needs exactly one of at= or delay=")
        if missed not in ("latest", "all"):
            raise InvalidPayload('missed must be "latest" or "all"')
        if at is not None and not isinstance(at, datetime):
            raise InvalidPayload("schedule(at=...) needs a timezone-aware datetime")
        validate_available_at(at, "schedule(at=...)")
        if key is not None and not isinstance(key, str):
            raise InvalidPayload(f"schedule(key=...) must be a string, got {type(key).__name__}")
        self._context = context
        self._at = at
        self._delay = _seconds(delay, "delay") if delay is not None else None
        self._every = _seconds(every, "every") if every is not None else None
        if self._every is not None and self._every <= 0:
            raise InvalidPayload("every= must be positive")
        self._missed = missed
        self._key = key

    def __getattr__(self, operation: str) -> Any:
        if operation.startswith("_"):
            raise AttributeError(operation)
        spec_operation = self._context.spec.operation(operation)

        def stage(*args: Any, **kwargs: Any) -> None:
            arguments = bind(spec_operation, args, kwargs)
            name = operation if self._key is None else f"{operation}:{self._key}"
            validate_identifier(name, "reminder name")
            self._context.staged.reminders.append(
                StagedReminder(
                    name=name,
                    operation=operation,
                    arguments=payloads.encode(
                        arguments,
                        what="reminder arguments",
                        limit=get_settings().MAX_PAYLOAD_BYTES,
                        max_depth=self._context.max_depth,
                    ),
                    at=self._at,
                    delay=self._delay,
                    interval_seconds=self._every,
                    missed_policy=self._missed,
                    cron=None if self._cron is None else self._cron[0],
                    time_zone=None if self._cron is None else self._cron[1],
                )
            )

        return stage


#: The longest ``delay=`` or ``every=`` a reminder takes (100 years): every database can add
#: it to the current time.
MAX_SCHEDULE_SECONDS = 100 * 365.25 * 86400


def _seconds(value: Any, what: str) -> float:
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
    else:
        raise InvalidPayload(f"{what}= takes seconds or a timedelta, got {type(value).__name__}")
    if not -MAX_SCHEDULE_SECONDS <= seconds <= MAX_SCHEDULE_SECONDS:  # also NaN
        raise InvalidPayload(
            f"{what}= must be finite seconds within 100 years, got {payloads.short_repr(value)}"
        )
    return seconds


class TurnContext:
    """What handler code reaches through ``self``: message context and staging."""

    def __init__(
        self,
        spec: ActorSpec,
        message: MessageContext,
        max_depth: int = payloads.MAX_DEPTH,
        actor_id: str = "",
    ) -> None:
        self.spec = spec
        self.actor_id = actor_id
        self.message = message
        self.staged = Staged()
        self.max_depth = max_depth
        #: Journal entries of this turn sent through the outbox (the journal lives elsewhere).
        self._routed_activities = 0

    def _stage_effect(
        self, name: str, arguments: dict[str, Any], on_success: str | None, on_failure: str | None
    ) -> EffectHandle:
        effect_id = str(uuid.uuid4())
        self.staged.effects.append(
            StagedEffect(
                effect_id=effect_id,
                name=name,
                arguments=payloads.encode(
                    arguments,
                    what="effect arguments",
                    limit=get_settings().MAX_PAYLOAD_BYTES,
                    max_depth=self.max_depth,
                ),
                success_operation=on_success,
                failure_operation=on_failure,
            )
        )
        return EffectHandle(effect_id, name)

    def emit(
        self, name: str, on_success: str | None, on_failure: str | None, arguments: dict[str, Any]
    ) -> EffectHandle:
        validate_identifier(name, "effect name")
        for callback in (on_success, on_failure):
            if callback is not None:
                if not isinstance(callback, str):
                    raise UnknownOperation(
                        f"effect callback {payloads.short_repr(callback)} is not an operation"
                    )
                self.spec.operation(callback)
        return self._stage_effect(name, arguments, on_success, on_failure)

    def send_to(
        self, ref: ActorAddress, available_at: Any, idempotency_key: str | None
    ) -> _SendProxy:
        return _SendProxy(self, ref, available_at, idempotency_key)

    def schedule(
        self,
        at: Any,
        delay: Any,
        every: Any,
        missed: str,
        key: str | None,
        cron_expression: Any = None,
        tz: Any = None,
    ) -> _ScheduleProxy:
        return _ScheduleProxy(self, at, delay, every, missed, key, cron_expression, tz)

    def unschedule(self, op: Any, key: str | None) -> None:
        operation = op if isinstance(op, str) else getattr(op, "__name__", str(op))
        if key is not None and not isinstance(key, str):
            raise InvalidPayload(f"unschedule(key=...) must be a string, got {type(key).__name__}")
        name = operation if key is None else f"{operation}:{key}"
        validate_identifier(name, "reminder name")
        self.staged.reminders.append(
            StagedReminder(
                name=name,
                operation=operation,
                arguments="{}",
                at=None,
                delay=None,
                interval_seconds=None,
                missed_policy="latest",
                cancel=True,
            )
        )

    def record_activity(
        self,
        member: Any,
        verb: Any,
        *,
        object: Any,
        quantity: Any,
        context: Any,
        occurred_at: Any,
        idempotency_key: Any,
    ) -> str:
        """Validate one journal entry now and stage it for the fenced commit; its key.

        The default key is derived from the message id and the call's position in the turn,
        so every run of this turn stages the same keys and the commit, which happens at most
        once, writes each once."""
        problem = _journal_problem()
        if problem is not None:
            error = ImproperlyConfigured(problem)
            # errors.is_retryable() reads this attribute; Django's exception declares none.
            error.retryable = False  # type: ignore[attr-defined]
            raise error
        home = database_for(self.spec.actor_type, self.actor_id)
        position = len(self.staged.activities) + self._routed_activities
        if home == activity_settings().DATABASE:
            staged = self.staged.activities
            draft = staged.stage(
                member,
                verb,
                object=object,
                quantity=quantity,
                context=context,
                occurred_at=occurred_at,
                idempotency_key=idempotency_key,
                derived_key=activity_key(self.message.id, position),
            )
            return draft.idempotency_key
        # The journal is on another database: the entry travels through this actor's outbox
        # (staged in the same fenced commit) and is written once per key after it commits.
        draft = StagedActivities().stage(
            member,
            verb,
            object=object,
            quantity=quantity,
            context=context,
            occurred_at=occurred_at,
            idempotency_key=idempotency_key,
            derived_key=activity_key(self.message.id, position, database=home),
        )
        self._routed_activities += 1
        self._stage_effect(
            RECORD_ACTIVITY,
            {
                "member": draft.member,
                "verb": draft.verb,
                "object": draft.object,
                "quantity": draft.quantity,
                "context": draft.context,
                # The turn's time, given, so a redelivery records the same entry.
                "occurred_at": draft.occurred_at.isoformat(),
                "idempotency_key": draft.idempotency_key,
            },
            None,
            None,
        )
        return draft.idempotency_key

    def commit_action(self, name: str, arguments: dict[str, Any]) -> None:
        if get_commit_action(name) is None:
            raise LookupError(f"no commit action {name!r} is registered")
        payloads.validate(arguments, what="commit action arguments")
        self.staged.commit_actions.append(StagedCommitAction(name, arguments))


def _journal_problem() -> str | None:
    """Why this process cannot record activity from a turn, or None."""
    if not apps.is_installed("tilttek_activity"):
        return "self.record_activity() needs 'tilttek_activity' in INSTALLED_APPS"
    return None


def activity_key(message_id: int, position: int, database: str | None = None) -> str:
    """The idempotency key of a turn's ``position``-th ``record_activity`` (from 0) when the
    handler gives none. An entry routed through the outbox names the actor's database:
    message ids are numbered per database, and two shards' entries share one journal."""
    if database is None:
        return f"solid_objects:message:{message_id}:{position}"
    return f"solid_objects:{database}:message:{message_id}:{position}"


@dataclass(slots=True)
class TurnOutcome:
    """What one turn produced. Exactly one of result/rejection/error is meaningful."""

    message: MessageRow
    kind: str  # "completed" | "rejected" | "failed"
    result_json: str | None = None
    result: Any = None
    rejection: Rejected | None = None
    rejection_json: str | None = None  # the rejection as stored (code, message, details)
    error: dict[str, Any] | None = None
    exception: BaseException | None = None
    retryable: bool = True
    staged: Staged | None = None
    is_query: bool = False
    duration: float = 0.0
    broadcasts: dict[str, Any] | None = None  # observables this turn changed

    @property
    def ok(self) -> bool:
        return self.kind != "failed"


def describe_exception(exc: BaseException) -> dict[str, Any]:
    """``{class, message, backtrace}`` with the documented bounds, always storable: a NUL or
    a lone surrogate in the exception's text is written as an escape (``\\x00``,
    ``\\ud800``), so recording a failure can never fail in turn."""
    cls = type(exc)
    try:
        message = str(exc)
    except Exception:
        message = f"<str() of this {cls.__name__} failed>"
    try:
        lines = traceback.format_exception(cls, exc, exc.__traceback__)
    except Exception:
        lines = [f"{cls.__name__}: <the traceback could not be formatted>"]
    backtrace = [
        _storable(line[:MAX_EXCEPTION_MESSAGE])
        for line in "".join(lines).splitlines()[-MAX_BACKTRACE_LINES:]
    ]
    return {
        "class": _storable(f"{cls.__module__}.{cls.__qualname__}"[:255])[:255],
        "message": _storable(message[:MAX_EXCEPTION_MESSAGE]),
        "backtrace": backtrace,
    }


def _storable(text: str) -> str:
    if "\x00" not in text and (text.isascii() or payloads.problem_with_text(text) is None):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def run_turn(
    actor: ActorInstance, spec: ActorSpec, message: MessageRow, max_depth: int = payloads.MAX_DEPTH
) -> TurnOutcome:
    """Run one message's handler against ``actor`` (state is mutated in place).

    ``max_depth`` is the JSON nesting the database accepts (results, rejections, staged
    arguments are checked here, so a value the database would refuse fails this turn alone).
    """
    import time

    started = time.monotonic()
    context = TurnContext(
        spec,
        MessageContext(
            id=message.id,
            request_id=message.request_id,
            sequence=message.sequence,
            attempt=message.attempt_count,
            idempotency_key=message.idempotency_key,
            delivery_mode=message.delivery_mode,
            operation=message.operation,
        ),
        max_depth,
        actor.actor_id,
    )
    outcome = TurnOutcome(message=message, kind="completed", staged=context.staged)
    try:
        operation = spec.operation(message.operation)
        outcome.is_query = operation.is_query
        arguments = payloads.decode(message.arguments) or {}
        actor._context = context
        try:
            with handler_code():
                result = operation.function(actor, **arguments)
        finally:
            actor._context = None
        if write_was_attempted():
            raise ApplicationWriteForbidden("the handler tried to write to the database directly")
        outcome.result = result
        outcome.result_json = payloads.encode(
            result, what="result", limit=get_settings().MAX_RESULT_BYTES, max_depth=max_depth
        )
    except Rejected as rejection:
        try:
            # Stored with the commit: refuse what cannot be stored now, as a failed turn
            # (an error inside the commit would leave the claim stuck until its lease ends,
            # an error here would end the worker's thread). Anything the encoder or the
            # rejection itself raises is such a failure, without retry.
            outcome.rejection_json = _encode_rejection(rejection, max_depth)
        except Exception as exc:
            outcome.kind = "failed"
            outcome.exception = exc
            outcome.error = describe_exception(exc)
            outcome.retryable = False
            outcome.staged = None
        else:
            outcome.kind = "rejected"
            outcome.rejection = rejection
            outcome.staged = None
    except Exception as exc:
        if isinstance(exc, ApplicationWriteForbidden) or write_was_attempted():
            exc = (
                exc
                if isinstance(exc, ApplicationWriteForbidden)
                else ApplicationWriteForbidden(str(exc))
            )
        outcome.kind = "failed"
        outcome.exception = exc
        outcome.error = describe_exception(exc)
        outcome.retryable = is_retryable(exc)
        outcome.staged = None
    outcome.duration = time.monotonic() - started
    return outcome


def _encode_rejection(rejection: Rejected, max_depth: int) -> str:
    code = rejection.code
    if not isinstance(code, str) or not REJECTION_CODE.match(code):
        raise InvalidRejectionCode(f"invalid rejection code {payloads.short_repr(code)}")
    if not isinstance(rejection.message, str):
        raise InvalidPayload(
            f"a rejection message must be a string, got {type(rejection.message).__name__}"
        )
    return payloads.encode(
        {"code": code, "message": rejection.message, "details": rejection.details},
        what="rejection",
        limit=get_settings().MAX_RESULT_BYTES,
        max_depth=max_depth,
    )
