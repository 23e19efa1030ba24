"""The bounded SIGKILL soak (§A4, §A6, §A8; issue 9): real ``run_actor_worker`` processes,
killed at random every 0.5-2 s under load and replaced at once, must still apply every
message exactly once and in order.

Run it with ``pytest -m soak tests/adversarial/soak`` (it is deselected from the normal run).
``SOLID_SOAK_SECONDS`` sets the seconds of killing per mode (default 50), ``SOLID_SOAK_SEED``
replays a kill schedule, ``SOLID_SOAK_REPORT`` names a JSON file the figures are merged into,
``SOLID_SOAK_DRAIN_SECONDS`` bounds the final drain (default 300).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.processes import Commands

from .harness import (
    MAX_ATTEMPTS,
    MODES,
    SHARDED_MODES,
    SHARDS,
    Mode,
    Soak,
    merge_report,
    soak_seconds,
    soak_seed,
    summary,
)

pytestmark = [pytest.mark.soak, pytest.mark.slow]
#: With this many kills, every recovery path must have been taken at least once.
KILLS_TO_EXERCISE_RECOVERY = 10


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", MODES, ids=[mode.name for mode in MODES])
def test_sigkilled_workers_apply_every_message_exactly_once_in_order(
    mode: Mode,
    commands: Commands,
    vendor: str,
    solid_settings: Any,
    capsys: pytest.CaptureFixture[str],
    record_property: Any,
) -> None:
    solid_settings(MAX_ATTEMPTS=MAX_ATTEMPTS)  # stored on each message at enqueue
    soak(mode, commands, vendor, capsys, record_property)


@pytest.mark.django_db(transaction=True, databases=list(SHARDS))
@pytest.mark.parametrize("mode", SHARDED_MODES, ids=[mode.name for mode in SHARDED_MODES])
def test_sigkilled_workers_serving_two_shards_apply_every_message_exactly_once_on_each(
    mode: Mode,
    commands: Commands,
    vendor: str,
    solid_settings: Any,
    capsys: pytest.CaptureFixture[str],
    record_property: Any,
) -> None:
    """Actors on ``default`` and ``shard_b``; every worker serves both shards (one
    supervisor each), is SIGKILLed as in the other modes, and the same invariants hold on
    each shard."""
    solid_settings(MAX_ATTEMPTS=MAX_ATTEMPTS, DATABASES=list(SHARDS))
    figures = soak(mode, commands, vendor, capsys, record_property)
    assert figures["shards"] == list(SHARDS)


def soak(
    mode: Mode,
    commands: Commands,
    vendor: str,
    capsys: pytest.CaptureFixture[str],
    record_property: Any,
) -> dict[str, Any]:
    seed = soak_seed()
    with capsys.disabled():
        print(f"\nsoak {vendor}/{mode.name}: seed {seed} (replay with SOLID_SOAK_SEED={seed})")
    soak = Soak(commands, vendor, mode, seconds=soak_seconds(), seed=seed)

    figures = soak.run()

    merge_report(figures)
    record_property("soak", json.dumps({k: v for k, v in figures.items() if k != "settings"}))
    with capsys.disabled():
        print(summary(figures))
    assert not figures["violation_lines"], (
        f"{figures['violations']} violation(s) in {vendor}/{mode.name} with seed {seed}, "
        f"kill schedule (seconds, pid) {figures['kill_schedule']}:\n"
        + "\n".join(figures["violation_lines"])
    )
    if figures["kills"] >= KILLS_TO_EXERCISE_RECOVERY:
        # The soak proves something only if the recovery paths actually ran.
        assert figures["messages_rerun"] > 0, summary(figures)
        assert figures["stale_claims_recovered"] > 0, summary(figures)
        assert figures["dead_processes_cleaned"] > 0, summary(figures)
    return figures
