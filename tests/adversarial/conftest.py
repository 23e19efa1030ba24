"""Fixtures of the adversarial suites: the runtime tests' worker ids and per-test reset.

Keep this file shared and small; a suite's own fixtures live in its module or subpackage.
"""

from tests.runtime.conftest import _fresh_runtime, owner, second_owner

__all__ = ["_fresh_runtime", "owner", "second_owner"]
