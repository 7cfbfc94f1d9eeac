"""Streaming generation in the trainer, against a scripted server (no vLLM): request order decides whatever the
arrival order, one weight sync per step, the kept rows' own log-probs, and two processes that agree on every
decision while only the main process talks to the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from streaming_fake import ScriptedCompletions, attach_scripted_server, token_logprob
from tiny import loss_batches, run_two_processes, tiny_config

from trl_ada import ReinforceAdaTrainer

pytestmark = pytest.mark.xdist_group("trainer")

SCRIPT = "distributed_streaming.py"
PROMPTS = [f"question {k}" for k in range(4)]


def first_token_even(completion_ids, **kwargs) -> list[float]:
    return [float(ids[0] % 2 == 0) for ids in completion_ids]


def streaming_run(model_dir: str, tmp_path: Path, arrival_seed: int, batch: int, window: int | None = None) -> dict:
    """Two balance steps (M=4, N=3, n=4) of 4 prompts against a scripted server answering in a seeded order."""
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in PROMPTS]})
    args = tiny_config(
        tmp_path / f"run-{arrival_seed}-{batch}-{window}",
        num_generations=4,
        samples_per_round=4,
        max_rounds=3,
        per_device_train_batch_size=16,
        max_steps=2,
        vllm_importance_sampling_mode="token_truncate",
        vllm_importance_sampling_clip_max=1e9,
    )
    trainer = ReinforceAdaTrainer(model=model_dir, reward_funcs=[first_token_even], args=args, train_dataset=dataset)
    server = ScriptedCompletions(len(trainer.processing_class), max_length=4, seed=arrival_seed, batch=batch)
    generation = attach_scripted_server(trainer, server, streaming_window=window)
    decisions, batches = [], loss_batches(trainer)
    finish_step = trainer.finish_step

    def record(outcome, *rest):
        sampler = outcome.sampler
        decisions.append((sampler.pools, sampler.exit_round, sampler.select_groups()))
        return finish_step(outcome, *rest)

    trainer.finish_step = record
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reinforce_ada/samples" in h]
    return {"decisions": decisions, "batches": batches, "syncs": generation.syncs, "server": server, "logs": logs}


def test_any_arrival_order_gives_the_same_steps_with_the_engine_logprobs(tiny_model_dir, tmp_path):
    one_at_a_time = streaming_run(tiny_model_dir, tmp_path, arrival_seed=0, batch=1)
    shuffled = streaming_run(tiny_model_dir, tmp_path, arrival_seed=7, batch=3)

    assert len(one_at_a_time["decisions"]) == 2
    assert shuffled["decisions"] == one_at_a_time["decisions"]  # pools, exit rounds and kept groups, step by step
    for run in (one_at_a_time, shuffled):
        assert run["syncs"] == 2  # once per step, before its first request
        server = run["server"]
        assert server.closed and server.pending == 0
        for inputs, log in zip(run["batches"], run["logs"], strict=True):
            assert inputs["completion_ids"].shape[0] == 16  # 4 prompts x n = 4 rows, TRL's shape
            mask = inputs["completion_mask"].bool()
            expected = token_logprob(1) * inputs["completion_ids"].float()
            torch.testing.assert_close(inputs["sampling_per_token_logps"][mask], expected[mask])
            assert log["reinforce_ada/streaming/requests"] >= log["reinforce_ada/samples"]
        # every completion the server answered was scored once; the pools took a request-order prefix of them
        pooled = sum(len(pool) for pools, _, _ in run["decisions"] for pool in pools)
        assert pooled == sum(log["reinforce_ada/samples"] for log in run["logs"])
        assert pooled <= server.answered_completions
    torch.testing.assert_close(shuffled["batches"][1]["completion_ids"], one_at_a_time["batches"][1]["completion_ids"])


def test_a_wider_window_requests_more_up_front_and_decides_the_same(tiny_model_dir, tmp_path):
    default = streaming_run(tiny_model_dir, tmp_path, arrival_seed=3, batch=2)
    wide = streaming_run(tiny_model_dir, tmp_path, arrival_seed=3, batch=2, window=12)

    assert default["server"].first_wave == 4 * 4  # samples_per_round = 4 of each of the 4 prompts
    assert wide["server"].first_wave == 4 * 12  # the whole cap M·N = 12 of each prompt at once
    assert wide["decisions"] == default["decisions"]  # pools are request-order prefixes: the same either way
    requests = [sum(log["reinforce_ada/streaming/requests"] for log in run["logs"]) for run in (default, wide)]
    assert requests[1] > requests[0]  # ... paid for with requests the exits cancel
    assert wide["server"].cancelled > default["server"].cancelled


@pytest.mark.slow
@pytest.mark.xdist_group("distributed")
def test_two_processes_agree_on_every_streaming_decision(tiny_model_dir, tmp_path):
    result = run_two_processes(SCRIPT, tiny_model_dir, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["global_step"] for r in ranks] == [2, 2]
    assert len(ranks[0]["decisions"]) == 2
    assert ranks[0]["decisions"] == ranks[1]["decisions"]  # pools, exit rounds and kept groups, step by step
    assert [r["syncs"] for r in ranks] == [2, 2]  # the collective weight sync, once per step on every rank
    assert ranks[0]["server_closed"] and ranks[1]["answered_completions"] is None  # rank 1 never connected
    # the arrived rows are split over the ranks: each scores half of each batch (the last row repeated to even out)
    answered = ranks[0]["answered_completions"]
    assert ranks[0]["scored"] == ranks[1]["scored"]
    assert answered <= ranks[0]["scored"] + ranks[1]["scored"] <= answered + sum(ranks[0]["requests_logged"])
    assert ranks[0]["scored"] < answered  # neither rank scores everything
    # each rank's kept rows carry the server's log-probs of their own tokens
    assert all(gap < 1e-6 for rank in ranks for gap in rank["kept_logprob_gaps"])
    pooled = sum(len(pool) for d in ranks[0]["decisions"] for pool in d["pools"])
    assert pooled <= answered


@pytest.mark.slow
@pytest.mark.xdist_group("distributed")
def test_a_server_failure_on_the_main_process_fails_every_process(tiny_model_dir, tmp_path):
    result = run_two_processes(SCRIPT, tiny_model_dir, str(tmp_path), "5")
    assert result.returncode != 0
    for rank in range(2):  # no rank left waiting for a broadcast: each raised the main process's error
        assert "failed 3 times" in (tmp_path / f"error{rank}.txt").read_text()
