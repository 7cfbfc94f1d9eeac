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
        {"generation_schedule": "rounds", "prompt_oversampling": 3.0},
    ],
)
def test_a_possible_schedule_is_accepted(changes):
    plan = SamplingPlan.from_fields(**{**STREAMING, **changes})
    assert plan.generation_schedule == changes.get("generation_schedule", "streaming")


def test_an_unknown_schedule_names_the_choices():
    message = refusal(generation_schedule="stream")
    assert all(name in message for name in ("generation_schedule='stream'", "'streaming'", "'rounds'", "'est'"))


def test_plain_grpo_is_not_a_streaming_exit_rule():
    message = refusal(exit_rule="none")
    assert "exit_rule='none'" in message and "Remove generation_schedule" in message
    assert SamplingPlan.from_fields(exit_rule="none").generation_schedule == "grpo"  # the fix, followed


def refused_under(schedule: str, name: str, value, **extra) -> None:
    """`name` is refused under `schedule`, naming its value and the fix; removing it, as told, works."""
    message = refusal(generation_schedule=schedule, **{name: value}, **extra)
    for fragment in (f"{name}={value!r}", f"generation_schedule={schedule!r}", f"Remove {name}"):
        assert fragment in message
    assert SamplingPlan.from_fields(**{**STREAMING, "generation_schedule": schedule, **extra}).section


@pytest.mark.parametrize(("name", "value"), [("streaming_window", 4), ("streaming_chunk", 2)])
def test_a_streaming_field_without_streaming_is_refused(name, value):
    refused_under("rounds", name, value)


@pytest.mark.parametrize("name", ["first_round", "later_rounds"])
def test_rounds_sized_by_a_prior_are_refused(name):
    refused_under("streaming", name, "prior")


@pytest.mark.parametrize(
    ("name", "value"), [("prompt_oversampling", 2.0), ("rounds_per_prompt", 1), ("skip_threshold", 0.9)]
)
def test_candidates_are_refused_on_the_streaming_schedule(name, value):
    extra = {"pass_rate_memory": True} if name == "skip_threshold" else {}
    refused_under("streaming", name, value, **extra)


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
