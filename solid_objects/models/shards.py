"""What one shard's database last agreed the shard list was (``solid_objects_reshard``)."""

from __future__ import annotations

from django.db import models

from ..conf import table


class ShardAgreement(models.Model):
    """One row per database (``id`` is always 1): the fingerprint of the shard list its
    actors were last known to be placed by.

    Workers compare this row on every shard at start-up and refuse to start while it
    differs from the fingerprint of ``SOLID_OBJECTS["DATABASES"]`` (see
    :mod:`solid_objects.shard_agreement`); ``solid_objects_reshard --execute`` writes it when
    every actor is on its home.
    """

    fingerprint = models.CharField(max_length=64)
    shards = models.JSONField()
    agreed_at = models.DateTimeField()

    class Meta:
        db_table = table("shard_agreement")

    def __str__(self) -> str:
        return f"shard list {', '.join(self.shards)} ({self.fingerprint[:12]})"
