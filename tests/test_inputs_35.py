"""Issue 35: inputs that used to be misread, kept silently or fail with a traceback, each now refused or handled."""

from __future__ import annotations

import json
import logging
import shutil
import zipfile
from pathlib import Path

import pytest
from refusals import names, refusal

from trl_ada.cli import select_prompts

PROBLEMS = [{"problem": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(8)]


@pytest.fixture(autouse=True)
def fresh_log_handler():
    """The CLI adds a stderr handler to the `trl_ada` logger once; let each test's captured stderr receive it."""
    package_logger = logging.getLogger("trl_ada")
    saved = package_logger.handlers[:]
    package_logger.handlers.clear()
    yield
    package_logger.handlers[:] = saved


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _error_line(capsys, command: str) -> str:
    """The one error line of `command` (no traceback before it)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"trl-ada {command}: error: ")
    return line


# --------------------------------------------------------------------------- item 8: select-prompts --overwrite


def _fake_selection(monkeypatch, kept_rows: int = 3) -> None:
    """select-prompts without a model: every input check passes and the 'selection' is the first rows."""
    from datasets import Dataset

    monkeypatch.setattr(select_prompts, "check_model", lambda *a, **k: None)
    monkeypatch.setattr(select_prompts, "fitting_prompts", lambda datasets, *a: datasets)
    rows = {"problem": [row["problem"] for row in PROBLEMS[:kept_rows]]}
    monkeypatch.setattr(select_prompts, "select_prompts", lambda *a, **k: Dataset.from_dict(rows))


def test_select_prompts_overwrite_refuses_a_directory_with_files_it_did_not_write(tmp_path, monkeypatch, capsys):
    from datasets import Dataset

    from trl_ada.evaluation import save_selection

    problems = _jsonl(tmp_path / "problems.jsonl", PROBLEMS)
    out = tmp_path / "selected"
    save_selection(Dataset.from_dict({"problem": ["old"]}), out)  # an earlier selection ...
    (out / "notes.txt").write_text("mine")  # ... plus the user's own file
    _fake_selection(monkeypatch)
    argv = ["--model", "m", "--dataset", problems, "--output", str(out), "--overwrite", "--backend", "transformers"]
    assert select_prompts.main(argv) == 2
    line = _error_line(capsys, "select-prompts")
    assert "--output" in line and str(out) in line and "notes.txt" in line
    assert (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").rename(tmp_path / "notes.txt")  # the suggested fix: move it away
    assert select_prompts.main(argv) == 0
    assert len((out / "prompts.jsonl").read_text().splitlines()) == 3  # the earlier selection was replaced


def test_select_prompts_overwrite_replaces_an_earlier_selection_of_several_shards(tmp_path, monkeypatch):
    from datasets import Dataset

    problems = _jsonl(tmp_path / "problems.jsonl", PROBLEMS)
    out = tmp_path / "selected"
    Dataset.from_dict({"problem": list("abcdef")}).save_to_disk(str(out), num_shards=3)
    (out / "prompts.jsonl").write_text("{}\n")
    _fake_selection(monkeypatch, kept_rows=2)
    argv = ["--model", "m", "--dataset", problems, "--output", str(out), "--overwrite", "--backend", "transformers"]
    assert select_prompts.main(argv) == 0
    assert len((out / "prompts.jsonl").read_text().splitlines()) == 2


# --------------------------------------------------------------------------- item 10: null or empty problems


@pytest.mark.parametrize("blank", [None, "", "   ", []])
def test_rows_with_a_null_or_empty_problem_are_dropped_with_a_count(blank, caplog):
    from datasets import Dataset

    from trl_ada.data import format_dataset

    rows = [{"problem": "What is 1 + 1?", "answer": "2"}, {"problem": blank, "answer": "3"}]
    if blank == []:
        rows[0]["problem"] = [{"role": "user", "content": "What is 1 + 1?"}]
    with caplog.at_level(logging.WARNING, logger="trl_ada.data"):
        formatted = format_dataset(Dataset.from_list(rows))
    assert formatted["answer"] == ["2"]
    assert not any("None" in message["content"] for prompt in formatted["prompt"] for message in prompt)
    names(caplog.text, "dropped 1 of 2 rows", "column 'problem'")


CHAT_ASKING_NOTHING = [
    ([{"role": "user", "content": None}], "message 0 ('user') has content null"),
    ([{"role": "system", "content": None}, {"role": "user", "content": "Hi?"}], "message 0 ('system')"),
    ([{"role": "user", "content": "  "}], "last message ('user') is empty"),
    ([{"role": "user", "content": ""}], "last message ('user') is empty"),
]


@pytest.mark.parametrize(("conversation", "why"), CHAT_ASKING_NOTHING)
def test_a_chat_prompt_that_asks_nothing_is_dropped_from_files_and_refused_by_the_trainer(conversation, why, caplog):
    from datasets import Dataset

    from trl_ada.data import check_train_prompts, drop_unposed, format_dataset

    asks = [{"role": "user", "content": "What is 1 + 1?"}]
    with caplog.at_level(logging.WARNING, logger="trl_ada.data"):
        formatted = format_dataset(
            Dataset.from_list([{"problem": asks, "answer": "2"}, {"problem": conversation, "answer": "3"}])
        )
    assert formatted["answer"] == ["2"]
    names(caplog.text, "dropped 1 of 2 rows", "column 'problem'")
    train = Dataset.from_list([{"prompt": asks}, {"prompt": conversation}])
    refused = refusal(check_train_prompts, train, None, None, 16)  # before the tokenizer is read
    names(refused, "train_dataset row 1", why, "drop_unposed(train_dataset, 'prompt')")
    check_train_prompts(drop_unposed(train, "prompt"), None, None, 16)  # the fix


def test_a_dataset_without_any_problem_is_refused_naming_the_column():
    from datasets import Dataset

    from trl_ada.data import drop_unposed

    refused = refusal(
        drop_unposed, Dataset.from_dict({"question": [None, " "], "answer": ["1", "2"]}), "question", "data.jsonl"
    )
    names(refused, "data.jsonl: ", "column 'question'", "`problem_column`")


def test_select_prompts_drops_the_rows_without_a_problem_before_sampling(tmp_path, monkeypatch, capsys):
    problems = _jsonl(tmp_path / "problems.jsonl", [*PROBLEMS[:3], {"problem": None, "answer": "4"}])
    seen = []
    _fake_selection(monkeypatch)
    monkeypatch.setattr(select_prompts, "fitting_prompts", lambda datasets, *a: seen.append(datasets) or datasets)
    argv = ["--model", "m", "--dataset", problems, "--output", str(tmp_path / "o"), "--backend", "transformers"]
    assert select_prompts.main(argv) == 0
    assert len(seen[0][problems]) == 3
    names(capsys.readouterr().err, "dropped 1 of 4 rows", "column 'problem'")


# --------------------------------------------------------------------------- item 12: `eval_strategy: no` in YAML


def _parse_recipe(tmp_path: Path, text: str):
    from trl_ada.cli.train import parse_train_args

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"model_name_or_path: m\noutput_dir: {tmp_path / 'run'}\nreport_to: none\nuse_cpu: true\n{text}")
    return parse_train_args(["--config", str(recipe)])[1]


def test_unquoted_no_in_yaml_is_the_choice_no_for_every_strategy(tmp_path):
    config = _parse_recipe(tmp_path, "eval_strategy: no\nsave_strategy: no\nlogging_strategy: off\n")
    assert (config.eval_strategy, config.save_strategy, config.logging_strategy) == ("no", "no", "no")


def test_a_yaml_boolean_for_an_option_without_such_a_choice_is_still_refused(tmp_path):
    from trl_ada.cli.common import UsageError

    with pytest.raises(UsageError) as refused:
        _parse_recipe(tmp_path, "hub_strategy: no\n")
    names(str(refused.value), "hub_strategy: False", "--hub_strategy")


# --------------------------------------------------------------------------- items 9 and 14: incomplete checkpoints


def _checkpoint(root: Path, step: int) -> Path:
    """A complete checkpoint-`step`: trainer state, safetensors weights, optimizer."""
    import numpy as np
    from safetensors.numpy import save_file

    path = root / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    save_file({"w": np.zeros(16, np.float32)}, str(path / "model.safetensors"))
    with zipfile.ZipFile(path / "optimizer.pt", "w") as archive:  # as torch.save writes it: a zip archive
        archive.writestr("optimizer/data.pkl", b"optimizer state" * 8)
    return path


def _truncate(file: Path) -> None:
    file.write_bytes(file.read_bytes()[:-10])


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: (p / "model.safetensors").unlink(), "it has no model weights"),
        (lambda p: [f.unlink() for f in p.iterdir() if f.name != "trainer_state.json"], "it has no model weights"),
        (lambda p: (p / "optimizer.pt").write_bytes(b""), "its optimizer.pt is empty"),
        (lambda p: _truncate(p / "model.safetensors"), "its model.safetensors is truncated or corrupt"),
        (lambda p: (p / "model.safetensors").write_bytes(b"\xff" * 12), "its model.safetensors is truncated"),
        (lambda p: _truncate(p / "optimizer.pt"), "its optimizer.pt is truncated or corrupt"),
    ],
)
def test_resume_true_falls_back_past_a_checkpoint_with_a_missing_empty_or_truncated_file(
    tmp_path, caplog, damage, reason
):
    from trl_ada.run_dir import is_complete, resolve_resume

    previous = _checkpoint(tmp_path, 1)
    newest = _checkpoint(tmp_path, 2)
    damage(newest)
    assert not is_complete(newest) and is_complete(previous)
    with caplog.at_level(logging.INFO, logger="trl_ada.run_dir"):
        assert resolve_resume(tmp_path, True) == str(previous)
    assert f"{newest}: it was not completely written ({reason}" in caplog.text
    assert f"Resuming from {previous}" in caplog.text  # says which
    refused = refusal(resolve_resume, tmp_path, str(newest))
    names(refused, f"resume_from_checkpoint={str(newest)!r}", reason, f"{str(previous)!r}")


def test_a_sharded_checkpoint_with_a_missing_shard_is_incomplete(tmp_path):
    from trl_ada.run_dir import incomplete_reason

    path = _checkpoint(tmp_path, 1)
    (path / "model.safetensors").rename(path / "model-00001-of-00002.safetensors")
    shards = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))
    assert incomplete_reason(path) == "its weight shard model-00002-of-00002.safetensors is missing"
    (path / "model-00002-of-00002.safetensors").write_bytes((path / "model-00001-of-00002.safetensors").read_bytes())
    assert incomplete_reason(path) is None


def test_train_resumes_the_newest_complete_checkpoint_by_path_and_refuses_in_one_line_without_one(tmp_path, capsys):
    from types import SimpleNamespace

    from trl_ada.cli.train import check_run_dir, main

    previous = _checkpoint(tmp_path, 1)
    (_checkpoint(tmp_path, 2) / "model.safetensors").unlink()
    args = SimpleNamespace(output_dir=str(tmp_path), resume_from_checkpoint="true", overwrite_output_dir=False)
    check_run_dir(args)
    assert args.resume_from_checkpoint == str(previous)  # the trainer resumes exactly this one

    (previous / "optimizer.pt").write_bytes(b"")
    flags = ["--output_dir", str(tmp_path), "--model_name_or_path", str(tmp_path / "no-model"), "--use_cpu", "1"]
    assert main([*flags, "--report_to", "none", "--resume_from_checkpoint", "true"]) == 2
    line = _error_line(capsys, "train")
    assert "only partial checkpoints (checkpoint-1, checkpoint-2)" in line and "no-model" not in line


# --------------------------------------------------------------------------- item 13: the real-model task data


def _capitals(tmp_path: Path, text: str, encoding: str = "utf-8") -> Path:
    path = tmp_path / "capitals.csv"
    path.write_bytes(text.encode(encoding))
    return path


def test_a_capitals_row_without_a_country_is_dropped_with_a_count(tmp_path, caplog):
    from trl_ada.real.tasks import load_capitals

    path = _capitals(tmp_path, "country,capital\nFrance,Paris\n,Nowhere\n  ,Elsewhere\nItaly,Rome\n")
    with caplog.at_level(logging.WARNING, logger="trl_ada"):
        table = load_capitals(path)
    assert table["country"] == ["France", "Italy"]
    names(caplog.text, "dropped 2 of 4 rows", "column 'country'")


def test_a_country_listed_twice_is_kept_once_and_never_in_both_train_and_control(tmp_path, caplog):
    from trl_ada.real.tasks import capitals_task, load_capitals

    path = _capitals(tmp_path, "country,capital\nFrance,Paris\nItaly,Rome\nfrance,paris\nSpain,Madrid\n")
    with caplog.at_level(logging.WARNING, logger="trl_ada.real.tasks"):
        assert load_capitals(path)["country"] == ["France", "Italy", "Spain"]
    assert "dropped 1 repeated rows" in caplog.text and "france" in caplog.text
    for seed in range(5):
        task = capitals_task(2, 1, seed=seed, path=path)
        trained = {c.casefold() for c in task["train"]["fact"]}
        assert not trained & {c.casefold() for c in task["control"]["fact"]}


def test_contradictory_capitals_are_refused_naming_the_country(tmp_path):
    from trl_ada.real.tasks import load_capitals

    path = _capitals(tmp_path, "country,capital\nFrance,Paris\nItaly,Rome\nFrance,Lyon\n")
    names(refusal(load_capitals, path), f"{path}: France", "'Paris' and 'Lyon'", "keep one row")


def test_a_capitals_file_with_a_byte_order_mark_is_read(tmp_path):
    from trl_ada.real.tasks import load_capitals

    path = _capitals(tmp_path, "country,capital\nFrance,Paris\n", encoding="utf-8-sig")
    assert load_capitals(path)["capital"] == ["Paris"]


def test_a_latin1_capitals_file_is_one_error_naming_the_file_and_the_fix(tmp_path):
    import subprocess

    from trl_ada.real.tasks import load_capitals

    path = _capitals(tmp_path, "country,capital\nCôte d'Ivoire,Yamoussoukro\n", encoding="latin-1")
    with pytest.raises(ValueError) as refused:
        load_capitals(path)
    message = str(refused.value)
    assert str(path) in message and "UTF-8" in message and "\n" not in message
    command = message.split("`")[1]  # the suggested conversion works
    if shutil.which("iconv") is None:
        pytest.skip("no iconv here to run the suggested conversion")
    subprocess.run(command, shell=True, check=True, cwd=tmp_path)
    assert load_capitals(tmp_path / "capitals-utf8.csv")["country"] == ["Côte d'Ivoire"]


# --------------------------------------------------------------------------- item 14: sane upper bounds


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--samples_per_round", "100000000"], "samples_per_round=100000000: must be in [1, 4096]"),
        (
            ["--sampling", "dapo", "--pass_rate_memory", "true", "--skip_unsolvable_draws", "100000000"],
            "skip_unsolvable_draws=100000000: must be in [1, 10000]",
        ),
    ],
)
def test_an_absurd_sample_count_is_refused_in_one_line_before_the_model_loads(tmp_path, capsys, flags, named):
    from trl_ada.cli.train import main
    from trl_ada.plan import SamplingPlan

    base = ["--output_dir", str(tmp_path / "run"), "--model_name_or_path", str(tmp_path / "no-model")]
    assert main([*base, "--use_cpu", "1", "--report_to", "none", *flags]) == 2
    line = _error_line(capsys, "train")
    assert named in line and "no-model" not in line
    SamplingPlan.from_fields(num_generations=4, samples_per_round=4096, max_rounds=1)  # the bound itself is allowed


# --------------------------------------------------------------------------- item 14: the SmolLM2 fixture's cache


def _finished_fixture(cache: Path) -> Path:
    from trl_ada.real import model

    folder = cache / model.SMOLLM2_NAME
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / model.MARKER).write_text(json.dumps({"files": {"config.json": 2}}))
    return folder


def test_a_tilde_in_trl_ada_cache_is_the_home_folder(monkeypatch, tmp_path):
    from trl_ada.real import model

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TRL_ADA_CACHE", "~/x")
    assert model.default_cache_dir() == tmp_path / "x"
    folder = _finished_fixture(tmp_path / "x")
    assert model.smollm2_checkpoint() == folder
    assert model.smollm2_checkpoint("~/x") == folder


def test_a_corrupt_marker_is_a_fixture_error_with_the_fix(tmp_path):
    from trl_ada.real import FixtureError, smollm2_checkpoint

    folder = _finished_fixture(tmp_path)
    (folder / "trl_ada_fixture.json").write_text('{"files": {"config.js')
    with pytest.raises(FixtureError) as refused:
        smollm2_checkpoint(tmp_path)
    names(str(refused.value), str(folder / "trl_ada_fixture.json"), "JSONDecodeError", f"rm -rf {folder}")


def test_a_cache_folder_that_cannot_be_created_is_a_fixture_error(tmp_path, monkeypatch):
    from trl_ada.real import FixtureError, model, smollm2_checkpoint

    monkeypatch.setattr(model, "smollm2_gguf", lambda: tmp_path / "model.gguf")
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    with pytest.raises(FixtureError) as refused:
        smollm2_checkpoint(blocker / "sub")
    names(str(refused.value), str(blocker / "sub"), "TRL_ADA_CACHE")


def test_the_next_call_removes_the_staging_folders_of_killed_conversions(tmp_path):
    import os
    import socket
    import subprocess
    import sys

    from trl_ada.real import model

    folder = _finished_fixture(tmp_path)
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    prefix = f".{model.SMOLLM2_NAME}.staging-{socket.gethostname()}"
    killed = tmp_path / f"{prefix}-{finished.pid}-abc"
    running = tmp_path / f"{prefix}-{os.getpid()}-def"
    old_release, recent = tmp_path / f".{model.SMOLLM2_NAME}-old", tmp_path / f".{model.SMOLLM2_NAME}-new"
    for staging in (killed, running, old_release, recent):
        staging.mkdir()
        (staging / "model.safetensors").write_bytes(b"half")
    os.utime(old_release, (0, 0))
    assert model.smollm2_checkpoint(tmp_path) == folder
    assert not killed.exists() and not old_release.exists()
    assert running.exists() and recent.exists()  # a conversion in progress is left alone


# --------------------------------------------------------------------------- item 14: `evaluate --datasets =path`


def test_a_dataset_starting_with_equals_is_refused_with_a_hint_that_works(tmp_path, monkeypatch, capsys):
    from trl_ada.cli import evaluate

    monkeypatch.chdir(tmp_path)
    _jsonl(tmp_path / "problems.jsonl", PROBLEMS)
    monkeypatch.setattr(evaluate, "avg_at_k", lambda *a, **k: pytest.fail("sampled before the check"))
    monkeypatch.setattr(evaluate, "check_model", lambda *a, **k: None)
    monkeypatch.setattr(evaluate, "fitting_prompts", lambda datasets, *a: datasets)
    assert evaluate.main(["--model", "m", "--datasets", "=problems.jsonl"]) == 2
    line = _error_line(capsys, "evaluate")
    assert "--datasets =problems.jsonl" in line and "--datasets problems.jsonl" in line
    assert evaluate.main(["--model", "m", "--datasets", "math="]) == 2
    assert "--datasets math=" in _error_line(capsys, "evaluate")

    class Report:
        def table(self) -> str:
            return "table"

    labels = []
    monkeypatch.setattr(evaluate, "avg_at_k", lambda model, datasets, **k: labels.append(list(datasets)) or Report())
    assert evaluate.main(["--model", "m", "--datasets", "problems.jsonl"]) == 0  # the hints work
    assert evaluate.main(["--model", "m", "--datasets", "LABEL=problems.jsonl"]) == 0
    assert labels == [["problems"], ["LABEL"]]


# --------------------------------------------------------------------------- item 14: vllm_server_timeout


@pytest.mark.parametrize("command", ["train", "train-async"])
@pytest.mark.parametrize("timeout", ["-5", "0"])
def test_a_vllm_server_timeout_that_is_not_positive_is_refused_in_one_line(tmp_path, capsys, command, timeout):
    from trl_ada import cli

    base = ["--output_dir", str(tmp_path / "run"), "--model_name_or_path", str(tmp_path / "no-model")]
    argv = [command, *base, "--report_to", "none", "--vllm_server_timeout", timeout]
    assert cli.main([*argv, *(["--use_cpu", "1"] if command == "train" else [])]) == 2
    line = _error_line(capsys, command)
    assert f"vllm_server_timeout={float(timeout)!r}" in line and "(0, inf)" in line and "=240.0" in line


# --------------------------------------------------------------------------- item 14: `--help` defaults


def _help_of(command: str) -> dict[str, str]:
    from trl_ada.cli.train import TRAIN, make_parser
    from trl_ada.cli.train_async import TRAIN_ASYNC

    parser = make_parser(command=TRAIN if command == "train" else TRAIN_ASYNC)
    return {action.dest: " ".join((action.help or "").split()) for action in parser._actions}


@pytest.mark.parametrize(
    ("command", "defaults"),
    [
        (
            "train",
            {"num_generations": 4, "scale_rewards": "none", "loss_type": "dapo", "beta": 0.0, "epsilon": 0.2},
        ),
        ("train-async", {"num_generations": 4, "scale_rewards": "none"}),
    ],
)
def test_help_shows_the_defaults_that_differ_from_trl(command, defaults):
    shown = _help_of(command)
    for name, default in defaults.items():
        assert f"Default: {default!r}." in shown[name], name


def test_train_async_help_shows_the_schedule_it_runs_by_default(tmp_path):
    from trl_ada.async_grpo import AsyncReinforceAdaConfig

    assert _help_of("train-async")["generation_schedule"].endswith("Default: the preset's, else 'streaming'.")
    assert _help_of("train")["generation_schedule"].endswith("Default: the preset's, else 'rounds'.")
    run = {"use_cpu": True, "bf16": False, "per_device_train_batch_size": 8, "report_to": [], "save_strategy": "no"}
    assert AsyncReinforceAdaConfig(output_dir=str(tmp_path), **run).generation_schedule == "streaming"


# --------------------------------------------------------------------------- item 14: NaN and inf rewards


def test_a_nan_reward_abstains_like_none_and_an_infinite_one_is_refused():
    import math

    import numpy as np

    from trl_ada.checks import check_rewards
    from trl_ada.groups import aggregate_rewards, reward_values

    check_rewards("r", [math.nan, None, 1.0])  # both pass the check: no RewardError
    with_nan = aggregate_rewards(np.array([[math.nan, 1.0], [math.nan, math.nan]]), [1.0, 1.0])
    with_none = aggregate_rewards(np.array([[None, 1.0], [None, None]], dtype=float), [1.0, 1.0])
    assert np.array_equal(with_nan, with_none, equal_nan=True) and math.isnan(with_nan[1])
    names(refusal(reward_values, [math.inf, 1.0], 2), "rewards[0] = inf", "or NaN")
    text = (Path(__file__).resolve().parents[1] / "docs" / "algorithm.md").read_text()
    assert 'A reward of `float("nan")` means the same as `None`' in text


# --------------------------------------------------------------------------- item 14: Ctrl-C during a save


def test_ctrl_c_during_a_checkpoint_save_is_one_line_naming_the_checkpoint(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from trl_ada.cli import train
    from trl_ada.run_dir import SAVING_MARKER, SaveInterrupted, saving_checkpoint

    checkpoint = tmp_path / "run" / "checkpoint-3"

    def interrupted_save(trainer, script_args):
        with saving_checkpoint(checkpoint):
            raise KeyboardInterrupt

    monkeypatch.setattr(train, "check_model", lambda *a, **k: None)
    monkeypatch.setattr(train, "build_trainer", lambda *a, **k: SimpleNamespace(add_callback=lambda cb: None))
    monkeypatch.setattr(train, "run_training", interrupted_save)
    argv = ["--output_dir", str(tmp_path / "run"), "--model_name_or_path", "m", "--use_cpu", "1"]
    assert train.main([*argv, "--report_to", "none"]) == 130
    line = _error_line(capsys, "train")
    assert str(checkpoint) in line and "--resume_from_checkpoint true" in line
    assert (checkpoint / SAVING_MARKER).exists()
    with pytest.raises(KeyboardInterrupt), saving_checkpoint(tmp_path / "other"):  # still an interrupt in Python
        raise SaveInterrupted("nested")
