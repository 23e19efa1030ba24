"""The distribution's metadata says what is true: version, license, and the versions CI runs."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import solid_objects
import tilttek_activity

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "django-solid-objects"

# Nothing here touches a database: run once per CI leg, on its SQLite run.
pytestmark = pytest.mark.db_vendor("sqlite")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_both_apps_report_the_installed_version() -> None:
    installed = version(DISTRIBUTION)
    assert solid_objects.__version__ == installed
    assert tilttek_activity.__version__ == installed
    assert installed == _project()["version"]


def test_license_is_an_spdx_expression_with_its_file() -> None:
    project = _project()
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
    # PEP 639: a license expression replaces the "License ::" classifiers.
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]


def _ci_legs() -> set[tuple[str, str]]:
    """(Django, Python) of every test leg of .ci/run, e.g. ("5.2", "3.11")."""
    text = (ROOT / ".ci" / "run").read_text()
    return set(re.findall(r'run_leg "Django (\d+\.\d+) / Python (3\.\d+)"', text))


def test_classifiers_claim_exactly_the_versions_ci_runs() -> None:
    legs = _ci_legs()
    assert legs, ".ci/run names no leg as 'Django X.Y / Python 3.Z'"
    classifiers = _project()["classifiers"]
    claimed_django = {
        c.rsplit(" ", 1)[1] for c in classifiers if c.startswith("Framework :: Django :: ")
    }
    claimed_python = {
        c.rsplit(" ", 1)[1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    assert claimed_django == {django for django, _ in legs}
    assert claimed_python == {python for _, python in legs}


def test_tox_matrix_is_the_ci_matrix() -> None:
    envs = re.findall(r"py3(\d+)-dj(\d)(\d)-", (ROOT / "tox.ini").read_text())
    tox = {(f"{major}.{minor}", f"3.{py}") for py, major, minor in envs}
    assert tox == _ci_legs()


def test_project_urls_and_keywords() -> None:
    project = _project()
    assert set(project["urls"]) >= {"Repository", "Documentation", "Changelog"}
    assert all(url.startswith("https://") for url in project["urls"].values())
    assert project["keywords"]
    assert [c for c in project["classifiers"] if c.startswith("Development Status ::")]
