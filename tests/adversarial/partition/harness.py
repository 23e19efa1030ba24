"""One partition run: a private server (:mod:`tests.adversarial.restart.servers`) listening on
the root-side ends of two veth pairs (:mod:`.network`), one ``run_actor_worker --all-roles``
process in each namespace, and the test in the root namespace:

1. host A starts alone with ``HELD`` actor threads; the first message of each of the
   ``HELD`` held actors waits at a gate (:mod:`tests.testapp.actors.partition`), so A holds
   all of them mid-turn, renewing their leases;
2. host B starts; it runs the free actors' messages but none of the held actors (A renews
   their leases), for more than a lease;
3. A's link is cut, then the gate opens: A's turns finish and their commits wait in A's TCP
   retransmissions; B must take every held actor over once the lease has run out (the
   takeover time, cut to B's start of the turn, is measured) and run everything enqueued
   meanwhile; B's dead-process cleanup marks A stopped;
4. the link comes back: A's late commits reach the server and the fence rejects them
   (``activation_lost`` in A's log); A registers afresh;
5. B stops with SIGTERM (exit 0); more messages for every actor (and new ones), which A
   alone runs; the mailboxes and the effect outbox drain; A stops with SIGTERM (exit 0);
   the rows are checked (:func:`violations`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solid_objects.conf import table
from tests.adversarial.restart.harness import on_server
from tests.adversarial.restart.servers import PrivateServer
from tests.support.processes import Commands
from tests.support.waiting import wait_until
from tests.testapp.actors.partition import entered_marker

from .network import Host, Network

#: The private server's database name.
DATABASE = "partition"
#: Upper bound of every wait of the run (seconds); the machine is shared and slow.
PATIENCE = 90.0
LEASE_DURATION = 3.0
#: The server ends a session left idle inside a transaction this long (seconds). A cut
#: landing inside one of A's short transactions (a lease renewal) would otherwise leave the
#: rows it locked locked until the link returns; production servers want the same setting
#: (docs/guarantees.md).
IDLE_TRANSACTION_TIMEOUT = 5
#: B's takeover of a held actor must start within this many seconds of the cut: the lease,
#: plus the idle-transaction timeout (for a cut inside one of A's transactions), plus B's
#: polling on a loaded machine.
TAKEOVER_BOUND = LEASE_DURATION + IDLE_TRANSACTION_TIMEOUT + 4.0
SETTINGS: dict[str, Any] = {
    "POLLING_INTERVAL": 0.05,
    "IDLE_POLLING_INTERVAL": 0.25,
    "PROCESS_HEARTBEAT_INTERVAL": 0.5,
    "PROCESS_ALIVE_THRESHOLD": 6.0,
    "LEASE_DURATION": LEASE_DURATION,
    "LEASE_RENEWAL_INTERVAL": 1.0,
    "SYNC_TIMEOUT": 5.0,
}
#: Actors held mid-turn by A at the cut (A runs this many actor threads), actors free to run
#: anywhere, and actors that first get messages after the link is back.
HELD = 3
FREE = 4
LATE = 6


def server_settings(vendor: str) -> dict[str, str]:
    if vendor == "postgresql":
        return {"idle_in_transaction_session_timeout": str(IDLE_TRANSACTION_TIMEOUT * 1000)}
    return {"idle-transaction-timeout": str(IDLE_TRANSACTION_TIMEOUT)}


def _decode(value: Any) -> Any:
    if isinstance(value, (bytes, str)):
        return json.loads(value)
    return value


@dataclass
class Partition:
    server: PrivateServer
    network: Network
    directory: Path
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    #: Per actor, the numbers sent, in order.
    sent: dict[str, list[int]] = field(default_factory=dict)
    cut_at: float = 0.0
    restored_at: float = 0.0
    takeovers: dict[str, float] = field(default_factory=dict)
    generations_at_cut: dict[str, int] = field(default_factory=dict)
    a_log_offset: int = 0
    fenced: int = 0
    reregistered: bool = False
    exit_codes: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.gate = self.directory / "gate"
        self.sink = self.directory / "deliveries.jsonl"
        self.commands: dict[str, Commands] = {}
        for name, host in self.network.hosts.items():
            (self.directory / name).mkdir(exist_ok=True)
            self.commands[name] = Commands(
                self.directory / name,
                DATABASE,
                on_server(self.server, DATABASE, host.server_address),
            )
        (self.directory / "local").mkdir(exist_ok=True)
        self.local = Commands(self.directory / "local", DATABASE, on_server(self.server, DATABASE))
        self.held = [f"partition-held-{k}" for k in range(HELD)]
        self.free = [f"partition-free-{k}" for k in range(FREE)]
        self.late = [f"partition-late-{k}" for k in range(LATE)]

    @property
    def a(self) -> Host:
        return self.network["hostA"]

    @property
    def b(self) -> Host:
        return self.network["hostB"]

    # -- processes ---------------------------------------------------------------------------
    def start_worker(self, host: Host, threads: int) -> subprocess.Popen[bytes]:
        # DEBUG: the signal log names every activation claimed and lost.
        proc = self.commands[host.name].start(
            "run_actor_worker",
            "--all-roles",
            "--threads",
            str(threads),
            settings=SETTINGS,
            log_level="DEBUG",
            prefix=host.prefix,
        )
        self.workers[host.name] = proc
        self.wait(lambda: self.running_rows(proc.pid), f"{host.name}'s worker to register")
        return proc

    def send(self, messages: list[tuple[str, int, bool]]) -> None:
        """Enqueue ``(actor, n, gated)`` through the loopback address, in one transaction."""
        payload = [
            {"actor": a, "n": n, "sink": str(self.sink), "gate": str(self.gate) if gated else ""}
            for a, n, gated in messages
        ]
        proc = self.local.start_program(
            ["-m", "tests.adversarial.partition.send", json.dumps(payload)], name="send"
        )
        code = self.local.wait_exit(proc, PATIENCE)
        assert code == 0, f"enqueueing failed ({code}):\n{self.local.log(proc)}"
        for actor, n, _ in messages:
            self.sent.setdefault(actor, []).append(n)

    def stop(self, host: Host) -> int:
        """SIGTERM (a graceful stop) to ``host``'s worker; its exit code."""
        return self.commands[host.name].terminate(self.workers[host.name], PATIENCE)

    def kill_all(self) -> None:
        for commands in (*self.commands.values(), self.local):
            commands.kill_all()

    def log(self, host: Host) -> str:
        return self.commands[host.name].log(self.workers[host.name])

    def logs(self) -> str:
        parts = []
        for path in sorted(self.directory.glob("*/*.log")):
            lines = path.read_text(errors="replace").splitlines()
            parts.append(f"--- {path.parent.name}/{path.name} (last 40 lines) ---")
            parts.extend(lines[-40:])
        parts.append(f"--- server log ---\n{self.server.log_tail()}")
        return "\n".join(parts)

    def wait(self, predicate: Any, what: str, timeout: float = PATIENCE) -> Any:
        """:func:`wait_until` ``predicate``; a worker that exits fails at once."""

        def checked() -> Any:
            value = predicate()
            for name, proc in self.workers.items():
                if not value and name not in self.exit_codes and proc.poll() is not None:
                    raise AssertionError(
                        f"{name}'s worker exited with {proc.returncode}:\n{self.logs()}"
                    )
            return value

        return wait_until(checked, timeout, interval=0.05, what=what, details=self.logs)

    # -- the database, read directly (through the loopback address) ----------------------------
    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        connection = self.server.connect(DATABASE)
        try:
            cursor = connection.cursor()
            cursor.execute(sql, params or [])
            return list(cursor.fetchall())
        finally:
            connection.close()

    def running_rows(self, pid: int) -> int:
        return int(
            self.query(
                f"SELECT COUNT(*) FROM {table('processes')} WHERE pid = %s AND kind = 'worker' "
                "AND shutdown_state = 'running'",
                [pid],
            )[0][0]
        )

    def unfinished(self, actors: list[str] | None = None) -> int:
        """Messages sent to ``actors`` (all) not completed yet, or not even written."""
        names = actors if actors is not None else list(self.sent)
        marks = ", ".join(["%s"] * len(names))
        done = int(
            self.query(
                f"SELECT COUNT(*) FROM {table('messages')} m JOIN {table('instances')} i "
                f"ON i.id = m.instance_id WHERE i.actor_id IN ({marks}) "
                "AND m.completed_at IS NOT NULL",
                names,
            )[0][0]
        )
        return sum(len(self.sent.get(name, [])) for name in names) - done

    def generations(self, actors: list[str]) -> dict[str, int]:
        marks = ", ".join(["%s"] * len(actors))
        return {
            str(actor_id): int(generation)
            for actor_id, generation in self.query(
                f"SELECT actor_id, activation_generation FROM {table('instances')} "
                f"WHERE actor_id IN ({marks})",
                actors,
            )
        }

    def entered(self, actor: str, host: Host) -> float | None:
        """When ``host``'s worker started the gated turn of ``actor`` (``None``: it did not)."""
        marker = entered_marker(str(self.gate), actor, self.workers[host.name].pid)
        return float(marker.read_text()) if marker.exists() else None

    def count_in_log(self, host: Host, needle: bytes, since: int = 0) -> int:
        with self.commands[host.name].log_path(self.workers[host.name]).open("rb") as log:
            log.seek(since)
            return log.read().count(needle)

    # -- the run -------------------------------------------------------------------------------
    def execute(self) -> None:
        for host in self.network.hosts.values():
            assert self.network.can_reach(host, self.server.port), f"{host.name} cannot connect"
        a = self.start_worker(self.a, threads=HELD)
        self.send(
            [(actor, 1, True) for actor in self.held]
            + [(actor, n, False) for actor in self.held for n in range(2, 5)]
            + [(actor, n, False) for actor in self.free for n in range(1, 9)]
        )
        self.wait(
            lambda: all(self.entered(actor, self.a) for actor in self.held),
            "host A to hold every held actor mid-turn",
        )
        self.start_worker(self.b, threads=2)
        b_up = time.monotonic()
        self.wait(
            lambda: (
                self.unfinished(self.free) == 0
                and time.monotonic() > b_up + LEASE_DURATION + SETTINGS["LEASE_RENEWAL_INTERVAL"]
            ),
            "host B to run the free actors for more than a lease",
        )
        taken = [actor for actor in self.held if self.entered(actor, self.b)]
        assert not taken, f"B took {taken} while A, connected, renewed their leases"
        assert self.unfinished(self.held) == len(self.held) * 4, "a held turn completed early"
        self.generations_at_cut = self.generations(self.held)

        # -- the partition
        self.cut_at = time.time()
        self.network.cut(self.a)
        self.gate.write_text("open")  # A's turns finish now; their commits cannot get out
        self.send(
            [(actor, n, False) for actor in self.held for n in range(5, 8)]
            + [(actor, n, False) for actor in self.free for n in range(9, 13)]
        )
        self.wait(lambda: self.unfinished() == 0, "host B to run everything during the cut")
        for actor in self.held:
            started = self.entered(actor, self.b)
            assert started is not None, f"{actor} completed, yet not by B"
            self.takeovers[actor] = started - self.cut_at
        self.wait(lambda: self.running_rows(a.pid) == 0, "host B's cleanup to mark host A stopped")
        assert a.poll() is None, "host A's worker exited during the cut"

        # -- the link comes back
        self.a_log_offset = self.commands["hostA"].log_path(a).stat().st_size
        self.restored_at = time.time()
        self.network.restore(self.a)
        self.wait(
            lambda: self.count_in_log(self.a, b"activation_lost ", self.a_log_offset) >= HELD,
            "host A's late commits to be fenced off",
        )
        self.fenced = self.count_in_log(self.a, b"activation_lost ", self.a_log_offset)
        self.reregistered = bool(
            self.wait(lambda: self.running_rows(a.pid), "host A to register afresh")
        )
        # B stops (gracefully), so the last messages are all A's: A must work on, under its
        # fresh registration, with the connections that lived through the cut.
        self.exit_codes["hostB"] = self.stop(self.b)
        self.send(
            [(actor, n, False) for actor in self.held for n in range(8, 12)]
            + [(actor, n, False) for actor in self.free for n in range(13, 17)]
            + [(actor, n, False) for actor in self.late for n in range(1, 6)]
        )
        self.wait(lambda: self.unfinished() == 0, "host A to run the last messages")
        self.wait(self.drained, "the mailboxes and the effect outbox to drain")
        self.exit_codes["hostA"] = self.stop(self.a)

    def claims_after_restore(self) -> int:
        return self.count_in_log(self.a, b"activation_claimed ", self.a_log_offset)

    def drained(self) -> bool:
        left = self.query(
            f"SELECT (SELECT COUNT(*) FROM {table('ready_messages')}) + "
            f"(SELECT COUNT(*) FROM {table('claimed_messages')}) + "
            f"(SELECT COUNT(*) FROM {table('effects')} WHERE status <> 'completed')"
        )[0][0]
        return int(left) == 0


# -- checks and figures ---------------------------------------------------------------------------
def violations(run: Partition) -> list[str]:
    """Everything that breaks the promises, read from the rows and the delivery file."""
    found: list[str] = []
    a_pid, b_pid = run.workers["hostA"].pid, run.workers["hostB"].pid
    instances = {
        str(actor_id): (int(instance_id), _decode(state) or {}, int(revision))
        for instance_id, actor_id, state, revision in run.query(
            f"SELECT id, actor_id, state, state_revision FROM {table('instances')} "
            "WHERE actor_id LIKE 'partition-%%'"
        )
    }
    messages: dict[int, list[tuple[int, Any, Any, bool]]] = {}
    for instance_id, sequence, arguments, result, completed in run.query(
        f"SELECT instance_id, sequence, arguments, result, completed_at IS NOT NULL "
        f"FROM {table('messages')} ORDER BY instance_id, sequence"
    ):
        messages.setdefault(int(instance_id), []).append(
            (int(sequence), _decode(arguments), _decode(result), bool(completed))
        )
    for actor, numbers in sorted(run.sent.items()):
        if actor not in instances:
            found.append(f"{actor}: no instance row")
            continue
        instance_id, state, revision = instances[actor]
        seen = state.get("seen", [])
        if [n for n, _ in seen] != numbers:
            found.append(f"{actor}: seen {[n for n, _ in seen]} != sent {numbers}")
        rows = messages.get(instance_id, [])
        if [arguments["n"] for _, arguments, _, _ in rows] != numbers:
            found.append(f"{actor}: {len(rows)} message rows do not carry the numbers sent")
        for position, (_, arguments, result, completed) in enumerate(rows, start=1):
            if not completed or not result:
                found.append(f"{actor}: message {arguments['n']} is not completed")
                continue
            expected = seen[position - 1] if position <= len(seen) else None
            if [result["n"], result["pid"]] != expected or result["position"] != position:
                found.append(f"{actor}: result {result} does not match seen[{position}]")
        if rows and revision != rows[-1][0]:
            found.append(f"{actor}: state_revision {revision} != last sequence {rows[-1][0]}")
        if actor in run.held and seen and seen[0] != [1, b_pid]:
            found.append(f"{actor}: the held turn committed as {seen[0]}, not by B ({b_pid})")
        if actor in run.held and any(pid == a_pid for n, pid in seen if 1 <= n < 8):
            found.append(f"{actor}: A committed a turn of the partition ({seen})")
    generations = run.generations(run.held)
    for actor, before in run.generations_at_cut.items():
        if generations.get(actor, 0) <= before:
            found.append(f"{actor}: activation generation {before} did not move on")
    found.extend(_effect_violations(run))
    for name in ("ready_messages", "claimed_messages", "dead_letters"):
        count = int(run.query(f"SELECT COUNT(*) FROM {table(name)}")[0][0])
        if count:
            found.append(f"{count} rows left in {name}")
    return found


def _effect_violations(run: Partition) -> list[str]:
    found = []
    effects: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for effect_id, arguments, status in run.query(
        f"SELECT effect_id, arguments, status FROM {table('effects')}"
    ):
        arguments = _decode(arguments)
        key = (str(arguments["actor"]), int(arguments["n"]))
        effects.setdefault(key, []).append((str(effect_id), str(status)))
    expected = {(actor, n) for actor, numbers in run.sent.items() for n in numbers}
    if set(effects) != expected:
        found.append(
            f"effects for {len(effects)} turns, {len(expected)} turns committed: "
            f"missing {sorted(expected - set(effects))[:5]}, "
            f"extra {sorted(set(effects) - expected)[:5]}"
        )
    doubled = {key: rows for key, rows in effects.items() if len(rows) != 1}
    if doubled:
        found.append(
            f"{len(doubled)} turns have more than one effect row, "
            f"e.g. {next(iter(doubled.items()))}"
        )
    delivered = deliveries(run)
    for key, rows in effects.items():
        for effect_id, status in rows:
            if status != "completed":
                found.append(f"effect {effect_id} of {key} is {status}")
            if not delivered.get(effect_id):
                found.append(f"effect {effect_id} of {key} was never delivered")
    return found


def deliveries(run: Partition) -> dict[str, int]:
    counts: dict[str, int] = {}
    if run.sink.exists():
        for line in run.sink.read_text().splitlines():
            effect_id = json.loads(line)["effect_id"]
            counts[effect_id] = counts.get(effect_id, 0) + 1
    return counts


def figures(run: Partition, vendor: str) -> dict[str, Any]:
    takeovers = sorted(run.takeovers.values())
    delivered = deliveries(run)
    return {
        "vendor": vendor,
        "lease_seconds": LEASE_DURATION,
        "held_actors": len(run.held),
        "takeover_seconds": [round(t, 2) for t in takeovers],
        "takeover_min_seconds": round(takeovers[0], 2) if takeovers else None,
        "takeover_max_seconds": round(takeovers[-1], 2) if takeovers else None,
        "cut_seconds": round(run.restored_at - run.cut_at, 2),
        "late_commits_fenced": run.fenced,
        "a_registered_again": run.reregistered,
        "a_claims_after_restore": run.claims_after_restore(),
        "messages": sum(len(numbers) for numbers in run.sent.values()),
        "effects": len(delivered),
        "effect_deliveries_repeated": sum(count - 1 for count in delivered.values()),
    }


def summary(figures: dict[str, Any]) -> str:
    return (
        f"partition {figures['vendor']}: {figures['held_actors']} actors held mid-turn by host A "
        f"at the cut; host B took them over {figures['takeover_seconds']} s after the cut "
        f"(lease {figures['lease_seconds']} s); link down {figures['cut_seconds']} s; "
        f"A's late commits fenced off {figures['late_commits_fenced']}, A registered again "
        f"{figures['a_registered_again']}, activations A claimed after the link returned "
        f"{figures['a_claims_after_restore']}; {figures['messages']} messages each applied "
        f"once, {figures['effects']} effects (repeated deliveries "
        f"{figures['effect_deliveries_repeated']})"
    )


def merge_report(figures: dict[str, Any]) -> None:
    """Merge the figures into the JSON file named by ``SOLID_PARTITION_REPORT``, if set."""
    path = os.environ.get("SOLID_PARTITION_REPORT")
    if not path:
        return
    target = Path(path)
    existing = json.loads(target.read_text()) if target.exists() else {}
    existing[figures["vendor"]] = figures
    target.write_text(json.dumps(existing, indent=2, sort_keys=True))
