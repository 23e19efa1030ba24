"""pytest plugins for this repository's own test runs (loaded with ``-p tests.plugins.<name>``)."""
