"""The streaming schedule's checks, torch-free: the `SamplingPlan` fields of the streaming schedule, the request
settings and the `RequestWindow` constructor. Each refusal is checked
word for word."""

from __future__ import annotations

import pytest
from refusals import names

from trl_ada.plan import SamplingPlan
from trl_ada.sampling import AdaptiveSampler
from trl_ada.schedules.streaming import RequestWindow

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


def sampler(**kwargs) -> AdaptiveSampler:
    return AdaptiveSampler(num_prompts=2, num_generations=2, samples_per_round=2, max_rounds=2, **kwargs)


@pytest.mark.parametrize(
    ("window", "chunk", "field"),
    [
        (0, 1, "window=0"),
        (-1, 1, "window=-1"),
        (1.5, 1, "window=1.5"),
        ("2", 1, "window='2'"),
        (True, 1, "window=True"),
        (1, 0, "chunk=0"),
        (2, -2, "chunk=-2"),
        (2, 1.0, "chunk=1.0"),
        (None, 0, "chunk=0"),
    ],
)
def test_a_window_or_chunk_below_one_is_refused(window, chunk, field):
    with pytest.raises(ValueError) as refused:
        RequestWindow(sampler(), window=window, chunk=chunk)
    names(str(refused.value), f"{field}: ", "an integer >= 1")


def test_the_smallest_window_and_chunk_are_accepted_and_the_plan_gives_the_defaults():
    assert RequestWindow(sampler(), window=1, chunk=1).window == 1
    scheduler = RequestWindow(sampler())
    assert (scheduler.window, scheduler.chunk) == (2, 1)  # samples_per_round, one completion per request


def test_a_sampler_that_has_drawn_or_planned_is_refused():
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
        names(str(refused.value), "RequestWindow", "fresh AdaptiveSampler")


@pytest.mark.parametrize("name", ["first_round", "later_rounds"])
def test_a_prior_sized_sampler_is_refused(name):
    prior = {"prior_alpha": [1.0, 1.0], "prior_beta": [1.0, 1.0], "memory_hits": [True, True]}
    with pytest.raises(ValueError) as refused:
        RequestWindow(sampler(**{name: "prior"}, **prior))
    names(str(refused.value), f"{name}='prior'", "generation_schedule='streaming'", f"{name}='fixed'")
    names(str(refused.value), "generation_schedule='rounds'")
