"""`AdaptiveRolloutWorker._use`: results of a prompt that exited earlier in the same batch are skipped, not a crash.

Against a real server (tests/vllm_engine/test_async_engine.py) one `results()` batch often holds every request of a
prompt; the prompt exits on its 4th result and is popped, and its later results used to raise `KeyError`, stopping
the worker with the error "5".
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
pytest.importorskip("trl.experimental.async_grpo")

from transformers import AutoTokenizer  # noqa: E402

from trl_ada.async_grpo import AsyncReinforceAdaConfig  # noqa: E402
from trl_ada.async_grpo.trainer import _worker_settings  # noqa: E402
from trl_ada.async_grpo.worker import AdaptiveRolloutWorker  # noqa: E402
from trl_ada.server_requests import CompletionResult  # noqa: E402
from trl_ada.toy import build_tiny_model  # noqa: E402


class _Recorder:
    def __init__(self):
        self.sent, self.cancelled = [], []

    def submit(self, key, prompt_ids, n, model=None):
        self.sent.append(key)

    def cancel(self, key):
        self.cancelled.append(key)


def odd_first_token(completion_ids, **kwargs):
    return [float(ids[0] % 2) for ids in completion_ids]


def test_results_after_the_prompt_exited_in_the_same_batch_are_skipped(tmp_path):
    model_dir = build_tiny_model(tmp_path / "model", hidden_size=64)
    args = AsyncReinforceAdaConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        report_to=[],
        sampling="balance",
        per_device_train_batch_size=8,
        max_prompts_in_flight=1,
    )
    worker = AdaptiveRolloutWorker(
        _worker_settings(args, str(model_dir)),
        [{"prompt": "hello"}],
        [odd_first_token],
        AutoTokenizer.from_pretrained(model_dir),
    )
    server, active = _Recorder(), {}
    worker._admit(active, server)
    assert len(server.sent) > args.num_generations  # a window of single-completion requests for the one prompt
    # every request answered in one batch, mixed rewards: balance exits after the first n = 4, in request order
    results = [CompletionResult(key, [[k + 1]], [[-1.0]], attempts=1) for k, key in enumerate(server.sent)]

    worker._use(results, active, server)

    assert active == {}
    samples = [worker.rollout_buffer.get_nowait() for _ in range(worker.rollout_buffer.qsize())]
    assert [s.group_id for s in samples] == [0] * args.num_generations
