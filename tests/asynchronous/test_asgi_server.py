"""``ref.aio`` and the journal's awaitable functions in async views served by a real ASGI
server (uvicorn, in a subprocess, on the test database): concurrent requests to one actor get
one ordered, committed result each; snapshots, message look-ups, destruction and the journal
behave as their synchronous counterparts, with the same errors."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import tilttek_activity
from solid_objects.models import Instance, Message
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
    assert status == 200
    assert (body["status"], body["result"]) == ("ready", 1)

    status, body = get(f"{server}/counter/web/refuse")
    assert (status, body) == (409, {"code": "closed"})


def test_snapshot_find_message_and_destroy_under_uvicorn(server: str):
    counter = f"{server}/counter/life"
    assert get(f"{counter}/snapshot") == (
        200,
        {"exists": False, "revision": 0, "value": 0, "seen": []},
    )
    with ThreadPoolExecutor(max_workers=6) as pool:
        sent = list(pool.map(lambda n: get(f"{counter}/enqueue?n={n}&key=k{n}"), range(6)))
    assert all(status == 200 for status, _ in sent), sent
    assert sorted(body["result"] for _, body in sent) == list(range(1, 7))

    status, snap = get(f"{counter}/snapshot")
    assert status == 200 and snap["exists"] and snap["value"] == 0
    assert sorted(snap["seen"]) == list(range(6))
    committed = Counter.ref("life").snapshot()
    assert (snap["revision"], snap["seen"]) == (committed.revision, committed.seen)

    # Each message is found by its key from another request, with its committed outcome.
    for n, (_, body) in enumerate(sent):
        assert get(f"{counter}/find?key=k{n}") == (
            200,
            {"id": body["id"], "status": "completed", "result": body["result"]},
        )
    assert get(f"{counter}/find?key=never") == (404, {})
    assert get(f"{counter}/find?key=") == (400, {"error": "InvalidPayload"})  # as find_message()

    assert get(f"{counter}/destroy") == (200, {"destroyed": True})
    assert get(f"{counter}/destroy") == (200, {"destroyed": False})
    assert not Instance.objects.filter(actor_type="tests.counter", actor_id="life").exists()
    assert get(f"{counter}/snapshot")[1]["exists"] is False
    assert get(f"{counter}/find?key=k0") == (404, {})  # its messages went with it


def test_the_journal_awaited_under_uvicorn(server: str):
    record = f"{server}/activity/record?member=user:1&verb=user.signed_up&key=u1:signup"
    with ThreadPoolExecutor(max_workers=6) as pool:
        replies = list(pool.map(lambda _: get(record), range(6)))
    assert all(status == 200 for status, _ in replies), replies
    assert sorted(body["created"] for _, body in replies) == [False] * 5 + [True]  # once
    assert len({body["position"] for _, body in replies}) == 1
    status, body = get(f"{server}/activity/record?member=user:1&verb=other&key=u1:signup")
    assert (status, body) == (409, {"conflict": ["verb"]})

    many = f"{server}/activity/record-many?member=user:1&verbs=page.viewed,cart.opened"
    status, first = get(many)
    assert status == 200
    assert [(r["key"], r["created"]) for r in first["recorded"]] == [
        ("user:1:page.viewed", True),
        ("user:1:cart.opened", True),
    ]
    status, again = get(many)
    assert [r["created"] for r in again["recorded"]] == [False, False]
    assert [r["position"] for r in again["recorded"]] == [r["position"] for r in first["recorded"]]

    status, cancelled = get(f"{server}/activity/cancel?key=u1:signup")
    assert status == 200
    assert (cancelled["kind"], cancelled["created"], cancelled["verb"]) == (
        "cancelled",
        True,
        "user.signed_up",
    )
    assert get(f"{server}/activity/cancel?key=u1:signup")[1]["created"] is False
    assert get(f"{server}/activity/cancel?key=never") == (404, {"missing": "never"})

    status, feed = get(f"{server}/activity/entries?member=user:1")
    assert status == 200
    assert [(e["kind"], e["key"]) for e in feed["entries"]] == [
        ("cancelled", "u1:signup"),
        ("recorded", "user:1:cart.opened"),
        ("recorded", "user:1:page.viewed"),
        ("recorded", "u1:signup"),
    ]
    expected = tilttek_activity.entries(member="user:1", kind=None, newest_first=True)
    assert [e["position"] for e in feed["entries"]] == [e.position for e in expected]
