"""Fixtures of the real-engine suite (`make test-vllm`): a servable tiny model, a vLLM server, the CPU weight sync."""

from __future__ import annotations

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
def smollm2_server(tmp_path_factory):
    """A server of the real pretrained model, SmolLM2-135M-Instruct (`trl_ada.real.smollm2_checkpoint`), for the
    session; started by the first test that asks for it."""
    from trl_ada.real import smollm2_checkpoint

    yield from _serve(str(smollm2_checkpoint()), tmp_path_factory.mktemp("smollm2-server"))


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
    """TRL's weight sync reaches the CPU engine exactly (see `vllm_support.sync`)."""
    from vllm_support.sync import cpu_weight_sync

    with cpu_weight_sync():
        yield
