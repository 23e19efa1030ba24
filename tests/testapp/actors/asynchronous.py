"""Effect handlers written as ``async def`` (awaited by the effect runner)."""

from __future__ import annotations

import asyncio
from typing import Any

import solid_objects


@solid_objects.effect("tests.async.echo")
async def echo(arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    await asyncio.sleep(0)  # really suspends: the runner must await it, not just call it
    return {"echo": arguments.get("value"), "effect_id": context.effect_id}


@solid_objects.effect("tests.async.fail")
async def fail(arguments: dict[str, Any], context: Any) -> None:
    await asyncio.sleep(0)
    error = ValueError("async provider refused")
    error.retryable = False  # type: ignore[attr-defined]
    raise error
