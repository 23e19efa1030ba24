"""The shard list each database last agreed with (PRODUCT §A18, ``solid_objects_reshard``):
one row per database, compared by the workers at start-up. Named with
``SOLID_OBJECTS["TABLE_PREFIX"]``."""

from django.db import migrations, models

from solid_objects.conf import table


class Migration(migrations.Migration):
    dependencies = [
        ("solid_objects", "0006_reminder_cron"),
    ]

    operations = [
        migrations.CreateModel(
            name="ShardAgreement",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("fingerprint", models.CharField(max_length=64)),
                ("shards", models.JSONField()),
                ("agreed_at", models.DateTimeField()),
            ],
            options={
                "db_table": table("shard_agreement"),
            },
        ),
    ]
