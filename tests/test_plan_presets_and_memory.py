"""`SamplingPlan` pieces the trainer uses and the torch-free tests did not reach: preset resolution
(`preset_fields`), the trainer's memory requirement (`require_memory`), `from_config` and `replace`."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trl_ada.plan import BASE_FIELDS, PRESETS, Memory, SamplingPlan, flat_fields, preset_fields
from trl_ada.schedules.rounds import require_memory


def test_without_a_preset_the_fields_resolve_to_the_base_defaults():
    assert preset_fields(None, 4, {}) == BASE_FIELDS
    assert preset_fields(None, 4, {name: None for name in BASE_FIELDS}) == BASE_FIELDS  # None means "not given"


def test_a_preset_fills_what_the_user_left_unset_and_the_user_wins():
    dapo = preset_fields("dapo", 6, {"max_rounds": 2, "sample_budget": None})
    assert dapo == {
        **BASE_FIELDS,
        "exit_rule": "mixed",
        "samples_per_round": 6,  # n
        "max_rounds": 2,  # given
        "rounds_per_prompt": 1,
        "prompt_oversampling": 3.0,
    }
    budgeted = preset_fields("budgeted_balance", 4, {"futility_threshold": 0.0})
    assert budgeted["sample_budget"] == 8.0 and budgeted["futility_threshold"] == 0.0
    assert budgeted["first_round"] == budgeted["later_rounds"] == "prior" and budgeted["pass_rate_memory"] is True
    assert preset_fields("grpo", 4, {}) == {**BASE_FIELDS, "exit_rule": "none"}


def test_an_unknown_preset_names_the_choices():
    with pytest.raises(ValueError) as refused:
        preset_fields("dapo2", 4, {})
    assert str(refused.value) == (
        f"sampling='dapo2' is not a preset; choose one of {sorted(PRESETS)}, or leave it unset (None) and set the "
        "fields yourself."
    )


def test_the_trainer_needs_the_memory_for_a_prior_first_round_and_for_skipping():
    with pytest.raises(ValueError) as refused:
        require_memory(SamplingPlan.from_fields(first_round="prior"))
    assert str(refused.value) == (
        "first_round='prior' sizes the first round from the pass-rate memory, but pass_rate_memory=False. Set "
        "pass_rate_memory=True, or use first_round='fixed'."
    )
    with pytest.raises(ValueError) as refused:
        require_memory(SamplingPlan.from_fields(skip_threshold=0.9, prompt_oversampling=2.0))
    assert str(refused.value) == (
        "skip_threshold=0.9 skips candidates from the pass-rate memory, but pass_rate_memory=False. Set "
        "pass_rate_memory=True, or skip_threshold=None."
    )
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
    with pytest.raises(ValueError, match=r"^first_round='prior' sizes the first round"):
        SamplingPlan.from_config(SimpleNamespace(**{**fields, "first_round": "prior"}))


def test_replace_changes_a_field_and_validates_again():
    plan = SamplingPlan.from_fields(samples_per_round=4)
    assert plan.replace(max_rounds=2) == SamplingPlan.from_fields(samples_per_round=4, max_rounds=2)
    assert plan.section.samples_per_round == 4 and plan.section.max_rounds == 4  # the original is unchanged
    with pytest.raises(ValueError, match=r"^samples_per_round=0"):
        plan.replace(samples_per_round=0)


def test_rounds_per_prompt_needs_rounds_to_cap():
    with pytest.raises(ValueError) as refused:
        SamplingPlan.from_fields(exit_rule="none", rounds_per_prompt=1)
    assert str(refused.value) == (
        "rounds_per_prompt=1 with exit_rule='none': plain GRPO samples one round per prompt, so there are no rounds "
        "to cap. Remove rounds_per_prompt, or use an adaptive exit rule."
    )
    with pytest.raises(ValueError) as refused:
        SamplingPlan.from_fields(max_rounds=2, rounds_per_prompt=3)
    assert str(refused.value) == (
        "rounds_per_prompt=3 is more than max_rounds=2, the rounds of the whole step. Lower rounds_per_prompt, or "
        "raise max_rounds."
    )
    assert SamplingPlan.from_fields(max_rounds=2, rounds_per_prompt=2).section.candidates.rounds_per_prompt == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_generations": True}, "num_generations=True: must be an integer, not a boolean."),
        ({"samples_per_round": True}, "samples_per_round=True: must be an integer, not a boolean."),
        ({"samples_per_round": 0}, "samples_per_round=0: must be an integer >= 1 (the paper uses 8)."),
        ({"max_rounds": 0}, "max_rounds=0: must be an integer >= 1 (the paper uses 4)."),
        ({"max_rounds": 2.0}, "max_rounds=2.0: must be an integer, not a float; write max_rounds=2."),
        (
            {"first_round": "adaptive"},
            "first_round='adaptive': choose one of ['fixed', 'prior'] ('fixed': rounds of samples_per_round; 'prior': "
            "rounds sized from the pass-rate posterior).",
        ),
        (
            {"advantage_baseline": "batch"},
            "advantage_baseline='batch' is not supported; choose one of ['pool', 'group'].",
        ),
        (
            {"skip_threshold": 1.5, "prompt_oversampling": 2.0, "pass_rate_memory": True},
            "skip_threshold=1.5: must be in (0, 1] (e.g. 0.9 skips a candidate whose posterior chance of a group "
            "all right, or of skip_unsolvable_draws completions all wrong, is at least 90%), or None to never skip.",
        ),
    ],
)
def test_an_impossible_plan_gets_the_exact_reason(fields, message):
    with pytest.raises(ValueError) as refused:
        SamplingPlan.from_fields(**fields)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"memory_decay": True}, "memory_decay=True: must be a number, not a boolean."),
        ({"memory_decay": "0.5"}, "memory_decay='0.5': must be a number, not a str; write memory_decay=0.5."),
        (
            {"streaming_window": 4.0},
            "streaming_window=4.0: must be an integer or None, not a float; write streaming_window=4.",
        ),
        ({"est_max_samples": "x"}, "est_max_samples='x': must be an integer or None, not a str."),
        ({"objective_alpha": [1]}, "objective_alpha=[1]: must be a number, not a list (e.g. objective_alpha=0.5)."),
        ({"exit_rule": ["pos"]}, "exit_rule=['pos']: must be a string, not a list (e.g. exit_rule='balance')."),
    ],
)
def test_every_field_is_type_checked_whatever_the_schedule_with_how_to_write_it(fields, message):
    with pytest.raises(ValueError) as refused:  # the rounds schedule reads neither the window nor Est's bounds
        SamplingPlan.from_fields(**fields)
    assert str(refused.value) == message


def test_an_unknown_exit_rule_is_refused_by_the_plan():
    with pytest.raises(ValueError, match=r"^exit_rule='balanse' is not a known exit rule.*Did you mean 'balance'\?"):
        SamplingPlan.from_fields(exit_rule="balanse")


@pytest.mark.parametrize("decay", [0.0, -0.5, 1.5, float("nan")])
def test_memory_decay_must_be_in_zero_one(decay):
    with pytest.raises(ValueError) as refused:
        SamplingPlan.from_fields(memory_decay=decay)
    assert str(refused.value) == (
        f"memory_decay={decay!r}: must be in (0, 1] (a number); 1 keeps all past evidence, 0.5 halves the weight of "
        "earlier visits at each visit."
    )


@pytest.mark.parametrize("decay", [1.0, 0.5, 1e-6])
def test_memory_decay_in_zero_one_is_accepted(decay):
    assert SamplingPlan.from_fields(memory_decay=decay).memory.decay == decay


@pytest.mark.parametrize("flag", [1, "yes", None])
def test_pass_rate_memory_must_be_a_boolean(flag):
    with pytest.raises(ValueError) as refused:
        Memory(enabled=flag)
    assert str(refused.value) == f"pass_rate_memory={flag!r}: must be True or False."
    if flag is None:  # a flat field given as None is not given: the config's and the recipes' spelling of unset
        assert SamplingPlan.from_fields(pass_rate_memory=None).memory.enabled is False
        return
    with pytest.raises(ValueError) as refused:
        SamplingPlan.from_fields(pass_rate_memory=flag)
    assert str(refused.value) == f"pass_rate_memory={flag!r}: must be True or False."


def test_flat_construction_and_flat_reads_still_work_with_a_warning_naming_the_new_spelling():
    with pytest.warns(DeprecationWarning, match=r"^SamplingPlan\(\*\*flat_fields\) is deprecated: write"):
        plan = SamplingPlan(num_generations=4, exit_rule="pos", samples_per_round=8, max_rounds=2)
    assert plan == SamplingPlan.from_fields(num_generations=4, exit_rule="pos", samples_per_round=8, max_rounds=2)
    with pytest.warns(DeprecationWarning, match=r"^SamplingPlan\.max_rounds is deprecated: read plan\.fields\(\)"):
        assert plan.max_rounds == 2
    with pytest.warns(DeprecationWarning, match="memory_decay"):
        assert plan.memory_decay == 0.5  # a shared record's field, by its flat name
    with pytest.raises(AttributeError, match="no attribute 'sampels_per_round'"):
        plan.sampels_per_round  # noqa: B018
