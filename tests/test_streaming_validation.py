"""The streaming schedule's checks, torch-free: the `SamplingPlan` fields of the streaming schedule, the request
settings (`check_retries`, `check_request_timeout`) and the `RequestWindow` constructor. Each refusal is checked
word for word."""

from __future__ import annotations

import pytest

from trl_ada.plan import SamplingPlan
from trl_ada.sampling import AdaptiveSampler
from trl_ada.schedules.streaming import RequestWindow, check_request_timeout, check_retries

STREAMING = {"generation_schedule": "streaming", "samples_per_round": 4, "max_rounds": 3}


def refusal(**changes) -> str:
    with pytest.raises(ValueError) as refused:
        SamplingPlan.from_fields(**{**STREAMING, **changes})
    return str(refused.value)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"streaming_chunk": 4, "streaming_window": 4},
        {"streaming_chunk": 2, "streaming_window": 12},  # the window may reach the cap M·N
        {"streaming_window": 1},
        {"exit_rule": "none", "samples_per_round": 4, "max_rounds": 1},  # M·N = n: what plain GRPO draws anyway
        {"generation_schedule": "rounds", "prompt_oversampling": 3.0},
    ],
)
def test_a_possible_schedule_is_accepted(changes):
    plan = SamplingPlan.from_fields(**{**STREAMING, **changes})
    assert plan.generation_schedule == changes.get("generation_schedule", "streaming")


def test_an_unknown_schedule_names_the_choices():
    assert (
        refusal(generation_schedule="stream")
        == "generation_schedule='stream': choose one of ['rounds', 'streaming', 'est', 'pilot_commit']."
    )


ROUNDS_SUMMARY = (
    "each round is one batched generation call for the active prompts of the batch, with no requests in flight to "
    "window and no allocation"
)
STREAMING_SUMMARY = (
    "streaming keeps a window of completions of each prompt of the batch in flight, with no rounds to size and no "
    "candidates beyond the batch"
)


@pytest.mark.parametrize(("name", "value"), [("streaming_window", 4), ("streaming_chunk", 2)])
def test_a_streaming_field_without_streaming_is_refused(name, value):
    assert refusal(generation_schedule="rounds", **{name: value}) == (
        f"{name}={value!r} has no effect under generation_schedule='rounds': {ROUNDS_SUMMARY}. Remove {name}, or use "
        "generation_schedule='streaming'."
    )


@pytest.mark.parametrize("name", ["first_round", "later_rounds"])
def test_rounds_sized_by_a_prior_are_refused(name):
    assert refusal(**{name: "prior"}) == (
        f"{name}='prior' has no effect under generation_schedule='streaming': {STREAMING_SUMMARY}. Remove {name}, or "
        "sample in rounds (sampling='balance', or generation_schedule='rounds')."
    )


@pytest.mark.parametrize(
    ("name", "value", "off"),
    [("prompt_oversampling", 2.0, 1.0), ("rounds_per_prompt", 1, None), ("skip_threshold", 0.9, None)],
)
def test_candidates_are_refused_on_the_streaming_schedule(name, value, off):
    extra = {"pass_rate_memory": True} if name == "skip_threshold" else {}
    alternative = "" if off is None else f" (or set it to {off!r})"
    assert refusal(**{name: value}, **extra) == (
        f"{name}={value!r} has no effect under generation_schedule='streaming': {STREAMING_SUMMARY}. Remove "
        f"{name}{alternative}, or sample in rounds (sampling='balance', or generation_schedule='rounds')."
    )


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (check_retries, -1, "streaming_max_retries=-1: must be an integer >= 0 (e.g. 2)."),
        (check_retries, 1.0, "streaming_max_retries=1.0: must be an integer >= 0 (e.g. 2)."),
        (check_retries, True, "streaming_max_retries=True: must be an integer >= 0 (e.g. 2)."),
        (
            check_request_timeout,
            0,
            "streaming_request_timeout=0: must be a number of seconds > 0 (e.g. 600.0), not a int.",
        ),
        (
            check_request_timeout,
            "10",
            "streaming_request_timeout='10': must be a number of seconds > 0 (e.g. 600.0), not a str.",
        ),
    ],
)
def test_bad_request_settings_are_refused(check, value, message):
    with pytest.raises(ValueError) as refused:
        check(value)
    assert str(refused.value) == message


@pytest.mark.parametrize(("retries", "timeout"), [(0, 0.5), (2, 600.0), (5, 1)])
def test_good_request_settings_are_accepted(retries, timeout):
    assert check_retries(retries) is None and check_request_timeout(timeout) is None


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
        RequestWindow(sampler(), window=window, chunk=chunk)
    assert str(refused.value) == message


def test_the_smallest_window_and_chunk_are_accepted_and_the_plan_gives_the_defaults():
    assert RequestWindow(sampler(), window=1, chunk=1).window == 1
    scheduler = RequestWindow(sampler())
    assert (scheduler.window, scheduler.chunk) == (2, 1)  # samples_per_round, one completion per request


def test_a_sampler_that_has_drawn_or_planned_is_refused():
    message = "RequestWindow needs a fresh AdaptiveSampler (nothing planned or ingested yet)."
    used = sampler()
    used.plan_round()
    used.ingest([1.0, 0.0, 1.0, 0.0])
    holding = sampler()
    holding.pools[0].append(1.0)  # a completion, no round
    counted = sampler()
    counted.round = 1  # a round, no completion
    for stale in (used, holding, counted):
        with pytest.raises(ValueError) as refused:
            RequestWindow(stale)
        assert str(refused.value) == message


@pytest.mark.parametrize("name", ["first_round", "later_rounds"])
def test_a_prior_sized_sampler_is_refused(name):
    prior = {"prior_alpha": [1.0, 1.0], "prior_beta": [1.0, 1.0], "memory_hits": [True, True]}
    with pytest.raises(ValueError) as refused:
        RequestWindow(sampler(**{name: "prior"}, **prior))
    assert str(refused.value) == (
        f"{name}='prior' sizes rounds, but generation_schedule='streaming' has none: it keeps a window of "
        f"completions of each active prompt in flight. Use {name}='fixed', or generation_schedule='rounds'."
    )
