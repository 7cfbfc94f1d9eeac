"""The plan's records as a user meets them: the one-line refusal of each bad value (naming the field, the value and
the fix), the boundaries of the ranges, the type checks from the declarations, unknown names, `flat_fields()` and
its defaults, `from_config`, `from_fields`, `replace` and `fields()`. Torch-free."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from refusals import names, refusal

from trl_ada.plan import (
    PRESET_FIELDS,
    Memory,
    Objective,
    SamplingPlan,
    defaults,
    explicit_fields,
    flat_fields,
)
from trl_ada.records import check_integer, check_type, check_value, in_interval
from trl_ada.schedules.rounds import Rounds

# ------------------------------------------------------------------------------------------------------------------
# The objective
# ------------------------------------------------------------------------------------------------------------------


def test_an_unknown_objective_lists_the_three():
    names(refusal(Objective, function="sqrt"), "objective='sqrt'", "'linear', 'log', 'power'")


@pytest.mark.parametrize("alpha", [0, -0.5, "0.5", float("nan")])
def test_the_power_objective_refuses_an_alpha_that_is_not_a_positive_number(alpha):
    names(refusal(Objective, function="power", alpha=alpha), f"objective_alpha={alpha!r}", "0.5")


@pytest.mark.parametrize("function", ["linear", "log", "power"])
def test_alpha_must_be_positive_whatever_the_objective(function):
    assert Objective(function=function, alpha=1e-9).alpha == 1e-9
    names(refusal(Objective, function=function, alpha=0.0), "objective_alpha=0.0", "(0, inf)", "objective_alpha=0.5")
    assert Objective(function=function, alpha=0.5).alpha == 0.5  # the fix, followed


def test_an_unknown_weighting_lists_the_four():
    names(
        refusal(Objective, function="log", weighting="both"),
        "objective_weighting='both'",
        "'explicit', 'implicit', 'hybrid', 'variance'",
    )


def test_the_variance_weighting_needs_the_log_objective():
    assert Objective(function="log", weighting="variance").weighting == "variance"
    names(
        refusal(Objective, function="linear", weighting="variance"),
        "objective_weighting='variance'",
        "objective='linear'",
        "Set objective='log'",
    )


@pytest.mark.parametrize("epsilon", [1e-9, 0.05, 1.0])
def test_epsilon_in_the_half_open_unit_interval_is_accepted(epsilon):
    assert Objective(epsilon=epsilon).epsilon == epsilon


@pytest.mark.parametrize("epsilon", [0.0, -0.1, 1.5, float("inf"), float("nan")])
def test_epsilon_outside_the_half_open_unit_interval_is_refused(epsilon):
    names(refusal(Objective, epsilon=epsilon), f"objective_epsilon={epsilon!r}", "(0, 1]")


# ------------------------------------------------------------------------------------------------------------------
# The memory and the records' type checks
# ------------------------------------------------------------------------------------------------------------------


def test_memory_decay_one_keeps_everything_and_zero_is_refused():
    assert Memory(decay=1.0).decay == 1.0
    names(refusal(Memory, decay=0.0), "memory_decay=0.0", "(0, 1]")


@pytest.mark.parametrize("name", ["prior_alpha", "prior_beta"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan")])
def test_the_memory_prior_needs_positive_parameters(name, value):
    names(refusal(Memory, **{name: value}), f"memory_{name}={value!r}", "(0, inf)", f"memory_{name}=1.0")
    assert Memory(**{name: 1e-9}).prior == ((1e-9, 1.0) if name == "prior_alpha" else (1.0, 1e-9))


def test_a_record_field_of_the_wrong_type_names_its_flat_field_and_its_default():
    names(refusal(Memory, decay="high"), "memory_decay='high'", "a number", "memory_decay=0.5")
    names(refusal(Objective, function=1), "objective=1", "a string", "objective='linear'")
    names(refusal(Rounds, max_rounds="8"), "max_rounds='8'", "write max_rounds=8")
    assert Rounds(max_rounds=8).max_rounds == 8  # the fix, followed


def test_check_type_refuses_none_unless_the_field_is_optional():
    names(refusal(check_type, "max_rounds", None, int), "max_rounds=None", "an integer")
    check_type("sample_budget", None, float, optional=True)


def test_check_integer_refuses_a_boolean_and_a_value_below_the_minimum():
    names(refusal(check_integer, "max_rounds", True, 1, "."), "max_rounds=True", "not a boolean")
    names(refusal(check_integer, "max_rounds", 0, 1, " (the paper uses 4)."), "max_rounds=0", ">= 1")


@pytest.mark.parametrize(
    ("value", "interval", "inside"),
    [
        (0.0, "(0, 1]", False),
        (1e-9, "(0, 1]", True),
        (1.0, "(0, 1]", True),
        (1.0 + 1e-9, "(0, 1]", False),
        (0.0, "[0, 1)", True),
        (1.0, "[0, 1)", False),
        (0, "[1, inf)", False),
        (1, "[1, inf)", True),
        (float("inf"), "(0, inf)", False),
        (float("inf"), "(0, inf]", True),
        (float("-inf"), "(-inf, inf)", False),
        (float("-inf"), "[-inf, inf)", True),
        (float("nan"), "(-inf, inf)", False),
        (float("nan"), "[-inf, inf]", False),
    ],
)
def test_a_round_bracket_excludes_its_bound_and_nan_lies_in_no_interval(value, interval, inside):
    assert in_interval(value, interval) is inside


def test_check_value_names_the_field_the_value_and_what_it_takes():
    names(refusal(check_value, "x", 0.0, float, example=0.5, within="(0, 1]"), "x=0.0", "in (0, 1]", "x=0.5")
    names(refusal(check_value, "x", float("inf"), float, example=0.7, within="(-inf, inf)"), "a finite number")
    names(refusal(check_value, "x", "c", str, choices=("a", "b")), "x='c'", "['a', 'b']")
    names(refusal(check_value, "x", 2, int, optional=True, within="[3, inf)"), "x=2", "[3, inf)")
    # no example given: the interval's closed bound, a value it accepts (never x=None); none for an open interval
    assert refusal(check_value, "x", 2, int, within="[3, inf)").endswith("(e.g. x=3).")
    check_value("x", 3, int, within="[3, inf)")
    assert "e.g." not in refusal(check_value, "x", 0.0, float, within="(0, inf)")
    names(refusal(check_value, "x", "2", int, within="[0, inf)"), "x='2'", "write x=2")  # the type first
    check_value("x", None, int, optional=True, within="[3, inf)", choices=(3,))  # None is "not given"
    check_value("x", "b", str, choices=("a", "b"))
    check_value("x", 3, int, within="[3, inf)")


def test_a_sampling_plan_with_a_non_finite_positive_threshold_is_refused():
    names(refusal(SamplingPlan.from_fields, positive_threshold=float("nan")), "positive_threshold=nan", "0.7")
    names(refusal(SamplingPlan.from_fields, positive_threshold="0.5"), "positive_threshold='0.5'", "write")


def test_an_unknown_flat_field_is_refused_with_the_closest_name():
    names(refusal(explicit_fields, {"max_round": 3}), "max_round=3", "'max_rounds'")


def test_an_unknown_flat_field_far_from_every_name_gets_no_hint():
    assert "Did you mean" not in refusal(explicit_fields, {"banana": 1})


def test_a_known_flat_field_of_the_wrong_type_shows_its_default():
    names(refusal(SamplingPlan.from_fields, exit_rule="pos", max_rounds="many"), "max_rounds='many'", "max_rounds=4")
    assert SamplingPlan.from_fields(exit_rule="pos", sample_budget=None, max_rounds=2).section.max_rounds == 2


def test_explicit_fields_drop_none_and_the_group_size_but_keep_a_none_that_means_never():
    given = {"num_generations": 8, "max_rounds": None, "exit_rule": "pos", "skip_unsolvable_draws": None}
    assert explicit_fields(given) == {"exit_rule": "pos", "skip_unsolvable_draws": None}
    assert SamplingPlan.from_fields(skip_unsolvable_draws=None).fields()["skip_unsolvable_draws"] is None


# ------------------------------------------------------------------------------------------------------------------
# The plan
# ------------------------------------------------------------------------------------------------------------------

DEFAULT_FIELDS = {
    "exit_rule": "balance",
    "samples_per_round": 8,
    "max_rounds": 4,
    "futility_threshold": 0.0,
    "first_round": "fixed",
    "later_rounds": "fixed",
    "round_confidence": 0.5,
    "sample_budget": None,
    "prompt_oversampling": 1.0,
    "rounds_per_prompt": None,
    "skip_threshold": None,
    "skip_exploration": 0.05,
    "skip_unsolvable_draws": 64,
    "skip_max_consecutive": 4,
    "generation_schedule": "rounds",
    "positive_threshold": 0.7,
    "advantage_baseline": "pool",
    "pass_rate_memory": False,
    "memory_decay": 0.5,
    "memory_prior_alpha": 1.0,
    "memory_prior_beta": 1.0,
    "objective": "linear",
    "objective_alpha": 0.5,
    "objective_weighting": "explicit",
    "objective_epsilon": 0.05,
}


def test_fields_lists_the_section_then_the_schedule_then_the_shared_fields_without_the_group_size():
    fields = SamplingPlan.from_fields(num_generations=8).fields()
    assert fields == DEFAULT_FIELDS
    assert list(fields) == list(DEFAULT_FIELDS)


def test_from_fields_applies_the_preset():
    plan = SamplingPlan.from_fields("est", num_generations=8)
    assert (plan.generation_schedule, plan.n, plan.memory.enabled, plan.objective.function) == ("est", 8, True, "log")


def test_a_section_that_is_not_a_schedules_section_is_refused():
    names(refusal(SamplingPlan, "rounds"), "section='rounds'")


def test_a_weighting_that_sizes_samples_needs_a_schedule_that_allocates_them():
    message = refusal(SamplingPlan.from_fields, objective="log", objective_weighting="hybrid")
    names(message, "objective_weighting='hybrid'", "generation_schedule='rounds'", "objective_weighting='explicit'")
    assert SamplingPlan.from_fields(objective="log", objective_weighting="explicit").objective.function == "log"


def test_replace_changes_the_group_size_and_keeps_the_other_fields():
    plan = SamplingPlan.from_fields(num_generations=4, exit_rule="pos", max_rounds=2)
    wider = plan.replace(num_generations=8)
    assert wider.n == 8
    assert wider.fields() == {**DEFAULT_FIELDS, "exit_rule": "pos", "max_rounds": 2}
    grpo = plan.replace(sample_budget=None, generation_schedule="grpo")
    assert grpo.generation_schedule == "grpo" and grpo.section.exits(4).samples_per_round == 4
    back = grpo.replace(generation_schedule="rounds", exit_rule="pos")  # the schedule is explicit, as is the rule
    assert back.fields() == {**DEFAULT_FIELDS, "exit_rule": "pos"}


def test_from_config_reads_the_preset_and_the_group_size_and_takes_absent_attributes_as_not_given():
    config = SimpleNamespace(num_generations=6, sampling="dapo", memory_decay=0.9)
    plan = SamplingPlan.from_config(config)
    assert plan.n == 6
    assert plan.fields() == {
        **DEFAULT_FIELDS,
        "exit_rule": "mixed",
        "samples_per_round": 6,
        "prompt_oversampling": 3.0,
        "rounds_per_prompt": 1,
        "memory_decay": 0.9,
    }


@pytest.mark.parametrize("sampling", ["est", "balance"])
def test_from_config_builds_every_schedule_from_the_attributes_a_config_holds(sampling):
    # an attribute at its unset value is not given: None, or skip_unsolvable_draws's 64 (None means "never skip")
    config = SimpleNamespace(num_generations=4, sampling=sampling, skip_unsolvable_draws=64, est_max_samples=None)
    assert SamplingPlan.from_config(config) == SamplingPlan.from_fields(sampling=sampling)


@pytest.mark.parametrize(("use_vllm", "vllm_mode"), [(False, "server"), (True, "colocate")])
def test_from_config_checks_the_trainers_needs(use_vllm, vllm_mode):
    streaming = dict(num_generations=4, generation_schedule="streaming", exit_rule="balance")
    config = SimpleNamespace(**streaming, use_vllm=use_vllm, vllm_mode=vllm_mode)
    names(
        refusal(SamplingPlan.from_config, config), f"use_vllm={use_vllm!r}", "Set use_vllm=True and vllm_mode='server'"
    )
    server = SimpleNamespace(**streaming, use_vllm=True, vllm_mode="server")
    assert SamplingPlan.from_config(server).generation_schedule == "streaming"


# ------------------------------------------------------------------------------------------------------------------
# The fields' defaults
# ------------------------------------------------------------------------------------------------------------------


def test_plan_defaults_are_every_flat_fields_default():
    assert set(defaults()) == {f.name for f in flat_fields()}
    assert defaults() == {
        **DEFAULT_FIELDS,
        "streaming_chunk": 1,
        "streaming_max_retries": 2,
        "streaming_window": None,
        "streaming_request_timeout": 600.0,
        "est_min_samples": 2,
        "est_max_samples": None,
        "pilot_samples": None,
        "commit_samples": None,
        "pilot_band_low": 0.0,
        "pilot_band_high": 1.0,
        "commit_priority": "variance",
        "pilot_oversampling": 2.0,
    }


def test_every_field_a_preset_sets_is_a_flat_field():
    assert set(PRESET_FIELDS) <= set(defaults())


def test_check_value_refuses_none_unless_the_field_is_optional():
    with pytest.raises(ValueError, match=r"x=None"):
        check_value("x", None, float, within="(0, 1]")
    check_value("x", None, float, optional=True, within="(0, 1]")
