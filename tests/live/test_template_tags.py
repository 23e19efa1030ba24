"""``{% observe %}`` and ``{% solid_objects_script %}``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.template import TemplateSyntaxError, engines
from django.test import override_settings

from solid_objects.live import tokens
from tests.factories import UserFactory
from tests.live.policies import ALLOW_ALL, OWNER, RAISES, SESSION
from tests.support.statements import capturing_statements, without_transaction_control
from tests.testapp.actors.broadcasts import Board

pytestmark = pytest.mark.django_db(transaction=True)


def render(source: str, request: Any, **context: Any) -> str:
    template = engines["django"].from_string("{% load solid_objects %}" + source)
    return template.render({**context}, request)


def attribute(html: str, name: str) -> str:
    found = re.search(rf'{name}="([^"]*)"', html)
    assert found, html
    return found.group(1)


def test_the_default_policy_renders_nothing_live(make_request) -> None:
    board = Board.ref("b-default")
    board.add("x")
    html = render('{% observe board "size" %}', make_request(), board=board)
    assert html == (
        '<span data-solid-objects-observable="size" data-solid-objects-state="denied"></span>'
    )


def test_an_allowed_viewer_gets_the_committed_value_and_a_token(make_request, policy) -> None:
    policy(OWNER)
    user = UserFactory()
    board = Board.ref(f"board-of-{user.pk}")
    board.add("a")
    board.add("b")
    snapshot = board.snapshot()
    request = make_request(user=user)
    html = render('{% observe board "size" as_html="strong" %}', request, board=board)
    assert html.startswith("<strong ") and html.endswith(">2</strong>")
    assert attribute(html, "data-solid-objects-instance") == str(snapshot.instance_id)
    assert attribute(html, "data-solid-objects-revision") == str(snapshot.revision)
    subject = tokens.verify(attribute(html, "data-solid-objects-token"), f"u:{user.pk}")
    assert subject == tokens.Subject("tests.board", f"board-of-{user.pk}", "size")
    # Another user's board: denied, no value, no token.
    other = render('{% observe other "size" %}', request, other=Board.ref("board-of-0"))
    assert "denied" in other and "token" not in other


def test_an_actor_not_created_yet_renders_its_defaults(make_request, policy) -> None:
    policy(ALLOW_ALL)
    html = render('{% observe board "size" %}', make_request(), board=Board.ref("b-new"))
    assert html.endswith(">0</span>")
    assert attribute(html, "data-solid-objects-instance") == "0"


def test_values_are_escaped(make_request, policy) -> None:
    policy(ALLOW_ALL)
    board = Board.ref("b-escape")
    board.retitle("<script>alert(1)</script>")
    html = render('{% observe board "title" %}', make_request(), board=board)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_one_snapshot_read_per_actor_per_render(make_request, policy) -> None:
    policy(ALLOW_ALL)
    board = Board.ref("b-reads")
    board.add("x")
    request = make_request()
    request.session.save()
    with capturing_statements() as queries:
        render('{% observe board "size" %}{% observe board "title" %}', request, board=board)
    reads = [sql for sql in without_transaction_control(queries) if "instances" in sql]
    assert len(reads) == 1, reads


def test_an_anonymous_token_is_bound_to_the_session(make_request, policy) -> None:
    policy(SESSION)
    session = SessionStore()
    session["board"] = "b-session"
    html = render(
        '{% observe board "size" %}', make_request(session=session), board=Board.ref("b-session")
    )
    assert session.session_key  # the tag saved the new session so the token can bind to it
    token = attribute(html, "data-solid-objects-token")
    assert tokens.verify(token, tokens.viewer(None, session)).actor_id == "b-session"
    assert session.session_key not in html


def test_a_policy_that_raises_denies(make_request, policy) -> None:
    policy(RAISES)
    html = render('{% observe board "size" %}', make_request(), board=Board.ref("b-raises"))
    assert "denied" in html


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('{% observe board "nope" %}', "no observable"),
        ('{% observe board "size" as_html="script" %}', "as_html"),
        ('{% observe "tests.board" "size" %}', "actor reference"),
    ],
)
def test_bad_arguments_fail_loudly(make_request, source: str, message: str) -> None:
    with pytest.raises(TemplateSyntaxError, match=message):
        render(source, make_request(), board=Board.ref("b-bad"))


def test_without_the_request_the_tag_says_what_is_missing() -> None:
    template = engines["django"].from_string('{% load solid_objects %}{% observe b "size" %}')
    with pytest.raises(TemplateSyntaxError, match=r"context_processors\.request"):
        template.render({"b": Board.ref("b-norequest")})


def test_the_script_tag_names_the_socket_and_the_values_endpoint(make_request) -> None:
    html = render("{% solid_objects_script %}", make_request())
    assert 'src="/static/solid_objects/live.js"' in html
    assert 'data-solid-objects-socket="/ws/solid-objects/"' in html
    assert 'data-solid-objects-values="/solid-objects/observed/"' in html


def test_the_script_tag_needs_the_urls(make_request) -> None:
    with (
        override_settings(ROOT_URLCONF="tests.live.no_urls"),
        pytest.raises(TemplateSyntaxError, match=r"solid_objects\.urls"),
    ):
        render("{% solid_objects_script %}", make_request())
