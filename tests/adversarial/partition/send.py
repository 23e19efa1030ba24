"""Enqueue the partition test's messages, in a process of its own::

    python -m tests.adversarial.partition.send MESSAGES_JSON

on the database named by ``DATABASE_URL`` / ``SOLID_TEST_DATABASE_NAME`` (the private
server, through its loopback address: the test process's own Django database is another).
``MESSAGES_JSON`` is a list of ``{"actor", "n", "sink", "gate"}``; each becomes
``PartitionLedger.apply(n, sink, gate)`` with the idempotency key ``<actor>:<n>``, all in
one transaction, so a rerun of the same list enqueues nothing twice.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def send(messages: list[dict[str, Any]]) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()
    from django.db import transaction

    from tests.testapp.actors.partition import PartitionLedger

    with transaction.atomic():
        for item in messages:
            calls = PartitionLedger.ref(item["actor"]).enqueue(
                idempotency_key=f"{item['actor']}:{item['n']}"
            )
            calls.apply(item["n"], item["sink"], item.get("gate", ""))


if __name__ == "__main__":
    send(json.loads(sys.argv[1]))
