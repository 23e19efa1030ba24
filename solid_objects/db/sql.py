"""Filling in named statements: a dialect's tables and fragments, and lists of parameters.

The named statements of ``db/`` are module-level templates. Braces name what depends on the
database and is fixed per dialect: the quoted tables (``{t_broadcasts}``, ``{t_instances}``...)
and the fragments :class:`~solid_objects.db.dialect.Dialect` declares (``{now}``,
``{skip_locked}``, ``{json_cast}``, ``{later:NAME}``...); ``%(name)s`` names a parameter.
A statement that takes a list (``IN (...)``) gets one named parameter per item from
:func:`in_list`; a list whose items are several parameters (the rows of a multi-row
``INSERT``, the ``WHEN`` arms of a ``CASE``) repeats a named item template with :func:`each`.
No statement is edited by string replacement: a variant is written out, or composed of
named fragments (module constants concatenated, or filled in here).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from .dialect import Dialect


class _Fragments(dict[str, str]):
    """The names a template may use: the extra fragments given, then the dialect's."""

    def __init__(self, dialect: Dialect, extra: dict[str, str]) -> None:
        super().__init__(extra)
        self.dialect = dialect

    def __missing__(self, key: str) -> str:
        value = getattr(self.dialect, key)
        if not isinstance(value, str):
            raise KeyError(key)
        return value


@lru_cache(maxsize=256)
def _render_fixed(dialect: Dialect, template: str) -> str:
    return template.format_map(_Fragments(dialect, {}))


def render(dialect: Dialect, template: str, **fragments: str) -> str:
    """``template`` with ``dialect``'s tables and fragments (and ``fragments``) filled in.

    Rendered once per dialect, template and fragments: the hot paths send the same few
    statement texts again and again (a sync call renders about nine), and filling a template
    in costs more than sending it to SQLite."""
    if not fragments:
        return _render_fixed(dialect, template)
    return _render_with(dialect, template, tuple(sorted(fragments.items())))


@lru_cache(maxsize=1024)
def _render_with(dialect: Dialect, template: str, fragments: tuple[tuple[str, str], ...]) -> str:
    return template.format_map(_Fragments(dialect, dict(fragments)))


def milliseconds(seconds: float) -> str:
    """A lock or statement timeout of PostgreSQL (``set_config``), at least 1 ms."""
    return f"{max(1, int(seconds * 1000))}ms"


def in_list(name: str, values: Iterable[Any]) -> tuple[str, dict[str, Any]]:
    """``("%(name_0)s, %(name_1)s, ...", {"name_0": ..., ...})`` for an ``IN (...)`` list."""
    params = {f"{name}_{index}": value for index, value in enumerate(values)}
    return ", ".join(f"%({key})s" for key in params), params


def each(
    dialect: Dialect, template: str, count: int, separator: str = ", ", **fragments: str
) -> str:
    """``template`` rendered once per item ``0 .. count - 1`` and joined by ``separator``:
    the call-time fragment of a list whose items are more than one parameter (the rows of a
    multi-row ``INSERT``, the ``WHEN`` arms of a ``CASE``). In ``template``, ``{n}`` is the
    item's index (``%(message_{n})s`` names its parameter), the other braces are the
    dialect's fragments and ``fragments``. Rendered once per dialect, template and count."""
    return _each(dialect, template, count, separator, tuple(sorted(fragments.items())))


@lru_cache(maxsize=1024)
def _each(
    dialect: Dialect,
    template: str,
    count: int,
    separator: str,
    fragments: tuple[tuple[str, str], ...],
) -> str:
    return separator.join(
        template.format_map(_Fragments(dialect, {**dict(fragments), "n": str(n)}))
        for n in range(count)
    )
