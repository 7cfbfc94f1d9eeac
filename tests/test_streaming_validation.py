"""The streaming schedule's checks, torch-free: the `SamplingPlan` fields of the streaming schedule, the request
settings (`validate_transport`) and the `StreamingScheduler` constructor. Each refusal is checked word for word."""

from __future__ import annotations

import pytest

from trl_ada.plan import SamplingPlan, validate_transport
from trl_ada.sampling import AdaptiveSampler
from trl_ada.streaming import StreamingScheduler

STREAMING = {"generation_schedule": "streaming", "samples_per_round": 4, "max_rounds": 3}


def refusal(**changes) -> str:
    with pytest.raises(ValueError) as refused:
        SamplingPlan(**{**STREAMING, **changes})
    return str(refused.value)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"streaming_chunk": 4, "streaming_window": 4},
        {"streaming_chunk": 2, "streaming_window": 12},  # the window may reach the cap M·N
        {"streaming_window": 1},
        {"exit_rule": "none"},
        {"generation_schedule": "rounds", "streaming_chunk": 0, "prompt_oversampling": 3.0},
    ],
)
def test_a_possible_schedule_is_accepted(changes):
    plan = SamplingPlan(**{**STREAMING, **changes})
    assert plan.generation_schedule == changes.get("generation_schedule", "streaming")


def test_an_unknown_schedule_names_the_choices():
    assert (
        refusal(generation_schedule="stream")
        == "generation_schedule='stream': choose one of ['rounds', 'streaming', 'est']."
    )


def test_a_window_without_streaming_is_refused():
    assert refusal(generation_schedule="rounds", streaming_window=4) == (
        "streaming_window=4 with generation_schedule='rounds': the window only applies to streaming. Set "
        "generation_schedule='streaming', or remove streaming_window."
    )


@pytest.mark.parametrize("chunk", [0, 5])
def test_a_chunk_outside_one_to_samples_per_round_is_refused(chunk):
    assert refusal(streaming_chunk=chunk) == (
        f"streaming_chunk={chunk!r}: completions per request must be an integer in [1, samples_per_round=4]."
    )


@pytest.mark.parametrize(
    ("chunk", "message"),
    [
        (2.0, "streaming_chunk=2.0: must be an integer, not a float; write streaming_chunk=2."),
        ("1", "streaming_chunk='1': must be an integer, not a str; write streaming_chunk=1."),
        (True, "streaming_chunk=True: must be an integer, not a boolean."),
    ],
)
def test_a_chunk_that_is_not_an_integer_is_refused_saying_how_to_write_it(chunk, message):
    assert refusal(streaming_chunk=chunk) == message


@pytest.mark.parametrize(("chunk", "window"), [(1, 13), (2, 1), (1, 0)])
def test_a_window_outside_chunk_to_cap_is_refused(chunk, window):
    assert refusal(streaming_chunk=chunk, streaming_window=window) == (
        f"streaming_window={window!r}: completions of a prompt in flight must be an integer in "
        f"[streaming_chunk={chunk}, samples_per_round * max_rounds=12], or None for samples_per_round=4."
    )


@pytest.mark.parametrize("name", ["first_round", "later_rounds"])
def test_rounds_sized_by_a_prior_are_refused(name):
    assert refusal(**{name: "prior"}) == (
        f"{name}='prior' sizes rounds, but generation_schedule='streaming' has none: it keeps samples_per_round "
        f"completions of each active prompt in flight. Use {name}='fixed', or generation_schedule='rounds'."
    )


@pytest.mark.parametrize(
    ("name", "value"), [("prompt_oversampling", 2.0), ("rounds_per_prompt", 1), ("skip_threshold", 0.9)]
)
def test_candidates_are_refused_on_the_streaming_schedule(name, value):
    extra = {"pass_rate_memory": True} if name == "skip_threshold" else {}
    assert refusal(**{name: value}, **extra) == (
        f"generation_schedule='streaming' with {name}={value!r}: candidates, refill and pre-rollout skipping run on "
        f"the round schedule only. Use generation_schedule='rounds', or remove {name}."
    )


@pytest.mark.parametrize(
    ("retries", "timeout", "message"),
    [
        (-1, 600.0, "streaming_max_retries=-1: must be an integer >= 0 (e.g. 2)."),
        (1.0, 600.0, "streaming_max_retries=1.0: must be an integer >= 0 (e.g. 2)."),
        (True, 600.0, "streaming_max_retries=True: must be an integer >= 0 (e.g. 2)."),
        (2, 0, "streaming_request_timeout=0: must be a number of seconds > 0 (e.g. 600.0), not a int."),
        (2, "10", "streaming_request_timeout='10': must be a number of seconds > 0 (e.g. 600.0), not a str."),
    ],
)
def test_bad_request_settings_are_refused(retries, timeout, message):
    with pytest.raises(ValueError) as refused:
        validate_transport(retries, timeout)
    assert str(refused.value) == message


@pytest.mark.parametrize(("retries", "timeout"), [(0, 0.5), (2, 600.0), (5, 1)])
def test_good_request_settings_are_accepted(retries, timeout):
    assert validate_transport(retries, timeout) is None


def sampler(**kwargs) -> AdaptiveSampler:
    return AdaptiveSampler(num_prompts=2, num_generations=2, samples_per_round=2, max_rounds=2, **kwargs)


@pytest.mark.parametrize(
    ("window", "chunk", "message"),
    [
        (0, 1, "window=0: must be an integer >= 1."),
        (-1, 1, "window=-1: must be an integer >= 1."),
        (1.5, 1, "window=1.5: must be an integer >= 1."),
        ("2", 1, "window='2': must be an integer >= 1."),
        (True, 1, "window=True: must be an integer >= 1."),
        (1, 0, "chunk=0: must be an integer >= 1."),
        (2, -2, "chunk=-2: must be an integer >= 1."),
        (2, 1.0, "chunk=1.0: must be an integer >= 1."),
        (None, 0, "chunk=0: must be an integer >= 1."),
    ],
)
def test_a_window_or_chunk_below_one_is_refused(window, chunk, message):
    with pytest.raises(ValueError) as refused:
        StreamingScheduler(sampler(), window=window, chunk=chunk)
    assert str(refused.value) == message


def test_the_smallest_window_and_chunk_are_accepted_and_the_plan_gives_the_defaults():
    assert StreamingScheduler(sampler(), window=1, chunk=1).window == 1
    scheduler = StreamingScheduler(sampler())
    assert (scheduler.window, scheduler.chunk) == (2, 1)  # samples_per_round, one completion per request


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


@pytest.mark.parametrize("name", ["first_round", "later_rounds"])
def test_a_prior_sized_sampler_is_refused(name):
    prior = {"prior_alpha": [1.0, 1.0], "prior_beta": [1.0, 1.0], "memory_hits": [True, True]}
    with pytest.raises(ValueError) as refused:
        StreamingScheduler(sampler(**{name: "prior"}, **prior))
    assert str(refused.value) == (
        f"{name}='prior' sizes rounds, but generation_schedule='streaming' has none: it keeps a window of "
        f"completions of each active prompt in flight. Use {name}='fixed', or generation_schedule='rounds'."
    )
