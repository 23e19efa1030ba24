"""What a process hears of actors' progress (the shortcut that spares waiting sync callers
a database read per hint): the payload format, news versus echoes, malformed payloads."""

from __future__ import annotations

from solid_objects.runtime.wakeup import progress
from solid_objects.runtime.wakeup.doorbells import doorbell
from solid_objects.runtime.wakeup.listener import ring


def test_a_payload_reports_final_sequences_and_a_released_generation():
    assert progress.payload([]) == "result"
    assert progress.payload([(7, 3)]) == "result:7:3"
    assert progress.payload([(7, 3), (8, 1)]) == "result:7:3,8:1"
    assert progress.payload([(7, 3)], released=12) == "result:7:3:12"
    # A release names one actor; with more than one the hint says nothing (blind).
    assert progress.payload([(7, 3), (8, 1)], released=12) == "result"
    assert progress.payload([(n, 1) for n in range(progress.MAX_PER_HINT + 1)]) == "result"


def test_only_news_counts_and_knowledge_only_grows():
    alias = "progress-test"
    assert progress.committed(alias, 1, 5)
    assert not progress.committed(alias, 1, 5)  # the same again: no news
    assert not progress.committed(alias, 1, 4)  # older: ignored
    assert progress.known(alias, 1)[:2] == (5, 0)
    assert progress.ended(alias, 1, 9)
    assert not progress.ended(alias, 1, 9)
    assert progress.known(alias, 1)[:2] == (5, 9)
    # A hint coming back with what this process already knows is an echo: no news.
    assert not progress.note(alias, "result:1:5:9")
    assert progress.note(alias, "result:1:6,2:1")
    assert progress.known(alias, 1)[:2] == (6, 9)
    assert progress.known(alias, 2)[:2] == (1, 0)


def test_malformed_payload_parts_are_ignored():
    alias = "progress-malformed"
    assert not progress.note(alias, "result:x:1,1:-2,:,1:2:3:4,,")
    assert progress.known(alias, 1)[:2] == (0, 0)


def test_a_received_echo_rings_nobody_and_a_blind_hint_rings_everyone():
    alias = "progress-ring"
    bell = doorbell("result")
    progress.committed(alias, 3, 2)
    before = bell.generation
    ring("result:3:2", alias)  # this process's own hint, back from the database
    assert bell.generation == before
    ring("result:3:3", alias)
    assert bell.generation == before + 1
    blind = progress.known(alias, 3)[2]
    ring("result", alias)
    assert bell.generation == before + 2
    assert progress.known(alias, 3)[2] == blind + 1
    # Progress from a transport that does not say which database: a blind hint too.
    ring("result:3:9")
    assert bell.generation == before + 3
    assert progress.known(alias, 3)[:3] == (3, 0, blind + 2)


def test_the_next_caller_to_run_is_the_one_furthest_behind():
    alias = "progress-waiting"
    with progress.waiting(alias, 4, 10), progress.waiting(alias, 4, 12):
        assert progress.next_to_run(alias, 4, 12)
        assert not progress.next_to_run(alias, 4, 10)
    with progress.waiting(alias, 4, 10):
        assert progress.next_to_run(alias, 4, 10)
