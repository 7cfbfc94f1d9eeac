"""`ReinforceAdaConfig`: presets resolve to their fields (explicit fields win), and every pair of options is either
built or refused at construction with one `ValueError` that names both options and the fix."""

from __future__ import annotations

import itertools
import logging

import pytest
import yaml
from refusals import names, refusal

from trl_ada import ReinforceAdaConfig
from trl_ada.plan import PRESET_FIELDS, PRESETS, SamplingPlan, defaults
from trl_ada.schedules.grpo import Grpo

RUN = {"report_to": "none", "use_cpu": True}

FEATURES: dict[str, tuple[str, dict]] = {
    "plain grpo": ("sampling", {"sampling": "grpo"}),
    "exit pos": ("exit_rule", {"exit_rule": "pos"}),
    "exit mixed": ("exit_rule", {"exit_rule": "mixed"}),
    "memory": ("pass_rate_memory", {"pass_rate_memory": True}),
    "first round prior": ("first_round", {"pass_rate_memory": True, "first_round": "prior"}),
    "later rounds prior": ("later_rounds", {"later_rounds": "prior"}),
    "futility": ("futility_threshold", {"futility_threshold": 0.05}),
    "budget": ("sample_budget", {"sample_budget": 8.0}),
    "oversampling": ("prompt_oversampling", {"prompt_oversampling": 2.0}),
    "rounds per prompt": ("rounds_per_prompt", {"rounds_per_prompt": 1}),
    "skip": ("skip_threshold", {"pass_rate_memory": True, "skip_threshold": 0.9}),
    "streaming": (
        "generation_schedule",
        {"generation_schedule": "streaming", "use_vllm": True, "vllm_mode": "server"},
    ),
    "est": ("generation_schedule", {"generation_schedule": "est", "pass_rate_memory": True}),
    "log objective": ("objective", {"objective": "log"}),
    "group baseline": ("advantage_baseline", {"advantage_baseline": "group"}),
    "std scaling": ("scale_rewards", {"scale_rewards": "group"}),
}
"""Each option that changes how a step samples, with a representative non-default setting; the first entry is the
option a refusal must name."""

CONFLICTS = {
    frozenset(pair)
    for pair in [
        *(("plain grpo", other) for other in ("first round prior", "later rounds prior", "futility", "budget")),
        *(("plain grpo", other) for other in ("rounds per prompt", "oversampling", "skip", "exit pos", "exit mixed")),
        *(("plain grpo", other) for other in ("streaming", "est")),  # the preset's schedule against another
        *(("streaming", other) for other in ("first round prior", "later rounds prior")),
        *(("streaming", other) for other in ("oversampling", "rounds per prompt", "skip")),
        *(("est", f"exit {rule}") for rule in ("pos", "mixed")),
        *(("est", other) for other in ("first round prior", "later rounds prior", "futility", "budget")),
        *(("est", other) for other in ("oversampling", "rounds per prompt", "skip")),
    ]
}
"""The pairs that cannot work together. Every section meets every other: the rounds' (exit rules, prior sizing,
budget, candidates), streaming's, Est's, plain GRPO's (`sampling="grpo"`), the memory's and the objective's.
(Streaming and Est both set `generation_schedule`: the later one wins, as in a recipe; against the `grpo` preset's
schedule, either is refused.)"""

PAIRS = list(itertools.combinations(FEATURES, 2))


@pytest.mark.parametrize(("first", "second"), PAIRS, ids=[f"{a} + {b}" for a, b in PAIRS])
def test_every_pair_of_options_is_built_or_refused_naming_both(tmp_path, first, second):
    (name_a, fields_a), (name_b, fields_b) = FEATURES[first], FEATURES[second]
    fields = {**fields_a, **fields_b}
    if frozenset((first, second)) not in CONFLICTS:
        config = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, **fields)
        default = "grpo" if fields.get("sampling") == "grpo" else "rounds"
        assert config.sampling_plan.generation_schedule == fields.get("generation_schedule", default)
        return
    with pytest.raises(ValueError) as error:
        ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, **fields)
    message = str(error.value)
    assert name_a in message and name_b in message, message
    assert "\n" not in message
    assert any(word in message.lower() for word in ("use ", "set ", "remove ", "raise ", "lower ")), message


def test_the_conflicts_are_pairs_of_known_options():
    assert all(len(pair) == 2 and pair <= FEATURES.keys() for pair in CONFLICTS)


def test_a_streaming_window_without_streaming_is_refused(tmp_path):
    with pytest.raises(ValueError) as refused:
        ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, streaming_window=16)
    for fragment in ("streaming_window=16", "generation_schedule='rounds'", "'streaming'", "Remove streaming_window"):
        assert fragment in str(refused.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_decay", True),
        ("streaming_window", True),
        ("streaming_chunk", True),
        ("streaming_max_retries", True),
        ("streaming_request_timeout", "10"),
        ("samples_per_round", True),
        ("prompt_oversampling", True),
        ("pass_rate_memory", "yes"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_the_field(tmp_path, field, value):
    fields = {field: value}
    if field.startswith("streaming_") and field not in ("streaming_max_retries", "streaming_request_timeout"):
        fields.update(generation_schedule="streaming", use_vllm=True, vllm_mode="server")
    with pytest.raises(ValueError, match=f"^{field}={value!r}: "):
        ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, **fields)


# ------------------------------------------------------------------------------------------------------------------
# Presets
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("grpo", {"generation_schedule": "grpo", "schedule": "RoundsSchedule"}),
        ("balance", {"exit_rule": "balance", "samples_per_round": 8, "max_rounds": 4, "prompt_oversampling": 1.0}),
        ("pos", {"exit_rule": "pos", "samples_per_round": 8, "max_rounds": 4}),
        (
            "dapo",
            {
                "exit_rule": "mixed",
                "samples_per_round": 4,
                "max_rounds": 4,
                "rounds_per_prompt": 1,
                "prompt_oversampling": 3.0,
                "schedule": "RefillSchedule",
            },
        ),
        (
            "budgeted_balance",
            {
                "exit_rule": "balance",
                "samples_per_round": 8,
                "max_rounds": 3,
                "pass_rate_memory": True,
                "first_round": "prior",
                "later_rounds": "prior",
                "futility_threshold": 0.05,
                "sample_budget": 8.0,
            },
        ),
    ],
)
def test_a_preset_fills_the_fields_of_its_variant(tmp_path, preset, expected):
    plan = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling=preset).sampling_plan
    assert {
        name: plan.section.schedule_class().__name__ if name == "schedule" else plan.fields()[name]
        for name in expected
    } == expected


def test_every_preset_builds_and_is_documented(tmp_path):
    documented = ReinforceAdaConfig.__doc__
    for preset in PRESETS:
        ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling=preset)
        assert f'`"{preset}"`' in documented


def test_an_explicit_field_wins_over_the_preset(tmp_path):
    config = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="dapo", samples_per_round=8, max_rounds=2)
    assert (config.exit_rule, config.samples_per_round, config.max_rounds, config.rounds_per_prompt) == (
        "mixed",
        8,
        2,
        1,
    )


def test_the_dapo_preset_follows_the_group_size(tmp_path):
    config = ReinforceAdaConfig(
        output_dir=str(tmp_path), **RUN, sampling="dapo", num_generations=8, per_device_train_batch_size=8
    )
    assert (config.samples_per_round, config.sample_budget) == (8, None)


def test_without_a_preset_the_fields_take_the_balance_defaults(tmp_path):
    config = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN)
    balance = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="balance")
    assert config.sampling_plan == balance.sampling_plan
    assert {name: getattr(config, name) for name in PRESET_FIELDS} == {
        name: defaults()[name] for name in PRESET_FIELDS
    }


def test_an_unknown_preset_lists_the_presets(tmp_path):
    with pytest.raises(ValueError) as refused:
        ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="dappo")
    assert "sampling='dappo'" in str(refused.value) and all(repr(name) in str(refused.value) for name in PRESETS)


def test_a_config_rebuilt_from_its_dict_has_the_same_plan(tmp_path):
    config = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="budgeted_balance", max_rounds=4)
    fields = {name: getattr(config, name) for name in ("sampling", *PRESET_FIELDS)}
    again = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, **fields)
    assert again.sampling_plan == config.sampling_plan


def test_the_preset_comes_from_yaml_and_the_command_line(tmp_path):
    from trl_ada.cli.train import parse_train_args

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "out"), "sampling": "dapo", **RUN}))
    _, from_yaml, _ = parse_train_args(["--config", str(recipe), "--model_name_or_path", "m"])
    assert (from_yaml.sampling, from_yaml.exit_rule, from_yaml.rounds_per_prompt) == ("dapo", "mixed", 1)
    _, overridden, _ = parse_train_args(["--config", str(recipe), "--model_name_or_path", "m", "--sampling", "pos"])
    assert (overridden.exit_rule, overridden.prompt_oversampling, overridden.rounds_per_prompt) == ("pos", 1.0, None)


def test_the_plan_is_pure_and_validates_without_a_config():
    plan = SamplingPlan(Grpo(), num_generations=8)
    exits = plan.section.exits(8)
    assert (exits.samples_per_round, exits.max_rounds, plan.generation_schedule) == (8, 1, "grpo")
    with pytest.raises(ValueError, match="rounds_per_prompt=1"):
        plan.replace(rounds_per_prompt=1)


def test_the_resolved_sampling_is_logged_and_written_to_the_model_card(tiny_model_dir, tmp_path, caplog):
    from datasets import Dataset
    from tiny import tiny_config

    from trl_ada import ReinforceAdaTrainer

    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": "a"}]] * 8})
    with caplog.at_level(logging.INFO, logger="trl_ada.trainer"):
        trainer = ReinforceAdaTrainer(
            model=tiny_model_dir,
            reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
            args=tiny_config(tmp_path, sampling="pos", per_device_train_batch_size=4),
            train_dataset=dataset,
        )
    names(caplog.text, "sampling='pos': ", "num_generations=4", "exit_rule='pos'", "samples_per_round=8")
    trainer.create_model_card()
    card = (tmp_path / "out" / "README.md").read_text()
    assert "## Sampling" in card and "sampling='pos': num_generations=4, exit_rule='pos'" in card


# ------------------------------------------------------------------------------------------------------------------
# Explicit is explicit: a field you set is never read as unset because it equals a default
# ------------------------------------------------------------------------------------------------------------------

EST_UNUSED_AT_DEFAULT = {"exit_rule": "balance", "samples_per_round": 8, "max_rounds": 4, "first_round": "fixed"}
"""Fields Est has no use for, at the values that used to pass as "unset" (the base defaults)."""


@pytest.mark.parametrize(("name", "value"), EST_UNUSED_AT_DEFAULT.items())
def test_an_explicit_field_est_has_no_use_for_is_refused_even_at_its_default(tmp_path, name, value):
    with pytest.raises(ValueError) as refused:
        ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="est", **{name: value})
    for fragment in (f"{name}={value!r}", "generation_schedule='est' (set by sampling='est')", f"Remove {name}"):
        assert fragment in str(refused.value)
    assert (
        ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="est").sampling_plan.generation_schedule == "est"
    )
    rounds = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="balance", **{name: value})
    assert rounds.sampling_plan.fields()[name] == value  # the other advice: the same field in rounds


def test_exit_rule_pos_and_balance_under_est_get_the_same_answer(tmp_path):
    messages = []
    for rule in ("pos", "balance"):
        with pytest.raises(ValueError) as refused:
            ReinforceAdaConfig(
                output_dir=str(tmp_path), **RUN, generation_schedule="est", pass_rate_memory=True, exit_rule=rule
            )
        messages.append(str(refused.value).replace(f"exit_rule={rule!r}", "exit_rule=RULE"))
    assert messages[0] == messages[1]
    names(messages[0], "exit_rule=RULE", "generation_schedule='est'", "Remove exit_rule")


def test_grpo_refuses_the_rounds_fields_and_the_fix_works(tmp_path):
    for given in ({"sampling": "grpo", "samples_per_round": 16}, {"generation_schedule": "grpo", "max_rounds": 4}):
        with pytest.raises(ValueError) as refused:
            ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, **given)
        (name, value), *_ = ((k, v) for k, v in given.items() if k in ("samples_per_round", "max_rounds"))
        for fragment in (f"{name}={value!r}", "generation_schedule='grpo'", f"Remove {name}"):
            assert fragment in str(refused.value)
        fixed = {k: v for k, v in given.items() if k != name}
        plan = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, **fixed).sampling_plan
        exits = plan.section.exits(4)
        assert (plan.generation_schedule, exits.samples_per_round, exits.max_rounds) == ("grpo", 4, 1)
    balance = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="balance", samples_per_round=16)
    assert balance.sampling_plan.section.samples_per_round == 16


@pytest.mark.parametrize("given", [{}, {"sampling": "balance"}, {"sampling": "grpo"}, {"generation_schedule": "est"}])
def test_exit_rule_none_is_refused_at_construction_naming_its_replacement(tmp_path, given):
    message = refusal(ReinforceAdaConfig, output_dir=str(tmp_path), **RUN, **given, exit_rule="none")
    names(message, "exit_rule='none'", "sampling='grpo'")
    config = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="grpo")  # the fix, followed
    assert config.sampling_plan.generation_schedule == "grpo" and config.exit_rule is None


def test_est_keeps_the_fields_it_does_not_use_unset(tmp_path):
    config = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="est")
    assert (config.exit_rule, config.samples_per_round, config.max_rounds, config.futility_threshold) == (None,) * 4
    assert config.sampling_plan.generation_schedule == "est"
    from trl_ada.trainer import sampling_summary

    summary = sampling_summary(config)
    assert "exit_rule" not in summary and "samples_per_round" not in summary and "est_min_samples=2" in summary


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_config_rebuilt_from_its_fields_is_the_same_plan(tmp_path, preset):
    config = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling=preset)
    fields = {name: getattr(config, name) for name in ("sampling", *PRESET_FIELDS)}
    assert ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, **fields).sampling_plan == config.sampling_plan


def test_a_default_valued_field_is_explicit_from_yaml_and_from_a_flag(tmp_path):
    from trl_ada.cli.train import main

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "out"), "sampling": "est", "max_rounds": 4, **RUN}))
    for argv in (["--config", str(recipe)], ["--config", str(recipe), "--max_rounds", "4"]):
        assert main([*argv, "--model_name_or_path", "m"]) == 2
    recipe.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "out"), "sampling": "est", **RUN}))
    from trl_ada.cli.train import parse_train_args

    refused = refusal(
        parse_train_args, ["--config", str(recipe), "--model_name_or_path", "m", "--exit_rule", "balance"]
    )
    names(refused, "exit_rule='balance'", "generation_schedule='est'", "Remove exit_rule")


# ------------------------------------------------------------------------------------------------------------------
# Values of the wrong type: one line naming the field, before any comparison can raise a TypeError
# ------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "advice"),
    [
        ({"sampling": "est", "num_generations": None}, {"sampling": "est", "num_generations": 4}),
        ({"sampling": ["est"]}, {"sampling": "est"}),
        ({"sampling": {"name": "est"}}, {"sampling": "est"}),
        ({"samples_per_round": "8"}, {"samples_per_round": 8}),
        ({"positive_threshold": "0.5"}, {"positive_threshold": 0.5}),
        (
            {"streaming_chunk": "2", "generation_schedule": "streaming", "use_vllm": True, "vllm_mode": "server"},
            {"streaming_chunk": 2, "generation_schedule": "streaming", "use_vllm": True, "vllm_mode": "server"},
        ),
        ({"sampling": "est", "est_max_samples": "16"}, {"sampling": "est", "est_max_samples": 16}),
        ({"objective_alpha": "half"}, {"objective_alpha": 0.5}),  # checked although objective='linear' ignores it
    ],
)
def test_a_value_of_the_wrong_type_is_refused_in_one_line_and_the_advice_works(tmp_path, fields, advice):
    with pytest.raises(ValueError) as refused:
        ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, **fields)
    name = next(name for name in fields if name in advice and fields[name] != advice[name])
    assert str(refused.value).startswith(f"{name}={fields[name]!r}") and "\n" not in str(refused.value)
    ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, **advice)


def test_est_with_a_group_of_one_names_the_group_size_not_a_bound_that_cannot_be_lowered(tmp_path):
    with pytest.raises(ValueError) as refused:
        ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="est", num_generations=1)
    names(str(refused.value), "num_generations=1", ">= 2")
    assert "est_min_samples" not in str(refused.value)
    est = ReinforceAdaConfig(output_dir=str(tmp_path), **RUN, sampling="est", num_generations=2)
    assert est.sampling_plan.section.bounds(2) == (2, 8)


@pytest.mark.parametrize(
    ("key", "value", "start"),
    [
        ("sampling", ["est"], "sampling=['est']"),
        ("sampling", {"name": "est"}, "sampling={'name': 'est'}"),
        ("num_generations", None, "num_generations=None"),
    ],
)
def test_a_recipe_with_a_value_of_the_wrong_type_gets_one_line(tmp_path, capsys, key, value, start):
    from trl_ada.cli.train import main

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "out"), "sampling": "est", **RUN, key: value}))
    assert main(["--config", str(recipe), "--model_name_or_path", "m"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"trl-ada train: error: {start}") and "\n" not in error
