"""Two-process streaming run (torchrun, gloo on CPU) used by tests/test_streaming_trainer.py and, against a real
vLLM server, by tests/vllm_engine/test_streaming_engine.py.

    distributed_streaming.py MODEL OUT [FAIL_AFTER]     rank 0 talks to a scripted server answering in random order
    distributed_streaming.py MODEL OUT --server URL     rank 0 talks to the vLLM server at URL

Each rank writes what it decided each step (pools, exits, kept groups), the rows it scored and the weight syncs to
OUT/rank{r}.json. With FAIL_AFTER, the scripted server fails after that many answers and each rank writes the error
it raised to OUT/error{r}.txt.
"""

from __future__ import annotations

import contextlib
import json
import sys

from datasets import Dataset
from distributed_train import TWO_PROCESS_RUN, end_distributed  # this script's folder is on sys.path
from streaming_fake import ScriptedCompletions, attach_scripted_server

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer


class FirstTokenEven:
    """1 when a completion's first token is even; counts the rows this process scored."""

    __name__ = "first_token_even"

    def __init__(self):
        self.scored = 0

    def __call__(self, completion_ids, **kwargs) -> list[float]:
        self.scored += len(completion_ids)
        return [float(ids[0] % 2 == 0) for ids in completion_ids]


def main(model_dir: str, out: str, fail_after: int | None = None, server_url: str | None = None) -> None:
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": f"question {k}"}] for k in range(8)]})
    fields = dict(num_generations=4, samples_per_round=4, max_rounds=3, exit_rule="balance", max_steps=2)
    args = ReinforceAdaConfig(output_dir=out, **{**TWO_PROCESS_RUN, **fields, **real_server_fields(server_url)})
    reward = FirstTokenEven()
    with contextlib.ExitStack() as stack:
        if server_url is not None:
            from vllm_support.sync import cpu_weight_sync

            stack.enter_context(cpu_weight_sync())
        trainer = ReinforceAdaTrainer(model=model_dir, reward_funcs=[reward], args=args, train_dataset=dataset)
        run(trainer, reward, out, fail_after, server_url)


def real_server_fields(server_url: str | None) -> dict:
    """Config fields for the real server (float32 on both sides), or for the scripted one (its made-up log-probs)."""
    if server_url is None:
        return {
            "vllm_importance_sampling_mode": "token_truncate",
            "vllm_importance_sampling_clip_max": 1e9,
        }
    return {
        "use_vllm": True,
        "vllm_mode": "server",
        "vllm_server_base_url": server_url,
        "vllm_server_timeout": 30,
        "vllm_importance_sampling_correction": True,
        "generation_schedule": "streaming",
        "bf16": False,
        "max_completion_length": 8,
    }


def run(trainer, reward: FirstTokenEven, out: str, fail_after: int | None, server_url: str | None) -> None:
    rank = trainer.accelerator.process_index
    server = None
    if rank == 0 and server_url is None:
        server = ScriptedCompletions(len(trainer.processing_class), max_length=4, seed=1, fail_after=fail_after)
    generation = SyncCounter(trainer.vllm_generation) if server_url else attach_scripted_server(trainer, server)
    decisions, kept_logprob_gaps = [], []
    finish_step = trainer.finish_step

    def record(outcome, *rest):
        sampler = outcome.sampler
        decisions.append({"pools": sampler.pools, "exit_round": sampler.exit_round, "kept": sampler.select_groups()})
        return finish_step(outcome, *rest)

    trainer.finish_step = record
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        mask = inputs["completion_mask"].bool()
        expected = inputs["old_per_token_logps"] if server_url else -inputs["completion_ids"].float() / 1000.0
        kept_logprob_gaps.append(float((inputs["sampling_per_token_logps"] - expected)[mask].abs().max()))
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    try:
        trainer.train()
    except RuntimeError as error:
        with open(f"{out}/error{rank}.txt", "w") as file:
            file.write(str(error))
        raise
    result = {
        "global_step": trainer.state.global_step,
        "decisions": decisions,
        "scored": reward.scored,
        "syncs": generation.syncs,
        "kept_logprob_gaps": kept_logprob_gaps,
        "answered_completions": None if server is None else server.answered_completions,
        "server_closed": None if server is None else server.closed,
        "requests_logged": [
            h["reinforce_ada/streaming/requests"] for h in trainer.state.log_history if "reinforce_ada/samples" in h
        ],
    }
    with open(f"{out}/rank{rank}.json", "w") as file:
        json.dump(result, file)
    end_distributed(trainer)


class SyncCounter:
    """Counts the real `VLLMGeneration.sync_weights` calls of this process."""

    def __init__(self, generation):
        self.syncs, self._sync = 0, generation.sync_weights
        generation.sync_weights = self

    def __call__(self) -> None:
        self.syncs += 1
        self._sync()


if __name__ == "__main__":
    if len(sys.argv) > 4 and sys.argv[3] == "--server":
        main(sys.argv[1], sys.argv[2], server_url=sys.argv[4])
    else:
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None)
