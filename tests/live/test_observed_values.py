"""``solid_objects.views.observed_values``: authorized JSON, fresh tokens."""

from __future__ import annotations

import pytest
from django.test import Client

from solid_objects.live import tokens
from tests.factories import UserFactory
from tests.live import policies
from tests.live.policies import OWNER, SESSION
from tests.testapp.actors.broadcasts import Board

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/solid-objects/observed/"


def token_for(user, actor_id: str, observable: str = "size") -> str:
    return tokens.issue(tokens.Subject("tests.board", actor_id, observable), f"u:{user.pk}")


def test_values_of_allowed_tokens_in_order_with_fresh_tokens(policy) -> None:
    policy(OWNER)
    user = UserFactory()
    board = Board.ref(f"board-of-{user.pk}")
    board.add("a")
    board.retitle("hello")  # title only invalidates: the endpoint serves its value
    snapshot = board.snapshot()
    client = Client()
    client.force_login(user)
    mine_size, mine_title = (
        token_for(user, board.actor_id),
        token_for(user, board.actor_id, "title"),
    )
    theirs = token_for(user, "board-of-0")
    response = client.get(URL, {"token": [mine_size, theirs, mine_title, "forged"]})
    assert response.status_code == 200
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    size, other, title, forged = response.json()["values"]
    assert size["ok"] and size["value"] == 1 and size["observable"] == "size"
    assert (size["instance_id"], size["state_revision"]) == (
        snapshot.instance_id,
        snapshot.revision,
    )
    assert tokens.verify(size["token"], f"u:{user.pk}").actor_id == board.actor_id
    assert title["ok"] and title["value"] == "hello"
    assert other == {"ok": False, "reason": "forbidden"}
    assert forged == {"ok": False, "reason": "invalid"}


def test_another_viewers_token_and_a_revoked_permission_are_refused(policy) -> None:
    policy(OWNER)
    owner, intruder = UserFactory(), UserFactory()
    token = token_for(owner, f"board-of-{owner.pk}")
    client = Client()
    client.force_login(intruder)
    assert client.get(URL, {"token": token}).json()["values"] == [{"ok": False, "reason": "viewer"}]
    client.force_login(owner)
    policies.switch["on"] = False  # the policy is asked again on every request
    assert client.get(URL, {"token": token}).json()["values"] == [
        {"ok": False, "reason": "forbidden"}
    ]


def test_anonymous_visitors_are_bound_to_their_session(policy) -> None:
    policy(SESSION)
    client = Client()
    session = client.session
    session["board"] = "b-anon"
    session.save()
    client.cookies["sessionid"] = session.session_key
    token = tokens.issue(
        tokens.Subject("tests.board", "b-anon", "size"), tokens.viewer(None, session)
    )
    assert client.get(URL, {"token": token}).json()["values"][0]["ok"] is True
    stranger = Client()
    assert stranger.get(URL, {"token": token}).json()["values"] == [
        {"ok": False, "reason": "viewer"}
    ]


def test_requests_without_tokens_or_with_too_many_are_bad(policy) -> None:
    client = Client()
    assert client.get(URL).status_code == 400
    assert client.get(URL, {"token": ["x"] * 51}).status_code == 400
    assert client.post(URL, {"token": "x"}).status_code == 405


def test_an_expired_token_is_renewed_while_the_policy_allows(policy, monkeypatch) -> None:
    policy(OWNER)
    user = UserFactory()
    given = token_for(user, f"board-of-{user.pk}")
    client = Client()
    client.force_login(user)
    monkeypatch.setattr(tokens, "MAX_AGE", -1)  # too old to subscribe with...
    (renewed,) = client.get(URL, {"token": given}).json()["values"]
    assert renewed["ok"]  # ...but young enough to renew
    monkeypatch.setattr(tokens, "RENEW_MAX_AGE", -1)
    assert client.get(URL, {"token": given}).json()["values"] == [
        {"ok": False, "reason": "expired"}
    ]


def test_a_recreated_actor_reports_a_higher_instance_id(policy) -> None:
    """Pages order values by ``(instance_id, state_revision)`` (live.js): that needs instance
    ids to grow, even when the destroyed incarnation was the newest row of the table (a
    reused id, as SQLite without AUTOINCREMENT or an InnoDB counter recomputed from the
    table would give, would make the page ignore the new incarnation)."""
    policy(OWNER)
    user = UserFactory()
    board = Board.ref(f"board-of-{user.pk}")
    client = Client()
    client.force_login(user)
    token = token_for(user, board.actor_id)
    seen = []
    for _ in range(3):
        board.add("a")
        (value,) = client.get(URL, {"token": token}).json()["values"]
        seen.append((value["instance_id"], value["state_revision"], value["value"]))
        assert board.destroy()
    assert [instance for instance, _, _ in seen] == sorted({i for i, _, _ in seen})
    assert all(value == 1 for _, _, value in seen)
