"""The run directory: one run at a time, no mixing with an earlier run, no half-written checkpoint resumed."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset
from refusals import names
from safetensors.numpy import save_file

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer
from trl_ada.run_dir import (
    LOCK_NAME,
    SAVING_MARKER,
    RunDirectoryError,
    check_output_dir,
    is_complete,
    last_complete_checkpoint,
    resolve_resume,
    run_lock,
)

pytestmark = pytest.mark.xdist_group("trainer")


def _checkpoint(root: Path, step: int, *, complete: bool = True) -> Path:
    path = root / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    save_file({"w": np.zeros(1, np.float32)}, str(path / "model.safetensors"))
    if not complete:
        (path / SAVING_MARKER).write_text("")
    return path


# --------------------------------------------------------------------------- pure rules


def test_output_dir_with_checkpoints_is_refused_unless_resuming_or_overwriting(tmp_path):
    _checkpoint(tmp_path, 2)
    _checkpoint(tmp_path, 3)
    with pytest.raises(RunDirectoryError) as refused:
        check_output_dir(tmp_path, resuming=False, overwrite=False)
    names(
        str(refused.value), f"output_dir '{tmp_path}'", "(checkpoint-2, checkpoint-3)", "resume_from_checkpoint=true"
    )
    names(str(refused.value), "overwrite_output_dir=true")
    assert check_output_dir(tmp_path, resuming=True, overwrite=False) == []
    assert [p.name for p in check_output_dir(tmp_path, resuming=False, overwrite=True)] == [
        "checkpoint-2",
        "checkpoint-3",
    ]
    assert check_output_dir(tmp_path / "new", resuming=False, overwrite=False) == []


@pytest.mark.parametrize("files", [["model.safetensors"], ["trainer_state.json", "config.json"], ["config.json"]])
def test_a_finished_run_saved_without_checkpoints_is_refused_like_one_with_them(tmp_path, files):
    for name in files:
        (tmp_path / name).write_text("{}")
    with pytest.raises(RunDirectoryError) as refused:
        check_output_dir(tmp_path, resuming=False, overwrite=False)
    listed = ", ".join(name for name in ("trainer_state.json", "config.json", "model.safetensors") if name in files)
    assert "\n" not in str(refused.value)
    names(str(refused.value), f"output_dir '{tmp_path}'", f"({listed})", "overwrite_output_dir=true", "new output_dir")
    assert check_output_dir(tmp_path, resuming=False, overwrite=True) == []  # nothing to delete: the save replaces
    (tmp_path / "README.md").unlink(missing_ok=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "README.md").write_text("notes")  # not a run
    assert check_output_dir(other, resuming=False, overwrite=False) == []


def test_the_train_command_refuses_a_finished_run_before_the_model_loads(tmp_path, capsys):
    from trl_ada.cli.train import main

    (tmp_path / "model.safetensors").write_bytes(b"")
    flags = ["--output_dir", str(tmp_path), "--model_name_or_path", str(tmp_path / "no-such-model"), "--use_cpu", "1"]
    assert main([*flags, "--report_to", "none"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("trl-ada train: error: ") and "\n" not in error
    names(error, f"output_dir '{tmp_path}'", "(model.safetensors)", "overwrite_output_dir=true")
    main([*flags, "--report_to", "none", "--overwrite_output_dir", "true"])  # past the run directory: the model
    assert "no-such-model" in capsys.readouterr().err


def test_resume_true_skips_partial_checkpoints_with_a_warning(tmp_path, caplog):
    _checkpoint(tmp_path, 1)
    _checkpoint(tmp_path, 10)  # numeric order, not text order
    _checkpoint(tmp_path, 11, complete=False)
    (tmp_path / "checkpoint-12").mkdir()  # interrupted before trainer_state.json
    with caplog.at_level(logging.WARNING, logger="trl_ada.run_dir"):
        assert resolve_resume(tmp_path, True) == str(tmp_path / "checkpoint-10")
    warned = caplog.text
    assert "checkpoint-12" in warned and "checkpoint-11" in warned and "not completely written" in warned
    with pytest.raises(RunDirectoryError, match="checkpoint-11.*not completely written.*checkpoint-10"):
        resolve_resume(tmp_path, str(tmp_path / "checkpoint-11"))
    assert resolve_resume(tmp_path, None) is None and resolve_resume(tmp_path, False) is None


def test_resume_true_without_a_complete_checkpoint_says_what_to_do(tmp_path):
    with pytest.raises(RunDirectoryError) as refused:
        resolve_resume(tmp_path, True)
    names(
        str(refused.value), "resume_from_checkpoint=True", f"'{tmp_path}' holds no checkpoint", "without resume_from"
    )
    _checkpoint(tmp_path, 1, complete=False)
    with pytest.raises(RunDirectoryError, match=r"only partial checkpoints \(checkpoint-1\)"):
        resolve_resume(tmp_path, True)
    with pytest.raises(RunDirectoryError, match="no such directory"):
        resolve_resume(tmp_path, str(tmp_path / "checkpoint-7"))
    assert last_complete_checkpoint(tmp_path / "missing") is None


def test_a_checkpoint_whose_trainer_state_does_not_parse_is_partial(tmp_path, caplog):
    _checkpoint(tmp_path, 1)
    truncated = _checkpoint(tmp_path, 2)
    (truncated / "trainer_state.json").write_text('{"global_step": 2, "log_hist')
    with caplog.at_level(logging.WARNING, logger="trl_ada.run_dir"):
        assert resolve_resume(tmp_path, True) == str(tmp_path / "checkpoint-1")
    names(caplog.text, f"{truncated}: ", "trainer_state.json", "truncated or corrupt")
    with pytest.raises(RunDirectoryError) as refused:
        resolve_resume(tmp_path, str(truncated))
    names(str(refused.value), f"={str(truncated)!r}", "trainer_state.json", f"{str(tmp_path / 'checkpoint-1')!r}")
    (truncated / "trainer_state.json").write_text("[2]")
    assert not is_complete(truncated)


def test_resume_from_the_string_true_in_python_says_the_boolean(tmp_path):
    with pytest.raises(RunDirectoryError) as refused:
        resolve_resume(tmp_path, "true")
    names(str(refused.value), "resume_from_checkpoint='true'", "no such directory", "the boolean True")


@pytest.mark.parametrize("inside", [False, True])
def test_an_output_dir_that_is_a_file_is_refused_by_the_lock(tmp_path, inside):
    file = tmp_path / "out"
    file.write_text("not a directory")
    output_dir = file / "run" if inside else file
    where = f"is inside '{file}', which is a file" if inside else "is a file"
    message = f"output_dir '{output_dir}' {where}; output_dir must be a directory"
    with pytest.raises(RunDirectoryError, match=message), run_lock(output_dir):
        pass


# --------------------------------------------------------------------------- lock

HOLD_LOCK = textwrap.dedent("""
    import sys, time
    from trl_ada.run_dir import run_lock
    with run_lock(sys.argv[1]):
        print("locked", flush=True)
        time.sleep(60)
""")


def _hold_lock_in_child(output_dir: Path) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(output_dir)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert child.stdout.readline().strip() == "locked"
    return child


def test_a_second_run_fails_at_once_naming_the_first(tmp_path):
    child = _hold_lock_in_child(tmp_path)
    try:
        start = time.perf_counter()
        message = rf"in use by process {child.pid} on .*delete .*{LOCK_NAME}"
        with pytest.raises(RunDirectoryError, match=message), run_lock(tmp_path):
            pass
        assert time.perf_counter() - start < 1.0
    finally:
        child.kill()
        child.wait()


def test_a_dead_runs_lock_is_taken_over_and_released(tmp_path, caplog):
    child = _hold_lock_in_child(tmp_path)
    child.kill()  # SIGKILL: no cleanup, the lock file stays
    child.wait()
    assert (tmp_path / LOCK_NAME).exists()
    with caplog.at_level(logging.WARNING, logger="trl_ada.run_dir"), run_lock(tmp_path) as me:
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == me.pid == os.getpid()
        with run_lock(tmp_path):  # re-entrant: the CLI and train() both take it
            pass
        assert (tmp_path / LOCK_NAME).exists()
    assert f"process {child.pid}" in caplog.text and "no longer running" in caplog.text
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_reused_pid_does_not_keep_a_lock_alive(tmp_path):
    stale = {"pid": os.getpid(), "host": os.uname().nodename, "started": 0.0, "process_start": "-1"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(stale))
    with run_lock(tmp_path):
        assert json.loads((tmp_path / LOCK_NAME).read_text())["process_start"] != "-1"


# --------------------------------------------------------------------------- trainer


def _dataset() -> Dataset:
    prompts = ["two plus two", "three plus one", "one plus one", "five minus one"] * 4
    return Dataset.from_dict({"prompt": prompts, "answer": ["4"] * len(prompts)})


def _reward(completions, **kwargs):
    return [float(len(c) % 2) for c in completions]


def _config(output_dir: Path, **overrides) -> ReinforceAdaConfig:
    fields = dict(
        output_dir=str(output_dir),
        num_generations=2,
        samples_per_round=2,
        max_rounds=2,
        per_device_train_batch_size=4,
        max_completion_length=4,
        max_steps=2,
        save_strategy="steps",
        save_steps=1,
        report_to="none",
        use_cpu=True,
        seed=0,
    )
    fields.update(overrides)
    return ReinforceAdaConfig(**fields)


def _trainer(model: str, output_dir: Path, **overrides) -> ReinforceAdaTrainer:
    return ReinforceAdaTrainer(
        model=model, reward_funcs=_reward, args=_config(output_dir, **overrides), train_dataset=_dataset()
    )


def test_trainer_refuses_a_used_output_dir_and_overwrites_only_when_asked(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    _trainer(tiny_model_dir, out).train()
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert not list(out.glob(f"checkpoint-*/{SAVING_MARKER}")) and not (out / LOCK_NAME).exists()

    with pytest.raises(RunDirectoryError) as refused:
        _trainer(tiny_model_dir, out, max_steps=1).train()
    names(str(refused.value), "(checkpoint-1, checkpoint-2)", "overwrite_output_dir=true")

    _trainer(tiny_model_dir, out, max_steps=1, overwrite_output_dir=True).train()
    assert [p.name for p in out.glob("checkpoint-*")] == ["checkpoint-1"]  # the old run's checkpoint-2 is gone


def test_trainer_refuses_a_finished_run_without_checkpoints_and_replaces_it_when_asked(
    tiny_model_dir, tmp_path, caplog
):
    out = tmp_path / "run"
    first = _trainer(tiny_model_dir, out, max_steps=1, save_strategy="no")
    first.train()
    first.save_model()
    first.save_state()
    saved = (out / "model.safetensors").read_bytes()
    assert not list(out.glob("checkpoint-*"))

    with pytest.raises(RunDirectoryError) as refused:
        _trainer(tiny_model_dir, out, max_steps=1, save_strategy="no").train()
    names(str(refused.value), "(trainer_state.json, config.json", "overwrite_output_dir=true")
    assert (out / "model.safetensors").read_bytes() == saved

    again = _trainer(tiny_model_dir, out, max_steps=2, save_strategy="no", overwrite_output_dir=True, seed=1)
    with caplog.at_level(logging.WARNING, logger="trl_ada.run_dir"):
        again.train()
    names(caplog.text, "overwrite_output_dir=True", "trainer_state.json, config.json")
    again.save_model()
    assert (out / "model.safetensors").read_bytes() != saved


def test_trainer_fails_at_once_while_another_run_holds_the_directory(tiny_model_dir, tmp_path):
    child = _hold_lock_in_child(tmp_path)
    try:
        with pytest.raises(RunDirectoryError, match=f"in use by process {child.pid}"):
            _trainer(tiny_model_dir, tmp_path).train()
        assert not list(tmp_path.glob("checkpoint-*"))
    finally:
        child.kill()
        child.wait()


def test_resume_true_picks_the_last_complete_checkpoint(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    _trainer(tiny_model_dir, out, save_total_limit=1).train()
    assert [p.name for p in out.glob("checkpoint-*")] == ["checkpoint-2"]  # rotation still works
    _trainer(tiny_model_dir, out, max_steps=1, overwrite_output_dir=True).train()
    (out / "checkpoint-2").mkdir()  # a save of step 2 that died before writing anything
    resumed = _trainer(tiny_model_dir, out, max_steps=2)
    resumed.train(resume_from_checkpoint=True)
    assert resumed.state.global_step == 2
    assert json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())["global_step"] == 2


def test_a_save_into_a_partial_folder_of_the_same_step_keeps_none_of_its_files(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    _trainer(tiny_model_dir, out, max_steps=1).train()
    partial = _checkpoint(out, 2, complete=False)  # a killed save of step 2, by a run with the memory on
    (partial / "pass_rate_memory.npz").write_bytes(b"stale memory of the killed run")
    _trainer(tiny_model_dir, out, max_steps=2).train(resume_from_checkpoint=True)
    assert is_complete(partial) and (partial / "model.safetensors").is_file()
    assert not (partial / "pass_rate_memory.npz").exists()  # this run saves without the memory


KILLED_DURING_SAVE = textwrap.dedent("""
    import sys, time
    from datasets import Dataset
    from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer

    class Trainer(ReinforceAdaTrainer):
        def _save_optimizer_and_scheduler(self, output_dir):
            super()._save_optimizer_and_scheduler(output_dir)
            if self.state.global_step == 2:
                print("saving", flush=True)
                time.sleep(60)

    prompts = ["two plus two", "three plus one", "one plus one", "five minus one"] * 4
    args = ReinforceAdaConfig(
        output_dir=sys.argv[2], num_generations=2, samples_per_round=2, max_rounds=2, per_device_train_batch_size=4,
        max_completion_length=4, max_steps=3, save_strategy="steps", save_steps=1, report_to="none", use_cpu=True,
    )
    Trainer(
        model=sys.argv[1], reward_funcs=lambda completions, **kw: [1.0] * len(completions), args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
    ).train()
""")


@pytest.mark.slow
def test_a_run_killed_during_a_save_resumes_from_the_previous_checkpoint(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_DURING_SAVE, tiny_model_dir, str(out)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert child.stdout.readline().strip() == "saving"
    child.send_signal(signal.SIGKILL)
    child.wait()
    partial = out / "checkpoint-2"
    assert (partial / "optimizer.pt").exists() and (partial / SAVING_MARKER).exists()
    assert not (partial / "trainer_state.json").exists()

    resumed = _trainer(tiny_model_dir, out, max_steps=3)
    resumed.train(resume_from_checkpoint=True)  # the stale lock is taken over, checkpoint-2 skipped
    assert resumed.state.global_step == 3
    for step in (1, 2, 3):
        assert json.loads((out / f"checkpoint-{step}" / "trainer_state.json").read_text())["global_step"] == step
    assert not list(out.glob(f"checkpoint-*/{SAVING_MARKER}"))
