"""The property tests' shared parts: hypothesis settings and the count of distinct inputs.

Each property-test module counts what hypothesis generated for it, so the closing figures
(and CI's) can say how many distinct inputs were tried::

    counter = InputCounter("solid_objects")
    _count_distinct_inputs = counter.fixture()   # module-scoped, autouse

    @examples(200)
    @given(...)
    def test_x(value):
        counter.seen("test_x", value)

At the end of the module the counts are merged into the JSON file named by
``SOLID_HYPOTHESIS_COUNTS`` (key ``<module>::<test>``) and one summary line is printed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, settings


def examples(count: int, *also_suppress: HealthCheck) -> settings:
    """At most ``count`` examples, no deadline, no example database in the repository."""
    return settings(
        max_examples=count,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            *also_suppress,
        ],
    )


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except ValueError:  # an integer of more than 4,300 digits
        previous = sys.get_int_max_str_digits()
        sys.set_int_max_str_digits(0)
        try:
            return repr(value)
        finally:
            sys.set_int_max_str_digits(previous)


class InputCounter:
    """Distinct generated inputs per test (a digest of their ``repr``: inputs may be MBs)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.inputs: dict[str, set[str]] = {}

    def seen(self, test: str, *values: Any) -> None:
        text = _repr(values).encode("utf-8", "surrogatepass")
        self.inputs.setdefault(test, set()).add(hashlib.blake2b(text, digest_size=16).hexdigest())

    def counts(self) -> dict[str, int]:
        return {name: len(values) for name, values in sorted(self.inputs.items())}

    def report(self, module: str, request: pytest.FixtureRequest) -> None:
        counts = self.counts()
        path = os.environ.get("SOLID_HYPOTHESIS_COUNTS")
        if path:
            target = Path(path)
            merged = json.loads(target.read_text()) if target.exists() else {}
            merged.update({f"{module}::{name}": count for name, count in counts.items()})
            temporary = target.with_suffix(f"{target.suffix}.{os.getpid()}.tmp")
            temporary.write_text(json.dumps(merged, indent=2, sort_keys=True))
            temporary.replace(target)
        line = (
            f"{self.label} property tests on {connection.vendor}: "
            f"{sum(counts.values())} distinct inputs over {len(counts)} tests"
        )
        plugins = request.config.pluginmanager
        reporter = plugins.get_plugin("terminalreporter")
        capture = plugins.get_plugin("capturemanager")
        if reporter is None or capture is None:
            print(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    def fixture(self) -> Callable[..., Iterator[None]]:
        """A module-scoped autouse fixture that reports the module's counts at its end."""
        counter = self

        @pytest.fixture(scope="module", autouse=True)
        def _count_distinct_inputs(request: pytest.FixtureRequest) -> Iterator[None]:
            yield
            counter.report(request.module.__name__, request)

        return _count_distinct_inputs
