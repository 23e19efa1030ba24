"""Which Channels layer broadcasts go to, and whether it reaches beyond this process."""

from __future__ import annotations

from typing import Any


def default_layer() -> Any:
    """The default Channels layer, or ``None`` when Channels is absent or not configured."""
    try:
        from channels.layers import get_channel_layer
    except ImportError:
        return None
    return get_channel_layer()


def is_process_local(layer: Any) -> bool:
    """Whether ``layer`` only reaches consumers of the process that holds it (Channels'
    in-memory layer). A worker process sending to such a layer reaches nobody."""
    if layer is None:
        return False
    try:
        from channels.layers import InMemoryChannelLayer
    except ImportError:
        return False
    return isinstance(layer, InMemoryChannelLayer)


def describe(layer: Any) -> str:
    """``module.Class`` of ``layer`` (for logs and the doctor)."""
    return "none" if layer is None else f"{type(layer).__module__}.{type(layer).__qualname__}"
