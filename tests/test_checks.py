"""System checks of the ``SOLID_OBJECTS`` settings (``solid_objects.checks``)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.core.checks import CheckMessage
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.test import override_settings

from solid_objects.checks import COUNTS, DURATIONS, RETENTIONS, ZERO_ALLOWED, check_settings
from solid_objects.conf import DEFAULTS, WAKE_UP_CHOICES


def check(**values: Any) -> list[CheckMessage]:
    with override_settings(SOLID_OBJECTS=values):
        return check_settings()


def ids(messages: list[CheckMessage]) -> list[str]:
    return [message.id for message in messages]


def name(key: str) -> str:
    return f'SOLID_OBJECTS["{key}"]'


# -- overall ----------------------------------------------------------------------------------


def test_the_documented_defaults_pass() -> None:
    assert check(**DEFAULTS) == []


def test_an_absent_or_empty_setting_passes() -> None:
    assert check() == []
    with override_settings():
        del settings.SOLID_OBJECTS
        assert check_settings() == []


def test_the_test_settings_pass() -> None:
    assert check_settings() == []


def test_a_setting_that_is_not_a_dict_is_an_error() -> None:
    with override_settings(SOLID_OBJECTS=["LEASE_DURATION", 30]):
        assert ids(check_settings()) == ["solid_objects.E011"]


@pytest.mark.parametrize("key", sorted(DEFAULTS))
def test_every_setting_is_validated_and_named(key: str) -> None:
    messages = [m for m in check(**{key: object()}) if m.is_serious()]
    assert messages, f"{key} accepts anything"
    assert any(name(key) in m.msg for m in messages)


@pytest.mark.django_db(databases=["default", "shard_b"])  # Django 6.1 asks each SQLite db: JSON?
def test_manage_py_check_refuses_to_start() -> None:
    with (
        override_settings(SOLID_OBJECTS={"LEASE_DURATION": -1}),
        pytest.raises(SystemCheckError, match=r'SOLID_OBJECTS\["LEASE_DURATION"\]'),
    ):
        call_command("check")


def test_unknown_keys_are_warnings_with_a_suggestion() -> None:
    [message] = check(LEASE_DURATON=30)
    assert message.id == "solid_objects.W001"
    assert not message.is_serious()
    assert name("LEASE_DURATON") in message.msg
    assert name("LEASE_DURATION") in message.hint


# -- numbers ----------------------------------------------------------------------------------

BAD_NUMBERS = [0, -1, "1", None, True, math.nan, math.inf, timedelta(0), [1]]


@pytest.mark.parametrize("key", sorted(DURATIONS - ZERO_ALLOWED))
@pytest.mark.parametrize("bad", BAD_NUMBERS, ids=repr)
def test_durations_must_be_positive_numbers(key: str, bad: Any) -> None:
    messages = check(**{key: bad})
    assert "solid_objects.E001" in ids(messages)
    assert f"{name(key)} must be a positive number" in messages[0].msg


@pytest.mark.parametrize("key", sorted(DURATIONS))
def test_durations_accept_numbers_and_timedeltas(key: str) -> None:
    seconds = DEFAULTS[key]
    assert check(**{key: timedelta(seconds=seconds)}) == []
    assert check(**{key: int(seconds) if seconds >= 1 else seconds}) == []


def test_commit_delay_may_be_zero_but_not_negative() -> None:
    assert check(MAX_COMMIT_DELAY=0) == []
    [message] = check(MAX_COMMIT_DELAY=-0.01)
    assert message.id == "solid_objects.E001"
    assert f"{name('MAX_COMMIT_DELAY')} must be a non-negative number" in message.msg


@pytest.mark.parametrize("key", sorted(COUNTS))
@pytest.mark.parametrize("bad", [0, -5, 1.5, "10", True, None])
def test_counts_must_be_positive_integers(key: str, bad: Any) -> None:
    messages = check(**{key: bad})
    assert ids(messages) == ["solid_objects.E002"]
    assert f"{name(key)} must be a positive integer" in messages[0].msg


@pytest.mark.parametrize("key", sorted(RETENTIONS))
def test_retentions(key: str) -> None:
    assert check(**{key: timedelta(hours=1)}) == []
    assert check(**{key: 3600}) == []
    for bad in (timedelta(0), -1, "30 days", None):
        assert ids(check(**{key: bad})) == ["solid_objects.E003"], bad


# -- relations --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "offender"),
    [
        ({"LEASE_RENEWAL_INTERVAL": 30}, "LEASE_RENEWAL_INTERVAL"),  # equal to LEASE_DURATION
        ({"LEASE_DURATION": timedelta(seconds=5)}, "LEASE_RENEWAL_INTERVAL"),
        ({"POLLING_INTERVAL": 1.5}, "POLLING_INTERVAL"),
        ({"PROCESS_HEARTBEAT_INTERVAL": 60}, "PROCESS_HEARTBEAT_INTERVAL"),
        ({"PROCESS_ALIVE_THRESHOLD": 0.5, "PROCESS_HEARTBEAT_INTERVAL": 1}, "PROCESS_HEARTBEAT"),
    ],
)
def test_related_settings_must_agree(values: dict[str, Any], offender: str) -> None:
    [message] = check(**values)
    assert message.id == "solid_objects.E004"
    assert message.msg.startswith(f'SOLID_OBJECTS["{offender}')


def test_relations_at_their_limits_pass() -> None:
    assert check(LEASE_RENEWAL_INTERVAL=29.9, POLLING_INTERVAL=1.0) == []
    assert check(PROCESS_HEARTBEAT_INTERVAL=59, PROCESS_ALIVE_THRESHOLD=60) == []


def test_an_invalid_value_is_not_reported_twice() -> None:
    assert ids(check(LEASE_DURATION=-1)) == ["solid_objects.E001"]


def test_a_state_warning_above_the_limit_is_a_warning() -> None:
    [message] = check(WARN_STATE_BYTES=10 * 1024 * 1024)
    assert message.id == "solid_objects.W002"


# -- names, choices and policies --------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["solid_objects_", "acme_so_", "_so2_", ""])
def test_table_prefix_accepts_identifier_prefixes(prefix: str) -> None:
    assert check(TABLE_PREFIX=prefix) == []


@pytest.mark.parametrize(
    "prefix", ["Acme_", "1so_", "so-", "so objects_", "sø_", None, 5, "a" * 48]
)
def test_table_prefix_refuses_the_rest(prefix: Any) -> None:
    messages = check(TABLE_PREFIX=prefix)
    assert ids(messages) == ["solid_objects.E005"]
    assert name("TABLE_PREFIX") in messages[0].msg


def test_database_must_be_a_configured_alias() -> None:
    assert check(DATABASE="default") == []
    for bad in ("jobs", None, 1):
        messages = check(DATABASE=bad)
        assert ids(messages) == ["solid_objects.E006"]
        assert "'default'" in messages[0].msg


@pytest.mark.parametrize("mode", [m for m in WAKE_UP_CHOICES if m not in ("redis", "postgresql")])
def test_wake_up_choices(mode: str) -> None:
    assert check(WAKE_UP=mode) == []


def test_wake_up_refuses_unknown_modes() -> None:
    messages = check(WAKE_UP="carrier-pigeon")
    assert ids(messages) == ["solid_objects.E007"]
    assert "'polling'" in messages[0].msg


def test_redis_wake_up_needs_a_url() -> None:
    assert ids(check(WAKE_UP="redis")) == ["solid_objects.E008"]
    assert check(WAKE_UP="redis", REDIS_URL="redis://127.0.0.1:6379/0") == []


def test_postgresql_wake_up_needs_postgresql() -> None:
    expected = [] if connection.vendor == "postgresql" else ["solid_objects.E008"]
    assert ids(check(WAKE_UP="postgresql")) == expected


@pytest.mark.parametrize("url", [None, "redis://h:6379/1", "rediss://h", "unix:///tmp/r.sock"])
def test_redis_url_accepts_redis_urls(url: str | None) -> None:
    assert check(REDIS_URL=url) == []


@pytest.mark.parametrize("url", ["localhost:6379", "http://h", "", 6379])
def test_redis_url_refuses_the_rest(url: Any) -> None:
    assert ids(check(REDIS_URL=url)) == ["solid_objects.E009"]


@pytest.mark.parametrize("key", ["RETRY_DELAY", "AUTHORIZE_SUBSCRIPTION"])
def test_policies_are_callables_or_dotted_paths(key: str) -> None:
    assert check(**{key: lambda *args, **kwargs: 1}) == []
    assert check(**{key: "solid_objects.conf.default_retry_delay"}) == []
    for bad in ("math.pi", "no_such_module.policy", "nodots", 42, None):
        messages = check(**{key: bad})
        assert ids(messages) == ["solid_objects.E010"], bad
        assert name(key) in messages[0].msg
