"""The ``AUTHORIZE_SUBSCRIPTION`` question: may this viewer follow this observable?

The policy is called as ``policy(user, actor_type, actor_id, observable)``. A policy that also
declares a ``session`` parameter (or ``**kwargs``) receives the viewer's session as
``session=``, so an anonymous visitor's own objects (a cart id kept in the session) can be
allowed. Anything but ``True`` denies, and so does a policy that raises (logged). The default
policy denies everything.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..conf import get_settings
from ..registry import actor_types

logger = logging.getLogger("solid_objects")


@lru_cache(maxsize=32)
def _wants_session(policy: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(policy).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        or (p.name == "session" and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        for p in parameters
    )


def observable_exists(actor_type: str, observable: str) -> bool:
    """Whether ``actor_type`` is a registered type with an observable of that name."""
    spec = actor_types().get(actor_type)
    return spec is not None and observable in spec.observables


def allowed(user: Any, session: Any, actor_type: str, actor_id: str, observable: str) -> bool:
    """Ask the configured policy (synchronously: it may read the database)."""
    if not observable_exists(actor_type, observable):
        return False
    policy = get_settings().AUTHORIZE_SUBSCRIPTION
    try:
        if _wants_session(policy):
            answer = policy(user, actor_type, actor_id, observable, session=session)
        else:
            answer = policy(user, actor_type, actor_id, observable)
    except Exception:
        logger.exception(
            "AUTHORIZE_SUBSCRIPTION raised for %s/%s %s: denied", actor_type, actor_id, observable
        )
        return False
    return answer is True
