"""`resolve`: flat fields (explicit, a preset's, a base, the defaults) into a plan, the one-line refusal of every
field the resolved schedule does not use, under the synchronous and the asynchronous host (checked for the field, its
value, the schedule, the schedules that use it and a fix that works); the presets as constructors; the docs' table of
the fields (`fields_markdown`, `with_generated_tables`). Torch-free."""

from __future__ import annotations

import pytest
from refusals import names, refusal

from trl_ada.fields_table import FIELDS_BEGIN, FIELDS_END, fields_markdown, with_generated_tables
from trl_ada.plan import (
    ASYNCHRONOUS,
    PRESETS,
    SYNCHRONOUS,
    Host,
    preset_unused_fields,
    resolve,
)
from trl_ada.schedules.est import Est
from trl_ada.schedules.rounds import RefillSchedule
from trl_ada.schedules.streaming import PromptStreaming


def refused(given, **kwargs) -> str:
    return refusal(resolve, given, **kwargs)


def without(given: dict, name: str) -> dict:
    return {key: value for key, value in given.items() if key != name}


# ------------------------------------------------------------------------------------------------------------------
# Precedence: explicit > preset > host base > default
# ------------------------------------------------------------------------------------------------------------------


def test_explicit_wins_over_the_preset_which_wins_over_the_host_base_which_wins_over_the_defaults():
    base = {"exit_rule": "pos", "samples_per_round": 6, "max_rounds": 3, "round_confidence": 0.6}
    fields = resolve({"max_rounds": 2}, sampling="balance", base=base).fields()
    assert fields["max_rounds"] == 2  # explicit
    assert (fields["exit_rule"], fields["samples_per_round"]) == ("balance", 8)  # the preset's
    assert fields["round_confidence"] == 0.6  # the host's base
    assert fields["first_round"] == "fixed"  # the default


def test_a_value_equal_to_the_default_given_explicitly_still_wins_over_the_preset():
    assert PRESETS["dapo"](num_generations=4, samples_per_round=8).fields()["samples_per_round"] == 8


def test_the_group_size_is_resolves_own_not_a_host_bases():
    assert resolve({"num_generations": 6}).num_generations == 6
    assert resolve({}, num_generations=6, base={"num_generations": 8}).num_generations == 6


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
    names(refused({}, sampling="dapoo"), "sampling='dapoo'", "did you mean 'dapo'", *map(repr, PRESETS))
    names(refused({}, sampling=3), "sampling=3", *map(repr, PRESETS))
    far = refused({}, sampling="zzz")
    names(far, "sampling='zzz'", *map(repr, PRESETS))
    assert "did you mean" not in far  # nothing close: no guess


def test_a_misspelt_schedule_is_refused_with_the_closest_name_and_a_far_one_without_a_guess():
    names(refused({"generation_schedule": "rouds"}), "generation_schedule='rouds' (did you mean 'rounds'?)")
    far = refused({"generation_schedule": "zzz"})
    assert far.startswith("generation_schedule='zzz': ") and all(repr(name) in far for name in SYNCHRONOUS.registry)


@pytest.mark.parametrize(
    ("sampling", "synchronous", "asynchronous"),
    [
        ("grpo", [], []),
        ("pilot_commit", [], ["generation_schedule"]),
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
    only_est = Host("a trainer of Est alone", "est", {"est": Est})
    assert preset_unused_fields("balance", 4, only_est) == ["exit_rule", "samples_per_round", "max_rounds"]
    assert preset_unused_fields("pilot_commit", 4, only_est) == ["generation_schedule"]
    assert preset_unused_fields("est", 4, only_est) == []


# ------------------------------------------------------------------------------------------------------------------
# Refusals of the synchronous trainer
# ------------------------------------------------------------------------------------------------------------------


def test_a_preset_setting_fields_the_chosen_schedule_does_not_use_is_refused_by_its_name():
    given = {"generation_schedule": "streaming"}
    message = refused(given, sampling="dapo")
    names(
        message,
        "sampling='dapo'",
        "prompt_oversampling",
        "rounds_per_prompt",
        "'streaming'",
        "Remove generation_schedule",
    )
    assert resolve({}, sampling="dapo").section.schedule_class() is RefillSchedule  # the fix, followed


def test_a_preset_field_also_given_explicitly_is_refused_as_explicit_not_as_the_presets():
    given = {"generation_schedule": "streaming", "prompt_oversampling": 3.0}
    message = refused(given, sampling="dapo")
    names(message, "sampling='dapo'", "rounds_per_prompt")
    assert "prompt_oversampling" not in message
    given["rounds_per_prompt"] = 1
    names(refused(given, sampling="dapo"), "prompt_oversampling=3.0", "'streaming'", "Remove prompt_oversampling")


@pytest.mark.parametrize(
    ("given", "sampling", "field", "value", "schedule", "users"),
    [
        (
            {"generation_schedule": "est", "pass_rate_memory": True, "samples_per_round": 8},
            None,
            "samples_per_round",
            8,
            "est",
            "'rounds'",
        ),
        ({"samples_per_round": 8}, "est", "samples_per_round", 8, "est", "'streaming'"),
        ({"futility_threshold": 0.0}, "est", "futility_threshold", 0.0, "est", "'rounds'"),  # off, but explicit
        ({"streaming_window": 4}, "budgeted_balance", "streaming_window", 4, "rounds", "'streaming'"),
        ({"max_rounds": 4}, "grpo", "max_rounds", 4, "grpo", "'rounds'"),
        ({"generation_schedule": "grpo", "samples_per_round": 4}, None, "samples_per_round", 4, "grpo", "'rounds'"),
        ({"pilot_samples": 2}, None, "pilot_samples", 2, "rounds", "'pilot_commit'"),
    ],
)
def test_an_explicit_field_the_schedule_does_not_use_is_refused_whatever_its_value(
    given, sampling, field, value, schedule, users
):
    message = refused(given, sampling=sampling)
    names(message, f"{field}={value!r}", f"generation_schedule={schedule!r}", users, f"Remove {field}")
    assert resolve(without(given, field), sampling=sampling).generation_schedule == schedule  # the fix, followed


def test_the_refusal_names_what_chose_the_schedule():
    names(refused({"samples_per_round": 8}, sampling="est"), "(set by sampling='est')")
    assert "set by" not in refused({"generation_schedule": "est", "samples_per_round": 8}, sampling="est")


def test_plain_grpo_is_a_schedule_of_its_own_which_sampling_grpo_selects():
    plan = resolve({"num_generations": 6}, sampling="grpo")
    assert plan.generation_schedule == "grpo" and not plan.section.samples_adaptively
    exits = plan.section.exits(6)
    assert (exits.exit_rule, exits.samples_per_round, exits.max_rounds) == ("none", 6, 1)  # `NONE`: always met
    assert resolve({}, sampling="grpo") == resolve({"generation_schedule": "grpo"})


@pytest.mark.parametrize("host", [SYNCHRONOUS, ASYNCHRONOUS], ids=["synchronous", "asynchronous"])
@pytest.mark.parametrize("sampling", [None, *PRESETS])
def test_exit_rule_none_the_removed_alias_of_plain_grpo_is_refused_naming_sampling_grpo(sampling, host):
    message = refused({"exit_rule": "none", "num_generations": 6}, sampling=sampling, host=host)
    names(message, "exit_rule='none'", "sampling='grpo'")
    plan = resolve({"num_generations": 6}, sampling="grpo", host=host)  # the fix, followed
    assert (plan.generation_schedule, plan.num_generations) == ("grpo", 6)


def test_an_unknown_schedule_is_refused_with_the_hosts_schedules():
    names(refused({"generation_schedule": "nope"}), "generation_schedule='nope'", *map(repr, SYNCHRONOUS.registry))
    message = refused({"generation_schedule": "nope"}, host=ASYNCHRONOUS)
    names(message, "generation_schedule='nope'", "'streaming', 'est', 'grpo'")


# ------------------------------------------------------------------------------------------------------------------
# Refusals of the asynchronous trainer
# ------------------------------------------------------------------------------------------------------------------


def test_the_asynchronous_trainer_refuses_a_synchronous_schedule_naming_its_own():
    message = refused({"generation_schedule": "rounds"}, host=ASYNCHRONOUS)
    names(message, "generation_schedule='rounds'", "the asynchronous trainer", "'streaming'")
    assert resolve({}, host=ASYNCHRONOUS).generation_schedule == "streaming"


def test_the_asynchronous_trainer_refuses_a_preset_it_cannot_run_naming_the_presets_it_can():
    message = refused({}, sampling="dapo", host=ASYNCHRONOUS)
    names(message, "sampling='dapo'", "prompt_oversampling", "['balance', 'est', 'grpo', 'pos']", "Remove sampling")
    for sampling in ("balance", "est", "grpo", "pos"):
        assert resolve({}, sampling=sampling, host=ASYNCHRONOUS).section


@pytest.mark.parametrize(("field", "value"), [("sample_budget", 8.0), ("prompt_oversampling", 1.0)])
def test_the_asynchronous_trainer_refuses_a_field_no_schedule_of_it_uses(field, value):
    names(
        refused({field: value}, host=ASYNCHRONOUS), f"{field}={value!r}", "the asynchronous trainer", f"Remove {field}"
    )


def test_the_asynchronous_trainer_runs_plain_grpo_with_its_window_of_n():
    plan = resolve({"num_generations": 6}, sampling="grpo", host=ASYNCHRONOUS)
    assert plan.generation_schedule == "grpo" and plan.section.in_flight(6) == 6


def test_a_section_of_the_asynchronous_trainer_has_no_synchronous_schedule_class():
    with pytest.raises(NotImplementedError) as excinfo:
        PromptStreaming().schedule_class()
    assert "PromptStreaming" in str(excinfo.value)


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
    assert with_generated_tables(page) == (
        f"# Configuration\n\n{FIELDS_BEGIN}\n\n{fields_markdown()}\n{FIELDS_END}{after}"
    )
