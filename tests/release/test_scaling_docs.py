"""docs/scaling.md states the shard formula exactly as solid_objects/shards.py pins it."""

from __future__ import annotations

from pathlib import Path

import pytest

from solid_objects import shards

pytestmark = pytest.mark.db_vendor("sqlite")  # a text check: once, in the SQLite run

DOCS = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"


def formula(text: str) -> list[str]:
    """The lines from ``score(alias) =`` to the one naming the encoding, stripped."""
    lines = [line.strip() for line in text.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("score(alias) ="))
    end = next(i for i in range(start, len(lines)) if "UTF-8 encoded" in lines[i])
    return lines[start : end + 1]


def test_the_documented_shard_formula_is_the_pinned_one():
    documented = formula(DOCS.read_text())
    assert documented == formula(shards.__doc__ or "")
    assert shards.HASH_TAG.decode().rstrip("\x00") + "\\0" in documented[1]
