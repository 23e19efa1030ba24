"""Column sizes shared by the models and the validation that runs before any write."""

IDENTIFIER_LENGTH = 191  # the original engine's indexed-string size (utf8mb4 index limit)
UUID_LENGTH = 36
EXCEPTION_CLASS_LENGTH = 255
