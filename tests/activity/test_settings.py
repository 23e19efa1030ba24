"""TILTTEK_ACTIVITY settings: defaults, system checks naming the setting, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from tilttek_activity.checks import check_settings
from tilttek_activity.conf import get_settings


def messages() -> list[str]:
    return [error.msg for error in check_settings()]


def test_defaults() -> None:
    current = get_settings()
    assert current.DATABASE == "default"
    assert current.MAX_FUTURE is not None and current.MAX_FUTURE.total_seconds() == 300
    assert current.BATCH_SIZE == 500
    assert messages() == []


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"DATABASE": "nowhere"}, 'TILTTEK_ACTIVITY["DATABASE"]'),
        ({"MAX_FUTURE": "soon"}, 'TILTTEK_ACTIVITY["MAX_FUTURE"]'),
        ({"MAX_FUTURE": timedelta(seconds=-1)}, 'TILTTEK_ACTIVITY["MAX_FUTURE"]'),
        ({"BATCH_SIZE": 0}, 'TILTTEK_ACTIVITY["BATCH_SIZE"]'),
        ({"BATCH_SIZE": True}, 'TILTTEK_ACTIVITY["BATCH_SIZE"]'),
        ({"BULK_BATCH_SIZE": 10**6}, 'TILTTEK_ACTIVITY["BULK_BATCH_SIZE"]'),
        ({"GAP_SETTLE_SECONDS": -1}, 'TILTTEK_ACTIVITY["GAP_SETTLE_SECONDS"]'),
        ({"POLL_INTERVAL": 0}, 'TILTTEK_ACTIVITY["POLL_INTERVAL"]'),
        ({"GAP_WARN_SECONDS": "1"}, 'TILTTEK_ACTIVITY["GAP_WARN_SECONDS"]'),
        ({"BATCHSIZE": 10}, 'TILTTEK_ACTIVITY["BATCHSIZE"]'),
    ],
)
def test_invalid_settings_are_reported_by_name(
    settings: Any, values: dict[str, Any], named: str
) -> None:
    settings.TILTTEK_ACTIVITY = values
    found = check_settings()
    assert len(found) == 1 and found[0].id == "tilttek_activity.E001"
    assert named in found[0].msg
    with pytest.raises(ImproperlyConfigured, match=named.replace("[", r"\[")):
        get_settings()


def test_not_a_dict(settings: Any) -> None:
    settings.TILTTEK_ACTIVITY = ["DATABASE"]
    assert messages() == ["settings.TILTTEK_ACTIVITY must be a dict"]


def test_seconds_may_be_numbers(settings: Any) -> None:
    settings.TILTTEK_ACTIVITY = {"MAX_FUTURE": 60, "GAP_SETTLE_SECONDS": 0}
    assert messages() == []
    assert get_settings().MAX_FUTURE is not None
    assert get_settings().MAX_FUTURE.total_seconds() == 60


def test_use_tz_is_required(settings: Any) -> None:
    settings.USE_TZ = False
    assert any("USE_TZ" in error.msg for error in check_settings())


def test_the_package_imports_before_django_is_set_up() -> None:
    code = (
        "import tilttek_activity, tilttek_activity.errors;"
        "assert issubclass(tilttek_activity.InvalidActivity, ValueError);"
        "print(sorted(tilttek_activity.__all__)[:2])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_test_project_passes_the_checks() -> None:
    from tilttek_activity.checks import check_projections

    assert check_settings() == []
    assert check_projections() == []
