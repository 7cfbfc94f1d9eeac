"""Two-process training run used by tests/test_distributed.py (launched with torchrun, gloo on CPU).

Each rank writes what it decided each step (exit rounds, pools, kept groups) and how many completions it generated
in each round to OUT/rank{r}.json.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import torch
from datasets import Dataset

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer

TWO_PROCESS_RUN = dict(
    per_device_train_batch_size=6,  # 3 prompts per step (n = 4) over 2 ranks: the middle prompt straddles them
    max_completion_length=4,
    logging_steps=1,
    report_to="none",
    use_cpu=True,
    save_strategy="no",
    seed=0,
)
"""Config fields the two-process scripts share."""


def record_loss_rows(trainer) -> list[int]:
    """The number of rows of every batch that reaches the trainer's loss, in order (filled as it trains)."""
    rows: list[int] = []
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        rows.append(inputs["completion_ids"].shape[0])
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    return rows


def reward(prompts, completion_ids, **kwargs):
    """Data-driven 0/1 rewards: a prompt of a multiple of 3 characters is never solved (it stays active under `pos`),
    the others are solved by about half of their completions, so exits differ between prompts and steps."""
    return [
        0.0 if len(p[-1]["content"]) % 3 == 0 else float((sum(ids) + len(p[-1]["content"])) % 2 == 0)
        for p, ids in zip(prompts, completion_ids, strict=True)
    ]


def prompts_of_lengths(lengths: range = range(1, 13)) -> Dataset:
    """Prompts "x", "xx", ...: their length drives `reward`."""
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": "x" * k}] for k in lengths]})


def main(model_dir: str, out: str) -> None:
    dataset = prompts_of_lengths()
    args = ReinforceAdaConfig(
        output_dir=out,
        num_generations=4,
        samples_per_round=2,
        max_rounds=3,
        exit_rule="pos",
        max_steps=2,
        **TWO_PROCESS_RUN,
    )
    trainer = ReinforceAdaTrainer(model=model_dir, reward_funcs=[reward], args=args, train_dataset=dataset)
    rank, world = trainer.accelerator.process_index, trainer.accelerator.num_processes
    decisions, batch_prompts, generated = [], [], [[]]
    finish_step = trainer.finish_step
    generate = trainer._generate_single_turn

    def count_generated(prompt_ids, *args, **kwargs):
        generated[-1].append(len(prompt_ids))  # completions this rank generates in this round
        return generate(prompt_ids, *args, **kwargs)

    def record(outcome, *rest):
        sampler = outcome.sampler
        decisions.append({"exit_round": sampler.exit_round, "pools": sampler.pools, "groups": sampler.select_groups()})
        generated.append([])
        return finish_step(outcome, *rest)

    trainer._generate_single_turn = count_generated
    trainer.finish_step = record
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        batch_prompts.append(sorted(Counter(map(tuple, inputs["prompt_ids"].tolist())).values(), reverse=True))
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    trainer.train()
    Path(out, f"rank{rank}.json").write_text(
        json.dumps(
            {
                "world_size": world,
                "global_step": trainer.state.global_step,
                "decisions": decisions,
                "copies_per_prompt": batch_prompts,
                "generated_per_round": generated[:-1],
            }
        )
    )
    end_distributed(trainer)


def end_distributed(trainer) -> None:
    """Leave once both ranks are past every collective, skipping the interpreter's teardown.

    Gloo's C++ threads can still hold tensors when Python finalizes; releasing them then takes the GIL of a dying
    interpreter and aborts a run that succeeded ("terminate called without an active exception", seen once in CI).
    """
    trainer.accelerator.wait_for_everyone()
    torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    # Skip interpreter finalization: gloo's worker threads can abort there ("terminate called without an active
    # exception", seen once in CI after both ranks had finished), which is torch's teardown, not what is tested.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
