#!/usr/bin/env python
"""Run the example shop: web server, actor worker and projections together; one Ctrl-C stops all.

    python example_project/run_demo.py [--host H] [--port P] [--no-worker] [--no-catch-up]

- web server: uvicorn serving ``example_project.asgi`` (pages and the live-pages WebSocket;
  with the in-memory channel layer it also delivers the broadcasts itself);
- worker: ``manage.py run_actor_worker --all-roles`` (actor turns, effects, reminders,
  broadcasts, cleanup);
- catch-up: ``manage.py activity_catch_up --follow`` (keeps the activity projections current).

Each process runs in its own process group, so the launcher decides how they stop: on Ctrl-C
(or SIGTERM) it sends SIGINT to all (the worker finishes its turn in flight and releases its
leases), waits up to ``--grace`` seconds, then terminates whatever is left. A second Ctrl-C
stops at once. If one process exits on its own, the others are stopped too and the launcher
exits with its status.

Environment: ``DJANGO_DEBUG`` (default 1 here: local development), ``DATABASE_URL``,
``REDIS_URL`` (channels_redis: the worker delivers the broadcasts), ``SHOP_ABANDON_SECONDS``
(how long a cart may be left alone before its reminder empties it; default 1800).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANAGE = [sys.executable, str(HERE / "manage.py")]


class Stop(Exception):
    """Raised by the signal handler to leave the supervision loop."""


def _on_signal(signum: int, frame: object) -> None:
    raise Stop(signal.Signals(signum).name)


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def stop_all(processes: dict[str, subprocess.Popen[bytes]], grace: float) -> None:
    alive = {name: p for name, p in processes.items() if p.poll() is None}
    if not alive:
        return
    print(f"\n==> stopping {', '.join(alive)} (Ctrl-C again to force)", flush=True)
    for process in alive.values():
        _signal_group(process, signal.SIGINT)
    deadline = time.monotonic() + grace
    try:
        while time.monotonic() < deadline and any(p.poll() is None for p in alive.values()):
            time.sleep(0.1)
    except Stop:
        pass  # second Ctrl-C: fall through to the forced stop
    for name, process in alive.items():
        if process.poll() is None:
            print(f"==> {name} did not stop in time; terminating it", flush=True)
            _signal_group(process, signal.SIGTERM)
    for process in alive.values():
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--worker",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run `manage.py run_actor_worker --all-roles` (default: yes)",
    )
    parser.add_argument(
        "--catch-up",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run `manage.py activity_catch_up --follow` (default: yes)",
    )
    parser.add_argument("--grace", type=float, default=20.0, help="seconds to wait on stop")
    args = parser.parse_args(argv)

    url = f"http://{args.host}:{args.port}/"
    server = [sys.executable, "-m", "uvicorn", "example_project.asgi:application"]
    server += ["--app-dir", str(HERE), "--host", args.host, "--port", str(args.port)]
    server += ["--ws", "wsproto", "--lifespan", "on", "--no-access-log"]
    commands = {"web server": server}
    if args.worker:
        commands["worker"] = [*MANAGE, "run_actor_worker", "--all-roles"]
    if args.catch_up:
        commands["catch-up"] = [*MANAGE, "activity_catch_up", "--follow"]

    if _listening(args.host, args.port):
        print(
            f"error: {args.host}:{args.port} is already in use; pick another port "
            f"(make demo DEMO_PORT=8001, or --port 8001)",
            file=sys.stderr,
        )
        return 1

    print("==> example shop")
    print(f"    shop:   {url}")
    print(f"    admin:  {url}admin/   login: admin / admin")
    print(f"    running: {', '.join(commands)}; press Ctrl-C once to stop everything", flush=True)

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    env = {"DJANGO_DEBUG": "1", **os.environ, "PYTHONUNBUFFERED": "1"}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    status = 0
    try:
        for name, command in commands.items():
            processes[name] = subprocess.Popen(command, env=env, start_new_session=True)
        announced = False
        while True:
            for name, process in processes.items():
                code = process.poll()
                if code is not None:
                    print(f"==> {name} exited with status {code}", flush=True)
                    status = code if code >= 0 else 128 - code
                    raise Stop(name)
            if not announced and _listening(args.host, args.port):
                print(f"==> ready: {url}  (admin: {url}admin/, admin / admin)", flush=True)
                announced = True
            time.sleep(0.2)
    except Stop:
        pass
    finally:
        stop_all(processes, args.grace)
    return status


if __name__ == "__main__":
    sys.exit(main())
