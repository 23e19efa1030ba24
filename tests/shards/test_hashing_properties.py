"""Properties of the shard choice, for any identity and any list of aliases (hypothesis):
the winner is one of the aliases, order of the list does not matter, adding an alias moves
an identity only to that alias, removing an alias moves only the identities it held."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from solid_objects.shards import choose

texts = st.text(min_size=1, max_size=40)  # surrogates too: see ENCODING
anything = st.text(  # lone surrogates included
    st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr)), min_size=1, max_size=40
)
aliases = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6, unique=True)


@given(aliases, texts, texts, st.randoms(use_true_random=False))
def test_the_winner_is_one_of_them_whatever_the_order(names, actor_type, actor_id, rnd):
    winner = choose(names, actor_type, actor_id)
    assert winner in names
    shuffled = list(names)
    rnd.shuffle(shuffled)
    assert choose(shuffled, actor_type, actor_id) == winner


@given(aliases, st.text(min_size=1, max_size=12), texts, texts)
def test_adding_an_alias_moves_identities_only_to_it(names, added, actor_type, actor_id):
    if added in names:
        return
    before = choose(names, actor_type, actor_id)
    after = choose([*names, added], actor_type, actor_id)
    assert after in (before, added)


@given(aliases, texts, texts, st.data())
def test_removing_an_alias_moves_only_what_it_held(names, actor_type, actor_id, data):
    if len(names) < 2:
        return
    removed = data.draw(st.sampled_from(names))
    before = choose(names, actor_type, actor_id)
    after = choose([name for name in names if name != removed], actor_type, actor_id)
    if before != removed:
        assert after == before


@given(anything, anything)
def test_any_text_hashes(actor_type, actor_id):
    assert choose(["a", "b"], actor_type, actor_id) in ("a", "b")
