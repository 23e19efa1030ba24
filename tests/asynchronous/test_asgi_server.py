"""``ref.aio`` in async views served by a real ASGI server (uvicorn, in a subprocess, on the
test database): concurrent requests to one actor get one ordered, committed result each."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from solid_objects.models import Message
from tests.testapp.actors.core import Counter

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def server(commands: Any) -> str:
    from tests.support.waiting import wait_until

    port = free_port()
    proc = commands.start_program(
        ["-m", "uvicorn", "tests.asgi:application", "--port", str(port), "--lifespan", "off"],
        name="uvicorn",
    )
    base = f"http://127.0.0.1:{port}"

    def listening() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"uvicorn exited:\n{commands.log(proc)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    wait_until(listening, what="uvicorn to listen", details=commands.logs)
    return base


def test_async_views_call_actors_under_uvicorn(server: str):
    with ThreadPoolExecutor(max_workers=6) as pool:
        replies = list(pool.map(lambda _: get(f"{server}/counter/web/add?amount=1"), range(12)))
    assert all(status == 200 for status, _ in replies), replies
    assert sorted(body["value"] for _, body in replies) == list(range(1, 13))
    assert Counter.ref("web").snapshot().value == 12
    assert Message.objects.filter(actor_id="web", completed_at__isnull=False).count() == 12

    status, body = get(f"{server}/counter/web/enqueue?n=5")
    assert (status, body) == (200, {"status": "ready", "result": 1})

    status, body = get(f"{server}/counter/web/refuse")
    assert (status, body) == (409, {"code": "closed"})
