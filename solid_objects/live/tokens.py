"""Subscription tokens: signed, expiring, bound to one viewer and one observable.

A token is ``django.core.signing.dumps`` of ``{"t": actor_type, "i": actor_id,
"o": observable, "v": viewer}`` with its own salt, so it is valid only for this purpose and
only under this site's ``SECRET_KEY``. The signature carries a timestamp; a token older than
:data:`MAX_AGE` seconds is refused.

The payload is **signed, not encrypted**: whoever holds a token can read the actor type, id
and observable in it (base64 JSON). Never use a secret as an actor id (see docs/live-pages.md).

``viewer`` names who the page was rendered for:

- ``"u:<pk>"`` for an authenticated user;
- ``"s:<hmac>"`` for an anonymous visitor with a session: a salted HMAC of the session key
  (never the key itself, which is the session cookie);
- ``"a"`` for an anonymous visitor without a session.

A token is accepted only from the same viewer (:func:`verify`), and the subscription policy is
asked again each time it is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.core import signing
from django.utils.crypto import salted_hmac

#: The signing salt: tokens of this module are useless anywhere else.
SALT = "solid_objects.live.subscription"
#: Seconds a token stays valid after it was issued. A page open longer gets fresh tokens from
#: ``observed_values`` (each refresh re-signs them) while the policy still allows it.
MAX_AGE = 3600
#: ``observed_values`` still renews a token this old (seconds): a page left open overnight
#: refreshes itself after a reconnect, the viewer and the policy being checked as always.
RENEW_MAX_AGE = 7 * 24 * 3600


class TokenRefused(Exception):
    """A token that is not accepted; ``reason`` is ``"invalid"``, ``"expired"`` or
    ``"viewer"`` (issued for someone else)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Subject:
    """What a token allows its viewer to follow."""

    actor_type: str
    actor_id: str
    observable: str


def viewer(user: Any, session: Any) -> str:
    """The viewer string of ``user`` (``request.user`` or ``scope["user"]``) with
    ``session`` (``request.session`` or ``scope["session"]``, may be ``None``)."""
    if user is not None and getattr(user, "is_authenticated", False):
        return f"u:{user.pk}"
    session_key = getattr(session, "session_key", None) if session is not None else None
    if session_key:
        digest = salted_hmac(SALT + ".session", session_key, algorithm="sha256").hexdigest()
        return f"s:{digest[:32]}"
    return "a"


def issue(subject: Subject, viewer_id: str) -> str:
    """A fresh token for ``viewer_id`` to follow ``subject``."""
    payload = {
        "t": subject.actor_type,
        "i": subject.actor_id,
        "o": subject.observable,
        "v": viewer_id,
    }
    return str(signing.dumps(payload, salt=SALT))


def verify(token: Any, viewer_id: str, *, max_age: int | None = None) -> Subject:
    """The subject of ``token`` if it is authentic, fresh and was issued to ``viewer_id``;
    :class:`TokenRefused` otherwise."""
    if not isinstance(token, str) or not token or len(token) > 2048:
        raise TokenRefused("invalid")
    try:
        age = timedelta(seconds=MAX_AGE if max_age is None else max_age)
        payload = signing.loads(token, salt=SALT, max_age=age)
    except signing.SignatureExpired:
        raise TokenRefused("expired") from None
    except signing.BadSignature:
        raise TokenRefused("invalid") from None
    if not isinstance(payload, dict) or not all(
        isinstance(payload.get(key), str) for key in ("t", "i", "o", "v")
    ):
        raise TokenRefused("invalid")
    if payload["v"] != viewer_id:
        raise TokenRefused("viewer")
    return Subject(payload["t"], payload["i"], payload["o"])
