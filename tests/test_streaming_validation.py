"""The streaming schedule's checks, torch-free: `validate_schedule` on a stand-in for the config's fields,
`validate_streaming`, and the `StreamingScheduler` constructor. Each refusal is checked word for word."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trl_ada.sampling import AdaptiveSampler
from trl_ada.streaming import StreamingScheduler, validate_schedule, validate_streaming

STREAMING = {
    "generation_schedule": "streaming",
    "use_vllm": True,
    "vllm_mode": "server",
    "streaming_chunk": 1,
    "streaming_window": None,
    "streaming_max_retries": 2,
    "streaming_request_timeout": 600.0,
    "samples_per_round": 4,
    "max_rounds": 3,
    "exit_rule": "balance",
    "first_round": "fixed",
    "later_rounds": "fixed",
    "prompt_oversampling": 1.0,
}


def args(**changes):
    return SimpleNamespace(**{**STREAMING, **changes})


def refusal(**changes) -> str:
    with pytest.raises(ValueError) as refused:
        validate_schedule(args(**changes))
    return str(refused.value)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"streaming_chunk": 4, "streaming_window": 4},
        {"streaming_chunk": 2, "streaming_window": 12},  # the window may reach the cap M·N
        {"streaming_window": 1},
        {"streaming_max_retries": 0, "streaming_request_timeout": 0.5},
        {"exit_rule": "none", "first_round": "prior"},  # plain GRPO sampling has no rounds to size
        {"generation_schedule": "rounds", "use_vllm": False, "streaming_chunk": 0, "prompt_oversampling": 3.0},
    ],
)
def test_a_possible_schedule_is_accepted(changes):
    assert validate_schedule(args(**changes)) is None


def test_an_unknown_schedule_names_the_choices():
    assert (
        refusal(generation_schedule="stream") == "generation_schedule='stream': choose one of ['rounds', 'streaming']."
    )


@pytest.mark.parametrize(("use_vllm", "mode"), [(False, "server"), (True, "colocate"), (False, "colocate")])
def test_streaming_needs_a_vllm_server(use_vllm, mode):
    assert refusal(use_vllm=use_vllm, vllm_mode=mode) == (
        f"generation_schedule='streaming' sends requests to a vLLM server, but use_vllm={use_vllm!r} and "
        f"vllm_mode={mode!r}. Set use_vllm=True and vllm_mode='server', or use generation_schedule='rounds' (the "
        "default, which every backend supports)."
    )


@pytest.mark.parametrize("chunk", [0, 5, 2.0, "1"])
def test_a_chunk_outside_one_to_samples_per_round_is_refused(chunk):
    assert refusal(streaming_chunk=chunk) == (
        f"streaming_chunk={chunk!r}: completions per request must be an integer in [1, samples_per_round=4]."
    )


@pytest.mark.parametrize(("chunk", "window"), [(1, 13), (2, 1), (1, 0), (1, 4.0)])
def test_a_window_outside_chunk_to_cap_is_refused(chunk, window):
    assert refusal(streaming_chunk=chunk, streaming_window=window) == (
        f"streaming_window={window!r}: completions of a prompt in flight must be an integer in "
        f"[streaming_chunk={chunk}, samples_per_round * max_rounds=12], or None for samples_per_round=4."
    )


@pytest.mark.parametrize("retries", [-1, 1.0])
def test_retries_must_be_a_non_negative_integer(retries):
    assert refusal(streaming_max_retries=retries) == f"streaming_max_retries={retries!r}: must be an integer >= 0."


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_the_request_timeout_must_be_positive(timeout):
    assert refusal(streaming_request_timeout=timeout) == (
        f"streaming_request_timeout={timeout!r}: must be > 0 seconds."
    )


@pytest.mark.parametrize("name", ["first_round", "later_rounds"])
def test_rounds_sized_by_a_prior_are_refused(name):
    assert refusal(**{name: "prior"}) == (
        f"{name}='prior' sizes rounds, but generation_schedule='streaming' has none: it keeps samples_per_round "
        f"completions of each active prompt in flight. Use {name}='fixed', or generation_schedule='rounds'."
    )


def test_validate_streaming_checks_first_round_then_later_rounds():
    assert validate_streaming("fixed", "fixed") is None
    with pytest.raises(ValueError, match=r"^first_round='prior' sizes rounds"):
        validate_streaming("prior", "prior")
    with pytest.raises(ValueError, match=r"^later_rounds='prior' sizes rounds.*Use later_rounds='fixed'"):
        validate_streaming("fixed", "prior")


def test_candidates_are_refused_on_the_streaming_schedule():
    assert refusal(prompt_oversampling=2.0) == (
        "generation_schedule='streaming' with prompt_oversampling=2.0: candidates and refill run on the round "
        "schedule only. Use generation_schedule='rounds', or prompt_oversampling=1.0."
    )


def sampler(**kwargs) -> AdaptiveSampler:
    return AdaptiveSampler(num_prompts=2, num_generations=2, samples_per_round=2, max_rounds=2, **kwargs)


@pytest.mark.parametrize(
    ("window", "chunk"), [(0, 1), (1, 0), (-1, 1), (2, -2), (1.5, 1), (2, 1.0), (None, 0), ("2", 1)]
)
def test_a_window_or_chunk_below_one_is_refused(window, chunk):
    with pytest.raises(ValueError) as refused:
        StreamingScheduler(sampler(), window=window, chunk=chunk)
    assert str(refused.value) == f"window={window!r} and chunk={chunk!r} must be integers >= 1."


def test_the_smallest_window_and_chunk_are_accepted_and_the_window_defaults_to_samples_per_round():
    assert StreamingScheduler(sampler(), window=1, chunk=1).window == 1
    scheduler = StreamingScheduler(sampler())
    assert (scheduler.window, scheduler.chunk) == (2, 1)


def test_a_sampler_that_has_drawn_or_planned_is_refused():
    message = "StreamingScheduler needs a fresh AdaptiveSampler (nothing planned or ingested yet)."
    used = sampler()
    used.plan_round()
    used.ingest([1.0, 0.0, 1.0, 0.0])
    holding = sampler()
    holding.pools[0].append(1.0)  # a completion, no round
    counted = sampler()
    counted.round = 1  # a round, no completion
    for stale in (used, holding, counted):
        with pytest.raises(ValueError) as refused:
            StreamingScheduler(stale)
        assert str(refused.value) == message


def test_a_prior_sized_sampler_is_refused():
    with pytest.raises(ValueError, match=r"^later_rounds='prior' sizes rounds"):
        StreamingScheduler(
            sampler(later_rounds="prior", prior_alpha=[1.0, 1.0], prior_beta=[1.0, 1.0], memory_hits=[True, True])
        )
