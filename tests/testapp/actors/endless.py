"""An actor pair that never stops messaging each other (for drain()'s round limit)."""

from __future__ import annotations

from solid_objects import Actor, attribute


class Rally(Actor):
    actor_type = "tests.rally"

    hits = attribute(default=0)

    def hit(self, partner: str) -> int:
        self.hits = self.hits + 1
        self.send_to(Rally.ref(partner)).hit(partner=self.actor_id)
        return self.hits
