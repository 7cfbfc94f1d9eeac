"""TRL's private surface is touched in one module (`trl_ada/_trl.py`), and every joint there exists in the installed
TRL with the parameters we rely on: a TRL upgrade that moves one fails here, naming the joint and the version."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import trl
from trl import GRPOTrainer
from trl_crossings import trl_self_private_names

from trl_ada import _trl

PACKAGE = Path(__file__).resolve().parents[1] / "trl_ada"


def _trl_private_names() -> set[str]:
    """Every underscore member `GRPOTrainer` defines or sets in its own code (methods and `self._x = ...`)."""
    names = {name for name in dir(GRPOTrainer) if name.startswith("_") and not name.startswith("__")}
    return names | trl_self_private_names()


def test_every_joint_exists_in_the_installed_trl():
    assert _trl.check_joints() == []


def test_a_built_trainer_holds_every_attribute_joint(tiny_model_dir, tmp_path):
    from datasets import Dataset
    from tiny import tiny_config

    from trl_ada import ReinforceAdaTrainer

    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": "a"}]] * 4})
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=tiny_config(tmp_path, per_device_train_batch_size=4),
        train_dataset=dataset,
    )
    assert _trl.check_joints(trainer) == []


def test_a_moved_joint_is_reported_with_its_name_and_the_trl_version(monkeypatch):
    monkeypatch.delattr(GRPOTrainer, "_tokenize_prompts")
    monkeypatch.setattr(GRPOTrainer, "_calculate_rewards", lambda self, inputs, prompts: None)
    problems = _trl.check_joints()
    assert len(problems) == 2
    assert problems[0].startswith(
        f"GRPOTrainer._calculate_rewards takes ('inputs', 'prompts') in TRL {trl.__version__}"
    )
    assert problems[1] == (
        f"GRPOTrainer._tokenize_prompts is gone in TRL {trl.__version__} (called: prompt ids for streaming requests "
        "and length checks)."
    )


def test_a_missing_attribute_of_a_built_trainer_is_reported():
    present = {joint.name for joint in _trl.JOINTS if joint.kind == "attribute"} - {"_pending_metrics"}
    built = type("Built", (), dict.fromkeys(present))()
    assert _trl.check_joints(built) == [
        f"GRPOTrainer has no attribute _pending_metrics in TRL {trl.__version__} (read and written: reward "
        "functions' log_metric values)."
    ]


@pytest.mark.parametrize(
    "path",
    sorted(p for p in PACKAGE.rglob("*.py") if p.name != "_trl.py"),
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_no_module_but_the_joints_names_a_trl_private_member(path):
    private = _trl_private_names()
    named = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in private:
            named.add(node.attr)
        elif isinstance(node, ast.FunctionDef) and node.name in private:
            named.add(node.name)
        elif isinstance(node, ast.ClassDef):  # class attributes TRL reads (`_name = ...`)
            for statement in node.body:
                targets = (
                    statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
                )
                named.update(t.id for t in targets if isinstance(t, ast.Name) and t.id in private)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in private:
            named.add(node.value)
    assert named == set()


def _imports_from_trl() -> set[tuple[str, str]]:
    """(module, name) of every name the package imports from TRL, and of every `"trl.module:Name"` it loads."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "trl":
                found.update((node.module, alias.name) for alias in node.names)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                loaded = re.fullmatch(r"(trl(?:\.\w+)*):(\w+)", node.value)
                if loaded:
                    found.add(loaded.groups())
    return found


def test_every_import_from_trl_is_in_the_table_of_trl_names():
    listed = {(entry.module, entry.name) for entry in _trl.TRL_NAMES}
    listed_modules = {entry.module for entry in _trl.TRL_NAMES}
    imported = _imports_from_trl()
    assert ("trl.experimental.async_grpo", "AsyncGRPOConfig") in imported
    unlisted = {(m, n) for m, n in imported if (m, n) not in listed and f"{m}.{n}" not in listed_modules}
    assert unlisted == set()


def test_every_trl_name_exists_in_the_installed_trl_and_says_what_breaks():
    assert _trl.moved_names() == []
    joints = (*_trl.JOINTS, *_trl.ASYNC_JOINTS)
    assert all(entry.breaks for entry in (*joints, *_trl.TRL_NAMES))


def test_a_moved_trl_name_is_reported_with_what_breaks():
    gone = _trl.TRLName(
        "trl.experimental.async_grpo", "RolloutQueue", "what the worker fills", "the asynchronous trainer"
    )
    missing_module = _trl.TRLName("trl.experimental.nothing", "Thing", "a use", "a feature")
    assert _trl.moved_names((gone, missing_module)) == [
        f"trl.experimental.async_grpo.RolloutQueue is gone in TRL {trl.__version__} (what the worker fills; breaks "
        "the asynchronous trainer).",
        f"trl.experimental.nothing.Thing is gone in TRL {trl.__version__} (a use; breaks a feature).",
    ]


def test_every_async_joint_exists_in_the_installed_trl():
    assert _trl.check_async_joints() == []


def test_a_moved_async_joint_is_named(monkeypatch):
    from trl.experimental.async_grpo import AsyncGRPOTrainer

    monkeypatch.setattr(AsyncGRPOTrainer, "_save_checkpoint", lambda self, checkpoint: None)
    assert any("_save_checkpoint" in problem for problem in _trl.check_async_joints())


def test_a_step_of_four_rounds_passes_through_trl_once(tiny_model_dir, tmp_path):
    """The rounds run before TRL's `_generate_and_score_completions`, which then runs once over the kept rows; without
    environments, tools or images no round enters it (`docs/architecture.md`, "One step, as data")."""
    from trl_crossings import four_round_step

    crossings = four_round_step(tiny_model_dir, str(tmp_path / "out"))
    assert crossings.calls["GRPOTrainer._generate_and_score_completions"] == 1
    assert crossings.calls["GRPOTrainer._generate"] == crossings.calls["GRPOTrainer._calculate_rewards"] == 4
    assert crossings.entries["GRPOJoints._generate"] == 1  # TRL's one pass takes the kept rows
    assert crossings.entries["GRPOJoints._calculate_rewards"] == 1  # and their rewards, not scored twice
    # a round reaches TRL once to generate and once to score; TRL's log buffers are held once per step
    assert set(crossings.entries) == {
        "GRPOJoints._generate_and_score_completions",
        "GRPOJoints._generate",
        "GRPOJoints._calculate_rewards",
    }
    assert max(crossings.attributes.values()) <= 2 and crossings.total <= 30
