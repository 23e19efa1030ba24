"""The documentation site builds strictly: a link to a missing page or anchor fails the build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.db_vendor("sqlite")


def _mkdocs(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    built = _mkdocs("build", "--strict", "--site-dir", str(tmp_path / "site"), cwd=ROOT)
    # A new page must be added to the nav of mkdocs.yml; a link must name an existing page.
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    # Every page of docs/ is in the navigation and rendered, the changelog included.
    for page in (ROOT / "docs").glob("*.md"):
        target = "index.html" if page.stem == "index" else f"{page.stem}/index.html"
        assert (tmp_path / "site" / target).is_file(), page.name
    changelog = (tmp_path / "site" / "changelog" / "index.html").read_text()
    assert "Unreleased" in changelog


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The same configuration over a copy of docs/ with one dangling link and one bad anchor."""
    copy = tmp_path / "project"
    shutil.copytree(ROOT / "docs", copy / "docs")
    for name in ("mkdocs.yml", "CHANGELOG.md"):
        (copy / name).write_text((ROOT / name).read_text())
    settings = copy / "docs" / "settings.md"
    settings.write_text(
        settings.read_text() + "\n[gone](no-such-page.md) [anchor](actors.md#no-such-anchor)\n"
    )
    built = _mkdocs("build", "--strict", "--site-dir", str(tmp_path / "site"), cwd=copy)
    assert built.returncode != 0
    assert "no-such-page.md" in built.stderr
    assert "no-such-anchor" in built.stderr
