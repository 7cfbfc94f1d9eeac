"""One run of `AsyncReinforceAdaTrainer` against a real vLLM server, for the interrupt/resume chain of
`test_async_engine.py` (run as a subprocess so that it can be killed with SIGKILL, as a crash or an OOM kill would).

    python async_chain_run.py MODEL_DIR BASE_URL OUTPUT_DIR MAX_STEPS RESUME KILL_AT LOG

Checkpoints every 2 steps. Each time the trainer hands settled groups to the worker's pass-rate memory, one JSON line
`{"step": global_step, "groups": [...]}` is appended to LOG (flushed to the kernel, so a SIGKILL keeps it). With
KILL_AT > 0 the process SIGKILLs itself at the end of that step, after its weight sync; RESUME is a checkpoint path,
or "-" for a fresh run.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from datasets import Dataset
from scripted import PROMPTS
from transformers import AutoTokenizer, TrainerCallback

from trl_ada.async_grpo import AsyncReinforceAdaConfig, AsyncReinforceAdaTrainer


def parity(completions, completion_ids, **kwargs):
    return [float(ids[0] % 2 == 0) if ids else 0.0 for ids in completion_ids]


class KillAt(TrainerCallback):
    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


def main(model_dir: str, base_url: str, output_dir: str, max_steps: int, resume: str, kill_at: int, log: str) -> None:
    args = AsyncReinforceAdaConfig(
        output_dir=output_dir,
        sampling="balance",
        bf16=False,
        use_cpu=True,
        dtype="float32",
        max_steps=max_steps,
        per_device_train_batch_size=8,
        num_generations=4,
        token_budget=0,
        max_completion_length=8,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="steps",
        save_steps=2,
        seed=0,
        vllm_server_base_url=base_url,
        vllm_server_timeout=30,
    )
    trainer = AsyncReinforceAdaTrainer(
        model_dir,
        reward_funcs=[parity],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in PROMPTS]}),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )
    commit = trainer.worker.commit

    def logged(group_ids):
        with open(log, "a") as file:
            file.write(json.dumps({"step": trainer.state.global_step, "groups": list(group_ids)}) + "\n")
        commit(group_ids)

    trainer.worker.commit = logged
    if kill_at:
        trainer.add_callback(KillAt(kill_at))
    trainer.train(resume_from_checkpoint=None if resume == "-" else resume)


if __name__ == "__main__":
    model_dir, base_url, output_dir, max_steps, resume, kill_at, log = sys.argv[1:]
    main(model_dir, base_url, output_dir, int(max_steps), resume, int(kill_at), log)
