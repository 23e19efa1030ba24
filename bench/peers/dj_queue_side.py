"""The dj-queue side of ``make bench-peers``: run by the interpreter of its own virtual
environment (``.bench-peers/dj-queue``, Python >= 3.12), never imported by the project.

``python dj_queue_side.py DATABASE_URL reset``: migrate, then empty dj-queue's tables.
``python dj_queue_side.py DATABASE_URL enqueue N independent|ordered``: N no-op tasks
(ordered: one concurrency key with limit 1, dj-queue's per-key ordering).
``python dj_queue_side.py DATABASE_URL work``: ``manage.py dj_queue`` with its default
topology (one worker process, 3 threads, 0.1 s polling); stopped with SIGTERM.
``python dj_queue_side.py DATABASE_URL rate N``: JSON {rate, jobs} after checking all N
finished, on the database clock from the first to the last ``finished_at`` (dj-queue keeps
no start time once a job is done, so this leaves out the first job's run time).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import urlparse

import django
from django.conf import settings


def configure(url: str) -> None:
    parsed = urlparse(url)
    engine = {
        "postgres": "django.db.backends.postgresql",
        "postgresql": "django.db.backends.postgresql",
        "mysql": "django.db.backends.mysql",
    }[parsed.scheme]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    settings.configure(
        INSTALLED_APPS=["dj_queue"],
        DATABASES={
            "default": {
                "ENGINE": engine,
                "NAME": parsed.path.lstrip("/"),
                "USER": parsed.username or "",
                "PASSWORD": parsed.password or "",
                "HOST": parsed.hostname or "",
                "PORT": str(parsed.port or ""),
            }
        },
        DATABASE_ROUTERS=["dj_queue.routers.DjQueueRouter"],
        TASKS={"default": {"BACKEND": "dj_queue.backend.DjQueueBackend", "QUEUES": []}},
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        LOGGING_CONFIG=None,
    )
    django.setup()


def main() -> None:
    configure(sys.argv[1])
    from django.core.management import call_command
    from django.db import connection

    command = sys.argv[2]
    if command == "reset":
        call_command("migrate", verbosity=0)
        from django.apps import apps

        models = apps.get_app_config("dj_queue").get_models()
        tables = [m._meta.db_table for m in models if m._meta.managed and not m._meta.proxy]
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
            else:
                cursor.execute("SET FOREIGN_KEY_CHECKS = 0")
                for name in tables:
                    cursor.execute(f"TRUNCATE TABLE {name}")
                cursor.execute("SET FOREIGN_KEY_CHECKS = 1")
    elif command == "enqueue":
        import djq_tasks

        count, mode = int(sys.argv[3]), sys.argv[4]
        target = djq_tasks.ordered if mode == "ordered" else djq_tasks.independent
        for n in range(count):
            target.enqueue(n)
    elif command == "work":
        call_command("dj_queue")
    elif command == "rate":
        from dj_queue.models import Job

        expected = int(sys.argv[3])
        finished = Job.objects.filter(finished_at__isnull=False)
        done, total = finished.count(), Job.objects.count()
        if sys.argv[4:] == ["--count"]:
            print(json.dumps({"done": done}))
            return
        if done != expected or total != expected:
            raise SystemExit(f"dj-queue: {done} of {expected} jobs finished ({total} jobs)")
        from django.db.models import Max, Min

        span = finished.aggregate(first=Min("finished_at"), last=Max("finished_at"))
        seconds = max((span["last"] - span["first"]).total_seconds(), 1e-6)
        print(json.dumps({"rate": (done - 1) / seconds, "jobs": done}))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
