"""The `trl-ada` command line: version, help, subcommand delegation, and `train` end to end on the tiny model."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from refusals import names

import trl_ada
from trl_ada import cli
from trl_ada.cli import train as train_cli
from trl_ada.data import build_prompt

pytestmark = pytest.mark.xdist_group("trainer")

PROBLEMS = [
    {"problem": "What is 2 + 3?", "answer": "5"},
    {"problem": "What is 7 * 6?", "answer": "42"},
    {"problem": "What is 10 - 4?", "answer": "6"},
    {"problem": "What is 9 / 3?", "answer": "3"},
]


# ---------------------------------------------------------------------------------------------------- top level


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"trl-ada {trl_ada.__version__}"


@pytest.mark.parametrize("module", ["trl_ada", "trl_ada.cli"])  # `accelerate launch -m trl_ada.cli` runs the latter
def test_version_as_module(module):
    result = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == f"trl-ada {trl_ada.__version__}"


def test_help_lists_the_commands(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("train", "evaluate", "select-prompts", "demo"):
        assert command in out


def test_no_command_and_unknown_command(capsys):
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().err
    assert cli.main(["fly"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_train_help_lists_every_dataclass(capsys):
    assert cli.main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--problem_column", "--exit_rule", "--samples_per_round", "--lora_r", "--max_prompt_tokens"):
        assert flag in out


@pytest.mark.parametrize(
    ("command", "module", "function"),
    [
        ("train", "trl_ada.cli.train", "main"),
        ("evaluate", "trl_ada.cli.evaluate", "main"),
        ("select-prompts", "trl_ada.cli.select_prompts", "main"),
        ("demo", "trl_ada.cli.demo", "main"),
    ],
)
def test_subcommands_pass_their_arguments_through(monkeypatch, command, module, function):
    received = []
    fake = types.ModuleType(module)
    setattr(fake, function, lambda argv: received.append(argv) or 3)
    monkeypatch.setitem(sys.modules, module, fake)
    assert cli.main([command, "--model", "m", "--help", "-k", "4"]) == 3
    assert received == [["--model", "m", "--help", "-k", "4"]]


def test_missing_subcommand_module_is_reported(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "trl_ada.cli.demo", None)  # import fails
    assert cli.main(["demo"]) == 1
    names(capsys.readouterr().err, "trl-ada demo: error: ", "not available", "trl_ada.cli.demo")


def test_missing_config_file(tmp_path, capsys):
    assert cli.main(["train", "--config", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_unknown_config_key_is_reported_without_traceback(tmp_path, capsys):
    config = tmp_path / "typo.yaml"
    config.write_text("exit_rul: pos\n")
    assert cli.main(["train", "--config", str(config)]) == 2
    names(capsys.readouterr().err, "exit_rul ", "exit_rule?")


# ---------------------------------------------------------------------------------------------------- credentials


def test_hub_credentials_not_checked_without_push(monkeypatch):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: pytest.fail("token looked up"))
    train_cli.check_hub_credentials(types.SimpleNamespace(push_to_hub=False, hub_token=None))


def test_hub_credentials_missing_token(monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import LocalTokenNotFoundError

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    with pytest.raises(LocalTokenNotFoundError, match="hf auth login"):
        train_cli.check_hub_credentials(types.SimpleNamespace(push_to_hub=True, hub_token=None))


def test_hub_credentials_invalid_and_valid_token(monkeypatch):
    import huggingface_hub

    def reject(token):
        raise OSError("401 Unauthorized")

    monkeypatch.setattr(huggingface_hub, "whoami", reject)
    with pytest.raises(ValueError, match="could not be verified.*401"):
        train_cli.check_hub_credentials(types.SimpleNamespace(push_to_hub=True, hub_token="hf_bad"))
    monkeypatch.setattr(huggingface_hub, "whoami", lambda token: {"name": "someone"})
    train_cli.check_hub_credentials(types.SimpleNamespace(push_to_hub=True, hub_token="hf_good"))


# ---------------------------------------------------------------------------------------------------- train


@pytest.fixture
def problems_file(tmp_path) -> Path:
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in PROBLEMS))
    return path


@pytest.fixture
def train_config(tmp_path, tiny_model_dir, problems_file) -> Path:
    """A tiny end-to-end recipe: two steps of Reinforce-Ada on the offline model, on CPU."""
    config = {
        "model_name_or_path": tiny_model_dir,
        "dataset_name": str(problems_file),
        "reward_funcs": ["math"],
        "max_prompt_tokens": 512,
        "exit_rule": "balance",
        "num_generations": 4,
        "samples_per_round": 2,
        "max_rounds": 2,
        "per_device_train_batch_size": 8,
        "max_completion_length": 8,
        "learning_rate": 1.0e-4,
        "max_steps": 2,
        "use_cpu": True,
        "bf16": False,
        "gradient_checkpointing": False,
        "report_to": "none",
        "logging_steps": 1,
        "save_strategy": "no",
        "seed": 0,
        "output_dir": str(tmp_path / "out"),
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _train(config: Path, *flags: str) -> int:
    return cli.main(["train", "--config", str(config), *flags])


@pytest.mark.slow
def test_train_end_to_end_with_flag_override(train_config, tmp_path):
    out = tmp_path / "out"
    assert _train(train_config, "--max_steps", "1") == 0
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 1  # the flag beat the YAML's max_steps: 2
    assert (out / "model.safetensors").is_file()
    assert (out / "config.json").is_file()
    assert (out / "tokenizer_config.json").is_file()
    assert (out / "tokenizer.json").is_file()
    assert (out / "README.md").is_file()


@pytest.mark.slow
def test_train_resumes_from_checkpoint(train_config, tmp_path):
    out = tmp_path / "resume"
    flags = ["--output_dir", str(out), "--save_strategy", "steps", "--save_steps", "1"]
    assert _train(train_config, *flags, "--max_steps", "1") == 0
    assert (out / "checkpoint-1").is_dir()
    first_run = json.loads((out / "trainer_state.json").read_text())["log_history"][0]
    assert _train(train_config, *flags, "--max_steps", "2", "--resume_from_checkpoint", "true") == 0
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    # Step 1's log entry (timings included) comes from the checkpoint: it was restored, not trained again.
    assert state["log_history"][0] == first_run


@pytest.mark.slow
def test_train_with_lora_writes_an_adapter(train_config, tmp_path):
    out = tmp_path / "lora"
    assert _train(train_config, "--use_peft", "--lora_r", "4", "--max_steps", "1", "--output_dir", str(out)) == 0
    assert (out / "adapter_model.safetensors").is_file()
    assert json.loads((out / "adapter_config.json").read_text())["r"] == 4
    assert not (out / "model.safetensors").exists()


@pytest.mark.slow
def test_train_a_reward_returning_text_is_one_error_line_naming_it(train_config, tmp_path, monkeypatch, capsys):
    """Found at the reward function's first call (the first step's generation), reported without a traceback."""
    (tmp_path / "text_reward.py").write_text(
        "def as_text(completions, **kwargs):\n    return ['1'] * len(completions)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _train(train_config, "--reward_funcs", "text_reward:as_text", "--max_steps", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    (line,) = [line for line in err if "error:" in line]
    names(line, "trl-ada train: error: ", "'as_text'", "a str ('1')", "completion 0", "float(score)")
    assert not any("Traceback" in line for line in err), "\n".join(err)


def test_train_unknown_reward_lists_known_names(train_config, capsys):
    assert _train(train_config, "--reward_funcs", "nonexistent_reward") == 2
    err = capsys.readouterr().err
    assert "nonexistent_reward" in err
    assert "math" in err


def test_train_missing_columns_error(train_config, tmp_path, capsys):
    data = tmp_path / "odd.jsonl"
    data.write_text(json.dumps({"q": "What is 1 + 1?", "a": "2"}) + "\n")
    assert _train(train_config, "--dataset_name", str(data)) == 2
    err = capsys.readouterr().err
    assert "['q', 'a']" in err
    assert "--problem_column" in err


def test_train_explicit_columns_reach_the_dataset(train_config, tmp_path):
    data = tmp_path / "odd.jsonl"
    data.write_text("".join(json.dumps({"q": r["problem"], "a": r["answer"]}) + "\n" for r in PROBLEMS))
    flags = ["--dataset_name", str(data), "--problem_column", "q", "--answer_column", "a", "--system_prompt", ""]
    train_dataset, eval_dataset = train_cli.build_datasets(
        *train_cli.parse_train_args(["--config", str(train_config), *flags])
    )
    assert eval_dataset is None
    assert train_dataset["answer"] == [r["answer"] for r in PROBLEMS]
    assert train_dataset[0]["prompt"] == build_prompt(PROBLEMS[0]["problem"], system_prompt="")


def test_push_to_hub_without_credentials_fails_before_training(train_config, monkeypatch, capsys):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    monkeypatch.setattr(train_cli, "build_trainer", lambda *args: pytest.fail("reached the trainer"))
    assert _train(train_config, "--push_to_hub", "true") == 1
    err = capsys.readouterr().err
    assert "push_to_hub" in err and "token" in err
