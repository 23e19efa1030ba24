from tests.outbox.helpers import fresh_caller_state  # noqa: F401  (autouse fixture)
