"""Schedules declared in settings: ``SOLID_OBJECTS["SCHEDULES"]`` (docs/tasks.md).

Each schedule is one cron reminder of an internal actor, ``solid_objects.schedule``, whose
id is the schedule's name. A reminder scheduler arms them when it starts
(:func:`sync_schedules`): an ``arm`` message per schedule, a no-op turn when the definition
is unchanged, so any number of schedulers may start together. Every occurrence then fires
through the reminder machinery, exactly once however many schedulers run, and its ``tick``
turn sends the target message in its fenced commit: an actor operation, or the ``run``
message of a ``django.tasks`` task of the ``solid_objects.tasks`` backend.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from django.utils.module_loading import import_string

from . import cron
from .actor import Actor, attribute
from .conf import get_settings
from .errors import InvalidPayload, SolidObjectsError
from .models import Reminder
from .references import ref
from .registry import get_spec, register
from .shards import databases
from .tasks.naming import TASK_ACTOR_TYPE

SCHEDULE_ACTOR_TYPE = "solid_objects.schedule"
#: The reminder (and operation) name of a schedule's occurrences.
TICK = "tick"
KEYS = frozenset(
    {"cron", "tz", "missed", "task", "args", "kwargs", "actor", "actor_id", "operation"}
    | {"arguments"}
)


def _json(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"{what} must be JSON values: {exc}") from None


def definition(name: object, raw: object) -> dict[str, Any]:
    """The normalized definition of one schedule, or :class:`InvalidPayload` saying why."""
    if not isinstance(name, str) or not name or len(name) > 191:
        raise InvalidPayload(f"schedule names must be non-empty strings, got {name!r}")
    if not isinstance(raw, Mapping):
        raise InvalidPayload(f"schedule {name!r} must be a dict")
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise InvalidPayload(f"schedule {name!r} has unknown keys {unknown}")
    expression, tz = cron.validate(raw.get("cron"), raw.get("tz", "UTC"))
    missed = raw.get("missed", "latest")
    if missed not in ("latest", "all"):
        raise InvalidPayload(f'schedule {name!r}: missed must be "latest" or "all"')
    result: dict[str, Any] = {"cron": expression, "tz": tz, "missed": missed}
    if ("task" in raw) == ("actor" in raw):
        raise InvalidPayload(f"schedule {name!r} needs exactly one of task= or actor=")
    if "task" in raw:
        args, kwargs = raw.get("args", []), raw.get("kwargs", {})
        if not isinstance(args, list | tuple) or not isinstance(kwargs, Mapping):
            raise InvalidPayload(f"schedule {name!r}: args must be a list, kwargs a dict")
        _task(raw["task"], name)
        result.update(
            task=raw["task"],
            args=_json(list(args), f"schedule {name!r} args"),
            kwargs=_json(dict(kwargs), f"schedule {name!r} kwargs"),
        )
    else:
        actor_id, operation = raw.get("actor_id"), raw.get("operation")
        arguments = raw.get("arguments", {})
        if not isinstance(actor_id, str) or not actor_id:
            raise InvalidPayload(f"schedule {name!r} needs actor_id= (a string)")
        if not isinstance(operation, str) or not isinstance(arguments, Mapping):
            raise InvalidPayload(f"schedule {name!r} needs operation= and arguments= (a dict)")
        try:
            get_spec(raw["actor"]).operation(operation)
        except SolidObjectsError as exc:
            raise InvalidPayload(f"schedule {name!r}: {exc}") from exc
        result.update(
            actor=raw["actor"],
            actor_id=actor_id,
            operation=operation,
            arguments=_json(dict(arguments), f"schedule {name!r} arguments"),
        )
    return result


def _task(path: object, name: str) -> Any:
    """The ``django.tasks`` task at ``path``, run by a ``solid_objects.tasks`` backend."""
    from .tasks.backend import SolidObjectsBackend

    if not isinstance(path, str):
        raise InvalidPayload(f"schedule {name!r}: task= must be a dotted path")
    try:
        task = import_string(path)
        backend = task.get_backend()
    except (ImportError, AttributeError, KeyError) as exc:
        raise InvalidPayload(f"schedule {name!r}: no task {path!r} ({exc})") from exc
    if not isinstance(backend, SolidObjectsBackend):
        raise InvalidPayload(
            f"schedule {name!r}: task {path!r} runs on {type(backend).__name__}, "
            "not solid_objects.tasks.SolidObjectsBackend"
        )
    return task


def definitions() -> dict[str, dict[str, Any]]:
    """Every schedule of the settings, normalized (raises :class:`InvalidPayload`)."""
    raw = get_settings().SCHEDULES
    if not isinstance(raw, Mapping):
        raise InvalidPayload("SCHEDULES must be a dict of schedule names to definitions")
    return {name: definition(name, value) for name, value in raw.items()}


def problems(raw: object) -> list[str]:
    """What is wrong with a ``SCHEDULES`` value (the system check's findings)."""
    if not isinstance(raw, Mapping):
        return ["must be a dict of schedule names to definitions"]
    found: list[str] = []
    for name, value in raw.items():
        try:
            definition(name, value)
        except InvalidPayload as exc:
            found.append(str(exc))
    return found


def digest(value: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


class ScheduleActor(Actor):
    """One schedule of ``SOLID_OBJECTS["SCHEDULES"]``: its cron reminder and its target."""

    actor_type = SCHEDULE_ACTOR_TYPE

    definition = attribute(default=dict)
    digest = attribute(default="")

    def arm(self, definition: dict[str, Any], digest: str) -> bool:
        """Schedule the ``tick`` reminder for ``definition``; ``False`` when it already is."""
        if digest == self.digest:
            return False
        self.definition, self.digest = definition, digest
        self.schedule(
            cron=definition["cron"], tz=definition["tz"], missed=definition["missed"]
        ).tick()
        return True

    def disarm(self) -> bool:
        """Cancel the schedule (it left the settings)."""
        if not self.digest:
            return False
        self.definition, self.digest = {}, ""
        self.unschedule(TICK)
        return True

    def tick(self) -> None:
        """One occurrence: send the target message in this turn's commit."""
        target = self.definition
        if "task" in target:
            task = _task(target["task"], self.actor_id)
            prepared = task.get_backend().prepare(task, target["args"], target["kwargs"])
            self.send_to(
                ref(TASK_ACTOR_TYPE, prepared.actor_id), available_at=prepared.available_at
            ).run(**prepared.arguments)
        elif "actor" in target:
            send = self.send_to(ref(target["actor"], target["actor_id"]))
            getattr(send, target["operation"])(**target["arguments"])


register(ScheduleActor)


def sync_schedules() -> int:
    """Arm every schedule of the settings and disarm the ones that left them; returns how
    many arm and disarm messages were enqueued (each a no-op turn when nothing changed)."""
    wanted = definitions()
    for name, value in wanted.items():
        ref(SCHEDULE_ACTOR_TYPE, name).enqueue().arm(definition=value, digest=digest(value))
    left = [  # schedules' actors live on every shard
        actor_id
        for alias in databases()
        for actor_id in Reminder.objects.using(alias)
        .filter(actor_type=SCHEDULE_ACTOR_TYPE, name=TICK)
        .exclude(actor_id__in=list(wanted))
        .values_list("actor_id", flat=True)
    ]
    for name in left:
        ref(SCHEDULE_ACTOR_TYPE, name).enqueue().disarm()
    return len(wanted) + len(left)
