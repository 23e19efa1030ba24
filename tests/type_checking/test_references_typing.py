"""Typed references (§A16): mypy --strict with the plugin flags exactly the marked lines of
a sample of user code (a misspelled operation, a wrong argument, a wrong use of the result,
for sync calls, enqueue() and the async face, and snapshot attributes) and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

SAMPLES = Path(__file__).parent / "samples"
EXPECTED = re.compile(r"#\s*error:\s*([a-z-]+)\s*$")
REPORTED = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<text>.*)\[(?P<code>[a-z-]+)\]$")

# mypy runs once: the test does not depend on the database.
pytestmark = pytest.mark.db_vendor("sqlite")


def expected_errors(sample: Path) -> set[tuple[int, str]]:
    found = set()
    for number, line in enumerate(sample.read_text().splitlines(), start=1):
        match = EXPECTED.search(line)
        if match:
            found.add((number, match.group(1)))
    return found


def run_mypy(tmp_path: Path, sample: Path) -> tuple[set[tuple[int, str]], str]:
    # The configuration docs/actors.md gives users: strict, django-stubs' plugin and ours.
    # The package's own modules are typed by make typecheck; here only the sample counts.
    config = tmp_path / "mypy.toml"
    config.write_text(
        "[tool.mypy]\n"
        "strict = true\n"
        "warn_unused_ignores = true\n"
        'plugins = ["mypy_django_plugin.main", "solid_objects.mypy_plugin"]\n'
        "[tool.django-stubs]\n"
        'django_settings_module = "tests.typing_settings"\n'
        "[[tool.mypy.overrides]]\n"
        'module = ["solid_objects.*", "tilttek_activity.*"]\n'
        'follow_imports = "silent"\n'
    )
    stdout, stderr, status = mypy_api.run(
        [
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--show-error-codes",
            "--no-error-summary",
            "--no-pretty",
            str(sample),
        ]
    )
    assert status in (0, 1), f"mypy crashed:\n{stdout}\n{stderr}"
    reported = set()
    for line in stdout.splitlines():
        match = REPORTED.match(line)
        if match and Path(match.group("path")).name == sample.name:
            reported.add((int(match.group("line")), match.group("code")))
    return reported, stdout


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> tuple[set[tuple[int, str]], str]:
    return run_mypy(tmp_path_factory.mktemp("mypy"), SAMPLES / "references.py")


def test_mypy_flags_exactly_the_marked_lines(checked: tuple[set[tuple[int, str]], str]):
    sample = SAMPLES / "references.py"
    reported, output = checked
    expected = expected_errors(sample)
    assert expected, "the sample marks no line"
    missing = sorted(expected - reported)
    unexpected = sorted(reported - expected)
    assert not missing and not unexpected, (
        f"not flagged: {missing}\nflagged but not marked: {unexpected}\nmypy said:\n{output}"
    )


def test_the_plugin_names_the_actor_and_the_operation(checked: tuple[set[tuple[int, str]], str]):
    _, output = checked
    assert '"Cart" has no operation "ad_item"' in output
    assert '"Cart" has no state attribute "valeu"' in output
