"""Placeholder; replaced by the actor registry."""


def autodiscover() -> None:
    pass
