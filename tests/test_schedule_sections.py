"""The refusals of the Est and streaming sections, as a config or a recipe meets them (torch-free: `resolve`)."""

from __future__ import annotations

import pytest
from refusals import names

from trl_ada.plan import resolve
from trl_ada.schedules.est import Est

EST = {"generation_schedule": "est", "pass_rate_memory": True}
STREAMING = {"generation_schedule": "streaming", "exit_rule": "balance"}  # M = 8, N = 4: a cap of 32


def refusal(**given) -> str:
    with pytest.raises(ValueError) as refused:
        resolve(given)
    assert "\n" not in str(refused.value), refused.value
    return str(refused.value)


def test_est_needs_the_pass_rate_memory():
    refused = refusal(generation_schedule="est", pass_rate_memory=False)
    names(refused, "generation_schedule='est'", "pass_rate_memory=False", "pass_rate_memory=True")
    names(refused, "generation_schedule='rounds'")


def test_est_bounds_default_to_two_and_four_n():
    assert Est().bounds(3) == (2, 12)
    assert Est(min_samples=3, max_samples=5).bounds(3) == (3, 5)
    assert resolve({**EST, "num_generations": 3}).section.bounds(3) == (2, 12)


def test_est_min_samples_is_an_integer_from_two_to_n():
    names(refusal(**EST, est_min_samples=1), "est_min_samples=1", "[2, inf)")
    names(refusal(**EST, est_min_samples=True), "est_min_samples=True", "not a boolean")
    names(refusal(**EST, num_generations=4, est_min_samples=5), "est_min_samples=5", "num_generations=4", "at most 4")
    assert resolve({**EST, "num_generations": 4, "est_min_samples": 4}).section.bounds(4) == (4, 16)


def test_est_max_samples_is_an_integer_of_at_least_n_or_none():
    names(refusal(**EST, est_max_samples=1), "est_max_samples=1", "[2, inf)")
    refused = refusal(**EST, num_generations=4, est_max_samples=3)
    names(refused, "est_max_samples=3", "num_generations=4", "at least 4", "None")
    assert resolve({**EST, "num_generations": 4, "est_max_samples": 4}).section.bounds(4) == (2, 4)
    assert resolve({**EST, "num_generations": 2, "est_max_samples": 2}).section.bounds(2) == (2, 2)


def test_streaming_retries_are_an_integer_of_at_least_zero():
    assert resolve({**STREAMING, "streaming_max_retries": 0}).section.max_retries == 0
    names(refusal(**STREAMING, streaming_max_retries=-1), "streaming_max_retries=-1", "[0, inf)", "retries=2")


def test_streaming_chunk_is_within_one_round():
    names(refusal(**STREAMING, streaming_chunk=0), "streaming_chunk=0", "[1, inf)")
    names(refusal(**STREAMING, streaming_chunk=9), "streaming_chunk=9", "[1, samples_per_round=8]")


def test_streaming_window_is_between_the_chunk_and_the_cap():
    cap = "samples_per_round * max_rounds=32]"
    names(
        refusal(**STREAMING, streaming_chunk=2, streaming_window=1), "streaming_window=1", "[streaming_chunk=2, ", cap
    )
    names(refusal(**STREAMING, streaming_window=33), "streaming_window=33", "[streaming_chunk=1, ", cap, "or None")
    for window in (2, 32):
        assert resolve({**STREAMING, "streaming_chunk": 2, "streaming_window": window}).section.window_size == window
    assert resolve({**STREAMING, "streaming_chunk": 8}).section.window_size == 8
