"""``AUTHORIZE_SUBSCRIPTION`` policies of the live-pages tests."""

from __future__ import annotations

from typing import Any

ALLOW_ALL = "tests.live.policies.allow_all"
OWNER = "tests.live.policies.owner_only"
SESSION = "tests.live.policies.session_board"
RAISES = "tests.live.policies.raises"

#: owner_only allows a user the boards named "board-of-<pk>"; the flag turns it off.
switch = {"on": True}


def allow_all(user: Any, actor_type: str, actor_id: str, observable: str) -> bool:
    return True


def owner_only(user: Any, actor_type: str, actor_id: str, observable: str) -> bool:
    return bool(
        switch["on"]
        and getattr(user, "is_authenticated", False)
        and actor_type == "tests.board"
        and actor_id == f"board-of-{user.pk}"
    )


def session_board(
    user: Any, actor_type: str, actor_id: str, observable: str, *, session: Any = None
) -> bool:
    return session is not None and session.get("board") == actor_id


def raises(user: Any, actor_type: str, actor_id: str, observable: str) -> bool:
    raise RuntimeError("policy bug")
