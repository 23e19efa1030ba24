"""Fixtures of the adversarial suites: the runtime tests' worker ids.

Keep this file shared and small; a suite's own fixtures live in its module or subpackage.
"""

from tests.runtime.conftest import owner, second_owner

__all__ = ["owner", "second_owner"]
