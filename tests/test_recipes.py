"""Every recipe parses with the CLI's own parser, matches the paper's settings, and the accelerate configs load."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest
import yaml
from refusals import names

from trl_ada.cli.train import ConfigKeyError, parse_train_args
from trl_ada.cli.train_async import TRAIN_ASYNC

RECIPES_DIR = Path(__file__).resolve().parent.parent / "recipes"
ACCELERATE_DIR = RECIPES_DIR / "accelerate_configs"
ALL_RECIPES = sorted(p for p in RECIPES_DIR.rglob("*.yaml") if ACCELERATE_DIR not in p.parents)
ASYNC_RECIPES = [p for p in ALL_RECIPES if "async" in p.stem]
"""Recipes of `trl-ada train-async` (AsyncReinforceAdaConfig); the others are `trl-ada train`'s."""
TRAIN_RECIPES = [p for p in ALL_RECIPES if p not in ASYNC_RECIPES]
ACCELERATE_CONFIGS = sorted(ACCELERATE_DIR.glob("*.yaml"))

MODELS = {
    "Qwen2.5-Math-1.5B": "Qwen/Qwen2.5-Math-1.5B",
    "Qwen2.5-Math-7B": "Qwen/Qwen2.5-Math-7B",
    "Qwen3-4B-Instruct-2507": "Qwen/Qwen3-4B-Instruct-2507",
    "Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B-Instruct",
}
METHODS = {"grpo": None, "reinforce_ada_pos": "pos", "reinforce_ada_balance": "balance"}  # plain GRPO: no exit rule
PAPER_RECIPES = [RECIPES_DIR / model / f"{method}.yaml" for model in MODELS for method in METHODS]
LORA_RECIPE = RECIPES_DIR / "Qwen2.5-Math-1.5B" / "reinforce_ada_balance_lora_1gpu.yaml"
EST_RECIPES = [RECIPES_DIR / model / "reinforce_ada_est.yaml" for model in MODELS]
BUDGETED_RECIPES = [RECIPES_DIR / model / "reinforce_ada_budgeted_balance.yaml" for model in MODELS]
TRAINING_GPUS = 8
PROMPTS_PER_GENERATION = 512
UPDATES_PER_GENERATION = 4  # the reference run: mini-batches of 128 prompts, one PPO epoch


def updates_per_generation(args, num_processes: int) -> float:
    """Optimizer updates TRL makes per generation batch on `num_processes` training processes."""
    micro_batches = args.generation_batch_size / (args.per_device_train_batch_size * num_processes)
    return micro_batches * args.num_iterations / args.gradient_accumulation_steps


def _id(path: Path) -> str:
    return str(path.relative_to(RECIPES_DIR))


def _parse(path: Path, tmp_path: Path, *flags: str):
    """Parse a recipe as `trl-ada train` does; output_dir in tmp, and use_cpu so bf16 validates without a GPU."""
    return parse_train_args(
        ["--config", str(path), "--output_dir", str(tmp_path / "out"), "--use_cpu", "true", *flags]
    )


def test_the_recipe_set_is_complete():
    assert set(PAPER_RECIPES) | {LORA_RECIPE} | set(EST_RECIPES) | set(BUDGETED_RECIPES) == set(TRAIN_RECIPES)
    assert ASYNC_RECIPES == [RECIPES_DIR / "Qwen2.5-Math-1.5B" / "reinforce_ada_async_balance.yaml"]
    names = {p.name for p in ACCELERATE_CONFIGS}
    assert {"single_gpu.yaml", "multi_gpu.yaml", "zero2.yaml", "zero3.yaml", "fsdp2.yaml"} <= names


@pytest.mark.parametrize("path", TRAIN_RECIPES, ids=_id)
def test_recipe_keys_are_dataclass_fields(path):
    from trl import ModelConfig

    from trl_ada.config import ReinforceAdaConfig
    from trl_ada.data import ReinforceAdaScriptArguments

    known = {
        f.name
        for cls in (ReinforceAdaScriptArguments, ReinforceAdaConfig, ModelConfig)
        for f in dataclasses.fields(cls)
    }
    keys = set(yaml.safe_load(path.read_text()))
    assert "env" not in keys
    assert keys <= known, f"unknown keys: {sorted(keys - known)}"


@pytest.mark.parametrize("path", TRAIN_RECIPES, ids=_id)
def test_recipe_parses_without_side_effects(path, tmp_path):
    environ = dict(os.environ)
    script_args, training_args, model_args = _parse(path, tmp_path)
    assert dict(os.environ) == environ
    assert not (tmp_path / "out").exists()
    assert training_args.output_dir == str(tmp_path / "out")
    assert model_args.model_name_or_path == MODELS[path.parent.name]
    assert script_args.reward_funcs == ["math"]
    assert script_args.dataset_name == "open-r1/OpenR1-Math-220k"


@pytest.mark.parametrize("path", PAPER_RECIPES, ids=_id)
def test_paper_settings(path, tmp_path):
    script_args, args, model_args = _parse(path, tmp_path)
    assert args.exit_rule == METHODS[path.stem]
    assert args.num_generations == 4
    assert (args.sampling, args.generation_schedule) == (("grpo", "grpo") if path.stem == "grpo" else (None, "rounds"))
    if args.exit_rule is not None:
        assert (args.samples_per_round, args.max_rounds, args.positive_threshold) == (8, 4, 0.7)
        assert args.advantage_baseline == "pool"
    assert args.learning_rate == 1e-6
    assert args.temperature == 1.0
    assert args.max_completion_length == 2048
    assert (args.loss_type, args.epsilon, args.epsilon_high, args.beta) == ("dapo", 0.2, 0.28, 0.0)
    assert args.scale_rewards == "none"
    assert args.use_vllm and args.vllm_mode == "server"
    assert args.bf16 and args.gradient_checkpointing
    assert model_args.dtype == "bfloat16"
    assert args.max_steps == 600 * UPDATES_PER_GENERATION  # 600 generation batches
    assert args.lr_scheduler_type == "constant_with_warmup"
    assert args.warmup_steps == 10 * UPDATES_PER_GENERATION  # the reference's 10 warm-up steps (generation batches)
    assert script_args.prompt_style == "reference"
    assert not model_args.use_peft
    assert not args.push_to_hub


@pytest.mark.parametrize("path", PAPER_RECIPES, ids=_id)
def test_512_prompts_per_generation_and_4_updates_of_128_on_8_gpus(path, tmp_path):
    _, args, _ = _parse(path, tmp_path)
    completions = PROMPTS_PER_GENERATION * args.num_generations
    assert args.generation_batch_size == completions
    assert updates_per_generation(args, TRAINING_GPUS) == UPDATES_PER_GENERATION
    update = args.per_device_train_batch_size * TRAINING_GPUS * args.gradient_accumulation_steps
    assert update == completions // UPDATES_PER_GENERATION == 128 * args.num_generations


@pytest.mark.parametrize("path", EST_RECIPES, ids=_id)
def test_est_recipe_is_the_papers_algorithm_at_8_per_prompt_with_the_reference_batch(path, tmp_path):
    _, args, _ = _parse(path, tmp_path)
    plan = args.sampling_plan
    assert args.sampling == "est" and plan.generation_schedule == "est" and args.num_generations == 8
    assert (plan.objective.function, plan.objective.weighting, plan.memory.decay) == ("log", "hybrid", 0.9)
    assert (plan.memory.prior, plan.section.bounds(plan.n)) == ((1.0, 1.0), (2, 32))
    assert args.generation_batch_size == PROMPTS_PER_GENERATION * 8
    assert updates_per_generation(args, TRAINING_GPUS) == UPDATES_PER_GENERATION
    assert args.max_steps == 600 * UPDATES_PER_GENERATION and args.learning_rate == 1e-6


@pytest.mark.parametrize("path", BUDGETED_RECIPES, ids=_id)
def test_budgeted_recipe_is_balance_with_memory_and_a_budget_of_8(path, tmp_path):
    balance = yaml.safe_load((path.parent / "reinforce_ada_balance.yaml").read_text())
    est = yaml.safe_load(path.read_text())
    changed = {key for key in est if est[key] != balance.get(key)}
    est_fields = {"pass_rate_memory", "memory_decay", "first_round", "later_rounds", "round_confidence"}
    assert changed == est_fields | {"futility_threshold", "sample_budget", "max_rounds", "output_dir", "run_name"}
    _, args, _ = _parse(path, tmp_path)
    assert args.pass_rate_memory and (args.first_round, args.later_rounds) == ("prior", "prior")
    assert (args.sample_budget, args.max_rounds, args.futility_threshold) == (8, 3, 0.05)
    assert args.exit_rule == "balance" and args.samples_per_round == 8


def test_lora_single_gpu_recipe(tmp_path):
    _, args, model_args = _parse(LORA_RECIPE, tmp_path)
    assert model_args.use_peft
    assert (model_args.lora_r, model_args.lora_alpha, model_args.lora_target_modules) == (64, 128, "all-linear")
    assert args.use_vllm and args.vllm_mode == "colocate" and args.vllm_enable_sleep_mode
    assert 0.2 <= args.vllm_gpu_memory_utilization <= 0.4
    assert args.gradient_checkpointing
    assert args.learning_rate == 1e-5
    assert args.exit_rule == "balance"
    # One process: generation batch = 32 prompts x n, one optimizer update per generation batch (a small batch:
    # splitting it further would leave mini-batches of 8 prompts).
    assert args.generation_batch_size == 32 * args.num_generations
    assert args.steps_per_generation == args.gradient_accumulation_steps
    assert updates_per_generation(args, 1) == 1


def test_flags_override_the_recipe(tmp_path):
    _, args, model_args = _parse(
        PAPER_RECIPES[0], tmp_path, "--max_steps", "3", "--sampling", "pos", "--lora_r", "8", "--use_peft"
    )
    assert (args.max_steps, args.exit_rule, model_args.lora_r, model_args.use_peft) == (3, "pos", 8, True)


# ---------------------------------------------------------------------------------------------------- async


def _parse_async(path: Path, tmp_path: Path, *flags: str):
    """Parse a recipe as `trl-ada train-async` does (no model loads, no server is contacted)."""
    return parse_train_args(
        ["--config", str(path), "--output_dir", str(tmp_path / "out"), "--use_cpu", "true", *flags], TRAIN_ASYNC
    )


@pytest.mark.parametrize("path", ASYNC_RECIPES, ids=_id)
def test_async_recipe_parses_into_an_async_config(path, tmp_path):
    from trl_ada.async_grpo import AsyncReinforceAdaConfig

    environ = dict(os.environ)
    script_args, args, model_args = _parse_async(path, tmp_path)
    assert dict(os.environ) == environ and not (tmp_path / "out").exists()
    assert isinstance(args, AsyncReinforceAdaConfig)
    assert model_args.model_name_or_path == MODELS[path.parent.name]
    assert script_args.reward_funcs == ["math"] and script_args.dataset_name == "open-r1/OpenR1-Math-220k"
    assert args.dtype == model_args.dtype == "bfloat16"
    assert args.vllm_server_base_url.startswith("http://") and args.vllm_mode == "server"
    with pytest.raises(ConfigKeyError):  # GRPOConfig's fields are not AsyncGRPOConfig's
        _parse_async(path, tmp_path, "--generation_batch_size", "2048")


def test_async_balance_recipe_is_the_papers_setting_with_512_completions_per_step(tmp_path):
    (path,) = ASYNC_RECIPES
    _, args, model_args = _parse_async(path, tmp_path)
    plan = args.sampling_plan
    assert (plan.section.exit_rule, args.num_generations, plan.generation_schedule) == ("balance", 4, "streaming")
    assert (args.samples_per_round, args.max_rounds, args.positive_threshold) == (8, 4, 0.7)
    assert args.advantage_baseline == "pool" and args.scale_rewards == "none"
    assert (args.epsilon, args.epsilon_high, args.learning_rate, args.max_steps) == (0.2, 0.28, 1e-6, 2400)
    assert args.per_device_train_batch_size * TRAINING_GPUS * args.gradient_accumulation_steps == 512
    assert (args.max_staleness, args.weight_sync_steps) == (3, 1)
    assert args.bf16 and args.gradient_checkpointing and not model_args.use_peft
    assert model_args.attn_implementation is None  # the async trainer attends with its tree attention


# ---------------------------------------------------------------------------------------------------- unknown keys


def test_unknown_yaml_key_names_it_and_suggests(tmp_path):
    config = tmp_path / "typo.yaml"
    config.write_text("model_name_or_path: some/model\nlerning_rate: 1.0e-6\nsamples_per_rnd: 8\nfoo_bar_baz: 1\n")
    with pytest.raises(ConfigKeyError) as excinfo:
        parse_train_args(["--config", str(config), "--output_dir", str(tmp_path / "out")])
    message = str(excinfo.value)
    assert str(config) in message
    names(message, "lerning_rate ", "learning_rate?", "samples_per_rnd ", "samples_per_round?")
    assert "foo_bar_baz\n" in message  # no close match: no suggestion
    assert isinstance(excinfo.value, ValueError)


def test_unknown_flag_names_it_and_suggests(tmp_path):
    with pytest.raises(ConfigKeyError) as excinfo:
        parse_train_args(["--config", str(PAPER_RECIPES[0]), "--max_round", "3"])
    names(str(excinfo.value), "--max_round ", "--max_rounds?")


def test_env_block_is_exported(tmp_path, monkeypatch):
    monkeypatch.delenv("TRL_ADA_RECIPE_TEST", raising=False)
    config = tmp_path / "env.yaml"
    config.write_text("env:\n  TRL_ADA_RECIPE_TEST: 7\nmax_steps: 2\nuse_cpu: true\n")
    _, args, _ = parse_train_args([f"--config={config}", "--output_dir", str(tmp_path / "out")])
    assert os.environ["TRL_ADA_RECIPE_TEST"] == "7"
    assert args.max_steps == 2
    monkeypatch.delenv("TRL_ADA_RECIPE_TEST")


# ---------------------------------------------------------------------------------------------------- accelerate


@pytest.mark.parametrize("path", ACCELERATE_CONFIGS, ids=_id)
def test_accelerate_config_loads(path):
    from accelerate.commands.config.config_args import ClusterConfig

    raw = yaml.safe_load(path.read_text())
    for key in ("compute_environment", "distributed_type", "num_processes", "mixed_precision", "use_cpu", "debug"):
        assert key in raw, f"{path.name} misses {key}"
    config = ClusterConfig.from_yaml_file(str(path))  # rejects unknown keys
    expected = {
        "single_gpu": ("NO", 1),
        "multi_gpu": ("MULTI_GPU", 8),
        "zero2": ("DEEPSPEED", 8),
        "zero3": ("DEEPSPEED", 8),
        "fsdp2": ("FSDP", 8),
    }.get(path.stem)
    if expected:
        assert (config.distributed_type.value, config.num_processes) == expected
    if path.stem.startswith("zero"):
        assert config.deepspeed_config["zero_stage"] == int(path.stem[-1])
    if path.stem == "fsdp2":
        assert config.fsdp_config["fsdp_version"] == 2


def test_readme_points_at_existing_files():
    readme = (RECIPES_DIR / "README.md").read_text()
    paths = set(re.findall(r"recipes/[\w./-]+\.yaml", readme))
    assert paths, "the README should show launch commands"
    missing = [p for p in paths if not (RECIPES_DIR.parent / p).exists()]
    assert not missing
