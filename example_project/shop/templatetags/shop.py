"""``{% load shop %}``: ``{{ entry.member|member_name }}`` shows a display name, never an id."""

from __future__ import annotations

from django import template

from ..visitors import display_name

register = template.Library()


@register.filter
def member_name(member_ref: str) -> str:
    return display_name(member_ref)
