"""Column sizes and kinds of the schema, importable before the app registry is ready."""

from __future__ import annotations

ENTRY_TABLE = "tilttek_activity_entry"
CHECKPOINT_TABLE = "tilttek_activity_checkpoint"

KIND_LENGTH = 16
KEY_LENGTH = 255
REFERENCE_LENGTH = 320
VERB_LENGTH = 128
PROJECTION_NAME_LENGTH = 64

RECORDED = "recorded"
CANCELLED = "cancelled"
KINDS = (RECORDED, CANCELLED)

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
#: Journal positions are 64-bit integers (``BIGINT`` / identity / SQLite INTEGER).
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

#: The largest ``context``: its compact JSON text, encoded as UTF-8. The same on every
#: database, and checked before anything is sent: far below what each one accepts in a
#: statement (MySQL's and MariaDB's ``max_allowed_packet`` is 16 MiB by default, and a bigger
#: packet is refused with error 1153 or drops the connection).
MAX_CONTEXT_BYTES = 1024 * 1024
#: MariaDB's ``JSON_VALID`` (the check behind its JSON columns) refuses deeper documents.
MAX_CONTEXT_DEPTH = 31
#: Python writes floats from this magnitude up with an exponent (``1e+16``), which
#: PostgreSQL's ``jsonb`` keeps as an exact decimal that reads back as an *integer*: the
#: journal writes them out in full (``10000000000000000.0``) instead.
FLOAT_EXPONENT_FROM = 1e16
