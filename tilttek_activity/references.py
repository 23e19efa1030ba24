"""References to members and objects: ``"kind:identifier"`` strings.

A model instance becomes ``"<app_label>.<model_name>:<pk>"`` of its *concrete* model (a proxy
of ``auth.User`` refers to the same member as the user itself, as ``ContentType`` does by
default). Strings are taken as given once they validate.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from .errors import InvalidActivity
from .limits import REFERENCE_LENGTH
from .text import problem_with_identifier

__all__ = ["reference", "reference_problem"]


def reference(obj: models.Model | str, *, field: str = "reference") -> str:
    """The reference string of a model instance, or a validated reference string.

    Raises :class:`InvalidActivity` naming ``field`` when the value cannot be a reference.
    """
    if isinstance(obj, str):
        text = obj
    elif isinstance(obj, models.Model):
        pk = obj.pk
        if pk is None:
            raise InvalidActivity(field, "an unsaved model instance has no reference")
        # Only abstract models lack a concrete model, and Django refuses to instantiate them.
        model = obj._meta.concrete_model or type(obj)
        text = f"{model._meta.label_lower}:{pk}"
    else:
        raise InvalidActivity(
            field,
            f"expected a model instance or a 'kind:identifier' string, got {_type(obj)}",
        )
    problem = reference_problem(text)
    if problem:
        raise InvalidActivity(field, problem)
    return text


def reference_problem(text: str) -> str | None:
    """Why ``text`` is not a valid reference string, or None."""
    kind, colon, identifier = text.partition(":")
    if not colon or not kind or not identifier:
        return f"{text[:40]!r} is not a 'kind:identifier' reference (both parts non-empty)"
    if len(text) > REFERENCE_LENGTH:
        return f"is {len(text)} characters long, at most {REFERENCE_LENGTH} are allowed"
    return problem_with_identifier(text)


def _type(value: Any) -> str:
    return type(value).__name__
