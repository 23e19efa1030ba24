"""Fixtures of the live-pages tests: a request as a view would see it, policies."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.backends.db import SessionStore
from django.test import RequestFactory, override_settings

from tests.live import policies


@pytest.fixture
def policy() -> Iterator[Callable[[str], Any]]:
    """``policy(DOTTED_PATH)`` makes it the ``AUTHORIZE_SUBSCRIPTION`` of the test."""
    overrides: list[Any] = []

    def use(path: str) -> None:
        override = override_settings(SOLID_OBJECTS={"AUTHORIZE_SUBSCRIPTION": path})
        override.enable()
        overrides.append(override)

    policies.switch["on"] = True
    yield use
    for override in reversed(overrides):
        override.disable()
    policies.switch["on"] = True


@pytest.fixture
def make_request() -> Callable[..., Any]:
    def build(user: Any = None, session: Any = None, path: str = "/") -> Any:
        request = RequestFactory().get(path)
        request.user = user if user is not None else AnonymousUser()
        request.session = session if session is not None else SessionStore()
        return request

    return build
