"""ReinforceAdaTrainer and GRPOTrainer against a real vLLM engine on CPU, in server and in colocate mode.

The rewards are scripted by prompt, so the number of completions each prompt gets and the engine requests of each
round are known by hand; the completions themselves come from the engine. After each weight sync the engine must
compute the trainer model's log-probs, and every kept completion must carry its own sampling log-probs.
"""

from __future__ import annotations

from collections import Counter

import pytest

pytest.importorskip("vllm")

from datasets import Dataset  # noqa: E402
from scripted import ONE_IN_FOUR, PROMPTS, REQUESTS, STEPS, TOLERANCE, ScriptedReward, make_config  # noqa: E402
from trl import GRPOTrainer  # noqa: E402
from vllm_support.probes import engine_prompt_logprobs, model_logprobs, record_requests  # noqa: E402

from trl_ada import ReinforceAdaTrainer  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def train_against_engine(method: str, args, model_dir: str):
    """Train with every engine request, weight sync and loss batch observed; returns what was seen."""
    reward = ScriptedReward()
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in PROMPTS]})
    trainer_class = GRPOTrainer if method == "grpo" else ReinforceAdaTrainer
    trainer = trainer_class(model=model_dir, reward_funcs=[reward], args=args, train_dataset=dataset)
    tokenizer, generation = trainer.processing_class, trainer.vllm_generation

    def prompt_key(ids):
        return next(p for p in PROMPTS if p in tokenizer.decode(ids))

    requests = record_requests(generation, prompt_key)
    probe = tokenizer(
        tokenizer.apply_chat_template([{"role": "user", "content": ONE_IN_FOUR}], tokenize=False)
        + "the tree is green and the sea is blue"
    )["input_ids"]
    syncs = []  # per sync: (largest |engine - trainer| prompt log-prob gap, the trainer's log-probs)
    sync_weights = generation.sync_weights

    def sync_and_probe():
        sync_weights()
        expected = model_logprobs(trainer.model, probe)
        got = engine_prompt_logprobs(generation, probe)
        syncs.append((max(abs(a - b) for a, b in zip(got, expected, strict=True)), expected))

    generation.sync_weights = sync_and_probe
    row_gaps = []  # per loss batch: per row, largest |trainer - engine| log-prob of a completion token
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        mask = inputs["completion_mask"].bool()
        gap = (inputs["old_per_token_logps"] - inputs["sampling_per_token_logps"]).abs().masked_fill(~mask, 0)
        row_gaps.append(gap.max(dim=1).values.tolist())
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    trainer.train()
    return trainer, reward, requests, syncs, row_gaps


def check_run(method: str, trainer, reward, requests, syncs, row_gaps) -> None:
    assert trainer.state.global_step == STEPS
    # one engine request batch per round, holding the active prompts only, M (or n, or Est's allocation) each
    assert requests == REQUESTS[method]
    assert reward.scored == sum(REQUESTS[method], Counter())
    # the weights reach the engine before every step's generation, exactly (tied embeddings included) ...
    assert len(syncs) == STEPS
    assert max(gap for gap, _ in syncs) < TOLERANCE, [gap for gap, _ in syncs]
    # ... and they did change between syncs, so the comparison is not vacuous
    first, last = syncs[0][1], syncs[-1][1]
    assert max(abs(a - b) for a, b in zip(first, last, strict=True)) > 100 * TOLERANCE
    # TRL's own measure of the gap between sampling and training log-probs, at every step
    logp_gaps = [
        h["sampling/sampling_logp_difference/mean"]
        for h in trainer.state.log_history
        if "sampling/sampling_logp_difference/mean" in h
    ]
    assert len(logp_gaps) == STEPS and max(logp_gaps) < TOLERANCE, logp_gaps
    # every kept row carries the engine's log-probs of its own tokens
    assert [len(rows) for rows in row_gaps] == [16] * STEPS
    assert max(max(rows) for rows in row_gaps) < TOLERANCE
    print(
        f"measured: engine vs trainer prompt log-probs after sync <= {max(gap for gap, _ in syncs):.1e}; TRL "
        f"sampling_logp_difference/mean <= {max(logp_gaps):.1e}; kept-row token gap <= {max(map(max, row_gaps)):.1e}"
    )


@pytest.mark.parametrize("method", ["balance", "pos", "none", "grpo", "est", "pilot_commit"])
def test_server_mode(method, vllm_server, servable_model_dir, cpu_sync, tmp_path):
    args = make_config(method, "server", tmp_path, vllm_server.base_url)
    check_run(method, *train_against_engine(method, args, servable_model_dir))


@pytest.mark.parametrize("method", ["balance", "pos", "none", "grpo", "est", "pilot_commit"])
def test_colocate_mode(method, servable_model_dir, cpu_sync, tmp_path):
    args = make_config(method, "colocate", tmp_path)
    check_run(method, *train_against_engine(method, args, servable_model_dir))
