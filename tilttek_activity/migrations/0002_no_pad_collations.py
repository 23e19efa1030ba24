"""MySQL/MariaDB: identifiers compare trailing spaces too (a NO PAD binary collation).

``0001`` created the identifier columns with ``utf8mb4_bin``, a PAD SPACE collation that
ignores trailing spaces. :class:`~tilttek_activity.fields.BinaryCharField` now asks for the
NO PAD twin (:func:`~tilttek_activity.db.collations.binary_collation`); a fresh database gets it from
``0001`` already, and this migration moves an existing one there through the schema editor
(``ALTER TABLE ... MODIFY`` keeping type and nullability; InnoDB rebuilds the indexes). Other
databases have nothing to do. Going back fails if two keys now differ only by trailing spaces.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

#: The identifier columns, per model.
COLUMNS = {
    "Entry": ("idempotency_key", "member", "verb", "object"),
    "Checkpoint": ("projection",),
}
PAD_SPACE = "utf8mb4_bin"


def _pad_space_twin(field: Any) -> models.CharField:
    """The column as ``0001`` left it on MySQL/MariaDB."""
    old = models.CharField(
        max_length=field.max_length,
        null=field.null,
        blank=field.blank,
        primary_key=field.primary_key,
        db_collation=PAD_SPACE,
    )
    old.set_attributes_from_name(field.name)
    old.model = field.model
    return old


def _move(apps: Any, schema_editor: Any, *, forwards: bool) -> None:
    from tilttek_activity.db.collations import binary_collation

    connection = schema_editor.connection
    if connection.vendor != "mysql" or binary_collation(connection) == PAD_SPACE:
        return
    for model_name, names in COLUMNS.items():
        model = apps.get_model("tilttek_activity", model_name)
        for name in names:
            exact = model._meta.get_field(name)
            padded = _pad_space_twin(exact)
            old, new = (padded, exact) if forwards else (exact, padded)
            schema_editor.alter_field(model, old, new)


def forwards(apps: Any, schema_editor: Any) -> None:
    _move(apps, schema_editor, forwards=True)


def backwards(apps: Any, schema_editor: Any) -> None:
    _move(apps, schema_editor, forwards=False)


class Migration(migrations.Migration):
    dependencies = [("tilttek_activity", "0001_initial")]

    # DDL cannot run inside a transaction on MySQL/MariaDB (it would commit it).
    operations = [migrations.RunPython(forwards, backwards, atomic=False, elidable=False)]
