"""`generation_schedule="streaming"` against a real vLLM server on CPU: per-completion requests, exits as results
arrive, cancellation on the server, the engine's own log-probs on every kept row, one weight sync per step."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("vllm")

import requests  # noqa: E402
import scripted  # noqa: E402
from datasets import Dataset  # noqa: E402
from scripted import ALTERNATING, ONE_IN_FOUR, PROMPTS, RIGHT, STEPS, TOLERANCE, WRONG, ScriptedReward  # noqa: E402
from tiny import run_two_processes  # noqa: E402
from vllm_support.probes import server_metric  # noqa: E402
from vllm_support.server import MAX_MODEL_LEN  # noqa: E402

from trl_ada import ReinforceAdaTrainer  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def assert_server_idle(base_url: str, timeout: float = 60.0) -> None:
    """Nothing running or waiting on the server, allowing it `timeout` seconds to process the aborts of closed
    requests: the server learns of a closed connection asynchronously, and its gauges change on its next engine
    step, which a loaded 2-CPU machine can delay past a fixed sleep."""
    names = ("vllm:num_requests_running", "vllm:num_requests_waiting")
    deadline = time.monotonic() + timeout
    while any(server_gauge(base_url, name) for name in names) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [server_gauge(base_url, name) for name in names] == [0, 0]


def server_gauge(base_url: str, name: str) -> float:
    """Sum of a Prometheus gauge or counter over its label sets, read from the server's `/metrics`."""
    return server_metric(base_url, name)


def test_streaming_balance_trains_with_the_engine_logprobs_and_leaves_nothing_running(
    vllm_server, servable_model_dir, cpu_sync, tmp_path
):
    args = scripted.make_config("balance", "server", tmp_path, vllm_server.base_url, generation_schedule="streaming")
    reward = ScriptedReward()
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in PROMPTS]})
    trainer = ReinforceAdaTrainer(model=servable_model_dir, reward_funcs=[reward], args=args, train_dataset=dataset)
    generation = trainer.vllm_generation
    syncs, sync_weights = [], generation.sync_weights

    def counted_sync():
        syncs.append(trainer.state.global_step)
        sync_weights()

    generation.sync_weights = counted_sync
    row_gaps, shapes = [], []
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        mask = inputs["completion_mask"].bool()
        gap = (inputs["old_per_token_logps"] - inputs["sampling_per_token_logps"]).abs().masked_fill(~mask, 0)
        row_gaps.append(gap.max(dim=1).values.tolist())
        shapes.append(tuple(inputs["completion_ids"].shape))
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    trainer.train()

    assert trainer.state.global_step == STEPS
    assert syncs == [0, 1, 2]  # once per step, before its generation
    # exact kept shapes: 4 prompts x n = 4 rows per loss batch, at most max_completion_length tokens
    assert len(shapes) == STEPS and all(rows == 16 and length <= 8 for rows, length in shapes)
    logs = [h for h in trainer.state.log_history if "reinforce_ada/samples" in h]
    assert len(logs) == STEPS
    for h in logs:
        # always-right and always-wrong never meet balance: each draws exactly its cap M·N = 12 and nothing is
        # cancelled for them; alternating and one-in-four do meet it within 12 (any 12 of their scorings hold >= 2
        # of each class), so half the prompts exit and the pools hold 24 + 2 * (4..12) completions
        assert h["reinforce_ada/exited_fraction"] == 0.5
        assert h["reinforce_ada/unresolved_all_positive_fraction"] == 0.25
        assert h["reinforce_ada/unresolved_all_negative_fraction"] == 0.25
        assert h["reinforce_ada/mixed_group_fraction"] == 0.5
        assert 32 <= h["reinforce_ada/samples"] <= 48
        assert h["reinforce_ada/streaming/requests"] >= h["reinforce_ada/samples"]
    assert reward.scored[RIGHT] == reward.scored[WRONG] == 12 * STEPS
    assert reward.scored[ALTERNATING] >= 4 * STEPS and reward.scored[ONE_IN_FOUR] >= 4 * STEPS
    # every kept row carries the engine's log-probs of its own tokens
    assert max(max(rows) for rows in row_gaps) < TOLERANCE
    logp_gaps = [h["sampling/sampling_logp_difference/mean"] for h in trainer.state.log_history if "loss" in h]
    assert len(logp_gaps) == STEPS and max(logp_gaps) < TOLERANCE
    # nothing left running or queued on the server after the steps
    assert_server_idle(vllm_server.base_url)
    cancelled = sum(h["reinforce_ada/streaming/cancelled_requests"] for h in logs)
    print(f"measured: cancelled requests {cancelled:.0f}; kept-row token gap <= {max(map(max, row_gaps)):.1e}")


def test_two_processes_stream_from_one_server_and_agree_on_every_decision(vllm_server, servable_model_dir, tmp_path):
    """torchrun, 2 CPU processes: rank 0 alone talks to the server; both take the same decisions from its results."""
    result = run_two_processes(
        "distributed_streaming.py", servable_model_dir, str(tmp_path), "--server", vllm_server.base_url, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["global_step"] for r in ranks] == [2, 2]
    assert ranks[0]["decisions"] == ranks[1]["decisions"]  # pools, exit rounds and kept groups, step by step
    assert [r["syncs"] for r in ranks] == [2, 2]  # TRL's collective weight sync, once per step on every rank
    assert ranks[0]["scored"] == ranks[1]["scored"] > 0  # the arrived rows are split over the ranks
    pooled = sum(len(pool) for d in ranks[0]["decisions"] for pool in d["pools"])
    assert pooled <= ranks[0]["scored"] + ranks[1]["scored"]
    # each rank's kept rows carry the engine's log-probs of their own tokens
    assert max(gap for rank in ranks for gap in rank["kept_logprob_gaps"]) < TOLERANCE
    assert_server_idle(vllm_server.base_url)


def test_cancelling_a_request_stops_the_engine_work_for_it(vllm_server, servable_model_dir):
    """Closing a request's connection makes the server abort it: the engine stops generating its tokens."""
    from trl.generation.vllm_client import parse_logprobs

    from trl_ada.server_requests import ServerCompletions

    base_url = vllm_server.base_url
    model = requests.get(f"{base_url}/v1/models", timeout=10).json()["data"][0]["id"]
    requested, n, length = 48, 8, MAX_MODEL_LEN - 16
    # 48 requests x 8 completions x 240 tokens, 16 sequences at a time: 24 waves of 240 engine steps, tens of seconds
    # even for the toy model on a fast CPU (48 x 200 tokens once finished before the aborts reached the engine)
    sampling = {"max_tokens": length, "ignore_eos": True, "temperature": 1.0, "logprobs": 0}
    client = ServerCompletions(base_url, model, sampling, parse_logprobs)
    tokens_before = server_gauge(base_url, "vllm:generation_tokens_total")
    for key in range(requested):
        client.submit(key, [1, 2, 3, 4], n=n)
    deadline = time.monotonic() + 30
    while server_gauge(base_url, "vllm:num_requests_running") == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    client.close()  # cancels all 48
    assert_server_idle(base_url, timeout=30.0)  # well before the requested tokens would have taken
    spent = server_gauge(base_url, "vllm:generation_tokens_total") - tokens_before
    total = requested * n * length
    print(f"measured: tokens generated for {requested} cancelled requests of {n} x {length} tokens: {spent:.0f}")
    assert spent < 0.5 * total
    assert client.cancelled == requested and client.pending == 0
