"""``{% load solid_objects %}``: live observables on a page (PRODUCT §A10).

``{% observe ref "observable" %}`` renders an element holding the committed value of the
observable (a snapshot read, no message; one read per actor per template render) and a
signed subscription token for the requesting viewer, **only** when ``AUTHORIZE_SUBSCRIPTION``
allows that viewer; otherwise an empty element marked ``data-solid-objects-state="denied"``.
``as_html="div"`` picks the element (default ``span``) among :data:`ELEMENTS`.

``{% solid_objects_script %}`` (once per page) loads ``solid_objects/live.js``, which
subscribes every such element over ``ws/solid-objects/`` and keeps it current.

Both need the ``request`` in the template context
(``django.template.context_processors.request``).
"""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.templatetags.static import static
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from ..live import WEBSOCKET_PATH, tokens, values
from ..live.policy import allowed, observable_exists
from ..references import ActorReference, Snapshot

register = template.Library()

#: Elements ``as_html`` may name (text containers; never script, style, iframe...).
ELEMENTS = frozenset(
    {
        *("span", "div", "p", "strong", "em", "b", "i", "small", "mark", "code", "output"),
        *("data", "time", "li", "td", "th", "dd", "dt", "label"),
        *("h1", "h2", "h3", "h4", "h5", "h6"),
    }
)
_SNAPSHOTS = "solid_objects.snapshots"


def display(value: Any) -> str:
    """The text an element shows for ``value`` (the script formats values the same way):
    strings as they are, ``None`` as nothing, anything else as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _request(context: template.Context, tag: str) -> Any:
    request = context.get("request")
    if request is None:
        raise template.TemplateSyntaxError(
            f"{{% {tag} %}} needs the request in the context: add "
            "'django.template.context_processors.request' to the template context processors"
        )
    return request


def _authenticated(user: Any) -> bool:
    return bool(user is not None and getattr(user, "is_authenticated", False))


@register.simple_tag(takes_context=True)
def observe(
    context: template.Context, ref: Any, observable: str, as_html: str = "span"
) -> SafeString:
    """``{% observe cart "item_count" %}``, ``{% observe cart "item_count" as_html="div" %}``."""
    if not isinstance(ref, ActorReference):
        raise template.TemplateSyntaxError(
            f"{{% observe %}} takes an actor reference (Cart.ref(id)), not {type(ref).__name__}"
        )
    if not isinstance(observable, str) or not observable_exists(ref.actor_type, observable):
        raise template.TemplateSyntaxError(
            f"{ref.actor_type} has no observable {observable!r} ({{% observe %}})"
        )
    if as_html not in ELEMENTS:
        raise template.TemplateSyntaxError(
            f"{{% observe %}} as_html={as_html!r}: use one of {', '.join(sorted(ELEMENTS))}"
        )
    request = _request(context, "observe")
    user = getattr(request, "user", None)
    session = getattr(request, "session", None)
    if not allowed(user, session, ref.actor_type, ref.actor_id, observable):
        return format_html(
            '<{tag} data-solid-objects-observable="{name}" data-solid-objects-state="denied">'
            "</{tag}>",
            tag=as_html,
            name=observable,
        )
    if session is not None and not session.session_key and not _authenticated(user):
        session.save()  # bind the token to the session the browser will present
    # (django-stubs types RenderContext.setdefault for the loader's own entries only)
    cache: dict[tuple[str, str], Snapshot[Any]] | None = context.render_context.get(_SNAPSHOTS)
    if cache is None:
        cache = context.render_context[_SNAPSHOTS] = {}
    key = (ref.actor_type, ref.actor_id)
    if key not in cache:
        cache[key] = values.snapshot(*key)
    observed = values.compute(ref.actor_type, cache[key], observable)
    subject = tokens.Subject(ref.actor_type, ref.actor_id, observable)
    return format_html(
        '<{tag} data-solid-objects-token="{token}" data-solid-objects-observable="{name}" '
        'data-solid-objects-instance="{instance}" data-solid-objects-revision="{revision}" '
        'data-solid-objects-state="rendered">{text}</{tag}>',
        tag=as_html,
        token=tokens.issue(subject, tokens.viewer(user, session)),
        name=observable,
        instance=observed.instance_id,
        revision=observed.state_revision,
        text=display(observed.value),
    )


@register.simple_tag(takes_context=True)
def solid_objects_script(context: template.Context) -> SafeString:
    """``{% solid_objects_script %}``: the client script, once per page."""
    request = _request(context, "solid_objects_script")
    try:
        values_url = reverse("solid_objects:observed_values")
    except NoReverseMatch:
        raise template.TemplateSyntaxError(
            '{% solid_objects_script %} needs path("solid-objects/", '
            'include("solid_objects.urls")) in your URLconf'
        ) from None
    script_name = request.META.get("SCRIPT_NAME", "").rstrip("/")
    return format_html(
        '<script src="{src}" data-solid-objects-socket="{socket}" '
        'data-solid-objects-values="{values}" defer></script>',
        src=static("solid_objects/live.js"),
        socket=f"{script_name}/{WEBSOCKET_PATH}",
        values=values_url,
    )
