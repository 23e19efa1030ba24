"""Django Channels group names of actors.

Channels accepts group names of ASCII letters, digits, hyphens, underscores and periods,
shorter than 100 characters; actor types and ids are arbitrary strings of up to 191
characters. The group of an actor is therefore::

    solid_objects.<type part>.<sha1 hex of actor_type NUL actor_id>

- ``<type part>`` is the actor type with every character outside ``[A-Za-z0-9_.-]``
  replaced by ``_``, cut to 40 characters. It only makes names readable in logs;
- the 40-digit SHA-1 of ``actor_type.encode() + b"\\0" + actor_id.encode()`` (UTF-8) is
  what identifies the actor: the NUL separator cannot occur ambiguously, so two different
  ``(type, id)`` pairs never share a group (short of a SHA-1 collision, which an attacker
  would need to choose both identities to attempt).

The longest name is 14 + 40 + 1 + 40 = 95 characters. The broadcast worker sends to this
group and the subscription consumer joins it; both must use :func:`group_name`.
"""

from __future__ import annotations

import hashlib
import re

PREFIX = "solid_objects"
TYPE_PART_LENGTH = 40
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def group_name(actor_type: str, actor_id: str) -> str:
    """The Channels group that receives the broadcasts of ``(actor_type, actor_id)``."""
    type_part = _UNSAFE.sub("_", actor_type)[:TYPE_PART_LENGTH] or "_"
    digest = hashlib.sha1(
        actor_type.encode("utf-8") + b"\0" + actor_id.encode("utf-8"), usedforsecurity=False
    ).hexdigest()
    return f"{PREFIX}.{type_part}.{digest}"
