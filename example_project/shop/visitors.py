"""Who is shopping: the visitor's cart id and journal member, kept in the session.

Identifiers here are random values stored in the session, never the session key: the session
key *is* the ``sessionid`` cookie, so anything that shows or leaks it (a public feed, a
subscription token, a log line) would let others take over the visitor's session. Django's
``login()`` keeps the session's data (it only changes the key), so the cart survives a
login; ``logout()`` clears it.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.http import HttpRequest

from tilttek_activity.references import reference

#: Session keys of the shop's own values.
CART_KEY = "shop_cart_id"
VISITOR_KEY = "shop_visitor_id"


def _kept(session: Any, key: str) -> str:
    value = session.get(key)
    if not isinstance(value, str) or not value:
        value = secrets.token_urlsafe(18)  # 144 random bits
        session[key] = value
    return value


def cart_id(request: HttpRequest) -> str:
    """The visitor's cart (an unguessable id kept in the session)."""
    return _kept(request.session, CART_KEY)


def member(request: HttpRequest) -> str:
    """The journal reference of this visitor (a string: it travels in messages): the user's
    ``auth.user:<pk>`` when logged in, else ``visitor:<random id>`` (not the cart id, not the
    session key)."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return reference(user)
    return f"visitor:{_kept(request.session, VISITOR_KEY)}"


def display_name(member_ref: str) -> str:
    """What public pages show for a journal member: a user's username, or "visitor" and
    four hex digits of a hash (stable, never the identifier)."""
    kind, _, key = str(member_ref).partition(":")
    if kind == "auth.user" and key.isdigit():
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.filter(pk=int(key)).first()
        if user is not None:
            return user.get_username()
    digest = hashlib.sha256(str(member_ref).encode()).hexdigest()[:4]
    return f"visitor {digest}"
