"""The wheel and the sdist as an index would receive them: built, checked, installed, used.

The artifacts are built once per session from a copy of the files git tracks (so local
databases, logs and caches cannot leak in), without build isolation (setuptools comes from the
dev extra; ``make dist`` builds in isolation), and checked with ``twine check --strict``. The
wheel is then installed into a new virtual environment, which must import, check and migrate
both apps from it alone (its dependencies are borrowed from this environment's site-packages).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = ("solid_objects", "tilttek_activity")
#: Files setuptools writes into every sdist besides the tracked ones.
GENERATED = {"PKG-INFO", "setup.cfg"}

pytestmark = pytest.mark.db_vendor("sqlite")


def _run(*command: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    return done.stdout


def _tracked_files() -> list[str]:
    """Paths git tracks, plus new files not ignored (about to be committed)."""
    listed = _run("git", "ls-files", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    return sorted(path for path in listed.splitlines() if (ROOT / path).is_file())


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("the artifacts are checked from a git checkout (this is not one)")
    return _tracked_files()


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory, tracked: list[str]) -> Path:
    source = tmp_path_factory.mktemp("source")
    for path in tracked:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, source / path)
    out = tmp_path_factory.mktemp("dist")
    # sdist first, then the wheel built from the unpacked sdist: the sdist must be buildable.
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, source)
    return out


def _one(dist: Path, pattern: str) -> Path:
    (found,) = dist.glob(pattern)
    return found


def _version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_twine_accepts_both_artifacts(dist: Path) -> None:
    artifacts = sorted(dist.iterdir())
    assert {p.suffix for p in artifacts} == {".gz", ".whl"}
    output = _run(sys.executable, "-m", "twine", "check", "--strict", *artifacts)
    assert output.count("PASSED") == 2, output


def test_the_wheel_holds_the_two_apps_and_the_license(dist: Path, tracked: list[str]) -> None:
    wheel = _one(dist, "django_solid_objects-*-py3-none-any.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"django_solid_objects-{_version()}.dist-info"
        metadata = Parser().parsestr(archive.read(f"{info}/METADATA").decode())
    assert f"{info}/licenses/LICENSE" in names
    assert {name.split("/")[0] for name in names} == {*APPS, info}
    # Every tracked file of the apps ships: modules, migrations, templates, static, py.typed.
    shipped = [path for path in tracked if path.split("/")[0] in APPS]
    assert [path for path in shipped if path not in names] == []
    assert metadata["License-Expression"] == "MIT"
    assert metadata["License-File"] == "LICENSE"
    assert metadata["Version"] == _version()
    assert "Framework :: Django :: 6.1" in metadata.get_all("Classifier")


def test_the_sdist_is_the_tracked_tree_and_the_license(dist: Path, tracked: list[str]) -> None:
    sdist = _one(dist, "django_solid_objects-*.tar.gz")
    prefix = f"django_solid_objects-{_version()}/"
    with tarfile.open(sdist) as archive:
        names = {m.name.removeprefix(prefix) for m in archive.getmembers() if m.isfile()}
    extra = {n for n in names - set(tracked) if n not in GENERATED and ".egg-info/" not in n}
    assert extra == set()
    assert [path for path in tracked if path not in names] == [], "add them to MANIFEST.in"
    assert "LICENSE" in names


def test_the_suite_runs_from_the_unpacked_sdist(dist: Path, tmp_path: Path) -> None:
    """The tests an sdist carries run from it (the apps imported from the unpacked tree)."""
    sdist = _one(dist, "django_solid_objects-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    unpacked = tmp_path / f"django_solid_objects-{_version()}"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "PYTHON", "PYTEST_", "DATABASE_URL"))
    }
    env["SOLID_TEST_SQLITE_DIR"] = str(tmp_path / "databases")
    imported = _run(
        sys.executable, "-c", "import solid_objects; print(solid_objects.__file__)", cwd=unpacked
    )
    assert Path(imported.strip()).is_relative_to(unpacked)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/test_smoke.py",
            "tests/test_example_project.py",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=unpacked,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1]


def test_the_wheel_installs_and_both_apps_run_from_it(dist: Path, tmp_path: Path) -> None:
    wheel = _one(dist, "django_solid_objects-*-py3-none-any.whl")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel)
    site = Path(
        _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip()
    )
    # Django, tqdm...: from this environment, after the new one's own site-packages.
    (site / "zz_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    script = tmp_path / "check.py"
    script.write_text(_CHECK)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTHON"))}
    done = subprocess.run(
        [python, script, str(site), str(tmp_path / "db.sqlite3")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].split() == [_version(), _version(), "ok"]


_CHECK = """
import sys
from pathlib import Path

site, database = sys.argv[1], sys.argv[2]
import django
from django.conf import settings

settings.configure(
    INSTALLED_APPS=[
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django.contrib.admin",
        "solid_objects",
        "tilttek_activity",
    ],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": database}},
    USE_TZ=True,
    SECRET_KEY="release-check",
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    MIDDLEWARE=[
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
    ],
    TEMPLATES=[
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "APP_DIRS": True,
            "OPTIONS": {
                "context_processors": [
                    "django.template.context_processors.request",
                    "django.contrib.auth.context_processors.auth",
                    "django.contrib.messages.context_processors.messages",
                ]
            },
        }
    ],
)
django.setup()
import solid_objects
import tilttek_activity
from django.core.management import call_command
from django.template.loader import get_template

for module in (solid_objects, tilttek_activity):
    assert Path(module.__file__).is_relative_to(site), module.__file__
    assert (Path(module.__file__).parent / "py.typed").is_file()
call_command("check", fail_level="WARNING")
call_command("migrate", verbosity=0)
# The shipped migrations describe the shipped models (exits non-zero otherwise).
call_command("makemigrations", "solid_objects", "tilttek_activity", check=True, dry_run=True)
get_template("admin/solid_objects/deadletter/change_form.html")
print(solid_objects.__version__, tilttek_activity.__version__, "ok")
"""
