"""Two CPU processes (torchrun, gloo): same exit decisions on every rank, prompts straddling ranks, two steps, and
not one completion generated that no pool receives."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from tiny import run_two_processes

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("distributed")]


def test_two_processes_agree_on_every_exit_decision(tiny_model_dir, tmp_path):
    result = run_two_processes("distributed_train.py", tiny_model_dir, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert [r["global_step"] for r in ranks] == [2, 2]
    assert len(ranks[0]["decisions"]) == 2
    assert ranks[0]["decisions"] == ranks[1]["decisions"]  # exit rounds, pools and kept groups, step by step
    for rank in ranks:
        # 3 prompts x n=4 over 2 ranks of 6: each rank holds one whole group and half of the straddling one
        assert rank["copies_per_prompt"] == [[4, 2], [4, 2]]
    # No completion nobody asked for: each round's M=2 samples per active prompt are split at sample level, so the
    # ranks generate exactly what the pools receive, half each, even when a single prompt is still active.
    rounds_with_one_active = 0
    for step, decision in enumerate(ranks[0]["decisions"]):
        rounds = len(ranks[0]["generated_per_round"][step])
        active = [sum(1 for r in decision["exit_round"] if r is None or r >= k) for k in range(1, rounds + 1)]
        for k, num_active in enumerate(active):
            per_rank = [rank["generated_per_round"][step][k] for rank in ranks]
            assert per_rank == [num_active, num_active]  # 2 x num_active samples, one half on each rank
            rounds_with_one_active += num_active == 1
        assert sum(sum(rank["generated_per_round"][step]) for rank in ranks) == sum(map(len, decision["pools"]))
    assert rounds_with_one_active >= 1  # the case the split is for: fewer active prompts than processes


def test_two_processes_allocate_est_alike_and_split_its_groups_of_any_size(tiny_model_dir, tmp_path):
    result = run_two_processes("distributed_est.py", tiny_model_dir, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert ranks[0]["decisions"] == ranks[1]["decisions"]  # the same estimates, allocation and pools on both ranks
    decisions = ranks[0]["decisions"]
    assert len(decisions) == 4 and all(sum(d["allocation"]) == 12 for d in decisions)  # B·n = 3 · 4 every step
    assert any(len(set(d["allocation"])) > 1 for d in decisions[2:])  # epoch 2: the memory sizes the groups
    for step, decision in enumerate(decisions):
        assert [len(pool) for pool in decision["pools"]] == decision["allocation"]
        # every sample reaches the loss once: rank 0 takes the first 6 rows in prompt order, rank 1 the rest
        sizes = zip(decision["prompts"], decision["allocation"], strict=True)
        order = [length for length, size in sizes for _ in range(size)]
        for rank, part in enumerate((order[:6], order[6:])):
            assert {int(k): v for k, v in ranks[rank]["rows"][step].items()} == Counter(part)
