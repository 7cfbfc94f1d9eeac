"""`resolve`: flat fields (explicit, a preset's, a host's base, the defaults) into a plan, the one-line refusal of
every field the resolved schedule has no use for, under the synchronous and the asynchronous host; the presets as
constructors; the docs' table of the fields (`fields_markdown`, `with_fields_markdown`). Torch-free."""

from __future__ import annotations

import pytest

from trl_ada.async_grpo.rollout import ASYNCHRONOUS, PromptStreaming
from trl_ada.plan import (
    FIELDS_BEGIN,
    FIELDS_END,
    PRESETS,
    Host,
    fields_markdown,
    preset_unused_fields,
    resolve,
    with_fields_markdown,
)
from trl_ada.schedules.est import Est

PRESET_NAMES = "['balance', 'budgeted_balance', 'dapo', 'est', 'grpo', 'pilot_commit', 'pos']"
ASYNC_WHY = (
    "each prompt samples on its own, as generation_schedule='streaming' does: there is no step's batch to refill, "
    "skip from or budget, and no round to size"
)
ROUNDS_SUMMARY = (
    "each round is one batched generation call for the active prompts of the batch, with no requests in flight to "
    "window and no allocation"
)
STREAMING_SUMMARY = (
    "streaming keeps a window of completions of each prompt of the batch in flight, with no rounds to size and no "
    "candidates beyond the batch"
)
EST_SUMMARY = "Est samples one allocated round per step and trains every sample (no exit rule, rounds or candidates)"
CHOOSE_ROUNDS = "sample in rounds (sampling='balance', or generation_schedule='rounds')"


def refusal(given, **kwargs) -> str:
    with pytest.raises(ValueError) as excinfo:
        resolve(given, **kwargs)
    return str(excinfo.value)


# ------------------------------------------------------------------------------------------------------------------
# Precedence: explicit > preset > host base > default
# ------------------------------------------------------------------------------------------------------------------


def test_explicit_wins_over_the_preset_which_wins_over_the_host_base_which_wins_over_the_defaults():
    host = Host(base={"exit_rule": "pos", "samples_per_round": 6, "max_rounds": 3, "round_confidence": 0.6})
    fields = resolve({"max_rounds": 2}, sampling="balance", host=host).fields()
    assert fields["max_rounds"] == 2  # explicit
    assert (fields["exit_rule"], fields["samples_per_round"]) == ("balance", 8)  # the preset's
    assert fields["round_confidence"] == 0.6  # the host's base
    assert fields["first_round"] == "fixed"  # the default


def test_a_value_equal_to_the_default_given_explicitly_still_wins_over_the_preset():
    assert PRESETS["dapo"](num_generations=4, samples_per_round=8).fields()["samples_per_round"] == 8


def test_the_group_size_is_resolves_own_not_a_host_bases():
    assert resolve({"num_generations": 6}).num_generations == 6
    assert resolve({}, num_generations=6, host=Host(base={"num_generations": 8})).num_generations == 6


# ------------------------------------------------------------------------------------------------------------------
# Presets
# ------------------------------------------------------------------------------------------------------------------


def test_calling_a_preset_builds_its_plan_for_the_group_size():
    plan = PRESETS["dapo"](num_generations=6)
    assert plan.num_generations == 6 and plan.generation_schedule == "rounds"
    fields = plan.fields()
    assert (fields["exit_rule"], fields["samples_per_round"], fields["max_rounds"]) == ("mixed", 6, 4)
    assert (fields["prompt_oversampling"], fields["rounds_per_prompt"]) == (3.0, 1)


def test_a_preset_called_without_a_group_size_uses_n_4_and_explicit_fields_win():
    assert PRESETS["dapo"]().fields()["samples_per_round"] == 4
    assert PRESETS["dapo"](num_generations=6, max_rounds=2).fields()["max_rounds"] == 2


def test_a_bad_preset_name_or_type_is_refused_with_the_list_of_presets():
    assert refusal({}, sampling="dapoo") == (
        f"sampling='dapoo' is not a preset; choose one of {PRESET_NAMES}, or leave it unset (None) and set the "
        "fields yourself."
    )
    assert refusal({}, sampling=3) == (
        f"sampling=3: must be the name of one preset (a string), one of {PRESET_NAMES}, e.g. sampling='est'; or "
        "None for no preset."
    )


@pytest.mark.parametrize(
    ("sampling", "synchronous", "asynchronous"),
    [
        ("grpo", [], []),
        ("balance", [], []),
        ("pos", [], []),
        ("dapo", [], ["prompt_oversampling", "rounds_per_prompt"]),
        ("budgeted_balance", [], ["sample_budget", "first_round", "later_rounds"]),
        ("est", [], []),
    ],
)
def test_the_fields_a_preset_sets_that_its_schedule_has_no_use_for(sampling, synchronous, asynchronous):
    assert preset_unused_fields(sampling, 4) == synchronous
    assert preset_unused_fields(sampling, 4, ASYNCHRONOUS) == asynchronous


def test_a_preset_whose_schedule_the_host_does_not_run_is_unusable_as_a_whole():
    only_est = Host(schedules={"est": Est})
    assert preset_unused_fields("balance", 4, only_est) == ["generation_schedule"]
    assert preset_unused_fields("est", 4, only_est) == []


# ------------------------------------------------------------------------------------------------------------------
# Refusals of the synchronous trainer
# ------------------------------------------------------------------------------------------------------------------


def test_a_preset_setting_fields_the_chosen_schedule_has_no_use_for_is_refused_by_its_name():
    assert refusal({"generation_schedule": "streaming"}, sampling="dapo") == (
        "sampling='dapo' sets prompt_oversampling, rounds_per_prompt, which generation_schedule='streaming' has no "
        f"use for: {STREAMING_SUMMARY}. Remove generation_schedule, or choose a preset that samples so."
    )


def test_a_preset_field_also_given_explicitly_is_refused_as_explicit_not_as_the_presets():
    given = {"generation_schedule": "streaming", "prompt_oversampling": 3.0}
    assert refusal(given, sampling="dapo") == (
        "sampling='dapo' sets rounds_per_prompt, which generation_schedule='streaming' has no use for: "
        f"{STREAMING_SUMMARY}. Remove generation_schedule, or choose a preset that samples so."
    )
    given["rounds_per_prompt"] = 1
    assert refusal(given, sampling="dapo") == (
        f"prompt_oversampling=3.0 has no effect under generation_schedule='streaming': {STREAMING_SUMMARY}. Remove "
        f"prompt_oversampling (or set it to 1.0), or {CHOOSE_ROUNDS}."
    )


def test_an_explicit_field_the_schedule_ignores_is_refused_whatever_its_value():
    assert refusal({"generation_schedule": "est", "samples_per_round": 8}) == (
        f"samples_per_round=8 has no effect under generation_schedule='est': {EST_SUMMARY}. Remove "
        f"samples_per_round, or {CHOOSE_ROUNDS}."
    )


def test_the_refusal_names_the_preset_that_chose_the_schedule():
    assert refusal({"samples_per_round": 8}, sampling="est") == (
        f"samples_per_round=8 has no effect under generation_schedule='est' (set by sampling='est'): {EST_SUMMARY}. "
        f"Remove samples_per_round, or {CHOOSE_ROUNDS}."
    )


def test_a_schedule_given_explicitly_is_not_blamed_on_the_preset():
    assert refusal({"generation_schedule": "est", "samples_per_round": 8}, sampling="est") == (
        f"samples_per_round=8 has no effect under generation_schedule='est': {EST_SUMMARY}. Remove "
        f"samples_per_round, or {CHOOSE_ROUNDS}."
    )


def test_a_field_of_another_schedule_under_a_preset_that_keeps_rounds_names_the_schedule_that_uses_it():
    assert refusal({"streaming_window": 4}, sampling="budgeted_balance", num_generations=4) == (
        f"streaming_window=4 has no effect under generation_schedule='rounds': {ROUNDS_SUMMARY}. Remove "
        "streaming_window, or use generation_schedule='streaming'."
    )


def test_a_field_whose_default_means_off_is_refused_with_its_default_as_the_alternative_and_accepted_at_it():
    assert refusal({"futility_threshold": 0.05}, sampling="est") == (
        f"futility_threshold=0.05 has no effect under generation_schedule='est' (set by sampling='est'): "
        f"{EST_SUMMARY}. Remove futility_threshold (or set it to 0.0), or {CHOOSE_ROUNDS}."
    )
    assert resolve({"futility_threshold": 0.0}, sampling="est").generation_schedule == "est"


def test_plain_grpo_refuses_a_round_cap_set_by_the_user_naming_the_preset():
    assert refusal({"max_rounds": 4}, sampling="grpo") == (
        "max_rounds=4 has no effect with sampling='grpo' (exit_rule='none'): plain GRPO samples one round of exactly "
        "num_generations=4 per prompt. Remove max_rounds (or set it to 1), or choose an adaptive exit rule (e.g. "
        "sampling='balance') to sample in rounds."
    )


def test_plain_grpo_by_exit_rule_refuses_samples_per_round_other_than_n_and_accepts_what_it_does_anyway():
    assert refusal({"exit_rule": "none", "samples_per_round": 8, "num_generations": 6}) == (
        "samples_per_round=8 has no effect with exit_rule='none': plain GRPO samples one round of exactly "
        "num_generations=6 per prompt. Remove samples_per_round (or set it to 6), or choose an adaptive exit rule "
        "(e.g. sampling='balance') to sample in rounds."
    )
    plan = resolve({"exit_rule": "none", "samples_per_round": 6, "max_rounds": 1, "num_generations": 6})
    assert (plan.section.samples_per_round, plan.section.max_rounds) == (6, 1)


def test_an_unknown_schedule_is_refused_with_the_hosts_schedules():
    assert refusal({"generation_schedule": "nope"}) == (
        "generation_schedule='nope': choose one of ['rounds', 'streaming', 'est', 'pilot_commit']."
    )
    assert refusal({"generation_schedule": "nope"}, host=ASYNCHRONOUS) == (
        "generation_schedule='nope': choose one of ['streaming', 'est']."
    )


# ------------------------------------------------------------------------------------------------------------------
# Refusals of the asynchronous trainer
# ------------------------------------------------------------------------------------------------------------------


def test_the_asynchronous_trainer_refuses_a_synchronous_schedule_naming_its_default():
    assert refusal({"generation_schedule": "rounds"}, host=ASYNCHRONOUS) == (
        f"generation_schedule='rounds' is not supported by the asynchronous trainer ({ASYNC_WHY}). Use "
        "generation_schedule='streaming' (the default) or sampling='est'."
    )


def test_the_asynchronous_trainer_refuses_a_preset_it_cannot_run_naming_the_presets_it_can():
    assert refusal({}, sampling="dapo", host=ASYNCHRONOUS) == (
        "sampling='dapo' is not supported by the asynchronous trainer: the preset sets prompt_oversampling, "
        f"rounds_per_prompt ({ASYNC_WHY}). Choose one of ['balance', 'est', 'grpo', 'pos'], or train with the "
        "synchronous ReinforceAdaTrainer."
    )


def test_the_asynchronous_trainer_refuses_a_field_no_schedule_of_it_uses():
    assert refusal({"sample_budget": 8.0}, host=ASYNCHRONOUS) == (
        f"sample_budget=8.0 is not supported by the asynchronous trainer ({ASYNC_WHY}). Remove sample_budget, or "
        "train with the synchronous ReinforceAdaTrainer."
    )
    assert refusal({"prompt_oversampling": 2.0}, host=ASYNCHRONOUS) == (
        f"prompt_oversampling=2.0 is not supported by the asynchronous trainer ({ASYNC_WHY}). Remove "
        "prompt_oversampling (or set it to 1.0), or train with the synchronous ReinforceAdaTrainer."
    )
    assert resolve({"prompt_oversampling": 1.0}, host=ASYNCHRONOUS).generation_schedule == "streaming"


def test_the_asynchronous_trainer_names_its_own_schedule_as_the_fix():
    assert refusal({"samples_per_round": 8}, sampling="est", host=ASYNCHRONOUS) == (
        f"samples_per_round=8 has no effect under generation_schedule='est' (set by sampling='est'): {EST_SUMMARY}. "
        "Remove samples_per_round, or use generation_schedule='streaming' (the default)."
    )


def test_a_section_of_the_asynchronous_trainer_has_no_synchronous_schedule_class():
    with pytest.raises(NotImplementedError) as excinfo:
        PromptStreaming().schedule_class()
    assert str(excinfo.value) == "PromptStreaming runs in no synchronous trainer."


# ------------------------------------------------------------------------------------------------------------------
# The docs' table
# ------------------------------------------------------------------------------------------------------------------

HEADINGS = [
    "**Adaptive sampling (Reinforce-Ada, arXiv 2510.04996)**",
    "**The pass-rate memory and budgeted rounds (all off by default)**",
    "**Dynamic sampling: candidates, refill and pre-rollout skipping (all off by default)**",
    "**How generation is scheduled**",
    "**The objective (arXiv 2510.04996v3: J_f = E[f(p)], prompt weight f'(p))**",
]
HEADER = "| field | type | default | schedules | meaning |"
SEPARATOR = "| --- | --- | --- | --- | --- |"


def test_the_fields_table_has_one_headed_table_per_group_in_the_groups_order():
    lines = fields_markdown().split("\n")
    assert [line for line in lines if line.startswith("**")] == HEADINGS
    for heading in HEADINGS:
        at = lines.index(heading)
        assert lines[at + 1 : at + 4] == ["", HEADER, SEPARATOR]
        assert at == 0 or lines[at - 1] == ""
    assert lines[-1] == ""


def test_each_group_table_lists_its_fields():
    lines = fields_markdown().split("\n")
    first, last = lines.index(HEADINGS[0]), lines.index(HEADINGS[-1])
    names = [line.split("`")[1] for line in lines[first + 4 : lines.index(HEADINGS[1]) - 1]]
    assert names == ["exit_rule", "samples_per_round", "max_rounds", "positive_threshold", "advantage_baseline"]
    names = [line.split("`")[1] for line in lines[last + 4 : -1]]
    assert names == ["objective", "objective_alpha", "objective_weighting", "objective_epsilon"]


def test_a_fields_row_gives_its_type_default_schedules_and_meaning():
    lines = fields_markdown().split("\n")
    assert (
        "| `positive_threshold` | `float` | `0.7` | all | A completion is positive when its weighted reward is "
        "strictly greater than this value (0.7 suits 0/1 rewards; with several reward functions it applies to "
        "their weighted sum). |"
    ) in lines
    assert (
        "| `max_rounds` | `int` | `4` | `rounds`, `streaming` | N: the round cap. A prompt draws at most M·N "
        "completions per step. |"
    ) in lines
    assert (
        "| `est_max_samples` | `int` or `None` | `None` | `est` | Est: N_max, the most samples a prompt is "
        "allocated, at least n; None = 4n. |"
    ) in lines


def test_the_page_gets_the_table_between_its_markers_and_keeps_the_rest_byte_for_byte():
    after = f"\nThe table sits between `{FIELDS_BEGIN}` and `{FIELDS_END}`.\n"
    page = f"# Configuration\n\n{FIELDS_BEGIN}\nthe old table\n{FIELDS_END}{after}"
    assert with_fields_markdown(page) == (
        f"# Configuration\n\n{FIELDS_BEGIN}\n\n{fields_markdown()}\n{FIELDS_END}{after}"
    )
