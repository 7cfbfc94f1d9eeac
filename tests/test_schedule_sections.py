"""The refusals of the Est and streaming sections, as a config or a recipe meets them (torch-free: `resolve`)."""

from __future__ import annotations

import pytest

from trl_ada.plan import resolve
from trl_ada.schedules.est import Est

EST = {"generation_schedule": "est", "pass_rate_memory": True}
STREAMING = {"generation_schedule": "streaming", "exit_rule": "balance"}  # M = 8, N = 4: a cap of 32


def refusal(**given) -> str:
    with pytest.raises(ValueError) as refused:
        resolve(given)
    return str(refused.value)


def test_est_needs_the_pass_rate_memory():
    assert refusal(generation_schedule="est", pass_rate_memory=False) == (
        "generation_schedule='est' allocates each step from the pass-rate memory's estimates, but "
        "pass_rate_memory=False. Set pass_rate_memory=True (sampling='est' does), or use "
        "generation_schedule='rounds'."
    )


def test_est_bounds_default_to_two_and_four_n():
    assert Est().bounds(3) == (2, 12)
    assert Est(min_samples=3, max_samples=5).bounds(3) == (3, 5)
    assert resolve({**EST, "num_generations": 3}).section.bounds(3) == (2, 12)


def test_est_min_samples_is_an_integer_from_two_to_n():
    assert refusal(**EST, est_min_samples=1).startswith("est_min_samples=1: must be in [2, inf)")
    assert refusal(**EST, est_min_samples=True) == "est_min_samples=True: must be an integer, not a boolean."
    assert refusal(**EST, num_generations=4, est_min_samples=5) == (
        "est_min_samples=5 is more than num_generations=4: a step allocates n samples per prompt on average, so B "
        "prompts cannot all get 5. Lower est_min_samples to at most 4."
    )
    assert resolve({**EST, "num_generations": 4, "est_min_samples": 4}).section.bounds(4) == (4, 16)


def test_est_max_samples_is_an_integer_of_at_least_n_or_none():
    assert refusal(**EST, est_max_samples=1).startswith("est_max_samples=1: must be in [2, inf)")
    assert refusal(**EST, num_generations=4, est_max_samples=3) == (
        "est_max_samples=3 is less than num_generations=4: a step allocates n samples per prompt on average, so B "
        "prompts with at most 3 each cannot meet the total. Raise est_max_samples to at least 4, or leave it None "
        "(4 * num_generations)."
    )
    assert resolve({**EST, "num_generations": 4, "est_max_samples": 4}).section.bounds(4) == (2, 4)
    assert resolve({**EST, "num_generations": 2, "est_max_samples": 2}).section.bounds(2) == (2, 2)


def test_streaming_retries_are_an_integer_of_at_least_zero():
    assert resolve({**STREAMING, "streaming_max_retries": 0}).section.max_retries == 0
    assert refusal(**STREAMING, streaming_max_retries=-1) == (
        "streaming_max_retries=-1: must be in [0, inf) (e.g. streaming_max_retries=2)."
    )


def test_streaming_chunk_is_within_one_round():
    assert refusal(**STREAMING, streaming_chunk=0).startswith("streaming_chunk=0: must be in [1, inf)")
    assert refusal(**STREAMING, streaming_chunk=9) == (
        "streaming_chunk=9: completions per request must be an integer in [1, samples_per_round=8]."
    )


def test_streaming_window_is_between_the_chunk_and_the_cap():
    assert refusal(**STREAMING, streaming_chunk=2, streaming_window=1) == (
        "streaming_window=1: completions of a prompt in flight must be an integer in [streaming_chunk=2, "
        "samples_per_round * max_rounds=32], or None for samples_per_round=8."
    )
    assert refusal(**STREAMING, streaming_window=33) == (
        "streaming_window=33: completions of a prompt in flight must be an integer in [streaming_chunk=1, "
        "samples_per_round * max_rounds=32], or None for samples_per_round=8."
    )
    for window in (2, 32):
        assert resolve({**STREAMING, "streaming_chunk": 2, "streaming_window": window}).section.window_size == window
    assert resolve({**STREAMING, "streaming_chunk": 8}).section.window_size == 8
