"""Long-running roles: process registry, wake-ups, the actor worker."""
