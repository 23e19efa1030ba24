"""The example shop served for real, driven by headless Chromium.

``shop``: the example project migrated into the database under test, its ASGI application
served by uvicorn (embedded broadcast delivery, in-memory layer: no Redis), and a real worker
(``run_actor_worker --all-roles``), each in its own process group, killed at the end.
``browser``: a headless Chromium (Debian's ``chromium`` + ``chromium-driver``) through
selenium. Screenshots go to ``SOLID_SCREENSHOT_DIR`` (default ``.test-db/screenshots``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
MANAGE = [sys.executable, str(ROOT / "example_project" / "manage.py")]


def _database_url(tmp_path: Path) -> str:
    settings = connection.settings_dict
    vendor = connection.vendor
    if vendor == "sqlite":
        return f"sqlite:///{tmp_path / 'shop.sqlite3'}"
    user = settings["USER"] or ""
    host = settings["HOST"] or "127.0.0.1"
    port = settings["PORT"] or ("5432" if vendor == "postgresql" else "3306")
    scheme = "postgres" if vendor == "postgresql" else "mysql"
    return f"{scheme}://{user}@{host}:{port}/{settings['NAME']}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Shop:
    """The example shop's processes (web server, worker) and shell commands on its database."""

    def __init__(self, tmp_path: Path, redis_url: str = "") -> None:
        self.tmp_path = tmp_path
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.env = {
            **os.environ,
            "DATABASE_URL": _database_url(tmp_path),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "example_project.settings",
            "DJANGO_DEBUG": "0",  # as a copy of the project runs: no debug pages
            "DJANGO_SECRET_KEY": "browser-tests-secret",
            "DJANGO_HTTPS": "0",
            "SOLID_LOG": "INFO",
        }
        # REDIS_URL switches the shop to channels_redis: the worker delivers the broadcasts.
        self.env.pop("REDIS_URL", None)
        if redis_url:
            self.env["REDIS_URL"] = redis_url
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}

    def manage(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [*MANAGE, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def shell(self, code: str) -> str:
        """Run ``code`` in ``manage.py shell`` of the shop (its settings, its database)."""
        return self.manage("shell", "-v", "0", "-c", code)

    def start(self, name: str, command: list[str]) -> None:
        log = self.tmp_path / f"{name}.log"
        self.logs[name] = log
        with log.open("ab") as out:
            self.processes[name] = subprocess.Popen(
                command, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def start_web(self) -> None:
        self.start(
            "web",
            [
                *(sys.executable, "-m", "uvicorn", "example_project.asgi:application"),
                *("--app-dir", str(ROOT / "example_project"), "--host", "127.0.0.1"),
                *("--port", str(self.port), "--ws", "wsproto", "--lifespan", "on"),
            ],
        )
        wait_until(lambda: _listening(self.port), what="the ASGI server listens", details=self.log)

    def start_worker(self) -> None:
        self.start("worker", [*MANAGE, "run_actor_worker", "--all-roles"])
        wait_until(
            lambda: "kind=worker" in self.logs["worker"].read_text(),
            what="the worker registered",
            details=self.log,
        )

    def stop(self, name: str, signum: int = signal.SIGTERM) -> None:
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signum)
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass

    def stop_all(self) -> None:
        for name in list(self.processes):
            self.stop(name)

    def log(self) -> str:
        return "\n".join(
            f"--- {name}\n{path.read_text(errors='replace')[-6000:]}"
            for name, path in self.logs.items()
            if path.exists()
        )


def _running(tmp_path: Path, redis_url: str = "") -> Iterator[Shop]:
    running = Shop(tmp_path, redis_url)
    running.manage("migrate", "-v0", timeout=300)
    try:
        running.start_web()
        running.start_worker()
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def shop(tmp_path: Path, transactional_db: Any) -> Iterator[Shop]:
    """The demo as ``make demo`` runs it: in-memory layer, delivery in the web process."""
    yield from _running(tmp_path)


@pytest.fixture
def redis_shop(tmp_path: Path, transactional_db: Any) -> Iterator[Shop]:
    """The shop with channels_redis (``REDIS_URL``): the worker's broadcast role delivers."""
    yield from _running(
        tmp_path, os.environ.get("SOLID_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )


def _chromium() -> tuple[str, str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not binary or not driver:
        pytest.fail(
            "the browser tests need Chromium and its driver: make test-browser installs "
            "them (apt-get install chromium chromium-driver)"
        )
    return binary, driver


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium; ``browser.switch_to.new_window("window")`` opens a second
    window on the same profile (same cookies: the same visitor)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = _chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1100,900",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def screenshots() -> Path:
    folder = Path(os.environ.get("SOLID_SCREENSHOT_DIR", ROOT / ".test-db" / "screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder
