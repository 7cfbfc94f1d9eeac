"""`cpu_weight_sync()`: TRL's vLLM weight sync, made to work (exactly) on vLLM's CPU backend. Test-only.

TRL 1.16 refuses server-mode sync without CUDA (its NCCL communicator) and its colocate sync fails on CPU. Inside
`cpu_weight_sync()`:

* server mode: the client's communicator setup and teardown do nothing; `update_named_params` posts the serialised
  weights to the server's dev-mode `/collective_rpc` (`trl_ada.async_grpo.weights.post_weights`), whose workers run
  the package's `CPUWeightReloadExtension`; TRL still walks the parameters and resets the prefix cache as usual;
* colocate mode: `sync_weights` reloads the parameters into the in-process engine the same way, chunk by chunk,
  then resets the prefix cache; the engine is built with `COLOCATED_ENGINE_ARGS`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from trl_ada.async_grpo.weights import begin_reload, finish_reload, load_tensors, post_weights, weight_chunks

from . import check_versions

RPC_TIMEOUT_S = 120.0
COLOCATED_ENGINE_ARGS = {"dtype": "float32", "enforce_eager": True, "kv_cache_memory_bytes": 64 * 2**20}
"""What TRL's `LLM(...)` lacks on CPU: float32 as trained (not bfloat16), no compilation, a KV cache sized for tiny
models (the CPU default is 4 GiB, and the engines of successive tests are not all freed at once)."""


def _skip_communicator(client, *args, **kwargs) -> None:
    """No NCCL group on CPU: weights travel over HTTP instead."""


def _post_weights(client, metadata, named_params: Iterator) -> None:
    """Send every parameter to the server's workers through `/collective_rpc`, chunk by chunk, to be reloaded."""
    post_weights(client.session, client.base_url, named_params, RPC_TIMEOUT_S)


def colocated_model(generation):
    """The `nn.Module` inside a colocated `VLLMGeneration`'s engine, and its `VllmConfig`."""
    engine = generation.llm.llm_engine
    return engine.model_executor.driver_worker.model_runner.model, engine.vllm_config


def _sync_weights(generation, original) -> None:
    if generation.mode != "colocate":
        return original(generation)
    model, vllm_config = colocated_model(generation)
    begin_reload(model, vllm_config)
    for chunk in weight_chunks(generation._iter_named_params()):
        load_tensors(model, vllm_config, chunk)
    finish_reload(model, vllm_config)
    generation.llm.reset_prefix_cache()


@contextmanager
def cpu_weight_sync():
    """Within this context TRL's vLLM weight sync reaches a CPU engine exactly, in server and colocate mode."""
    check_versions()
    from trl.generation import vllm_client, vllm_generation

    client, generation = vllm_client.VLLMClient, vllm_generation.VLLMGeneration
    patches = [
        (client, "init_communicator", _skip_communicator),
        (client, "close_communicator", _skip_communicator),
        (client, "update_named_params", _post_weights),
        (generation, "sync_weights", functools.partialmethod(_sync_weights, generation.sync_weights)),
        (vllm_generation, "LLM", functools.partial(vllm_generation.LLM, **COLOCATED_ENGINE_ARGS)),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in patches]
    try:
        for owner, name, value in patches:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
