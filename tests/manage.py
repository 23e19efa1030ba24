#!/usr/bin/env python
"""``manage.py`` for the test project: the tests start real workers through it."""

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    if os.environ.get("SOLID_TEST_HOLD_AT"):  # tests/shards: be killed at a pause point
        from tests.support.holding import hold_at

        hold_at(os.environ["SOLID_TEST_HOLD_AT"], Path(os.environ["SOLID_TEST_HOLD_FILE"]))
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
