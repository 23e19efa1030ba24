"""The bounded SIGKILL soak of real worker processes (``pytest -m soak tests/adversarial/soak``)
and the self-tests of its invariant checks (part of the normal run)."""
