"""System checks for the ``SOLID_OBJECTS`` settings dict (PRODUCT §A11).

Every key is validated against the defaults of :mod:`solid_objects.conf` without touching the
database, so ``manage.py check``, ``runserver``, ``migrate`` and the worker commands refuse
to start on a bad value, with a message naming the setting. Identifiers (``docs/settings.md``):

====================  ==========================================================
``E001``              a duration is not a positive number of seconds (or timedelta)
``E002``              a count or size is not a positive integer
``E003``              a retention is not a positive timedelta or number of seconds
``E004``              two related settings contradict each other
``E005``              ``TABLE_PREFIX`` is not a usable table-name prefix
``E006``              ``DATABASE`` is not an alias of ``settings.DATABASES``
``E007``              ``WAKE_UP`` is not one of the choices
``E008``              ``WAKE_UP`` needs something that is not configured
``E009``              ``REDIS_URL`` is not a Redis URL
``E010``              a policy is neither a callable nor the dotted path of one
``E011``              ``SOLID_OBJECTS`` itself is not a dict
``I001``              actors record activity on a journal kept on another database (their
                      entries travel through the outbox)
``E014``              a schedule of ``SCHEDULES`` is not valid
``E015``              ``DATABASES`` (shards) is not a list of distinct aliases of
                      ``settings.DATABASES``
``W001``              unknown key (probably a typo)
``E013``              queries of an app's models are not routed to its ``DATABASE``
``W002``              ``WARN_STATE_BYTES`` above ``MAX_STATE_BYTES`` (never warns)
``W003``              ``migrate`` would create an app's tables on another database too
``W004``              the connection pool of the actors' database is too small for a worker
``W005``              actors declare observables but no Channels layer would deliver them
====================  ==========================================================
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Info, register
from django.core.checks import Warning as CheckWarning
from django.db import connections
from django.utils.module_loading import import_string

from .conf import DEFAULTS, SECONDS, WAKE_UP_CHOICES
from .db.vendors import dialect_for
from .schedules import problems as schedule_problems

TAG = "solid_objects"

DURATIONS = frozenset(SECONDS)
ZERO_ALLOWED = frozenset({"MAX_COMMIT_DELAY"})  # 0 = commit each turn without waiting
COUNTS = frozenset(
    {
        "MAX_MESSAGES_PER_ACTIVATION_PASS",
        "MAX_TURNS_PER_COMMIT",
        "MAX_ACTORS_PER_COMMIT",
        "MAX_MAILBOX_LENGTH",
        "MAX_ATTEMPTS",
        "MAX_PAYLOAD_BYTES",
        "MAX_RESULT_BYTES",
        "MAX_STATE_BYTES",
        "WARN_STATE_BYTES",
        "PRUNE_BATCH_SIZE",
    }
)
RETENTIONS = frozenset({"MESSAGE_RETENTION", "PROCESS_RETENTION"})
POLICIES = frozenset({"RETRY_DELAY", "AUTHORIZE_SUBSCRIPTION"})
# (smaller, larger, strictly): the first must stay below the second.
RELATIONS = (
    ("LEASE_RENEWAL_INTERVAL", "LEASE_DURATION", True),
    ("POLLING_INTERVAL", "IDLE_POLLING_INTERVAL", False),
    ("PROCESS_HEARTBEAT_INTERVAL", "PROCESS_ALIVE_THRESHOLD", True),
)
# The longest table name is <prefix>claimed_messages; PostgreSQL keeps 63 bytes, MySQL 64.
LONGEST_TABLE_SUFFIX = len("claimed_messages")
MAX_IDENTIFIER_LENGTH = 63
TABLE_PREFIX_PATTERN = re.compile(r"(?:[a-z_][a-z0-9_]*)?")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def name(key: str) -> str:
    return f'SOLID_OBJECTS["{key}"]'


def _error(key: str, text: str, id_: str, value: Any = None, hint: str | None = None) -> Error:
    return Error(f"{name(key)} {text}, got {value!r}.", hint=hint, id=f"solid_objects.{id_}")


@register(TAG)
def check_journal_database(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """``self.record_activity`` writes the journal inside the actor's fenced commit when the
    journal (``TILTTEK_ACTIVITY["DATABASE"]``) is the actor's own database, and through the
    actor's outbox, shortly after the commit, when it is not. Says so (``I001``) when some
    registered actor's code calls ``record_activity`` (found in its compiled methods) and
    some of the actors' databases is not the journal's."""
    from django.apps import apps

    if not apps.is_installed("tilttek_activity"):
        return []
    from tilttek_activity.conf import problems as journal_problems
    from tilttek_activity.conf import user_settings

    from .conf import get_settings as solid_settings
    from .registry import actor_types

    raw = getattr(settings, "SOLID_OBJECTS", None)
    if (
        not isinstance(raw, Mapping)
        or any(isinstance(m, Error) for m in check_settings())
        or journal_problems()
    ):
        return []  # the settings checks report those first
    journal = (user_settings() or {}).get("DATABASE", "default")
    elsewhere = [alias for alias in solid_settings().shards if alias != journal]
    if not elsewhere:
        return []
    recording = sorted(
        spec.actor_type for spec in actor_types().values() if _calls(spec.cls, "record_activity")
    )
    if not recording:
        return []
    aliases = ", ".join(repr(alias) for alias in elsewhere)
    return [
        Info(
            f"Actors {', '.join(recording)} call self.record_activity(); those on {aliases} "
            f'reach the journal (TILTTEK_ACTIVITY["DATABASE"] = {journal!r}) through their '
            "outbox, once per key, shortly after their turn commits, not inside it.",
            hint="Expected with shards; put the journal on the actors' database for entries "
            "written in the fenced commit itself (docs/activity.md).",
            id="solid_objects.I001",
        )
    ]


ROUTER_HINT = (
    'Add DATABASE_ROUTERS = ["solid_objects.routers.SolidObjectsRouter"] (before your own '
    "routers), or a router of yours that sends these models to the configured alias."
)


@register(TAG, "database")
def check_routing(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Without a router, an app whose ``DATABASE`` is not ``"default"`` is half-configured:
    the runtime writes the configured alias while the admin and ORM queries read
    ``default``, and ``migrate`` creates the tables on every alias. Both are reported
    (no connection is opened: only the routers are asked)."""
    from django.apps import apps
    from django.db.utils import ConnectionRouter

    from .routers import ACTORS_APP, JOURNAL_APP, alias_for_app, aliases_for_actors

    raw = getattr(settings, "SOLID_OBJECTS", None)
    if raw is not None and (
        not isinstance(raw, Mapping) or any(isinstance(m, Error) for m in check_settings())
    ):
        return []  # the settings checks report those first
    router = ConnectionRouter()  # reads settings.DATABASE_ROUTERS now (override_settings)
    messages: list[CheckMessage] = []
    for app_label, setting in ((ACTORS_APP, "SOLID_OBJECTS"), (JOURNAL_APP, "TILTTEK_ACTIVITY")):
        if not apps.is_installed(app_label):
            continue
        alias = alias_for_app(app_label)
        if alias not in settings.DATABASES:
            continue  # reported by the app's own settings check
        config = apps.get_app_config(app_label)
        wrong = sorted(
            {
                f"{model.__name__} → {routed!r}"
                for model in config.get_models()
                for routed in (router.db_for_read(model), router.db_for_write(model))
                if routed != alias
            }
        )
        if wrong:
            messages.append(
                Error(
                    f'{setting}["DATABASE"] is {alias!r} but queries of {app_label} models '
                    f"go elsewhere ({', '.join(wrong[:3])}"
                    f"{', ...' if len(wrong) > 3 else ''}): the admin and ORM queries would "
                    "read and write another copy of the tables.",
                    hint=ROUTER_HINT,
                    id="solid_objects.E013",
                )
            )
        # The actors' tables belong on DATABASE and on every shard of DATABASES.
        used = aliases_for_actors() if app_label == ACTORS_APP else {alias}
        others = [
            other
            for other in settings.DATABASES
            if other not in used and router.allow_migrate(other, app_label)
        ]
        if others:
            shown = ", ".join(repr(u) for u in settings.DATABASES if u in used)
            messages.append(
                CheckWarning(
                    f"migrate would create the {app_label} tables on "
                    f"{', '.join(repr(o) for o in others)} as well as on {shown}: only "
                    f"{shown} {'is' if len(used) == 1 else 'are'} used, the other copies "
                    "stay empty and mislead.",
                    hint=ROUTER_HINT,
                    id="solid_objects.W003",
                )
            )
    return messages


@register(TAG)
def check_pool_size(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Django's native PostgreSQL pool on the actors' database (and on each shard) must hold
    every connection a worker process keeps (docs/operations.md, "Connections")."""
    from .routers import actor_aliases
    from .runtime.connection_budget import connections_needed, pool_max_size

    raw = getattr(settings, "SOLID_OBJECTS", None)
    if raw is not None and (
        not isinstance(raw, Mapping) or any(isinstance(m, Error) for m in check_settings())
    ):
        return []  # the settings checks report those first
    needed = connections_needed(1, all_roles=True)
    return [
        _pool_warning(alias, size, needed)
        for alias in actor_aliases()
        for size in [pool_max_size(settings.DATABASES[alias])]
        if size is not None and size < needed
    ]


def _pool_warning(alias: str, size: int, needed: int) -> CheckMessage:
    return CheckWarning(
        f"The connection pool of database {alias!r} holds at most {size} connections, but "
        f"a worker process keeps one per role thread plus its supervisor's and its "
        f"hand-back watchdog's: run_actor_worker --all-roles needs {needed} (and one more "
        f"per extra --threads), run_actor_worker --threads N needs N + 2. Roles waiting for "
        f"a connection stall.",
        hint='Set OPTIONS["pool"] = {"max_size": ...} to at least that, or run the workers '
        "on an alias without a pool.",
        id="solid_objects.W004",
    )


def _calls(cls: type, attribute: str) -> bool:
    """Whether any function defined on ``cls`` (or its bases, nested functions included)
    names ``attribute`` in its code."""
    codes = [
        value.__code__
        for klass in cls.__mro__
        for value in vars(klass).values()
        if hasattr(value, "__code__") and klass.__module__ != "solid_objects.actor"
    ]
    while codes:
        code = codes.pop()
        if attribute in code.co_names:
            return True
        codes.extend(const for const in code.co_consts if hasattr(const, "co_names"))
    return False


@register(TAG)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The registered check: every problem of ``settings.SOLID_OBJECTS``."""
    raw = getattr(settings, "SOLID_OBJECTS", None)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        return [
            Error(
                f"settings.SOLID_OBJECTS must be a dict, got {type(raw).__name__}.",
                id="solid_objects.E011",
            )
        ]
    values = {**DEFAULTS, **raw}
    messages: list[CheckMessage] = list(_unknown_keys(raw))
    for validate in VALIDATORS:
        messages.extend(validate(values))
    return messages


def _unknown_keys(raw: Mapping[str, Any]) -> Iterator[CheckMessage]:
    for key in raw:
        if key in DEFAULTS:
            continue
        close = difflib.get_close_matches(str(key), DEFAULTS, n=1)
        yield CheckWarning(
            f"{name(key)} is not a solid_objects setting and is ignored.",
            hint=f"Did you mean {name(close[0])}?" if close else "See docs/settings.md.",
            id="solid_objects.W001",
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _seconds(value: Any) -> float | None:
    """``value`` in seconds when it is a finite number or a timedelta, else ``None``."""
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value) if _is_number(value) else None


def _durations(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    for key in sorted(DURATIONS):
        seconds = _seconds(values[key])
        if key in ZERO_ALLOWED:
            if seconds is None or seconds < 0:
                yield _error(key, "must be a non-negative number (seconds)", "E001", values[key])
        elif seconds is None or seconds <= 0:
            yield _error(key, "must be a positive number (seconds)", "E001", values[key])


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _counts(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    for key in sorted(COUNTS):
        if not _is_count(values[key]):
            yield _error(key, "must be a positive integer", "E002", values[key])


def _retentions(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    for key in sorted(RETENTIONS):
        seconds = _seconds(values[key])
        if seconds is None or seconds <= 0:
            yield _error(
                key, "must be a positive timedelta (or number of seconds)", "E003", values[key]
            )


def _relations(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    for smaller, larger, strictly in RELATIONS:
        low, high = _seconds(values[smaller]), _seconds(values[larger])
        if low is None or high is None or low <= 0 or high <= 0:
            continue  # already reported by _durations
        if low > high or (strictly and low == high):
            relation = "less than" if strictly else "at most"
            yield Error(
                f"{name(smaller)} ({values[smaller]!r}) must be {relation} "
                f"{name(larger)} ({values[larger]!r}).",
                id="solid_objects.E004",
            )
    warn, limit = values["WARN_STATE_BYTES"], values["MAX_STATE_BYTES"]
    if _is_count(warn) and _is_count(limit) and warn > limit:
        yield CheckWarning(
            f"{name('WARN_STATE_BYTES')} ({warn}) is above {name('MAX_STATE_BYTES')} ({limit}): "
            "the size warning can never fire.",
            id="solid_objects.W002",
        )


def _table_prefix(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    prefix = values["TABLE_PREFIX"]
    if not isinstance(prefix, str) or not TABLE_PREFIX_PATTERN.fullmatch(prefix):
        yield _error(
            "TABLE_PREFIX",
            "must be lowercase ASCII letters, digits and underscores, not starting with a digit",
            "E005",
            prefix,
            hint="Table names must be valid, unquoted-safe identifiers on every database.",
        )
    elif len(prefix) + LONGEST_TABLE_SUFFIX > MAX_IDENTIFIER_LENGTH:
        limit = MAX_IDENTIFIER_LENGTH - LONGEST_TABLE_SUFFIX
        yield _error("TABLE_PREFIX", f"must be at most {limit} characters long", "E005", prefix)


def _database(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    alias = values["DATABASE"]
    if not isinstance(alias, str) or alias not in settings.DATABASES:
        aliases = ", ".join(repr(a) for a in settings.DATABASES)
        yield _error(
            "DATABASE", f"must be an alias of settings.DATABASES ({aliases})", "E006", alias
        )


def _shards(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    shards = values.get("DATABASES")
    if shards is None:
        return
    if (
        not isinstance(shards, list | tuple)
        or not shards
        or not all(isinstance(alias, str) for alias in shards)
    ):
        yield _error(
            "DATABASES", "must be a non-empty list of alias names (or None)", "E015", shards
        )
        return
    if len(set(shards)) != len(shards):
        yield _error("DATABASES", "names an alias twice", "E015", shards)
    unknown = [alias for alias in shards if alias not in settings.DATABASES]
    if unknown:
        aliases = ", ".join(repr(a) for a in settings.DATABASES)
        message = f"{unknown} are not aliases of settings.DATABASES ({aliases})"
        yield _error("DATABASES", message, "E015", shards)


def _wake_up(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    mode = values["WAKE_UP"]
    if not isinstance(mode, str) or mode not in WAKE_UP_CHOICES:
        choices = ", ".join(repr(c) for c in WAKE_UP_CHOICES)
        yield _error("WAKE_UP", f"must be one of {choices}", "E007", mode)
    elif mode == "redis" and not values["REDIS_URL"]:
        yield Error(
            f'{name("WAKE_UP")} is "redis" but {name("REDIS_URL")} is not set.',
            id="solid_objects.E008",
        )
    elif mode == "postgresql":
        alias = values["DATABASE"]
        if isinstance(alias, str) and alias in settings.DATABASES:
            connection = connections[alias]  # no connection is opened
            if not _carries_hints(connection):
                yield Error(
                    f'{name("WAKE_UP")} is "postgresql" but database {alias!r} is '
                    f"{connection.vendor}.",
                    hint='Use "auto", which picks what the database supports.',
                    id="solid_objects.E008",
                )


def _carries_hints(connection: Any) -> bool:
    """Whether the database carries wake-up hints itself (no connection is opened)."""
    try:
        return dialect_for(connection).listen_notify
    except NotImplementedError:  # a database solid_objects does not support
        return False


def _redis_url(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    url = values["REDIS_URL"]
    if url is not None and (not isinstance(url, str) or not url.startswith(REDIS_SCHEMES)):
        schemes = ", ".join(REDIS_SCHEMES)
        yield _error("REDIS_URL", f"must be None or a URL starting with {schemes}", "E009", url)


def _schedules(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    for problem in schedule_problems(values["SCHEDULES"]):
        yield Error(
            f"{name('SCHEDULES')}: {problem}.",
            hint="See docs/tasks.md (Schedules).",
            id="solid_objects.E014",
        )


def _policies(values: Mapping[str, Any]) -> Iterator[CheckMessage]:
    for key in sorted(POLICIES):
        value = values[key]
        if isinstance(value, str):
            try:
                value = import_string(value)
            except Exception as exc:  # ImportError, or an error raised by the module itself
                yield _error(key, f"cannot be imported ({exc})", "E010", values[key])
                continue
        if not callable(value):
            yield _error(key, "must be a callable or the dotted path of one", "E010", values[key])


VALIDATORS: tuple[Callable[[Mapping[str, Any]], Iterator[CheckMessage]], ...] = (
    _table_prefix,
    _database,
    _shards,
    _durations,
    _counts,
    _retentions,
    _relations,
    _wake_up,
    _redis_url,
    _policies,
    _schedules,
)


BROADCAST_HINT = (
    "install django-solid-objects[realtime] and set CHANNEL_LAYERS (the in-memory layer with "
    "EmbeddedBroadcasts in asgi.py for one web process, channels_redis across processes); "
    "see docs/live-pages.md"
)


@register(TAG)
def check_broadcast_layer(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Observables write a broadcast row per change; with no Channels layer nothing ever
    delivers them, and they stay pending (kept by retention) for good."""
    from .live.layers import default_layer
    from .registry import actor_types

    observed = sorted(
        f"{spec.actor_type}.{name}"
        for spec in actor_types().values()
        for name in spec.observables
        if not spec.actor_type.startswith("solid_objects.")
    )
    if not observed:
        return []
    try:
        layer = default_layer()
    except Exception as exc:  # a broken CHANNEL_LAYERS: Channels reports it in detail
        layer, problem = None, f" (CHANNEL_LAYERS does not load: {exc})"
    else:
        problem = ""
    if layer is not None:
        return []
    shown = ", ".join(observed[:5]) + (", ..." if len(observed) > 5 else "")
    return [
        CheckWarning(
            f"actors declare observables ({shown}) but no Channels layer is configured"
            f"{problem}: every change writes a broadcast row that nothing will deliver.",
            hint=BROADCAST_HINT,
            id="solid_objects.W005",
        )
    ]
