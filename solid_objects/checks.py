"""System checks for the ``SOLID_OBJECTS`` settings (filled in by the foundation work)."""
