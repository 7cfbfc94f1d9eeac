"""The vLLM colocate and server paths, through a recording stand-in for TRL's `VLLMGeneration`.

vLLM needs a CUDA GPU; TRL's trainer talks to it only through `self.vllm_generation.generate(...)` and
`sync_weights()`. The stand-in checks that call's contract for each mode and returns log-probs that encode
their own token ids, so the test can tell whether each kept completion still carries its own log-probs.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
from datasets import Dataset
from tiny import loss_batches

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer

pytestmark = pytest.mark.xdist_group("trainer")


def _token_logprob(token_id: int) -> float:
    return -token_id / 1000.0


class RecordingVLLMGeneration:
    """Stands in for `trl.generation.vllm_generation.VLLMGeneration` in `server` or `colocate` mode."""

    def __init__(self, mode: str, vocab_size: int, eos_token_id: int, length: int = 4):
        self.mode, self.vocab_size, self.eos_token_id, self.length = mode, vocab_size, eos_token_id, length
        self.calls: list[dict] = []
        self.syncs = 0
        self.generator = torch.Generator().manual_seed(0)

    def sync_weights(self):
        self.syncs += 1

    def generate(self, prompts, images, num_generations, profiler=None):
        if self.mode == "server":
            # TRL's server path asks the server for `n=num_generations` per prompt of prompts[::num_generations]:
            # every run of num_generations entries must be one prompt.
            for start in range(0, len(prompts), num_generations):
                assert all(p == prompts[start] for p in prompts[start : start + num_generations])
        self.calls.append({"num_generations": num_generations, "prompts": [list(p) for p in prompts]})
        completion_ids = [
            torch.randint(3, self.vocab_size, (self.length,), generator=self.generator).tolist() for _ in prompts
        ]
        logprobs = [[[_token_logprob(t)] for t in ids] for ids in completion_ids]
        return [list(p) for p in prompts], completion_ids, logprobs, None


def first_token_is_even(completion_ids, **kwargs):
    return [float(ids[0] % 2 == 0) for ids in completion_ids]


@pytest.mark.parametrize("mode", ["server", "colocate"])
def test_vllm_rounds_call_once_per_round_with_active_prompts_and_aligned_logprobs(tiny_model_dir, tmp_path, mode):
    prompts = [f"question {k}" for k in range(4)]
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in prompts]})
    args = ReinforceAdaConfig(
        output_dir=str(tmp_path),
        num_generations=4,
        samples_per_round=4,
        max_rounds=3,
        per_device_train_batch_size=16,
        max_completion_length=4,
        max_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        vllm_importance_sampling_mode="token_truncate",
        vllm_importance_sampling_clip_max=1e9,
    )
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[first_token_is_even], args=args, train_dataset=dataset
    )
    tokenizer = trainer.processing_class
    stand_in = RecordingVLLMGeneration(mode, len(tokenizer), tokenizer.eos_token_id)
    trainer.use_vllm, trainer.vllm_generation, trainer._last_loaded_step = True, stand_in, -1
    trainer.vllm_importance_sampling_correction = True

    seen = loss_batches(trainer)
    trainer.train()
    sampler_log = trainer.state.log_history[0]

    # one generate call per round, M per prompt, only the prompts still active
    assert [call["num_generations"] for call in stand_in.calls] == [4] * int(sampler_log["reinforce_ada/rounds"])
    distinct_per_call = [len({tuple(p) for p in call["prompts"]}) for call in stand_in.calls]
    assert distinct_per_call[0] == 4
    assert all(later <= earlier for earlier, later in zip(distinct_per_call, distinct_per_call[1:], strict=False))
    assert sum(len(call["prompts"]) for call in stand_in.calls) == sampler_log["reinforce_ada/samples"]
    assert stand_in.syncs == 1  # weights pushed once per step, not once per round

    # each kept completion carries its own sampling log-probs
    (inputs,) = seen
    assert inputs["completion_ids"].shape[0] == 16
    mask = inputs["completion_mask"].bool()
    expected = -inputs["completion_ids"].float() / 1000.0
    assert torch.allclose(inputs["sampling_per_token_logps"][mask], expected[mask])


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available() or importlib.util.find_spec("vllm") is None, reason="needs a CUDA GPU and vllm"
)
def test_real_vllm_colocate_step(tiny_model_dir, tmp_path):
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": f"q{k}"}] for k in range(4)]})
    args = ReinforceAdaConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=16,
        samples_per_round=4,
        max_rounds=2,
        max_completion_length=8,
        max_steps=1,
        report_to="none",
        use_vllm=True,
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.2,
    )
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[first_token_is_even], args=args, train_dataset=dataset
    )
    trainer.train()
    assert trainer.state.global_step == 1
