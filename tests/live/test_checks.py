"""``solid_objects.W005``: observables whose broadcast rows nothing would deliver."""

from __future__ import annotations

from django.test import override_settings

from solid_objects.checks import check_broadcast_layer

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def test_observables_without_a_channel_layer_warn() -> None:
    with override_settings(CHANNEL_LAYERS={}):
        (warning,) = check_broadcast_layer()
    assert warning.id == "solid_objects.W005"
    assert "tests.board.size" in warning.msg and "CHANNEL_LAYERS" in warning.hint


def test_a_configured_layer_is_enough() -> None:
    with override_settings(CHANNEL_LAYERS=IN_MEMORY):
        assert check_broadcast_layer() == []
