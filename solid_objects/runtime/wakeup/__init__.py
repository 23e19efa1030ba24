"""Wake-up hints. Rows are the truth; a hint only shortens a wait.

- :mod:`.doorbells`: this process's doorbells (what every waiter waits on);
- :mod:`.hints`: which cross-process mode is in force, and sending hints after a commit;
- :mod:`.listener`: what a listener of cross-process hints is (the :class:`Listener`
  protocol the supervisor depends on) and the thread every transport runs;
- :mod:`.postgresql`, :mod:`.redis`: the two transports;
- :mod:`.transports`: probing, starting and sharing this process's listener.
"""

from __future__ import annotations

from .doorbells import KINDS, Doorbell, doorbell, notify_local

__all__ = ["KINDS", "Doorbell", "doorbell", "notify_local"]
