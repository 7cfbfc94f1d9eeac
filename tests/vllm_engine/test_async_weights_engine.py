"""`HTTPWeightTransfer` against a real vLLM server on CPU: after each send the server computes the sent model exactly.

Two sends of different weights: the second one catches a tied lm_head still packed from the first send's embedding.
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

import torch  # noqa: E402
from scripted import TOLERANCE  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402
from vllm_support.probes import model_logprobs, server_prompt_logprobs  # noqa: E402

from trl_ada.async_grpo.weights import HTTPWeightTransfer  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PROBE = [3, 17, 42, 5, 99, 8, 64, 23, 11, 77, 2, 50]


def perturbed(model_dir: str, seed: int) -> torch.nn.Module:
    """The servable model with every weight moved by noise of 0.05 (a different policy for each seed)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=generator))
    return model.eval()


def send_and_gap(transfer: HTTPWeightTransfer, server, model: torch.nn.Module) -> float:
    """Sync `model` as the trainer does (pause, send, resume); the largest prompt log-prob gap to the server after."""
    transfer.pause()
    transfer.send_weights((name, param.detach()) for name, param in model.named_parameters())  # what TRL sends
    transfer.resume()
    expected = model_logprobs(model, PROBE)
    got = server_prompt_logprobs(server.base_url, server.model_dir, PROBE)
    return max(abs(a - b) for a, b in zip(got, expected, strict=True))


def test_two_sends_reach_the_server_exactly(vllm_server, servable_model_dir):
    transfer = HTTPWeightTransfer(vllm_server.base_url, startup_timeout=10.0)
    transfer.init_weight_transfer()
    before = server_prompt_logprobs(vllm_server.base_url, vllm_server.model_dir, PROBE)
    first, second = perturbed(servable_model_dir, seed=1), perturbed(servable_model_dir, seed=2)
    try:
        gaps = [send_and_gap(transfer, vllm_server, first), send_and_gap(transfer, vllm_server, second)]
        after = server_prompt_logprobs(vllm_server.base_url, vllm_server.model_dir, PROBE)
    finally:  # the session's server serves the original model to the other tests
        send_and_gap(transfer, vllm_server, AutoModelForCausalLM.from_pretrained(servable_model_dir).eval())
        transfer.destroy()
    assert max(gaps) < TOLERANCE, gaps
    # the sends did change what the server computes, so the comparison is not vacuous
    assert max(abs(a - b) for a, b in zip(before, after, strict=True)) > 100 * TOLERANCE
