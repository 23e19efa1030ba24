"""Database-specific pieces of ``solid_objects`` (DDL and vendor SQL)."""
