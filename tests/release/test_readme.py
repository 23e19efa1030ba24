"""The README works where users read it: on a package index page as well as in the repository."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)|^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)

pytestmark = pytest.mark.db_vendor("sqlite")


def _links(text: str) -> list[str]:
    return [inline or reference for inline, reference in LINK.findall(text)]


def _repository() -> str:
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    return urls["Repository"].rstrip("/")


def test_readme_links_are_absolute() -> None:
    links = _links((ROOT / "README.md").read_text())
    assert links
    relative = [link for link in links if not link.startswith(("https://", "http://", "#"))]
    assert relative == [], "relative links break on a package index page"


@pytest.mark.parametrize(
    "document",
    [
        "README.md",
        "CHANGELOG.md",
        *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
    ],
)
def test_links_into_the_repository_name_files_it_has(document: str) -> None:
    base = _repository() + "/"
    for link in _links((ROOT / document).read_text()):
        if not link.startswith(base):
            continue
        parts = link.removeprefix(base).split("#")[0].split("/", 2)
        if parts[0] in ("blob", "tree"):
            assert parts[1] == "main", link
            assert (ROOT / parts[2]).exists(), f"{document}: {link}"


def test_readme_keeps_exactly_the_two_setup_commands() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Try it", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    assert [block.strip() for block in blocks[:2]] == ["make demo", "make test"]


def test_readme_reads_the_latest_entries_newest_first() -> None:
    text = (ROOT / "README.md").read_text()
    calls = re.findall(r"^entries\(.*$", text, re.MULTILINE)
    assert calls and all("newest_first=True" in call for call in calls)
