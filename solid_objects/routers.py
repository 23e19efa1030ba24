"""``SolidObjectsRouter``: keeps both apps' tables and queries on their configured databases.

Add it to ``settings.DATABASE_ROUTERS`` whenever ``SOLID_OBJECTS["DATABASE"]`` or
``TILTTEK_ACTIVITY["DATABASE"]`` is not ``"default"``::

    DATABASE_ROUTERS = ["solid_objects.routers.SolidObjectsRouter"]

Reads and writes of ``solid_objects`` models (the admin, the operator verbs, user queries)
go to ``SOLID_OBJECTS["DATABASE"]``, those of ``tilttek_activity`` models to
``TILTTEK_ACTIVITY["DATABASE"]``. A ``solid_objects`` row read from a shard
(``Model.objects.using(alias)``) stays on its shard: saving or deleting it, and following
its relations (``instance.dead_letters``), use the alias it came from. ``migrate`` creates
each app's tables on its database only (``solid_objects``'s on each shard of
``SOLID_OBJECTS["DATABASES"]`` too: run ``migrate --database`` once per shard). For models
of other apps the router has no opinion (``None``), so it composes with the project's own
routers (put it first).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model

ACTORS_APP = "solid_objects"
JOURNAL_APP = "tilttek_activity"


def alias_for_app(app_label: str) -> str | None:
    """The configured database of one of the two apps, ``None`` for any other app."""
    if app_label == ACTORS_APP:
        from .conf import get_settings

        return get_settings().DATABASE
    if app_label == JOURNAL_APP:
        from tilttek_activity.conf import user_settings

        raw = user_settings()
        alias = raw.get("DATABASE", "default") if isinstance(raw, dict) else "default"
        return alias if isinstance(alias, str) else "default"
    return None


def aliases_for_actors() -> set[str]:
    """Every alias that holds ``solid_objects`` tables: ``DATABASE`` and each shard."""
    from .conf import get_settings

    settings = get_settings()
    return {settings.DATABASE, *settings.shards}


def actor_aliases() -> tuple[str, ...]:
    """The aliases that hold ``solid_objects`` tables, in order: each shard of
    ``DATABASES`` (settings order), then ``DATABASE`` when it is not one of them. The
    operator surfaces (status, admin, doctor, health, metrics, dead letters) cover these."""
    from .conf import get_settings

    settings = get_settings()
    shards = settings.shards
    return shards if settings.DATABASE in shards else (*shards, settings.DATABASE)


def require_actor_alias(alias: str | None) -> str:
    """``alias`` when it holds ``solid_objects`` tables (``None``: ``DATABASE``), else
    :class:`~solid_objects.errors.UnknownDatabase` (before anything is read or written)."""
    from .conf import get_settings
    from .errors import UnknownDatabase

    if alias is None:
        return get_settings().DATABASE
    known = actor_aliases()
    if alias not in known:
        raise UnknownDatabase(
            f"{alias!r} holds no solid_objects tables: use one of "
            f"{', '.join(repr(a) for a in known)} (SOLID_OBJECTS DATABASE and DATABASES)",
            alias=alias,
            known=known,
        )
    return alias


def _alias(model: type[Model] | Model, hints: dict[str, Any] | None = None) -> str | None:
    alias = alias_for_app(model._meta.app_label)
    if alias is not None and model._meta.app_label == ACTORS_APP and hints:
        # A row read from a shard (``.using(alias)``) keeps its alias for its saves,
        # deletes and related lookups, as Django does without a router.
        instance = hints.get("instance")
        own = getattr(getattr(instance, "_state", None), "db", None)
        if own is not None and own in aliases_for_actors():
            return str(own)
    return alias


class SolidObjectsRouter:
    """Routes ``solid_objects`` and ``tilttek_activity`` to their configured aliases."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        return _alias(model, hints)

    def db_for_write(self, model: type[Model], **hints: Any) -> str | None:
        return _alias(model, hints)

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool | None:
        first = _alias(obj1, {"instance": obj1})
        second = _alias(obj2, {"instance": obj2})
        if first is None and second is None:
            return None
        if first is None or second is None:
            return None  # one of ours and a foreign model: the project's routers decide
        return first == second

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool | None:
        if app_label == ACTORS_APP:
            return db in aliases_for_actors()
        alias = alias_for_app(app_label)
        return None if alias is None else db == alias
