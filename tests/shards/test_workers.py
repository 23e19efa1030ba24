"""Worker processes serve every shard (PRODUCT §A18): one ``run_actor_worker`` runs one
supervisor per alias of ``SOLID_OBJECTS["DATABASES"]`` (its own process rows, heartbeats,
cleanup and roles on each), or only the shard its ``--database`` names.

Real ``tests/manage.py`` subprocesses; every wait polls the databases with a deadline.
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from solid_objects import database_for
from solid_objects.models import ClaimedMessage, Effect, Message, Process, RateLimit
from solid_objects.outbox.effects import DEFERRED, claim_due, process
from solid_objects.runtime import processes
from solid_objects.runtime.processes import callers
from solid_objects.testing import drain
from tests.support.waiting import wait_until
from tests.testapp.actors.core import Blocker, Counter
from tests.testapp.actors.outbox import Alarm, Messenger, Payer

SHARDS = ["default", "shard_b"]
pytestmark = [
    pytest.mark.django_db(transaction=True, databases=SHARDS),
    pytest.mark.slow,
]

FAST = {
    "POLLING_INTERVAL": 0.05,
    "IDLE_POLLING_INTERVAL": 0.25,
    "PROCESS_HEARTBEAT_INTERVAL": 0.5,
    "DATABASES": SHARDS,
}


@pytest.fixture(autouse=True)
def sharded(solid_settings):
    solid_settings(DATABASES=SHARDS)


def ids_on(alias: str, count: int, actor_type: str, prefix: str = "w") -> list[str]:
    found = [
        f"{prefix}{n}" for n in range(400) if database_for(actor_type, f"{prefix}{n}") == alias
    ]
    assert len(found) >= count
    return found[:count]


def state(ref, name: str, default=None):
    """An attribute of the actor's stored state (``default`` before its first turn)."""
    return ref.snapshot().state.get(name, default)


def rows_of(proc, alias: str) -> list[Process]:
    return list(Process.objects.using(alias).filter(pid=proc.pid))


def wait_serving(commands, proc, aliases: list[str], kinds: set[str]) -> None:
    """Wait until ``proc`` registered a running row of every kind on each alias."""

    def registered() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"worker exited with {proc.returncode}:\n{commands.log(proc)}")
        return all(
            {row.kind for row in rows_of(proc, alias) if row.shutdown_state == "running"} >= kinds
            for alias in aliases
        )

    wait_until(registered, what=f"worker {proc.pid} to register {sorted(kinds)} on {aliases}")


ALL_ROLES = {"worker", "effect", "reminder", "broadcast"}


def test_one_all_roles_worker_runs_turns_effects_reminders_and_messages_on_both_shards(
    commands, tmp_path
):
    proc = commands.start("run_actor_worker", "--all-roles", settings=FAST)
    wait_serving(commands, proc, SHARDS, ALL_ROLES)
    sink = tmp_path / "sink.jsonl"
    counters = {alias: ids_on(alias, 2, "tests.counter") for alias in SHARDS}
    payers = {alias: ids_on(alias, 1, "tests.payer")[0] for alias in SHARDS}
    alarms = {alias: ids_on(alias, 1, "tests.alarm")[0] for alias in SHARDS}
    messengers = {alias: ids_on(alias, 1, "tests.messenger")[0] for alias in SHARDS}
    for alias in SHARDS:
        for actor_id in counters[alias]:
            for _ in range(3):
                Counter.ref(actor_id).enqueue().add(amount=1)
        Payer.ref(payers[alias]).enqueue().pay(
            effect="tests.outbox.sink", arguments={"sink": str(sink)}
        )
        Alarm.ref(alarms[alias]).enqueue().set_alarm(delay=0.5, label=alias)
    Messenger.ref(messengers["default"]).enqueue().tell(target=messengers["shard_b"], text="a->b")
    Messenger.ref(messengers["shard_b"]).enqueue().tell(target=messengers["default"], text="b->a")

    def done() -> bool:
        return all(
            state(Counter.ref(actor_id), "value") == 3
            for alias in SHARDS
            for actor_id in counters[alias]
        ) and all(
            len(state(Payer.ref(payers[a]), "successes", []))
            + len(state(Alarm.ref(alarms[a]), "rings", []))
            + len(state(Messenger.ref(messengers[a]), "inbox", []))
            == 3
            for a in SHARDS
        )

    wait_until(done, what="the work of both shards")
    for alias in SHARDS:
        # Each shard's work ran there, under that shard's process rows of this one process.
        kinds = [row.kind for row in rows_of(proc, alias) if row.kind != "caller"]
        assert sorted(kinds) == sorted(ALL_ROLES)
        assert Effect.objects.using(alias).get(name="tests.outbox.sink").status == "completed"
        assert Message.objects.using(alias).filter(operation="hear").count() == 1
        assert Alarm.ref(alarms[alias]).rang()[0]["label"] == alias
    assert [m["text"] for m in Messenger.ref(messengers["shard_b"]).heard()] == ["a->b"]
    assert [m["text"] for m in Messenger.ref(messengers["default"]).heard()] == ["b->a"]
    assert len(sink.read_text().splitlines()) == 2  # each effect ran once

    assert commands.terminate(proc) == 0, commands.log(proc)
    for alias in SHARDS:
        assert {row.shutdown_state for row in rows_of(proc, alias)} == {"stopped"}
    assert commands.log(proc).count("solid_objects worker started") == 2


def test_two_processes_each_serve_the_shard_their_database_names(commands):
    procs = {
        alias: commands.start("run_actor_worker", "--all-roles", "--database", alias, settings=FAST)
        for alias in SHARDS
    }
    for alias, proc in procs.items():
        wait_serving(commands, proc, [alias], ALL_ROLES)
    messengers = {alias: ids_on(alias, 1, "tests.messenger")[0] for alias in SHARDS}
    counters = {alias: ids_on(alias, 1, "tests.counter")[0] for alias in SHARDS}
    for alias in SHARDS:
        Counter.ref(counters[alias]).enqueue().add(amount=5)
    Messenger.ref(messengers["default"]).enqueue().tell(target=messengers["shard_b"], text="hi")
    wait_until(
        lambda: (
            all(state(Counter.ref(counters[a]), "value") == 5 for a in SHARDS)
            and len(state(Messenger.ref(messengers["shard_b"]), "inbox", [])) == 1
        ),
        what="each shard's worker to run its turns",
    )
    for alias, proc in procs.items():
        other = next(a for a in SHARDS if a != alias)
        assert not rows_of(proc, other)  # it never registered on the other shard
        ran = Message.objects.using(alias).filter(operation="add").get()
        assert (ran.result, ran.attempt_count) == (5, 1)
    for proc in procs.values():
        assert commands.terminate(proc) == 0, commands.log(proc)


def test_sigkill_of_a_worker_serving_both_shards_and_takeover_on_one(commands, tmp_path):
    settings = {**FAST, "PROCESS_ALIVE_THRESHOLD": 3}
    release = tmp_path / "release"
    actor_id = ids_on("shard_b", 1, "tests.blocker")[0]
    message = Blocker.ref(actor_id).enqueue().hold_on_file(str(release))
    first = commands.start("run_actor_worker", settings=settings)
    wait_until(lambda: Path(f"{release}.entered").exists(), what="the handler to start")
    # The supervisors start one per shard; the kill comes once both registered.
    wait_serving(commands, first, SHARDS, {"worker"})
    claim = ClaimedMessage.objects.using("shard_b").get(message_id=message.id)
    (held_by,) = [row for row in rows_of(first, "shard_b") if row.kind == "worker"]
    assert claim.process_id == held_by.id

    os.kill(first.pid, signal.SIGKILL)
    assert commands.wait_exit(first) == -signal.SIGKILL
    release.write_text("go")
    second = commands.start("run_actor_worker", "--database", "shard_b", settings=settings)

    wait_until(lambda: message.status() == "completed", what="the other worker to take over")
    stored = Message.objects.using("shard_b").get(id=message.id)
    assert (stored.attempt_count, stored.result) == (2, 1)
    assert Blocker.ref(actor_id).snapshot().hits == 1
    wait_until(  # the takeover may come from the lease's expiry before the cleanup ran
        lambda: Process.objects.using("shard_b").get(id=held_by.id).shutdown_state == "stopped",
        what="the other worker's cleanup to find the killed process",
    )
    # The killed process's row on the shard nobody else serves stays until someone does.
    assert {row.shutdown_state for row in rows_of(first, "default")} == {"running"}
    assert commands.terminate(second) == 0, commands.log(second)


def test_sigterm_stops_every_shard_s_turn_gracefully(commands, tmp_path):
    releases = {alias: tmp_path / f"release-{alias}" for alias in SHARDS}
    blockers = {alias: ids_on(alias, 1, "tests.blocker")[0] for alias in SHARDS}
    held = {
        alias: Blocker.ref(blockers[alias]).enqueue().hold_on_file(str(releases[alias]))
        for alias in SHARDS
    }
    proc = commands.start("run_actor_worker", settings={**FAST, "SHUTDOWN_TIMEOUT": 60})
    for path in releases.values():
        wait_until(lambda p=path: Path(f"{p}.entered").exists(), what="both handlers to start")
    behind = {alias: Blocker.ref(blockers[alias]).enqueue().bump() for alias in SHARDS}
    proc.send_signal(signal.SIGTERM)
    wait_until(lambda: "stop requested" in commands.log(proc), what="the worker to see SIGTERM")
    assert proc.poll() is None  # both turns are still in flight
    for path in releases.values():
        path.write_text("go")
    assert commands.wait_exit(proc) == 0, commands.log(proc)
    for alias in SHARDS:
        stored = Message.objects.using(alias).get(id=held[alias].id)
        assert (stored.result, stored.attempt_count) == (1, 1)
        assert Message.objects.using(alias).get(id=behind[alias].id).attempt_count == 0
        assert not ClaimedMessage.objects.using(alias).exists()
        assert {row.shutdown_state for row in rows_of(proc, alias)} == {"stopped"}


@pytest.mark.parametrize(
    "command",
    ["run_actor_worker", "run_effect_worker", "run_reminder_scheduler", "prune_solid_objects"],
)
def test_a_database_that_is_not_a_shard_is_refused_before_anything_runs(command):
    with pytest.raises(CommandError, match="'nope'"):
        call_command(command, database="nope")
    for alias in SHARDS:
        assert not Process.objects.using(alias).exists()


def test_prune_covers_every_shard(capsys):
    old = timezone.now() - timedelta(days=60)
    for alias in SHARDS:
        for _ in range(2 if alias == "shard_b" else 1):
            process_id = processes.register("worker", alias)
            processes.deregister(process_id, alias)
            Process.objects.using(alias).filter(id=process_id).update(
                stopped_at=old, last_heartbeat_at=old, started_at=old
            )
    call_command("prune_solid_objects", "--processes")
    assert "processes: 3 would be deleted" in capsys.readouterr().out
    call_command("prune_solid_objects", "--processes", "--execute", "--database", "shard_b")
    assert "processes: 2 deleted" in capsys.readouterr().out
    assert Process.objects.using("default").count() == 1
    call_command("prune_solid_objects", "--processes", "--execute")
    assert "processes: 1 deleted" in capsys.readouterr().out
    assert not any(Process.objects.using(alias).exists() for alias in SHARDS)


def test_an_effect_rate_is_global_its_row_on_the_home_database():
    """``tests.rate.hourly`` allows one attempt an hour across every shard."""
    payers = {alias: ids_on(alias, 1, "tests.payer")[0] for alias in SHARDS}
    for alias in ["shard_b", "default"]:
        Payer.ref(payers[alias]).enqueue().pay(effect="tests.rate.hourly", arguments={})
    drain(roles=("actors",))
    outcomes = {}
    for alias in ["shard_b", "default"]:
        owner = callers.process_id(alias)
        (row,) = claim_due(alias, owner, 1)
        outcomes[alias] = process(alias, owner, row)
    assert outcomes["shard_b"] != DEFERRED  # the first attempt anywhere took the slot
    assert outcomes["default"] == DEFERRED  # the same name on another shard waits for it
    assert RateLimit.objects.using("default").filter(name="tests.rate.hourly").exists()
    assert not RateLimit.objects.using("shard_b").exists()
    assert Effect.objects.using("default").get().status == "pending"  # handed back


class BrokenShard(Exception):
    pass


def test_a_shard_that_cannot_start_stops_the_others_and_fails_the_process():
    """The group of one process: a supervisor that fails outright (here its role cannot
    even be built) stops the other shards' supervisors, which mark their rows stopped, and
    the error ends ``run()`` as it would end a worker of one database."""
    from solid_objects.runtime.launch import build_supervisor
    from solid_objects.runtime.shard_group import SupervisorGroup
    from solid_objects.runtime.supervisor import Supervisor

    def broken(host, index):
        raise BrokenShard("this shard's role cannot start")

    healthy = build_supervisor(alias="default")
    healthy.wake_ups = False
    failing = Supervisor(roles=[(broken, 1)], alias="shard_b", wake_ups=False)
    group = SupervisorGroup([healthy, failing], install_signal_handlers=False)
    with pytest.raises(BrokenShard):
        group.run()
    rows = list(Process.objects.using("default").filter(pid=os.getpid(), kind="worker"))
    assert [row.shutdown_state for row in rows] in ([], ["stopped"])
    assert not Process.objects.using("shard_b").filter(pid=os.getpid(), kind="worker").exists()


def test_a_group_stops_every_shard_on_request_and_returns_zero():
    import threading

    from solid_objects.runtime.launch import build_workers
    from solid_objects.runtime.shard_group import SupervisorGroup

    group = build_workers(database=None)
    assert isinstance(group, SupervisorGroup)
    assert group.aliases == SHARDS
    group.install_signal_handlers = False
    for supervisor in group.supervisors:
        supervisor.wake_ups = False
    outcome: list[int] = []
    thread = threading.Thread(target=lambda: outcome.append(group.run()))
    thread.start()
    for supervisor in group.supervisors:
        assert supervisor.started.wait(30)
    for alias in SHARDS:
        assert Process.objects.using(alias).get(pid=os.getpid(), kind="worker").shutdown_state == (
            "running"
        )
    group.request_stop()
    thread.join(30)
    assert outcome == [0]
    for alias in SHARDS:
        assert Process.objects.using(alias).get(pid=os.getpid(), kind="worker").shutdown_state == (
            "stopped"
        )


def test_reload_restarts_every_shard_s_supervisor_gracefully(commands):
    """``--reload``: a changed module stops the child's supervisors of both shards (their
    rows marked stopped) and a fresh child registers on both again."""
    import time

    from tests.support.processes import REPO_ROOT

    watched = REPO_ROOT / "tests" / "testapp" / "__init__.py"

    def workers_on(alias: str, exclude: int | None = None) -> list[Process]:
        rows = Process.objects.using(alias).filter(kind="worker", shutdown_state="running")
        return [row for row in rows if row.pid != exclude]

    proc = commands.start("run_actor_worker", "--reload", settings=FAST)
    firsts = wait_until(
        lambda: [workers_on(alias) for alias in SHARDS] if all(map(workers_on, SHARDS)) else None,
        what="the child to register on both shards",
    )
    (child,) = {row.pid for rows in firsts for row in rows}
    assert child != proc.pid
    stat = watched.stat()
    os.utime(watched, (stat.st_atime, time.time() + 5))
    try:
        wait_until(
            lambda: all(workers_on(alias, exclude=child) for alias in SHARDS),
            what="a fresh child on both shards",
            details=lambda: commands.log(proc),
        )
    finally:
        os.utime(watched, (stat.st_atime, stat.st_mtime))
    for rows in firsts:
        for row in rows:
            row.refresh_from_db()
            assert row.shutdown_state == "stopped"
    assert commands.terminate(proc) == 0, commands.log(proc)
    for alias in SHARDS:
        assert not workers_on(alias)
    log = commands.log(proc)
    assert log.count("solid_objects worker started") == 4  # two children, two shards each


def test_all_roles_retention_prunes_each_shard_from_its_own_supervisor():
    from solid_objects.runtime.launch import build_workers

    old = timezone.now() - timedelta(days=60)
    for alias in SHARDS:
        process_id = processes.register("worker", alias)
        processes.deregister(process_id, alias)
        Process.objects.using(alias).filter(id=process_id).update(
            stopped_at=old, last_heartbeat_at=old, started_at=old
        )
    group = build_workers(all_roles=True)
    for supervisor in group.supervisors:
        (task,) = [task for task in supervisor.periodic if task.name == "retention"]
        assert Process.objects.using(supervisor.alias).exists()
        task.function()  # what the supervisor runs hourly in a thread of its own
        assert not Process.objects.using(supervisor.alias).exists(), supervisor.alias
