"""SmolLM2-135M-Instruct, a real pretrained chat model, trained against a real vLLM engine on CPU.

Two one-digit additions the model answers in prose ("2 + 3 = 5.", or something else, often running to the length
limit): measured 0.38 and 0.41 of 128 completions right at temperature 1 within 32 tokens, so a GRPO run's 16
completions are all wrong about once in 3,000 runs (with 4 + 9, right 0.27, once in 600: it happened in CI). The reward
is the registry's `math_final` (the final number of the plain text against the gold answer). The rewards come from the
model, so each check is derived from the rewards the run recorded: the completions requested per prompt (by hand from
the exit rule or Est's allocation), the rows of each prompt that reach the loss, the truncation statistics. After every
weight sync the engine must compute the trainer model's prompt log-probs (tied embeddings: the output layer is the
embedding), and the weights must have changed.
"""

from __future__ import annotations

import copy
import gc
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("vllm")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from test_async_engine import _record_pushed_rows, _timed_train  # noqa: E402
from test_streaming_engine import assert_server_idle  # noqa: E402
from tiny import prompt_text  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from vllm_support.probes import (  # noqa: E402
    engine_prompt_logprobs,
    model_logprobs,
    record_requests,
    server_prompt_logprobs,
)
from vllm_support.server import MAX_MODEL_LEN  # noqa: E402

from trl_ada import ReinforceAdaConfig, ReinforceAdaTrainer  # noqa: E402
from trl_ada.async_grpo import AsyncReinforceAdaConfig, AsyncReinforceAdaTrainer, HTTPWeightTransfer  # noqa: E402
from trl_ada.checkpoint_state import MEMORY_FILE as MEMORY  # noqa: E402
from trl_ada.memory import PassRateMemory, prompt_keys  # noqa: E402
from trl_ada.real import model as fixture  # noqa: E402
from trl_ada.real import smollm2_checkpoint  # noqa: E402
from trl_ada.rewards import get_reward_funcs  # noqa: E402
from trl_ada.schedules.est import est_allocation  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

PROBLEMS = {"What is 2 + 3? Answer with the number.": "5", "What is 1 + 2? Answer with the number.": "3"}
N = 4  # num_generations; the two prompts are one step's batch
MAX_COMPLETION = 32
M, ROUNDS = 8, 4  # the balance preset's samples per round and rounds
TOLERANCE = 2e-4
"""Largest |engine - trainer| log-prob of a token after a sync, float32 on both sides: measured at most 5.6e-5 (the
kernels differ over 30 layers); a stale tied output layer or a LoRA sync of the base weights is off by 0.3-1.9."""
PROBE_ANSWER = " 2 + 3 = 5. The answer is 5."
ASYNC_HANG_GUARD_S = 1800
"""The asynchronous run has not ended by then: a hang (a weight sync of SmolLM2 takes up to a minute on busy cores)."""


def dataset() -> Dataset:
    return Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": q}] for q in PROBLEMS], "answer": list(PROBLEMS.values())}
    )


class RecordingReward:
    """The registry's `math_final`, recording each call (one per engine request) as (question, reward) pairs."""

    __name__ = "math_final"

    def __init__(self):
        (self.score,) = get_reward_funcs(["math_final"])
        self.calls: list[list[tuple[str, float]]] = []

    def __call__(self, prompts, completions, answer, **kwargs) -> list[float]:
        rewards = self.score(prompts=prompts, completions=completions, answer=answer, **kwargs)
        self.calls.append([(prompt_text(p), r) for p, r in zip(prompts, rewards, strict=True)])
        return rewards

    def rewards(self) -> list[float]:
        return [r for call in self.calls for _, r in call]


def config(sampling: str, output_dir, server_url: str | None = None, **overrides) -> ReinforceAdaConfig:
    """2 prompts × n = 4 per step, 32 new tokens, float32 on both sides; server mode unless `server_url` is None."""
    fields = dict(
        output_dir=str(output_dir),
        sampling=sampling,
        num_generations=N,
        per_device_train_batch_size=2 * N,
        max_completion_length=MAX_COMPLETION,
        max_steps=2,
        learning_rate=1e-5,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        seed=0,
        use_vllm=True,
        vllm_importance_sampling_correction=True,
    )
    if server_url is None:
        fields.update(vllm_mode="colocate", vllm_max_model_length=MAX_MODEL_LEN)
    else:
        fields.update(vllm_mode="server", vllm_server_base_url=server_url, vllm_server_timeout=30)
    fields.update(overrides)
    return ReinforceAdaConfig(**fields)


@dataclass
class Run:
    """What a training run showed: engine requests, weight syncs, the rows of each loss batch."""

    trainer: ReinforceAdaTrainer
    reward: RecordingReward
    requests: list[Counter] = field(default_factory=list)
    syncs: list[tuple[float, list[float]]] = field(default_factory=list)  # (largest gap, the trainer's log-probs)
    loss_rows: list[Counter] = field(default_factory=list)  # per loss batch: rows per question
    lengths: list[list[int]] = field(default_factory=list)  # per loss batch: completion lengths
    truncated: list[list[bool]] = field(default_factory=list)  # per loss batch: no end-of-sequence token
    row_gaps: list[float] = field(default_factory=list)  # per loss batch: largest |trainer - engine| token log-prob
    changed: list[str] = field(default_factory=list)  # parameters that moved

    def logged(self, name: str) -> list[float]:
        return [h[name] for h in self.trainer.state.log_history if name in h]


def question_of(tokenizer, ids) -> str:
    text = tokenizer.decode(ids)
    return next(q for q in PROBLEMS if q in text)


def probe_ids(tokenizer) -> list[int]:
    """A chat prompt and an answer, the text whose log-probs engine and trainer must agree on."""
    messages = [{"role": "user", "content": next(iter(PROBLEMS))}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + PROBE_ANSWER
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def observe(trainer: ReinforceAdaTrainer, reward: RecordingReward) -> Run:
    """Wrap the trainer's engine requests, weight sync and loss so that `train()` records a `Run`."""
    run = Run(trainer, reward)
    tokenizer, generation = trainer.processing_class, trainer.vllm_generation
    run.requests = record_requests(generation, lambda ids: question_of(tokenizer, ids))
    probe = probe_ids(tokenizer)
    sync_weights = generation.sync_weights

    def sync_and_probe():
        sync_weights()
        expected = model_logprobs(trainer.model, probe)
        got = engine_prompt_logprobs(generation, probe)
        run.syncs.append((max(abs(a - b) for a, b in zip(got, expected, strict=True)), expected))

    generation.sync_weights = sync_and_probe
    compute_loss = trainer._compute_loss
    eos = tokenizer.eos_token_id

    def spy(model, inputs):
        mask = inputs["completion_mask"].bool()
        lengths = mask.sum(dim=1).tolist()
        prompts = zip(inputs["prompt_ids"], inputs["prompt_mask"].bool(), strict=True)
        run.loss_rows.append(Counter(question_of(tokenizer, ids[real]) for ids, real in prompts))
        run.lengths.append(lengths)
        run.truncated.append(
            [int(ids[n - 1]) != eos for ids, n in zip(inputs["completion_ids"], lengths, strict=True)]
        )
        gap = (inputs["old_per_token_logps"] - inputs["sampling_per_token_logps"]).abs().masked_fill(~mask, 0)
        run.row_gaps.append(gap.max().item())
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    return run


def train(trainer: ReinforceAdaTrainer, reward: RecordingReward, final_sync: bool = True, **train_kwargs) -> Run:
    """`trainer.train()` observed; `final_sync`: one more sync and probe after the last step."""
    run = observe(trainer, reward)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train(**train_kwargs)
    if final_sync:
        trainer.vllm_generation.sync_weights()
    run.changed = [n for n, p in trainer.model.named_parameters() if n in before and not torch.equal(before[n], p)]
    return run


@pytest.fixture(autouse=True)
def one_torch_thread(monkeypatch):
    """The trainer shares the cores with the engine: on 2 busy cores (load average ~10) one intra-op thread ran
    SmolLM2's forward and backward pass over 8 × 75 tokens in 14 s, two threads in 66 s. `OMP_NUM_THREADS` too:
    accelerate resets the thread count when it finds the distributed variables that a colocated engine leaves."""
    threads = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    gc.collect()  # the test's trainer (2 GB with its optimizer) before the next one loads


# -- what the exit rules imply, by hand, from the recorded rewards ---------------------------------------------------


def balance_rounds(calls: list[list[tuple[str, float]]]) -> list[Counter]:
    """The requests the balance preset must make given the rewards each round returned: a step starts with every
    prompt; a prompt stays while its pool lacks ⌊n/2⌋ = 2 positives or n − ⌊n/2⌋ = 2 negatives, for at most 4 rounds
    of M = 8."""
    expected, active, pools, round_ = [], list(PROBLEMS), {}, 0
    for call in calls:
        if not active:
            active, pools, round_ = list(PROBLEMS), {}, 0
        expected.append(Counter(dict.fromkeys(active, M)))
        round_ += 1
        for question, r in call:
            pools.setdefault(question, []).append(r)
        active = [q for q in active if round_ < ROUNDS and (sum(pools[q]) < 2 or len(pools[q]) - sum(pools[q]) < 2)]
    return expected


def est_memory(calls: list[list[tuple[str, float]]], start: PassRateMemory | None = None) -> list[PassRateMemory]:
    """The Est preset's pass-rate memory (λ = 0.9, Beta(1, 1)) after each step, one call per step."""
    memory = start if start is not None else PassRateMemory(decay=0.9, prior=(1.0, 1.0))
    memories = []
    for call in calls:
        per_prompt = {q: [r for question, r in call if question == q] for q in PROBLEMS}
        keys = prompt_keys([[{"role": "user", "content": q}] for q in per_prompt])
        memory.update(keys, [sum(r) for r in per_prompt.values()], [len(r) - sum(r) for r in per_prompt.values()])
        memories.append(copy.deepcopy(memory))
    return memories


def remembered(memory: PassRateMemory) -> np.ndarray:
    """(α, β, visits) of each question in the memory."""
    keys = prompt_keys([[{"role": "user", "content": q}] for q in PROBLEMS])
    alpha, beta, _ = memory.posterior(keys)
    return np.stack([alpha, beta, memory.visits(keys)])


def est_request(memory: PassRateMemory | None, plan) -> Counter:
    """Est's allocation of the step's 2n samples from the memory's estimates (n each for prompts never seen)."""
    if memory is None:
        return Counter(dict.fromkeys(PROBLEMS, N))
    alpha, beta, _ = memory.posterior(prompt_keys([[{"role": "user", "content": q}] for q in PROBLEMS]))
    return Counter(dict(zip(PROBLEMS, est_allocation(alpha / (alpha + beta), plan).tolist(), strict=True)))


# -- the checks every run gets --------------------------------------------------------------------------------------


def check_run(run: Run, steps: int, kept: list[Counter]) -> None:
    trainer = run.trainer
    assert trainer.state.global_step == steps
    # each engine request was scored, and the rows of each question that reached the loss are the group shapes
    assert [sum(c.values()) for c in run.requests] == [len(call) for call in run.reward.calls]
    assert run.loss_rows == kept
    # the reward reads the model's prose: both outcomes occur in the run
    assert {0.0, 1.0} <= set(run.reward.rewards()), run.reward.rewards()
    assert run.changed, "no parameter moved"
    # the weights reach the engine before every step's generation, exactly (tied embeddings included) ...
    assert len(run.syncs) == steps + 1
    gaps = [gap for gap, _ in run.syncs]
    assert max(gaps) < TOLERANCE, gaps
    # ... and they changed between the first sync and the last, so the comparison is not vacuous
    first, last = run.syncs[0][1], run.syncs[-1][1]
    moved = max(abs(a - b) for a, b in zip(first, last, strict=True))
    assert moved > 100 * TOLERANCE, moved
    # every kept row carries the engine's log-probs of its own tokens; TRL's measure of the same agrees
    assert max(run.row_gaps) < TOLERANCE, run.row_gaps
    logp_gaps = run.logged("sampling/sampling_logp_difference/mean")
    assert len(logp_gaps) == steps and max(logp_gaps) < TOLERANCE, logp_gaps
    # truncation statistics of the rows that reached the loss: pad and end-of-sequence are the same token here
    for lengths, truncated in zip(run.lengths, run.truncated, strict=True):
        assert all(n == MAX_COMPLETION for n, t in zip(lengths, truncated, strict=True) if t)
    assert run.logged("completions/clipped_ratio") == pytest.approx([np.mean(t) for t in run.truncated])
    assert run.logged("completions/mean_length") == pytest.approx([np.mean(n) for n in run.lengths])
    print(
        f"\nmeasured: sync gap <= {max(gaps):.1e}, weights moved the probe by {moved:.2e}; kept-row token gap <= "
        f"{max(run.row_gaps):.1e}; rewards {Counter(run.reward.rewards())}; clipped "
        f"{[round(float(np.mean(t)), 2) for t in run.truncated]}"
    )


def groups_of_n() -> Counter:
    return Counter(dict.fromkeys(PROBLEMS, N))


# -- the fixture ----------------------------------------------------------------------------------------------------


def test_smollm2_fixture_converts_loads_and_is_reused(smollm2_dir, monkeypatch):
    folder = Path(smollm2_dir)  # converted from the GGUF into this session's fresh cache
    marker = json.loads((folder / fixture.MARKER).read_text())
    assert marker["sha256"] == fixture.GGUF_SHA256 and marker["dtype"] == "float32"
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= set(marker["files"])
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert model.config.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>" and len(tokenizer) == 49_152
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")

    def no_conversion(*args):
        raise AssertionError("the second call converted again")

    monkeypatch.setattr(fixture, "_convert", no_conversion)
    monkeypatch.setattr(fixture, "smollm2_gguf", no_conversion)
    assert smollm2_checkpoint(folder.parent) == folder


# -- the synchronous trainer ------------------------------------------------------------------------------------------


def test_colocate_mode_trains_balance(smollm2_dir, cpu_sync, tmp_path):
    reward = RecordingReward()
    trainer = ReinforceAdaTrainer(
        model=smollm2_dir, reward_funcs=[reward], args=config("balance", tmp_path), train_dataset=dataset()
    )
    run = train(trainer, reward)
    assert run.requests == balance_rounds(reward.calls)
    check_run(run, steps=2, kept=[groups_of_n()] * 2)


@pytest.mark.parametrize("sampling", ["grpo", "balance"])
def test_server_mode_trains_with_exact_groups_and_exact_weight_sync(
    sampling, smollm2_dir, smollm2_server, cpu_sync, tmp_path
):
    reward = RecordingReward()
    args = config(sampling, tmp_path, smollm2_server.base_url)
    trainer = ReinforceAdaTrainer(model=smollm2_dir, reward_funcs=[reward], args=args, train_dataset=dataset())
    run = train(trainer, reward)
    if sampling == "grpo":
        assert run.requests == [groups_of_n()] * 2
    else:
        assert run.requests == balance_rounds(reward.calls)
    check_run(run, steps=2, kept=[groups_of_n()] * 2)


def test_lora_adapter_reaches_the_engine_merged(smollm2_dir, smollm2_server, cpu_sync, tmp_path):
    from peft import LoraConfig

    reward = RecordingReward()
    args = config("balance", tmp_path, smollm2_server.base_url, learning_rate=1e-3)
    trainer = ReinforceAdaTrainer(
        model=smollm2_dir,
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset(),
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]),
    )
    run = train(trainer, reward)
    assert all("lora_" in name for name in run.changed), run.changed  # the base weights stay frozen
    # after the updates the engine computes the adapter's merged weights (gap < TOLERANCE to the trainer's peft
    # model at every sync), which moved the probe's log-probs away from the base model's (the first sync)
    check_run(run, steps=2, kept=[groups_of_n()] * 2)


def test_est_trains_checkpoints_and_resumes(smollm2_dir, smollm2_server, cpu_sync, tmp_path):
    reward = RecordingReward()
    args = config("est", tmp_path / "run", smollm2_server.base_url, save_strategy="steps", save_steps=1)
    trainer = ReinforceAdaTrainer(model=smollm2_dir, reward_funcs=[reward], args=args, train_dataset=dataset())
    run = train(trainer, reward)
    plan = args.sampling_plan
    memories = est_memory(reward.calls)
    allocations = [est_request(None, plan), est_request(memories[0], plan)]
    assert run.requests == allocations  # one request a step, Est's allocation from the memory of the steps before
    check_run(run, steps=2, kept=allocations)  # every sample is trained: groups of the allocated sizes

    output = Path(args.output_dir)
    for step, memory in zip((1, 2), memories, strict=True):
        checkpoint = output / f"checkpoint-{step}"
        files = {p.name for p in checkpoint.iterdir()}
        assert {"model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json", MEMORY} <= files
        assert json.loads((checkpoint / "trainer_state.json").read_text())["global_step"] == step
        saved = PassRateMemory.load(str(checkpoint / MEMORY))
        assert len(saved) == 2 and saved.decay == 0.9
        np.testing.assert_allclose(remembered(saved), remembered(memory))

    # a new trainer resumes from checkpoint-1: its one step draws Est's allocation from the restored memory and
    # starts from checkpoint-1's weights (the first run's second sync)
    after_step_1 = run.syncs[1][1]
    del trainer, run
    gc.collect()  # one SmolLM2 trainer in memory at a time
    resumed_reward = RecordingReward()
    args = config("est", tmp_path / "run", smollm2_server.base_url, save_strategy="steps", save_steps=1)
    resumed = ReinforceAdaTrainer(model=smollm2_dir, reward_funcs=[resumed_reward], args=args, train_dataset=dataset())
    resumed_run = train(resumed, resumed_reward, final_sync=False, resume_from_checkpoint=str(output / "checkpoint-1"))
    assert resumed.state.global_step == 2
    assert resumed_run.requests == [est_request(memories[0], plan)]
    assert max(abs(a - b) for a, b in zip(resumed_run.syncs[0][1], after_step_1, strict=True)) < TOLERANCE
    (expected,) = est_memory(resumed_reward.calls, start=PassRateMemory.load(str(output / "checkpoint-1" / MEMORY)))
    np.testing.assert_allclose(remembered(resumed.pass_rate_memory), remembered(expected))
    np.testing.assert_allclose(
        remembered(PassRateMemory.load(str(output / "checkpoint-2" / MEMORY))), remembered(expected)
    )
    assert json.loads((output / "checkpoint-2" / "trainer_state.json").read_text())["global_step"] == 2


# -- the asynchronous trainer -----------------------------------------------------------------------------------------


def test_async_balance_trains_on_smollm2_and_syncs_its_weights(smollm2_dir, smollm2_server, tmp_path):
    from trl.chat_template_utils import add_response_schema

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir)
    # TRL's own async worker parses completions with a response schema it knows only for some chat templates, not
    # SmolLM2's ChatML (it would need `tokenizer.response_template`); ours reads the decoded text and needs none
    with pytest.raises(ValueError, match="Unrecognized chat template"):
        add_response_schema(AutoTokenizer.from_pretrained(smollm2_dir))
    reward = RecordingReward()
    args = AsyncReinforceAdaConfig(
        sampling="balance",
        output_dir=str(tmp_path / "out"),
        bf16=False,
        use_cpu=True,
        dtype="float32",
        max_steps=2,
        per_device_train_batch_size=2 * N,
        num_generations=N,
        token_budget=0,  # batches of whole samples (TRL packs by tokens otherwise, splitting groups across steps)
        max_completion_length=MAX_COMPLETION,
        learning_rate=1e-5,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=0,
        vllm_server_base_url=smollm2_server.base_url,
        vllm_server_timeout=30,
    )
    trainer = AsyncReinforceAdaTrainer(
        smollm2_dir,
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset(),
        processing_class=tokenizer,
    )
    assert isinstance(trainer.weight_transfer, HTTPWeightTransfer)
    pushed = _record_pushed_rows(trainer)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    wall = _timed_train(trainer, hang_guard_s=ASYNC_HANG_GUARD_S)

    assert trainer.state.global_step == 2
    assert getattr(tokenizer, "response_template", None) is None
    assert {0.0, 1.0} <= set(reward.rewards()), reward.rewards()
    assert any(not torch.equal(before[n], p.detach()) for n, p in trainer.model.named_parameters())
    assert set(pushed.values()) == {N}, pushed  # every group the worker pushed has n rows
    assert len(trainer._trained_groups) == 2 * 2, trainer._trained_groups.position()
    # the server computes the trained weights, which moved the probe's log-probs away from the base model's
    probe = probe_ids(tokenizer)
    copy = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()
    base = model_logprobs(copy, probe)
    copy.load_state_dict(trainer.accelerator.unwrap_model(trainer.model).state_dict())
    expected = model_logprobs(copy, probe)
    got = server_prompt_logprobs(smollm2_server.base_url, smollm2_dir, probe)
    gap = max(abs(a - b) for a, b in zip(got, expected, strict=True))
    moved = max(abs(a - b) for a, b in zip(base, expected, strict=True))
    print(f"\nasync balance on SmolLM2: {wall:.0f} s, sync gap {gap:.1e}, the probe moved by {moved:.2e}")
    assert gap < TOLERANCE and moved > 100 * TOLERANCE
    assert_server_idle(smollm2_server.base_url)
