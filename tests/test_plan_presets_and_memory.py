"""`SamplingPlan` pieces the trainer uses and the torch-free tests did not reach: preset resolution, the trainer's
memory requirement (`require_memory`), `from_config` and `replace`. Refusals are checked for what a user relies on:
the field, its value and the fix."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from refusals import names, refusal

from trl_ada.plan import PRESETS, Memory, SamplingPlan, defaults, flat_fields
from trl_ada.schedules.rounds import require_memory


def test_without_a_preset_the_fields_resolve_to_the_defaults():
    fields = SamplingPlan.from_fields().fields()
    assert {name: value for name, value in fields.items()} == {name: defaults()[name] for name in fields}
    assert SamplingPlan.from_fields(max_rounds=None) == SamplingPlan.from_fields()  # None means "not given"


def test_a_preset_fills_what_the_user_left_unset_and_the_user_wins():
    dapo = SamplingPlan.from_fields("dapo", num_generations=6, max_rounds=2, sample_budget=None).fields()
    assert (dapo["exit_rule"], dapo["samples_per_round"], dapo["max_rounds"]) == ("mixed", 6, 2)  # n; given
    assert (dapo["rounds_per_prompt"], dapo["prompt_oversampling"], dapo["sample_budget"]) == (1, 3.0, None)
    budgeted = SamplingPlan.from_fields("budgeted_balance", futility_threshold=0.0).fields()
    assert budgeted["sample_budget"] == 8.0 and budgeted["futility_threshold"] == 0.0
    assert budgeted["first_round"] == budgeted["later_rounds"] == "prior" and budgeted["pass_rate_memory"] is True
    assert SamplingPlan.from_fields("grpo").generation_schedule == "grpo"


def test_an_unknown_preset_names_the_choices():
    message = refusal(SamplingPlan.from_fields, "dapo2")
    names(message, "sampling='dapo2'", "'dapo'", *map(repr, PRESETS))


def test_the_trainer_needs_the_memory_for_a_prior_first_round_and_for_skipping():
    message = refusal(require_memory, SamplingPlan.from_fields(first_round="prior"))
    names(message, "first_round='prior'", "pass_rate_memory=False", "Set pass_rate_memory=True")
    message = refusal(require_memory, SamplingPlan.from_fields(skip_threshold=0.9, prompt_oversampling=2.0))
    names(message, "skip_threshold=0.9", "pass_rate_memory=False", "Set pass_rate_memory=True")
    for plan in (
        SamplingPlan.from_fields(first_round="prior", pass_rate_memory=True),
        SamplingPlan.from_fields(later_rounds="prior"),  # later rounds read the step's own pool
        SamplingPlan.from_fields(skip_threshold=0.9, prompt_oversampling=2.0, pass_rate_memory=True),
    ):
        assert require_memory(plan) is None


def test_from_config_reads_every_field_and_checks_the_memory():
    fields = {spec.name: spec.unset for spec in flat_fields()} | {"num_generations": 4}  # a config's, nothing given
    config = SimpleNamespace(**{**fields, "samples_per_round": 4, "max_rounds": 2, "unrelated": "ignored"})
    assert SamplingPlan.from_config(config) == SamplingPlan.from_fields(samples_per_round=4, max_rounds=2)
    message = refusal(SamplingPlan.from_config, SimpleNamespace(**{**fields, "first_round": "prior"}))
    names(message, "first_round='prior'", "pass_rate_memory=True")


def test_replace_changes_a_field_and_validates_again():
    plan = SamplingPlan.from_fields(samples_per_round=4)
    assert plan.replace(max_rounds=2) == SamplingPlan.from_fields(samples_per_round=4, max_rounds=2)
    assert plan.section.samples_per_round == 4 and plan.section.max_rounds == 4  # the original is unchanged
    names(refusal(plan.replace, samples_per_round=0), "samples_per_round=0")


def test_rounds_per_prompt_needs_rounds_to_cap():
    names(refusal(SamplingPlan.from_fields, "grpo", rounds_per_prompt=1), "rounds_per_prompt=1", "Remove")
    assert SamplingPlan.from_fields("grpo").generation_schedule == "grpo"  # the fix, followed
    message = refusal(SamplingPlan.from_fields, max_rounds=2, rounds_per_prompt=3)
    names(message, "rounds_per_prompt=3", "max_rounds=2")
    assert SamplingPlan.from_fields(max_rounds=2, rounds_per_prompt=2).section.candidates.rounds_per_prompt == 2


@pytest.mark.parametrize(
    ("fields", "fragments", "fix"),
    [
        ({"num_generations": True}, ["num_generations=True", "boolean"], {"num_generations": 4}),
        ({"samples_per_round": True}, ["samples_per_round=True", "boolean"], {"samples_per_round": 8}),
        ({"samples_per_round": 0}, ["samples_per_round=0", "[1, 4096]"], {"samples_per_round": 1}),
        ({"max_rounds": 0}, ["max_rounds=0", "[1, inf)"], {"max_rounds": 1}),
        ({"max_rounds": 2.0}, ["max_rounds=2.0", "write max_rounds=2"], {"max_rounds": 2}),
        ({"first_round": "adaptive"}, ["first_round='adaptive'", "'fixed', 'prior'"], {"first_round": "fixed"}),
        ({"advantage_baseline": "batch"}, ["advantage_baseline='batch'", "'pool', 'group'"], {}),
        (
            {"skip_threshold": 1.5, "prompt_oversampling": 2.0, "pass_rate_memory": True},
            ["skip_threshold=1.5", "(0, 1]"],
            {"skip_threshold": 0.9},
        ),
        ({"memory_decay": True}, ["memory_decay=True", "boolean"], {"memory_decay": 0.5}),
        ({"memory_decay": "0.5"}, ["memory_decay='0.5'", "write memory_decay=0.5"], {"memory_decay": 0.5}),
        ({"objective_alpha": [1]}, ["objective_alpha=[1]", "objective_alpha=0.5"], {"objective_alpha": 0.5}),
        ({"exit_rule": ["pos"]}, ["exit_rule=['pos']", "exit_rule='balance'"], {"exit_rule": "balance"}),
    ],
)
def test_an_impossible_plan_names_the_field_the_value_and_a_fix_that_works(fields, fragments, fix):
    names(refusal(SamplingPlan.from_fields, **fields), *fragments)
    fixed = {name: value for name, value in {**fields, **fix}.items() if name != "advantage_baseline"}
    assert isinstance(SamplingPlan.from_fields(**fixed), SamplingPlan)


@pytest.mark.parametrize(
    ("fields", "fragments"),
    [
        ({"streaming_window": 4.0}, ["streaming_window=4.0", "write streaming_window=4"]),
        ({"est_max_samples": "x"}, ["est_max_samples='x'", "an integer or None"]),
    ],
)
def test_every_field_is_type_checked_under_the_schedule_that_uses_it(fields, fragments):
    schedule = "streaming" if "streaming_window" in fields else "est"
    given = {"generation_schedule": schedule, "pass_rate_memory": schedule == "est", **fields}
    names(refusal(SamplingPlan.from_fields, **given), *fragments)


def test_an_unknown_exit_rule_is_refused_by_the_plan():
    names(refusal(SamplingPlan.from_fields, exit_rule="balanse"), "exit_rule='balanse'", "Did you mean 'balance'?")


@pytest.mark.parametrize("decay", [0.0, -0.5, 1.5, float("nan")])
def test_memory_decay_must_be_in_zero_one(decay):
    names(refusal(SamplingPlan.from_fields, memory_decay=decay), f"memory_decay={decay!r}", "(0, 1]")


@pytest.mark.parametrize("decay", [1.0, 0.5, 1e-6])
def test_memory_decay_in_zero_one_is_accepted(decay):
    assert SamplingPlan.from_fields(memory_decay=decay).memory.decay == decay


@pytest.mark.parametrize("flag", [1, "yes", None])
def test_pass_rate_memory_must_be_a_boolean(flag):
    names(refusal(Memory, enabled=flag), f"pass_rate_memory={flag!r}", "True or False")
    if flag is None:  # a flat field given as None is not given: the config's and the recipes' spelling of unset
        assert SamplingPlan.from_fields(pass_rate_memory=None).memory.enabled is False
        return
    names(refusal(SamplingPlan.from_fields, pass_rate_memory=flag), f"pass_rate_memory={flag!r}", "True or False")


def test_a_plan_is_built_from_a_section_or_from_flat_fields_and_has_no_flat_attributes():
    with pytest.raises(TypeError):
        SamplingPlan(num_generations=4, exit_rule="pos")  # the flat spelling is `from_fields`
    plan = SamplingPlan.from_fields(num_generations=4, exit_rule="pos", samples_per_round=8, max_rounds=2)
    assert plan.section.max_rounds == 2 and plan.fields()["memory_decay"] == 0.5
    assert not hasattr(plan, "max_rounds")
