"""Cron expressions of reminders: validation and the next slots, evaluated by ``cronsim``.

A cron reminder stores its expression and IANA time zone; every slot is computed in that
zone's wall clock and stored as an aware UTC instant. Daylight saving time follows cronsim's
(Debian cron's) rules: a slot in the hour the clocks skip runs at the first instant after the
jump, and a daily slot in the hour the clocks repeat runs once (the first time); expressions
that fire every hour (or more often) run in both passes of a repeated hour.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import InvalidPayload

if TYPE_CHECKING:
    from cronsim import CronSim


def _cron_sim(expression: str, start: datetime) -> CronSim:
    # Imported when a cron expression is evaluated, so an environment installed before
    # cronsim became a dependency keeps working until it uses cron reminders.
    from cronsim import CronSim, CronSimError

    try:
        return CronSim(expression, start)
    except CronSimError as exc:
        raise InvalidPayload(f"invalid cron expression {expression!r}: {exc}") from exc


#: The longest expression a reminder row holds.
MAX_EXPRESSION_LENGTH = 191
#: The longest time-zone name a reminder row holds.
MAX_TIME_ZONE_LENGTH = 64


def time_zone(name: object) -> ZoneInfo:
    """The zone named ``name``, or :class:`InvalidPayload`."""
    if not isinstance(name, str) or not name or len(name) > MAX_TIME_ZONE_LENGTH:
        raise InvalidPayload(f"tz must be an IANA time zone name, got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidPayload(f"unknown time zone {name!r}") from exc


def validate(expression: object, tz: object) -> tuple[str, str]:
    """``(expression, tz)`` checked, or :class:`InvalidPayload` naming what is wrong."""
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidPayload(f"cron must be a cron expression string, got {expression!r}")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise InvalidPayload(f"cron expression longer than {MAX_EXPRESSION_LENGTH} characters")
    if len(expression.split()) != 5:  # cronsim would also take a leading seconds field
        raise InvalidPayload(
            f"invalid cron expression {expression!r}: it needs five fields "
            "(minute, hour, day of month, month, day of week)"
        )
    _cron_sim(expression, datetime.now(time_zone(tz)))
    return expression, str(tz)


def _slots(expression: str, tz: str, after: datetime) -> Iterator[datetime]:
    zone = ZoneInfo(tz)
    # cronsim yields slots strictly after its start, which it truncates to the minute.
    for slot in _cron_sim(expression, after.astimezone(zone)):
        yield slot.astimezone(UTC)


def next_after(expression: str, tz: str, after: datetime) -> datetime:
    """The first slot strictly after ``after`` (an aware datetime), in UTC."""
    for slot in _slots(expression, tz, after):
        if slot > after:
            return slot
    raise InvalidPayload(f"cron expression {expression!r} has no future slot")


def following(expression: str, tz: str, start: datetime, count: int) -> list[datetime]:
    """``count`` slots after ``start`` (a slot itself), in order, in UTC."""
    result: list[datetime] = []
    for slot in _slots(expression, tz, start):
        if slot <= start:
            continue
        result.append(slot)
        if len(result) == count:
            break
    return result


def due_slots(expression: str, tz: str, start: datetime, now: datetime, limit: int) -> int:
    """How many slots from ``start`` (due, counted) up to ``now`` there are, at most
    ``limit``."""
    count = 1
    cursor = start
    while count < limit:
        cursor = next_after(expression, tz, cursor)
        if cursor > now:
            break
        count += 1
    return count


__all__ = ["due_slots", "following", "next_after", "time_zone", "validate"]
