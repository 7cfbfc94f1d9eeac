"""`trl-ada train-async`: help, one-line errors for unknown keys and unsupported options, and a run with no vLLM
server listening (fails within seconds in one line naming the URL)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
import yaml
from refusals import names

from trl_ada import cli
from trl_ada.cli import train as train_cli
from trl_ada.cli.train_async import TRAIN_ASYNC

pytestmark = pytest.mark.xdist_group("trainer")

PROBLEMS = [{"problem": "What is 2 + 3?", "answer": "5"}, {"problem": "What is 7 * 6?", "answer": "42"}]


def _error_lines(err: str) -> list[str]:
    return [
        line for line in err.splitlines() if line.strip() and "Warning" not in line and "warnings.warn" not in line
    ]


def test_help_lists_the_async_and_sampling_options(capsys):
    assert cli.main(["train-async", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--max_staleness", "--exit_rule", "--vllm_server_base_url", "--max_prompts_in_flight", "--lora_r"):
        assert flag in out
    assert "TRL AsyncGRPOConfig: the async rollout pipeline:" in out
    assert "AsyncReinforceAdaConfig:" in out
    assert "--generation_batch_size" not in out and "--use_vllm" not in out  # GRPOConfig's, not AsyncGRPOConfig's


def test_top_level_help_lists_train_async(capsys):
    assert cli.main(["--help"]) == 0
    assert "train-async" in capsys.readouterr().out


def test_dtype_is_one_option_for_the_config_and_the_model(tmp_path):
    flags = ["--model_name_or_path", "m", "--output_dir", str(tmp_path / "out"), "--use_cpu", "true"]
    _, args, model_args = train_cli.parse_train_args([*flags, "--dtype", "bfloat16"], TRAIN_ASYNC)
    assert args.dtype == model_args.dtype == "bfloat16"
    _, args, model_args = train_cli.parse_train_args(flags, TRAIN_ASYNC)
    assert args.dtype == model_args.dtype == "float32"  # AsyncGRPOConfig's default


def test_unknown_flag_is_one_error_with_the_closest_name(capsys):
    assert cli.main(["train-async", "--model_name_or_path", "m", "--max_stalenes", "2"]) == 2
    err = capsys.readouterr().err
    names(err, "--max_stalenes ", "--max_staleness?")
    assert "AsyncReinforceAdaConfig" in err and "trl-ada train-async --help" in err
    assert "Traceback" not in err


def test_unknown_yaml_key_is_reported(tmp_path, capsys):
    config = tmp_path / "typo.yaml"
    config.write_text("model_name_or_path: m\nweight_sync_step: 2\n")
    assert cli.main(["train-async", "--config", str(config)]) == 2
    names(capsys.readouterr().err, "weight_sync_step ", "weight_sync_steps?")


@pytest.mark.parametrize(
    ("flags", "option"),
    [
        (["--vllm_mode", "colocate"], "vllm_mode='colocate'"),
        (["--prompt_oversampling", "2"], "prompt_oversampling=2.0"),
        (["--max_staleness", "-1"], "max_staleness=-1"),
    ],
)
def test_unsupported_async_option_is_one_error_line(tmp_path, capsys, flags, option):
    argv = ["train-async", "--model_name_or_path", "m", "--output_dir", str(tmp_path / "out"), "--use_cpu", "true"]
    assert cli.main([*argv, *flags]) == 2  # a config error: exit code 2, as `train`
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1, lines
    assert lines[0].startswith("trl-ada train-async: error: ") and option in lines[0]


@pytest.mark.parametrize(
    ("flags", "option"),
    [
        (["--eval_strategy", "steps"], "eval_strategy='steps'"),
        (["--attn_implementation", "sdpa"], "attn_implementation='sdpa'"),
        (["--load_in_4bit", "true"], "load_in_4bit"),
    ],
)
def test_options_the_async_trainer_lacks_are_refused_before_the_model_loads(tmp_path, flags, option):
    argv = ["--model_name_or_path", "m", "--dataset_name", "d", "--output_dir", str(tmp_path / "out")]
    _, args, model_args = train_cli.parse_train_args([*argv, "--use_cpu", "true", *flags], TRAIN_ASYNC)
    with pytest.raises(ValueError, match=option):
        train_cli.check_trainer_options(args, model_args, TRAIN_ASYNC)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def async_config(tmp_path, tiny_model_dir) -> Path:
    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps(row) + "\n" for row in PROBLEMS))
    config = {
        "model_name_or_path": tiny_model_dir,
        "dataset_name": str(problems),
        "reward_funcs": ["math"],
        "exit_rule": "balance",
        "num_generations": 2,
        "samples_per_round": 2,
        "max_rounds": 2,
        "per_device_train_batch_size": 4,
        "max_completion_length": 4,
        "max_steps": 1,
        "use_cpu": True,
        "bf16": False,
        "dtype": "float32",
        "report_to": "none",
        "save_strategy": "no",
        "output_dir": str(tmp_path / "out"),
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_no_server_listening_fails_within_seconds_in_one_line(async_config, capsys):
    url = f"http://127.0.0.1:{_free_port()}"
    start = time.monotonic()
    flags = ["--vllm_server_base_url", url, "--vllm_server_timeout", "2"]
    assert cli.main(["train-async", "--config", str(async_config), *flags]) == 1
    assert time.monotonic() - start < 60  # the tiny model loads, then the server is waited for 2 s
    lines = [line for line in _error_lines(capsys.readouterr().err) if "trl-ada train-async: error:" in line]
    assert len(lines) == 1 and url in lines[0]


def test_no_server_with_http_weight_transfer_names_the_url_and_the_option(async_config, capsys):
    url = f"http://127.0.0.1:{_free_port()}"
    flags = ["--vllm_server_base_url", url, "--vllm_server_timeout", "2", "--token_budget", "0"]
    assert cli.main(["train-async", "--config", str(async_config), *flags]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    # the error may follow the progress bar's "0%|" on its line
    lines = [line for line in _error_lines(err) if "trl-ada train-async: error:" in line]
    assert len(lines) == 1 and url in lines[0] and "vllm_server_timeout" in lines[0]
