"""Shared fixtures: a tiny offline model, built once per test session (per xdist worker)."""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from trl_ada.candidates import RefillSampler

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """Path of a random tiny Qwen2 model with a ChatML tokenizer (no download)."""
    from trl_ada.toy import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-model")))


def load_benchmark_script(name: str) -> ModuleType:
    """The module `benchmarks.<name>` (run from the repository root, as `python -m benchmarks.<name>` is)."""
    return importlib.import_module(f"benchmarks.{name}")


@pytest.fixture
def exit_rule_registry():
    """Restore the exit-rule registry after a test that registers rules."""
    from trl_ada import exit_rules

    saved = dict(exit_rules._EXIT_RULES)
    yield
    exit_rules._EXIT_RULES.clear()
    exit_rules._EXIT_RULES.update(saved)


@pytest.fixture(autouse=True)
def fresh_reward_caches():
    """Every test scores answers afresh: the reward's score and gold caches (`clear_caches`) hold nothing from an
    earlier test, so no test passes on a score another test's code computed (under mutation testing, a mutant's
    tests run in a process forked after the clean run)."""
    scoring = sys.modules.get("trl_ada.rewards.scoring")
    if scoring is not None:
        scoring.clear_caches()


DAPO = {"num_generations": 2, "samples_per_round": 2, "rounds_per_prompt": 1, "exit_rule": "mixed"}
"""DAPO's dynamic sampling at n=2: one round of n per candidate, exit on a mixed pool."""


def run_scripted(sampler: RefillSampler, script: dict[int, list[float]]) -> list[list[int]]:
    """Drive `sampler` with each candidate's rewards taken in order from `script`; returns each round's plan."""
    plans = []
    while not sampler.done:
        plan = sampler.plan_round()
        plans.append(plan)
        rewards = []
        for prompt, size in zip(plan, sampler.plan_sizes, strict=True):
            rewards += script[prompt][:size]
            script[prompt] = script[prompt][size:]
        sampler.ingest(rewards)
    return plans
