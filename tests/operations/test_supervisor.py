"""The supervisor: crashed roles are replaced, periodic tasks never hold up heartbeats, a row
marked stopped behind our back is replaced, ``--all-roles`` runs every role and stops them
all on SIGTERM."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from solid_objects.models import Process
from solid_objects.outbox.broadcasts import BroadcastRole
from solid_objects.outbox.effects import EffectRole
from solid_objects.reminders import ReminderRole
from solid_objects.runtime.launch import build_supervisor
from solid_objects.runtime.roles import ActorRole, Role
from solid_objects.runtime.supervisor import RETENTION_INTERVAL, Periodic, Supervisor
from tests.operations.support import running
from tests.support.waiting import PATIENCE, wait_until
from tests.testapp.actors.core import Blocker

pytestmark = pytest.mark.django_db(transaction=True)


class CrashOnce(Role):
    """Its first incarnation raises out of the loop; the replacement runs normally."""

    name = "crash-once"
    kind = "worker"
    incarnations: ClassVar[list[int]] = []
    replacement_ran: ClassVar[threading.Event] = threading.Event()

    def run_once(self) -> bool:
        if not self.incarnations or self.incarnations[-1] != id(self):
            self.incarnations.append(id(self))
        if len(self.incarnations) == 1:
            raise RuntimeError("injected crash")
        self.replacement_ran.set()
        return False


class AlwaysCrash(Role):
    name = "always-crash"
    kind = "worker"

    def run_once(self) -> bool:
        raise RuntimeError("crash loop")


def test_a_role_whose_loop_raises_is_replaced(caplog):
    CrashOnce.incarnations.clear()
    CrashOnce.replacement_ran.clear()
    supervisor = Supervisor(roles=[(CrashOnce, 1)], install_signal_handlers=False)
    with running(supervisor):
        assert CrashOnce.replacement_ran.wait(PATIENCE)
        (slot,) = supervisor.slots()
        assert slot.restarts == 1
        assert slot.thread is not None and slot.thread.is_alive()
        assert len(CrashOnce.incarnations) == 2
        # The replacement works under the same process row.
        assert slot.role is not None and slot.role.process_id == supervisor.process_ids["worker"]
    assert "role crash-once-0 crashed" in caplog.text


def test_a_role_that_keeps_crashing_is_restarted_with_a_backoff():
    supervisor = Supervisor(roles=[(AlwaysCrash, 1)], install_signal_handlers=False)
    with running(supervisor):
        (slot,) = supervisor.slots()
        wait_until(lambda: slot.restarts >= 2, what="a second crash")
        # The first replacement came at once; the next one waits (1 s, 2 s, ... up to 30 s).
        assert slot.restart_at > 0.0 or slot.restarts >= 3
    assert Process.objects.get().shutdown_state == "stopped"


def test_periodic_tasks_run_in_their_own_thread_and_never_overlap(solid_settings):
    solid_settings(PROCESS_HEARTBEAT_INTERVAL=0.2, LEASE_RENEWAL_INTERVAL=0.2)
    release = threading.Event()
    runs: list[str] = []

    def slow_task() -> None:
        runs.append(threading.current_thread().name)
        release.wait(PATIENCE)

    supervisor = Supervisor(
        roles=[(ActorRole, 1)],
        periodic=[Periodic(0.05, slow_task, name="slow", first_delay=0.0)],
        install_signal_handlers=False,
    )
    with running(supervisor):
        wait_until(lambda: runs, what="the periodic task")
        process = Process.objects.get()
        first_beat = process.last_heartbeat_at
        wait_until(
            lambda: Process.objects.get().last_heartbeat_at > first_beat,
            what="a heartbeat while the task runs",
        )
        assert len(runs) == 1  # still running: not started again
        assert runs[0] == "solid-objects-slow"
        release.set()
        wait_until(lambda: len(runs) >= 2, what="the next run")


def test_a_process_row_marked_stopped_behind_our_back_is_replaced(solid_settings):
    solid_settings(PROCESS_HEARTBEAT_INTERVAL=0.2, LEASE_RENEWAL_INTERVAL=0.2)
    supervisor = Supervisor(roles=[(ActorRole, 1)], install_signal_handlers=False)
    with running(supervisor):
        original = supervisor.process_ids["worker"]
        Process.objects.filter(id=original).update(shutdown_state="stopped")
        replacement = wait_until(
            lambda: (
                supervisor.process_ids["worker"] != original and supervisor.process_ids["worker"]
            ),
            what="a fresh registration",
        )
        (slot,) = supervisor.slots()
        assert slot.role is not None and slot.role.process_id == replacement
        assert Process.objects.get(id=replacement).shutdown_state == "running"
    assert set(Process.objects.values_list("shutdown_state", flat=True)) == {"stopped"}


def test_all_roles_means_actor_effect_reminder_and_broadcast_roles_and_retention():
    supervisor = build_supervisor(all_roles=True, actor_threads=2)
    roles = {factory: count for factory, count in supervisor.roles}
    assert roles == {ActorRole: 2, EffectRole: 1, ReminderRole: 1, BroadcastRole: 1}
    (task,) = supervisor.periodic
    assert isinstance(task, Periodic)
    assert task.name == "retention" and task.interval == RETENTION_INTERVAL
    assert build_supervisor().periodic == []


@pytest.mark.slow
def test_sigterm_stops_every_role_of_all_roles_and_marks_every_row_stopped(commands):
    worker = commands.start("run_actor_worker", "--all-roles")
    rows = commands.wait_registered(worker, {"worker", "effect", "reminder", "broadcast"})
    assert len(rows) == 4
    assert commands.terminate(worker) == 0, commands.log(worker)
    states = dict(Process.objects.filter(pid=worker.pid).values_list("kind", "shutdown_state"))
    assert states == dict.fromkeys(("worker", "effect", "reminder", "broadcast"), "stopped")
    assert all(row.stopped_at is not None for row in Process.objects.filter(pid=worker.pid))
    log = commands.log(worker)
    assert "Traceback" not in log, log


@pytest.mark.slow
def test_a_second_signal_forces_the_exit(commands, tmp_path: Path):
    worker = commands.start("run_actor_worker", settings={"SHUTDOWN_TIMEOUT": 60.0})
    commands.wait_registered(worker, {"worker"})
    flag = tmp_path / "release"
    Blocker.ref("held").enqueue().hold_on_file(str(flag))
    wait_until(lambda: Path(f"{flag}.entered").exists(), what="the turn to start")
    worker.send_signal(signal.SIGTERM)  # drains: waits for the turn in flight
    threading.Event().wait(0.3)
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(PATIENCE) == 1
    flag.write_text("")
