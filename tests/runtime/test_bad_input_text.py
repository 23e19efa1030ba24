"""Text every database stores as given, or a typed refusal (issue 9, defect 5).

One rule on every database, for values, object keys and identifiers alike: no NUL and no
lone surrogate. Before, NUL raised a raw ``DataError`` on PostgreSQL but was stored on the
others; a lone surrogate raised a raw ``UnicodeEncodeError`` everywhere (arguments, actor
ids, idempotency keys, ``snapshot()``, ``destroy()``, ``find_message()``); an integer of more
than 4,300 digits a raw ``ValueError``. Now each raises ``InvalidPayload`` and nothing is
written (a handler's own output is covered by ``test_bad_input_turn_output``).
"""

from __future__ import annotations

import pytest

import solid_objects
from solid_objects import InvalidPayload, SolidObjectsError
from solid_objects.models import Instance, Message, Process, ReadyMessage
from tests.testapp.actors.inputs import Echo

pytestmark = pytest.mark.django_db(transaction=True)

BAD_TEXT = {
    "NUL": "before\x00after",
    "lone high surrogate": "x\ud800y",
    "lone low surrogate": "\udfff",
    "a surrogate pair as two code points": "\ud83d\ude00",
}
BAD_ARGUMENTS = {
    **{f"{name} in a value": {"text": text} for name, text in BAD_TEXT.items()},
    **{f"{name} in a key": {text: 1} for name, text in BAD_TEXT.items()},
    "NUL deep inside": [1, {"a": ["ok", "\x00"]}],
    "an integer of 4,301 digits": 10**4300,
    "a negative integer of 4,301 digits": -(10**4300),
}


def assert_nothing_written() -> None:
    assert Instance.objects.count() == 0
    assert Message.objects.count() == 0
    assert ReadyMessage.objects.count() == 0
    assert Process.objects.count() == 0  # not even this process's registration


@pytest.mark.parametrize("name", BAD_ARGUMENTS)
def test_bad_text_or_numbers_in_arguments_are_refused(name):
    value = BAD_ARGUMENTS[name]
    ref = Echo.ref("arguments")
    with pytest.raises(InvalidPayload):
        ref.echo(value)
    with pytest.raises(InvalidPayload):
        ref.sync(idempotency_key="k").keep(value)
    with pytest.raises(InvalidPayload):
        ref.enqueue().echo(value)
    assert_nothing_written()


@pytest.mark.parametrize("name", BAD_TEXT)
def test_bad_text_in_actor_ids_and_keys_is_refused(name):
    text = BAD_TEXT[name]
    with pytest.raises(InvalidPayload):
        Echo.ref(text)
    with pytest.raises(InvalidPayload):
        solid_objects.ref("tests.inputs.echo", f"id {text}")
    ref = Echo.ref("keys")
    with pytest.raises(InvalidPayload):
        ref.sync(idempotency_key=text)
    with pytest.raises(InvalidPayload):
        ref.enqueue(idempotency_key=f"key {text}").echo(1)
    with pytest.raises(InvalidPayload):
        ref.find_message(text)
    assert_nothing_written()


def test_snapshot_destroy_and_find_message_never_see_a_bad_id():
    """They are methods of a reference, and a reference with a bad id cannot be made."""
    for text in BAD_TEXT.values():
        with pytest.raises(InvalidPayload) as caught:
            Echo.ref(text).snapshot()
        assert isinstance(caught.value, SolidObjectsError)
    assert_nothing_written()


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "trailing ",
        "\t\n\x01\x7f",
        "é",
        "e\u0301",
        "😀 astral 𝄞",
        "\ufffe\uffff",
        "a" * 500,
    ],
    ids=repr,
)
def test_any_other_text_round_trips_exactly(text):
    ref = Echo.ref("text")
    assert ref.echo(text) == text
    assert ref.echo({text: [text]}) == {text: [text]}
    assert ref.keep({text: text}) and ref.snapshot().data == {text: text}


@pytest.mark.parametrize("actor_id", [" ", "x ", "X", "e\u0301", "é", "😀", "\x01", "a" * 191])
def test_ids_that_differ_in_any_way_are_different_actors(actor_id):
    """Compared byte for byte on every database: trailing spaces, case and normalisation
    forms all count."""
    Echo.ref("x").keep("x")
    ref = Echo.ref(actor_id)
    assert ref.snapshot().exists is False
    assert ref.keep(actor_id) is True
    assert ref.snapshot().data == actor_id
    assert Echo.ref("x").snapshot().data == "x"
