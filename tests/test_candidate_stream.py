"""The candidate stream: seeded permutations per pass, `peek` without consuming, `consume`, and checkpoint state."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import names, refusal

from trl_ada.candidates import CandidateStream


def permutation(seed: int, epoch: int, size: int) -> list[int]:
    """The documented order of pass `epoch`: numpy's permutation seeded by (seed, epoch)."""
    return np.random.default_rng([seed, epoch]).permutation(size).tolist()


def test_each_pass_is_the_permutation_seeded_by_seed_and_pass():
    stream = CandidateStream(10, seed=3)
    for epoch in (0, 1, 2, 1, 0):  # passes visited out of order give the same orders again
        assert stream.order(epoch).tolist() == permutation(3, epoch, 10)
        assert sorted(stream.order(epoch).tolist()) == list(range(10))
    assert stream.order(0).tolist() != stream.order(1).tolist()
    assert CandidateStream(10, seed=4).order(0).tolist() != stream.order(0).tolist()


def test_a_new_stream_starts_at_the_first_pass():
    stream = CandidateStream(6, seed=0)
    assert (stream.epoch, stream.position) == (0, 0)
    assert stream.state_dict() == {"size": 6, "seed": 0, "epoch": 0, "position": 0}


def test_peek_does_not_consume():
    stream = CandidateStream(8, seed=1)
    first = stream.peek(3)
    assert first == permutation(1, 0, 8)[:3] and all(isinstance(index, int) for index in first)
    assert stream.peek(3) == first and stream.peek(5)[:3] == first
    assert (stream.epoch, stream.position) == (0, 0)
    assert stream.peek(0) == []


def test_consume_moves_past_the_first_k_of_the_last_peek():
    stream = CandidateStream(8, seed=1)
    order = permutation(1, 0, 8)
    assert stream.peek(4) == order[:4]
    stream.consume(2)
    assert (stream.epoch, stream.position) == (0, 2)
    assert stream.peek(3) == order[2:5]  # the two examined are gone, the two not examined are offered again
    stream.consume(3)
    assert stream.state_dict() == {"size": 8, "seed": 1, "epoch": 0, "position": 5}


def test_consume_zero_stays_and_a_consume_needs_a_fresh_peek():
    stream = CandidateStream(5, seed=2)
    stream.peek(3)
    stream.consume(0)
    assert (stream.epoch, stream.position) == (0, 0)
    names(refusal(stream.consume, 1), "consume(1)", "peek", "only 0 indices")  # consume(0) used up the last peek
    stream.peek(2)
    names(refusal(stream.consume, 3), "consume(3)", "peek", "only 2 indices")
    assert (stream.epoch, stream.position) == (0, 0)
    stream.consume(2)
    assert (stream.epoch, stream.position) == (0, 2)


def test_a_later_peek_replaces_the_marks_of_an_earlier_one():
    stream = CandidateStream(6, seed=5)
    stream.peek(4)
    stream.peek(1)
    names(refusal(stream.consume, 2), "consume(2)", "peek", "only 1 indices")
    stream.peek(4)
    stream.consume(4)
    assert stream.position == 4


def test_rejected_indices_before_a_consumed_one_are_consumed_those_after_are_not():
    stream = CandidateStream(10, seed=7)
    order = permutation(7, 0, 10)
    odd = stream.peek(2, accept=lambda index: index % 2 == 1)
    assert odd == [i for i in order if i % 2 == 1][:2]
    stream.consume(1)
    assert stream.position == order.index(odd[0]) + 1  # everything up to the first odd index is passed over
    assert stream.peek(10) == order[stream.position :] + permutation(7, 1, 10)[: stream.position]


def test_peek_crosses_into_the_next_pass():
    stream = CandidateStream(4, seed=9)
    first, second = permutation(9, 0, 4), permutation(9, 1, 4)
    stream.peek(3)
    stream.consume(3)
    assert stream.peek(3) == first[3:] + second[:2]
    stream.consume(1)
    assert (stream.epoch, stream.position) == (0, 4)  # the end of the first pass
    assert stream.peek(1) == second[:1]
    stream.consume(1)
    assert (stream.epoch, stream.position) == (1, 1)


def test_peek_looks_at_most_two_passes_ahead():
    stream = CandidateStream(5, seed=11)
    both = permutation(11, 0, 5) + permutation(11, 1, 5)
    assert stream.peek(100) == both
    assert stream.peek(3, accept=lambda index: index == 2) == [2, 2]  # once in each of the two passes
    assert stream.peek(1, accept=lambda index: False) == []
    with pytest.raises(ValueError, match="returned only 0"):
        stream.consume(1)
    stream.peek(100)
    stream.consume(10)
    assert (stream.epoch, stream.position) == (1, 5)


def test_a_restored_stream_continues_the_same_way():
    stream = CandidateStream(12, seed=13)
    stream.peek(9)
    stream.consume(9)
    stream.peek(7, accept=lambda index: index > 3)
    stream.consume(5)
    state = stream.state_dict()
    assert set(state) == {"size", "seed", "epoch", "position"} and state["epoch"] == 1
    restored = CandidateStream.from_state_dict({name: np.int64(value) for name, value in state.items()})
    assert restored.state_dict() == state and all(type(value) is int for value in restored.state_dict().values())
    assert restored.peek(20) == stream.peek(20)


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 12),
    seed=st.integers(0, 2**16),
    steps=st.lists(st.tuples(st.integers(0, 15), st.integers(0, 15), st.integers(0, 3)), max_size=8),
)
def test_consumed_indices_are_the_stream_in_order(size, seed, steps):
    """Whatever is peeked and however much is consumed, the consumed indices read the passes in order."""
    stream = CandidateStream(size, seed)
    walked = [i for epoch in range(2 * len(steps) + 2) for i in permutation(seed, epoch, size)]
    consumed = []
    for count, take, modulus in steps:
        accept = (lambda index: True) if modulus == 0 else (lambda index, m=modulus: index % (m + 1) == 0)
        start = stream.epoch * size + stream.position
        taken = stream.peek(count, accept)
        assert len(taken) <= count
        assert taken == [i for i in walked[start : start + 2 * size] if accept(i)][:count]
        take = min(take, len(taken))
        stream.consume(take)
        consumed.extend(taken[:take])
        end = stream.epoch * size + stream.position
        assert [i for i in walked[start:end] if accept(i)] == taken[:take]
        assert take == 0 or walked[end - 1] == taken[take - 1]
    assert 0 <= stream.position <= size


def test_streams_compare_by_their_position_whatever_they_cached():
    walked, fresh = CandidateStream(10, seed=3), CandidateStream(10, seed=3)
    walked.peek(4)  # caches the pass's permutation and the marks
    assert walked == fresh  # nothing consumed: the same stream (comparing the cache raised before)
    walked.consume(2)
    assert walked != fresh and walked == CandidateStream.from_state_dict(walked.state_dict())
