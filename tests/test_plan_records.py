"""The plan's records as a user meets them: the one-line refusal of each bad value (the whole message), the
boundaries of the ranges, the flat-field type checks, the deprecated flat reads and the module's computed defaults
(`PLAN_DEFAULTS`, `BASE_FIELDS`), `from_config`, `from_fields`, `replace` and `fields()`. Torch-free."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

import trl_ada.plan as plan_module
from trl_ada.plan import (
    PRESET_FIELDS,
    Memory,
    Objective,
    SamplingPlan,
    check_field_types,
    check_integer,
    check_type,
    explicit_fields,
    flat_fields,
    validate_objective,
    validate_sampling,
)


def refusal(build, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as refused:
        build(*args, **kwargs)
    return str(refused.value)


# ------------------------------------------------------------------------------------------------------------------
# The objective
# ------------------------------------------------------------------------------------------------------------------


def test_an_unknown_objective_lists_the_three_and_what_each_maximises():
    assert refusal(validate_objective, "sqrt", 0.5, "explicit", 0.05) == (
        "objective='sqrt': choose one of ['linear', 'log', 'power'] ('linear': GRPO's E[p]; 'log': E[log p], "
        "weight 1/p; 'power': E[p^objective_alpha])."
    )


@pytest.mark.parametrize("alpha", [0, -0.5, "0.5", float("nan")])
def test_the_power_objective_refuses_an_alpha_that_is_not_a_positive_number(alpha):
    assert refusal(validate_objective, "power", alpha, "explicit", 0.05) == (
        f"objective_alpha={alpha!r}: objective='power' maximises E[p^alpha] and needs alpha > 0 (0 < alpha < 1 "
        "favours hard prompts, e.g. 0.5; 1 is the linear objective)."
    )


def test_alpha_just_above_zero_is_a_power_objective_and_other_objectives_ignore_alpha():
    assert Objective(function="power", alpha=1e-9).alpha == 1e-9
    assert Objective(function="linear", alpha=0.0).function == "linear"
    validate_objective("log", -1.0, "explicit", 0.05)


def test_an_unknown_weighting_lists_the_four_and_what_each_does():
    assert refusal(validate_objective, "log", 0.5, "both", 0.05) == (
        "objective_weighting='both': choose one of ['explicit', 'implicit', 'hybrid', 'variance'] ('explicit': the "
        "weight multiplies the advantages; 'implicit': it sizes the samples; 'hybrid': its square root does both; "
        "'variance': the variance-optimal split of the log weight)."
    )


def test_the_variance_weighting_needs_the_log_objective():
    assert Objective(function="log", weighting="variance").weighting == "variance"
    assert refusal(Objective, function="linear", weighting="variance") == (
        "objective_weighting='variance' splits the log objective's weight 1/p, but objective='linear'. "
        "Set objective='log', or choose another objective_weighting."
    )


@pytest.mark.parametrize("epsilon", [1e-9, 0.05, 1.0])
def test_epsilon_in_the_half_open_unit_interval_is_accepted(epsilon):
    assert Objective(epsilon=epsilon).epsilon == epsilon


@pytest.mark.parametrize("epsilon", [0.0, -0.1, 1.5, float("inf"), float("nan")])
def test_epsilon_outside_the_half_open_unit_interval_is_refused(epsilon):
    assert refusal(Objective, epsilon=epsilon) == (
        f"objective_epsilon={epsilon!r}: the floor added to a pass rate before weighting must be in (0, 1] "
        "(e.g. 0.05: the log objective's weight is then at most 1/0.05 = 20)."
    )


# ------------------------------------------------------------------------------------------------------------------
# The memory and the records' type checks
# ------------------------------------------------------------------------------------------------------------------


def test_memory_decay_one_keeps_everything_and_zero_is_refused():
    assert Memory(decay=1.0).decay == 1.0
    assert refusal(Memory, decay=0.0) == (
        "memory_decay=0.0: must be in (0, 1] (a number); 1 keeps all past evidence, 0.5 halves the weight of "
        "earlier visits at each visit."
    )


@pytest.mark.parametrize("name", ["prior_alpha", "prior_beta"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan")])
def test_the_memory_prior_needs_positive_parameters(name, value):
    assert refusal(Memory, **{name: value}) == (
        f"memory_{name}={value!r}: the Beta prior of an unseen prompt's pass rate needs positive parameters "
        "(e.g. 1 and 1: uniform; 1 and 16: most prompts are hard)."
    )
    assert Memory(**{name: 1e-9}).prior == ((1e-9, 1.0) if name == "prior_alpha" else (1.0, 1e-9))


def test_a_record_field_of_the_wrong_type_names_its_flat_field_and_its_default():
    assert refusal(Memory, decay="high") == "memory_decay='high': must be a number, not a str (e.g. memory_decay=0.5)."
    assert refusal(Objective, function=1) == "objective=1: must be a string, not a int (e.g. objective='linear')."


def test_check_type_refuses_none_unless_the_field_is_optional():
    assert refusal(check_type, "max_rounds", None, int) == "max_rounds=None: must be an integer, not a NoneType."
    check_type("sample_budget", None, float, optional=True)


def test_check_integer_refuses_a_boolean_and_a_value_below_the_minimum():
    assert refusal(check_integer, "max_rounds", True, 1, ".") == "max_rounds=True: must be an integer, not a boolean."
    assert refusal(check_integer, "max_rounds", 0, 1, " (the paper uses 4).") == (
        "max_rounds=0: must be an integer >= 1 (the paper uses 4)."
    )


def test_a_sampling_plan_with_a_non_finite_positive_threshold_is_refused():
    assert refusal(validate_sampling, 4, 8, 4, float("nan")) == (
        "positive_threshold=nan: must be a finite number (0.7 for 0/1 rewards; a completion is positive when its "
        "reward is strictly greater)."
    )


def test_an_unknown_flat_field_is_refused_with_the_closest_name():
    assert refusal(check_field_types, {"max_round": 3}) == (
        "max_round=3: not a sampling field (`trl_ada.plan.flat_fields()`). Did you mean 'max_rounds'?"
    )


def test_an_unknown_flat_field_far_from_every_name_gets_no_hint():
    assert (
        refusal(check_field_types, {"banana": 1}) == "banana=1: not a sampling field (`trl_ada.plan.flat_fields()`)."
    )


def test_a_known_flat_field_of_the_wrong_type_shows_its_default():
    assert refusal(check_field_types, {"exit_rule": "pos", "max_rounds": "many"}) == (
        "max_rounds='many': must be an integer, not a str (e.g. max_rounds=4)."
    )
    check_field_types({"exit_rule": "pos", "sample_budget": None, "max_rounds": 2})


def test_explicit_fields_drop_none_and_the_group_size_but_keep_a_none_that_means_never():
    given = {"num_generations": 8, "max_rounds": None, "exit_rule": "pos", "skip_unsolvable_draws": None}
    assert explicit_fields(given) == {"exit_rule": "pos", "skip_unsolvable_draws": None}
    assert explicit_fields({"not_a_field": None}) == {}
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
    assert refusal(SamplingPlan, "rounds") == ("section='rounds': must be a schedule's section (schedules.SCHEDULES).")


def test_a_weighting_that_sizes_samples_needs_a_schedule_that_allocates_them():
    assert refusal(SamplingPlan.from_fields, objective="log", objective_weighting="hybrid") == (
        "objective_weighting='hybrid' sizes each prompt's samples by its weight, but generation_schedule='rounds' "
        "does not allocate samples (its rounds realise the implicit part by their exit rule). Use "
        "objective_weighting='explicit' (the weight on the advantages: the paper's 1/p for Seq under "
        "objective='log'), or generation_schedule='est'."
    )


def test_replace_changes_the_group_size_and_keeps_the_other_fields():
    plan = SamplingPlan.from_fields(num_generations=4, exit_rule="pos", max_rounds=2)
    wider = plan.replace(num_generations=8)
    assert wider.n == 8
    assert wider.fields() == {**DEFAULT_FIELDS, "exit_rule": "pos", "max_rounds": 2}
    assert plan.replace(sample_budget=None, exit_rule="none").fields()["samples_per_round"] == 4


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
    assert refusal(SamplingPlan.from_config, config) == (
        f"generation_schedule='streaming' sends requests to a vLLM server, but use_vllm={use_vllm!r} and "
        f"vllm_mode={vllm_mode!r}. Set use_vllm=True and vllm_mode='server', or use generation_schedule='rounds' "
        "(the default, which every backend supports)."
    )
    server = SimpleNamespace(**streaming, use_vllm=True, vllm_mode="server")
    assert SamplingPlan.from_config(server).schedule == "streaming"


# ------------------------------------------------------------------------------------------------------------------
# Deprecated flat reads and the module's computed defaults
# ------------------------------------------------------------------------------------------------------------------


def test_a_flat_read_warns_and_returns_the_plans_value_or_the_fields_default():
    plan = SamplingPlan.from_fields(exit_rule="pos", samples_per_round=6)
    with pytest.warns(DeprecationWarning) as warned:
        assert plan.samples_per_round == 6
    assert str(warned[0].message) == (
        "SamplingPlan.samples_per_round is deprecated: read plan.fields()['samples_per_round'], or the field of its "
        "section."
    )
    assert warned[0].filename != plan_module.__file__  # it points at the reading line, not into the plan module
    with pytest.warns(DeprecationWarning, match=r"^SamplingPlan\.streaming_chunk is deprecated"):
        assert plan.streaming_chunk == 1  # a field of another schedule reads as its default


def test_an_unknown_attribute_of_a_plan_is_an_attribute_error():
    with pytest.raises(AttributeError) as missing:
        SamplingPlan.from_fields().not_a_field  # noqa: B018
    assert str(missing.value) == "'SamplingPlan' object has no attribute 'not_a_field'"


def test_private_names_and_an_unset_section_are_missing_without_reading_the_flat_fields(monkeypatch):
    plan = SamplingPlan.from_fields()

    def unreachable():
        raise AssertionError("the flat fields were read")

    monkeypatch.setattr(plan_module, "_defaults", unreachable)
    assert copy.copy(plan) == plan
    assert not hasattr(plan, "_private")
    assert not hasattr(object.__new__(SamplingPlan), "section")


def test_plan_defaults_are_every_flat_fields_default():
    defaults = plan_module.PLAN_DEFAULTS
    assert set(defaults) == {f.name for f in flat_fields()}
    assert defaults == {
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


def test_base_fields_are_the_defaults_of_the_fields_a_preset_sets():
    assert plan_module.BASE_FIELDS == {
        "exit_rule": "balance",
        "samples_per_round": 8,
        "max_rounds": 4,
        "prompt_oversampling": 1.0,
        "rounds_per_prompt": None,
        "pass_rate_memory": False,
        "sample_budget": None,
        "first_round": "fixed",
        "later_rounds": "fixed",
        "futility_threshold": 0.0,
        "generation_schedule": "rounds",
        "memory_decay": 0.5,
        "objective": "linear",
        "objective_weighting": "explicit",
    }
    assert list(plan_module.BASE_FIELDS) == list(PRESET_FIELDS)


def test_an_unknown_module_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError) as missing:
        plan_module.PLAN_DEFAULT  # noqa: B018
    assert str(missing.value) == "module 'trl_ada.plan' has no attribute 'PLAN_DEFAULT'"
