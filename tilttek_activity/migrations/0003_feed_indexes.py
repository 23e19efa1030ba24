"""Feeds read newest first from an index: ``member`` and ``object`` are indexed with
``position``.

``entries(member=..., newest_first=True, before_position=...)`` filters on the reference and
orders by position. InnoDB and SQLite already keep every secondary index in primary-key
(rowid) order within a value, so there the two indexes do not change physically; PostgreSQL
needs the position in the key to read a page of a feed backwards from the index instead of
sorting every entry of the member. The names stay those of the schema.
"""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tilttek_activity", "0002_no_pad_collations"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="entry", name="tilttek_activity_entry_member"),
        migrations.RemoveIndex(model_name="entry", name="tilttek_activity_entry_object"),
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(fields=["member", "position"], name="tilttek_activity_entry_member"),
        ),
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(fields=["object", "position"], name="tilttek_activity_entry_object"),
        ),
    ]
