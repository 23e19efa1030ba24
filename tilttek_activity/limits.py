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
