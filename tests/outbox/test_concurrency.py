"""Several effect workers at once: every effect is claimed and delivered exactly once."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from django.db import connections

from solid_objects.models import Effect
from solid_objects.outbox import run_pending_effects
from tests.testapp.actors.outbox import Payer

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_workers_deliver_each_effect_once(tmp_path: Path):
    sink = tmp_path / "sink.jsonl"
    payer = Payer.ref("crowd")
    emitted = {payer.pay("tests.outbox.sink", {"sink": str(sink)}) for _ in range(24)}
    start = threading.Barrier(3)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            start.wait(10)
            run_pending_effects()
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    delivered = [json.loads(line)["effect_id"] for line in sink.read_text().splitlines()]
    assert sorted(delivered) == sorted(emitted)  # each once, none twice
    assert set(Effect.objects.values_list("status", flat=True)) == {"completed"}
    assert len(payer.summary()["successes"]) == 24
