"""Two-process Est run used by tests/test_distributed.py (torchrun, gloo on CPU).

Each rank writes, per step, the allocation it computed, the pools it holds, and how many rows of each prompt reached
its loss, to OUT/rank{r}.json.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

from distributed_train import TWO_PROCESS_RUN, end_distributed, prompts_of_lengths, reward

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer


def main(model_dir: str, out: str) -> None:
    args = ReinforceAdaConfig(output_dir=out, sampling="est", num_generations=4, max_steps=4, **TWO_PROCESS_RUN)
    trainer = ReinforceAdaTrainer(
        model=model_dir, reward_funcs=[reward], args=args, train_dataset=prompts_of_lengths(range(1, 7))
    )
    rank, world = trainer.accelerator.process_index, trainer.accelerator.num_processes
    decisions, rows = [], []
    finish_step = trainer.finish_step

    def record(outcome, *rest):
        sampler = outcome.sampler
        lengths = [len(x["prompt"][-1]["content"]) for x in outcome.inputs]
        decisions.append({"prompts": lengths, "allocation": sampler.allocation.tolist(), "pools": sampler.pools})
        rows.append(Counter())
        return finish_step(outcome, *rest)

    trainer.finish_step = record
    compute_loss = trainer._compute_loss
    tokenizer = trainer.processing_class

    def spy(model, inputs):
        texts = tokenizer.batch_decode(inputs["prompt_ids"], skip_special_tokens=True)
        rows[-1].update(max(len(word) for word in text.split() if set(word) == {"x"}) for text in texts)
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    trainer.train()
    Path(out, f"rank{rank}.json").write_text(
        json.dumps({"world_size": world, "decisions": decisions, "rows": [dict(r) for r in rows]})
    )
    end_distributed(trainer)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()  # skip interpreter finalization, as distributed_train.py does
    sys.stderr.flush()
    os._exit(0)
