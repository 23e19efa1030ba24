"""The ``rate_limits`` table: the next free slot of each effect name declared with
``rate=`` (docs/effects.md). Named with ``SOLID_OBJECTS["TABLE_PREFIX"]``."""

import solid_objects.models.fields
from django.db import migrations, models

from solid_objects.conf import table


class Migration(migrations.Migration):
    dependencies = [
        ("solid_objects", "0004_effect_handled_status"),
    ]

    operations = [
        migrations.CreateModel(
            name="RateLimit",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", solid_objects.models.fields.BinaryCharField(max_length=191)),
                ("next_slot_at", models.DateTimeField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "db_table": table("rate_limits"),
                "constraints": [
                    models.UniqueConstraint(fields=("name",), name="idx_so_rate_limits_name")
                ],
            },
        ),
    ]
