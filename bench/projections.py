from __future__ import annotations

from typing import Any

from tilttek_activity import Projection


class NoopProjection(Projection):
    """Applies nothing: measures the catch-up machinery itself."""

    name = "bench_noop"

    def apply(self, entry: Any) -> None:
        return None

    def reset(self, since: Any = None, until: Any = None) -> None:
        return None
