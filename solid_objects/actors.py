"""The library's own actors, registered by autodiscovery like any app's ``actors`` module:
``solid_objects.diagnostic`` answers ``manage.py solid_objects_doctor``'s round trip."""

from .diagnostics import DiagnosticActor

__all__ = ["DiagnosticActor"]
