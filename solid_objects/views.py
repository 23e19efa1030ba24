"""``observed_values``: the committed values of observables a page follows, as JSON.

``GET <solid_objects:observed_values>?token=T1&token=T2`` (the tokens ``{% observe %}``
rendered, at most :data:`MAX_TOKENS`). Each token is checked like a subscription (authentic,
fresh, issued to this viewer, and allowed by ``AUTHORIZE_SUBSCRIPTION`` now). The answer
keeps the order of the tokens::

    {"values": [
        {"ok": true, "observable": "item_count", "value": 2, "instance_id": 812,
         "state_revision": 57, "token": "<a fresh token>"},
        {"ok": false, "reason": "forbidden"}
    ]}

The page calls it after a reconnect (changes sent while it was away are not replayed) and
for invalidation-only observables; each answer carries a re-signed token, so a page left open
keeps working for as long as the policy allows it: tokens up to
:data:`~solid_objects.live.tokens.RENEW_MAX_AGE` old (a week) are renewed here, while a
subscription needs one younger than ``MAX_AGE`` (an hour).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .live import tokens, values
from .live.policy import allowed

#: Tokens one request may carry.
MAX_TOKENS = 50


@never_cache
@require_GET
def observed_values(request: HttpRequest) -> HttpResponse:
    given = request.GET.getlist("token")
    if not given or len(given) > MAX_TOKENS:
        return JsonResponse(
            {"error": f"pass between 1 and {MAX_TOKENS} token parameters"}, status=400
        )
    user = getattr(request, "user", None)
    session = getattr(request, "session", None)
    viewer = tokens.viewer(user, session)
    snapshots: dict[tuple[str, str], Any] = {}  # one read per actor, however many tokens
    return JsonResponse(
        {"values": [_value(token, viewer, user, session, snapshots) for token in given]}
    )


def _value(
    token: str, viewer: str, user: Any, session: Any, snapshots: dict[tuple[str, str], Any]
) -> dict[str, Any]:
    try:
        subject = tokens.verify(token, viewer, max_age=tokens.RENEW_MAX_AGE)
    except tokens.TokenRefused as refusal:
        return {"ok": False, "reason": refusal.reason}
    if not allowed(user, session, subject.actor_type, subject.actor_id, subject.observable):
        return {"ok": False, "reason": "forbidden"}
    key = (subject.actor_type, subject.actor_id)
    if key not in snapshots:
        snapshots[key] = values.snapshot(*key)
    observed = values.compute(subject.actor_type, snapshots[key], subject.observable)
    return {
        "ok": True,
        "observable": subject.observable,
        "value": observed.value,
        "instance_id": observed.instance_id,
        "state_revision": observed.state_revision,
        "token": tokens.issue(subject, viewer),
    }
