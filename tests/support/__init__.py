"""Support shared by the whole test suite, one module per job:

- :mod:`tests.support.processes`: ``tests/manage.py`` commands in subprocesses on the test
  database (start, log, terminate, kill), always killed at the end of the test;
- :mod:`tests.support.waiting`: :func:`~tests.support.waiting.wait_until`, the one poll with
  a deadline, and :data:`~tests.support.waiting.PATIENCE`, the default deadline;
- :mod:`tests.support.statements`: counting the SQL statements an operation sends;
- :mod:`tests.support.state`: forgetting this process's runtime state between tests (run by
  the autouse fixture of ``tests/conftest.py``).
"""
