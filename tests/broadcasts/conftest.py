"""The same fixtures as tests/operations (one definition, registered here too)."""

from tests.operations.conftest import _fresh_runtime, children

__all__ = ["_fresh_runtime", "children"]
