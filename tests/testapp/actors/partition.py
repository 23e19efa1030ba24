"""The actor of the network-partition test (tests/adversarial/partition).

``apply(n, sink, gate)`` appends ``[n, pid]`` to ``seen`` (the pid of the worker process that
ran the turn: the test reads from the state which host committed it) and emits one
``tests.partition.deliver`` effect, which appends a line to the file ``sink``. With a
``gate``, the turn first writes ``<gate>.<actor_id>.<pid>`` (the moment it started, so the
test knows which host holds the actor mid-turn) and then blocks until the file ``gate``
exists: the test cuts the host's link while its turns wait there.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import solid_objects
from solid_objects import Actor, attribute

#: Upper bound of a gated turn's wait (seconds); the test opens the gate long before.
GATE_PATIENCE = 240.0
EFFECT = "tests.partition.deliver"


def entered_marker(gate: str, actor_id: str, pid: int) -> Path:
    return Path(f"{gate}.{actor_id}.{pid}")


def wait_for_gate(gate: str) -> None:
    deadline = time.monotonic() + GATE_PATIENCE
    pause = threading.Event()
    while not Path(gate).exists() and time.monotonic() < deadline:
        pause.wait(0.01)


class PartitionLedger(Actor):
    actor_type = "tests.partition_ledger"

    seen = attribute(default=list)

    def apply(self, n: int, sink: str, gate: str = "") -> dict[str, int]:
        pid = os.getpid()
        if gate:
            marker = entered_marker(gate, self.actor_id, pid)
            written = marker.with_name(f"{marker.name}.writing")
            written.write_text(repr(time.time()))
            written.rename(marker)  # whole: the test reads it the moment it exists
            wait_for_gate(gate)
        self.seen = [*self.seen, [n, pid]]
        self.emit(EFFECT, actor=self.actor_id, n=n, sink=sink)
        return {"n": n, "pid": pid, "position": len(self.seen)}


@solid_objects.effect(EFFECT)
def deliver(arguments: dict[str, Any], context: Any) -> dict[str, int]:
    """Append one line per delivery (an effect is delivered at least once)."""
    line = {
        "effect_id": context.effect_id,
        "actor": arguments["actor"],
        "n": arguments["n"],
        "pid": os.getpid(),
    }
    with Path(arguments["sink"]).open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    return {"pid": os.getpid()}
