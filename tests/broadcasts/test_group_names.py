"""Channels group names of actors: valid, bounded, stable and never shared."""

from __future__ import annotations

import re

import pytest
from channels.layers import InMemoryChannelLayer

from solid_objects.channels_groups import group_name


# -- group names ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("actor_type", "actor_id"),
    [
        ("shop.cart", "alice"),
        ("tests.board", "émile / ünïcode ✓"),
        ("x" * 191, "y" * 191),
        ("with space", ""),
        ("", "empty type"),
    ],
)
def test_group_names_are_valid_channels_names(actor_type, actor_id):
    name = group_name(actor_type, actor_id)
    assert len(name) < 100
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", name)
    assert name.startswith("solid_objects.")
    InMemoryChannelLayer().require_valid_group_name(name)


def test_group_names_are_stable_and_never_shared():
    assert group_name("shop.cart", "alice") == group_name("shop.cart", "alice")
    assert group_name("shop.cart", "alice").startswith("solid_objects.shop.cart.")
    names = {
        group_name("a/b", "c"),
        group_name("a", "b/c"),
        group_name("a b", "c"),
        group_name("a_b", "c"),
        group_name("shop.cart", "Alice"),
        group_name("shop.cart", "alice"),
    }
    assert len(names) == 6
