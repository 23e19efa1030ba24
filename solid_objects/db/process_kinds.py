"""The kinds of a few registry rows, read when dead-process cleanup reports them (rare: only
when some process went silent), so a quiet sync caller is not reported like a crashed
worker."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .dialect import Dialect
from .sql import in_list, render

#: The kind of each process row (``{ids}``: their ids).
KINDS_OF = "SELECT id, kind FROM {t_processes} WHERE id IN ({ids})"


def kinds_of(cursor: Any, dialect: Dialect, process_ids: Iterable[str]) -> dict[str, str]:
    """``{process_id: kind}`` for the given rows (missing rows are left out)."""
    ids, params = in_list("id", process_ids)
    if not params:
        return {}
    cursor.execute(render(dialect, KINDS_OF, ids=ids), params)
    return {str(row[0]): str(row[1]) for row in cursor.fetchall()}
