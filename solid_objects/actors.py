"""The library's own actors, registered by autodiscovery like any app's ``actors`` module:
``solid_objects.diagnostic`` answers ``manage.py solid_objects_doctor``'s round trip,
``solid_objects.task`` runs the ``django.tasks`` backend's tasks, ``solid_objects.schedule``
fires the schedules of ``SOLID_OBJECTS["SCHEDULES"]``."""

from .diagnostics import DiagnosticActor
from .schedules import ScheduleActor
from .tasks.actors import TaskActor

__all__ = ["DiagnosticActor", "ScheduleActor", "TaskActor"]
