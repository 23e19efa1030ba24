"""Subscription tokens: signed, expiring, bound to one viewer."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.db import SessionStore
from django.core import signing

from solid_objects.live import tokens
from tests.factories import UserFactory

SUBJECT = tokens.Subject("tests.board", "b1", "size")


def test_a_token_round_trips_for_its_viewer_only() -> None:
    token = tokens.issue(SUBJECT, "u:1")
    assert tokens.verify(token, "u:1") == SUBJECT
    with pytest.raises(tokens.TokenRefused) as refused:
        tokens.verify(token, "u:2")
    assert refused.value.reason == "viewer"


@pytest.mark.parametrize(
    "token",
    [
        "",
        None,
        42,
        "x" * 3000,
        "not-a-token",
        signing.dumps({"t": "tests.board", "i": "b1", "o": "size", "v": "u:1"}),  # other salt
        signing.dumps({"t": "tests.board", "v": "u:1"}, salt=tokens.SALT),  # fields missing
    ],
)
def test_forged_or_malformed_tokens_are_invalid(token: object) -> None:
    with pytest.raises(tokens.TokenRefused) as refused:
        tokens.verify(token, "u:1")
    assert refused.value.reason == "invalid"


def test_a_tampered_token_is_invalid() -> None:
    token = tokens.issue(SUBJECT, "u:1")
    payload, _, rest = token.partition(":")
    forged = signing.dumps({"t": "tests.board", "i": "b2", "o": "size", "v": "u:1"}).partition(":")[
        0
    ]
    with pytest.raises(tokens.TokenRefused) as refused:
        tokens.verify(f"{forged}:{rest}", "u:1")
    assert refused.value.reason == "invalid"
    assert payload != forged


def test_an_old_token_is_expired() -> None:
    token = tokens.issue(SUBJECT, "u:1")
    with pytest.raises(tokens.TokenRefused) as refused:
        tokens.verify(token, "u:1", max_age=-1)
    assert refused.value.reason == "expired"


@pytest.mark.django_db
def test_viewers_never_contain_the_session_key() -> None:
    session = SessionStore()
    session.save()
    anonymous = tokens.viewer(AnonymousUser(), session)
    assert anonymous.startswith("s:") and session.session_key not in anonymous
    other = SessionStore()
    other.save()
    assert tokens.viewer(AnonymousUser(), other) != anonymous
    assert tokens.viewer(AnonymousUser(), None) == "a"
    user = UserFactory()
    assert tokens.viewer(user, session) == f"u:{user.pk}"
