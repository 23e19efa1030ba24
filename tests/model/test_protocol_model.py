"""The protocol model (docs/protocol/solid_objects.pml, explained in docs/protocol.md),
checked by spin (issue 9).

Every change to an actor's lease, ready rows and claimed rows is modelled with the lock and
the statement boundaries the code has; workers crash, pause and stop at every step, leases
expire. For the protocol as it is, spin explores every state and finds:

1. safety: no message's state change commits twice, and no message is ever both ready and
   claimed (or still ready or claimed once finished);
2. liveness: every message eventually completes or is dead-lettered (weak fairness, a
   bounded number of faults).

The broken variants prove the model can fail: with the dead-process cleanup from before the
fix of defect 1, and with recovery transactions that do not re-check their lease, spin
finds the counterexample, printed as the interleaving that leads to it.

The model does not depend on the database, so it runs once, in the SQLite run. It needs
``spin`` and ``gcc`` (``apt-get install spin gcc``); without them the test fails. The figures
(states, transitions, depth, seconds) are printed and merged into the JSON file named by
``SOLID_MODEL_REPORT`` when it is set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .checker import Check, ToolMissing, Verdict, merge_report, require_tools, verify

pytestmark = pytest.mark.db_vendor("sqlite")

HOLDS = (
    Check(
        "safety",
        "2 worker processes, 3 messages, max attempts 2, 2 faults (crash, pause, graceful "
        "stop), 1 handler failure, grouped commits of 2",
    ),
    Check(
        "safety-threads",
        "1 worker process of 2 role threads sharing its process id (the fence's token "
        "check is what keeps them apart), 3 messages",
        defines=("NPROC=1", "THREADS=2"),
    ),
    Check(
        "safety-destroy-pause-enqueue",
        "2 messages enqueued while the workers run, an operator pause/resume, destroy(), 1 fault",
        defines=("NM=2", "MAXF=1", "PRODUCER", "ADMIN_PAUSE", "DESTROY"),
    ),
    Check(
        "safety-deferred-claim",
        "2 worker processes, 2 messages, 2 faults, leases also taken without their first "
        "claim, as a sync caller's enqueue takes them (the claim a second statement under "
        "the row lock)",
        defines=("NM=2", "DEFERRED_CLAIM"),
    ),
    Check(
        "safety-hand-back",
        "2 worker processes, 2 messages, 2 faults, a claimed turn not started yet handed "
        "back (a batch's watchdog: back to ready uncounted, the lease released, under the "
        "row lock while the lease holds)",
        defines=("NM=2", "HAND_BACK"),
    ),
    Check(
        "liveness",
        "every message completes or is dead-lettered: 2 worker processes, 2 messages, 2 faults",
        defines=("NM=2",),
        liveness=True,
    ),
    Check(
        "liveness-deferred-claim",
        "every message completes or is dead-lettered with leases also taken without their "
        "first claim: 2 worker processes, 2 messages, 1 fault",
        defines=("NM=2", "MAXF=1", "DEFERRED_CLAIM"),
        liveness=True,
    ),
    Check(
        "liveness-hand-back",
        "every message completes or is dead-lettered with a turn handed back: 2 worker "
        "processes, 2 messages, 1 fault",
        defines=("NM=2", "MAXF=1", "HAND_BACK"),
        liveness=True,
    ),
    Check(
        "liveness-threads",
        "the same with 1 worker process of 2 threads",
        defines=("NM=2", "NPROC=1", "THREADS=2"),
        liveness=True,
    ),
    Check(
        "liveness-pause-enqueue",
        "the same with messages enqueued while the workers run and an operator pause",
        defines=("NM=2", "MAXF=1", "PRODUCER", "ADMIN_PAUSE"),
        liveness=True,
    ),
)

BROKEN = (
    Check(
        "old-cleanup",
        "the cleanup before the fix (defect 1): a message ends up ready and claimed",
        defines=("OLD_CLEANUP",),
        expect_violation="assertion violated",
    ),
    Check(
        "old-cleanup-double-commit",
        "the cleanup before the fix, only property 1 checked: a state change commits twice",
        defines=("OLD_CLEANUP", "COMMIT_CHECK_ONLY"),
        expect_violation="assertion violated (done[",
    ),
    Check(
        "no-recheck",
        "recovery that does not re-check its lease under the row lock: a message cleanup "
        "requeued is dead-lettered while ready",
        defines=("NO_RECHECK",),
        expect_violation="assertion violated",
    ),
    Check(
        "blind-hand-back",
        "a hand-back that does not check the lease under the row lock: a message another "
        "worker took over ends up ready and claimed",
        defines=("NM=2", "BLIND_HAND_BACK"),
        expect_violation="assertion violated",
    ),
)


def report(verdict: Verdict, check: Check, capsys: pytest.CaptureFixture[str]) -> None:
    merge_report(verdict)
    with capsys.disabled():
        print(f"\n{verdict.summary()}  [{check.description}]")
        if verdict.trail:
            print("  counterexample:\n    " + "\n    ".join(verdict.trail))


@pytest.fixture
def tools() -> None:
    try:
        require_tools()
    except ToolMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.mark.parametrize("check", HOLDS, ids=[check.name for check in HOLDS])
def test_the_protocol_keeps_its_properties_in_every_state(
    check: Check, tools: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdict = verify(check, tmp_path)
    report(verdict, check, capsys)

    assert verdict.errors == 0, (
        f"spin found a counterexample to the protocol ({check.name}): "
        f"{verdict.violations}\nreplay: cd docs/protocol && {check.command_line()} && "
        f"spin -t {' '.join(check.spin_flags)} solid_objects.pml\n" + "\n".join(verdict.trail)
    )
    # A verdict is only worth something if the whole state space was explored.
    assert not verdict.incomplete, f"{check.name}: {verdict.incomplete}\n{verdict.output}"
    assert verdict.states_stored > 1000, verdict.output


@pytest.mark.parametrize("check", BROKEN, ids=[check.name for check in BROKEN])
def test_the_model_finds_the_known_defects(
    check: Check, tools: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdict = verify(check, tmp_path)
    report(verdict, check, capsys)

    assert verdict.errors >= 1, (
        f"spin no longer finds the defect of {check.name}: the model lost its power to "
        f"fail\n{verdict.output}"
    )
    assert check.expect_violation is not None
    assert any(check.expect_violation in line for line in verdict.violations), verdict.violations
    assert verdict.trail, "the counterexample's trail could not be replayed"


def test_a_missing_model_checker_fails_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolMissing, match="apt-get install spin"):
        require_tools()


def test_the_report_is_merged_into_the_json_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "model.json"
    target.write_text('{"earlier": {"errors": 0}}')
    monkeypatch.setenv("SOLID_MODEL_REPORT", str(target))
    verdict = Verdict("safety", 0, 10.0, None, 20.0, 3, 0.5, 1.0, 0.6, output="raw")

    merge_report(verdict)

    import json

    written: dict[str, Any] = json.loads(target.read_text())
    assert set(written) == {"earlier", "safety"}
    assert written["safety"]["states_stored"] == 10.0
    assert "output" not in written["safety"]
