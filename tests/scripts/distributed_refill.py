"""Two-process run with candidates beyond the batch, used by tests/test_refill_trainer.py (torchrun, gloo on CPU).

Each rank writes, per step, its candidates, skip flags, pools, kept prompts and candidate-stream position, and the
rows that reached its loss, to OUT/rank{r}.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from distributed_train import (  # this script's folder is on sys.path
    TWO_PROCESS_RUN,
    end_distributed,
    prompts_of_lengths,
    record_loss_rows,
    reward,
)

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer


def main(model_dir: str, out: str) -> None:
    dataset = prompts_of_lengths()
    args = ReinforceAdaConfig(
        output_dir=out,
        num_generations=4,
        exit_rule="mixed",
        samples_per_round=4,
        rounds_per_prompt=1,
        max_rounds=3,
        prompt_oversampling=2.0,
        pass_rate_memory=True,
        skip_threshold=0.5,
        skip_exploration=0.3,
        max_steps=3,
        **TWO_PROCESS_RUN,
    )
    trainer = ReinforceAdaTrainer(model=model_dir, reward_funcs=[reward], args=args, train_dataset=dataset)
    rank = trainer.accelerator.process_index
    steps = []
    new_sampler = trainer.schedule.new_sampler
    end_step = trainer.schedule.end_step

    def record_candidates(batch_inputs):
        candidates, sampler = new_sampler(batch_inputs)
        steps.append({"candidates": [len(x["prompt"][-1]["content"]) for x in candidates], "skipped": sampler.skipped})
        return candidates, sampler

    def record_kept(outcome):
        end_step(outcome)
        sampler = outcome.sampler
        steps[-1].update(
            pools=sampler.pools, kept=sampler.kept_prompts(), stream=trainer.schedule.candidate_stream.state_dict()
        )

    trainer.schedule.new_sampler = record_candidates
    trainer.schedule.end_step = record_kept
    rows = record_loss_rows(trainer)
    trainer.train()
    Path(out, f"rank{rank}.json").write_text(json.dumps({"steps": steps, "rows": rows}))
    end_distributed(trainer)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter finalization: gloo's threads can abort there after both ranks finished
