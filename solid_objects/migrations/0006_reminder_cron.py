"""Cron reminders: the expression and IANA time zone of a reminder that recurs on a cron
schedule (docs/reminders.md)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("solid_objects", "0005_rate_limits"),
    ]

    operations = [
        migrations.AddField(
            model_name="reminder",
            name="cron",
            field=models.CharField(blank=True, max_length=191, null=True),
        ),
        migrations.AddField(
            model_name="reminder",
            name="time_zone",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
    ]
