"""Shared fixtures: a tiny offline model, built once per test session (per xdist worker)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

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
