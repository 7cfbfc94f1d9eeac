"""Training experiments on the toy task: plain GRPO against Reinforce-Ada from the same weights and prompts.

The runner ([`run_method`]) trains one [`MethodSpec`] on the toy task with a [`StepRecorder`] callback and returns
one record per step; `trl_ada.toy.results` turns records into results: the summaries ([`summarize`],
[`steps_to_reach`], [`samples_to_reach`]), tables and the reward-curve figure ([`plot_curves`]), all importable from
here too. `trl-ada demo` and the learning benchmark (`docs/lab/benchmarks_learning.md`) are thin layers over the two.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from ..utils import mean
from .keyed import estimate_row_pass_rates, filter_rows, rows_dataset
from .model import build_tiny_model, configure_torch_threads
from .results import (
    INITIAL_SAMPLES,
    PASS_AT_K,
    SMOOTHING_WINDOW,
    difficulty_buckets,
    mean_token_entropy,
    metrics_at_milestones,
    moving_average,
    plot_curves,
    probe_metrics,
    samples_to_reach,
    steps_to_reach,
    summarize,
    task_title,
)
from .results import method_table as method_table
from .results import reading as reading
from .results import regime_note as regime_note
from .results import summary_table as summary_table
from .specs import TRAINERS as TRAINERS
from .specs import MethodSpec, TaskSettings, keyed_task, with_rounds
from .task import TOY_TEMPERATURE, make_toy_dataset, toy_grpo_kwargs, toy_reward

if TYPE_CHECKING:
    from datasets import Dataset
    from trl import GRPOTrainer

__all__ = [
    "SMOOTHING_WINDOW",
    "MethodSpec",
    "PassRateProbe",
    "StepRecorder",
    "TaskSettings",
    "keyed_task",
    "make_task",
    "metrics_at_milestones",
    "moving_average",
    "plot_curves",
    "prepare_model",
    "run_method",
    "samples_to_reach",
    "steps_to_reach",
    "summarize",
    "task_title",
    "training_rows",
    "with_rounds",
]

RECORDED_ROUNDS = 8
"""Rounds whose completions a step record keeps (`samples_round_<r>`, 0 for a round that did not run)."""
ADAPTIVE_METRICS = (
    "rounds",
    "exited_fraction",
    "unresolved_all_positive_fraction",
    "unresolved_all_negative_fraction",
    "pool_pass_rate",
)
"""`reinforce_ada/` metrics kept in each step record (besides first-round reward and samples)."""
REFILL_METRICS = (
    "candidates",
    "skipped",
    "sampled",
    "consumed",
    "effective_kept_fraction",
    "hard_kept_fraction",
    "exhausted",
)
"""`reinforce_ada/refill/` metrics kept in each step record as `refill_<name>` (NaN without candidates)."""


def training_rows(
    settings: TaskSettings, model_dir: str | Path | None = None, seed: int = 0
) -> list[tuple[str, int, str]]:
    """The distinct prompts training uses, as (answer, count, user message): the task's, filtered to
    `settings.pass_rate_band` on the base model in `model_dir` (sampled with `seed`) when a band is set.

    ValueError (naming the band, the prompts left and the fix) when the band leaves fewer prompts than one step needs.
    """
    rows = settings.task_rows()
    band = settings.pass_rate_band
    if band is None:
        return rows
    if model_dir is None:
        raise ValueError(f"pass_rate_band={band!r} filters on the base model; pass its model_dir.")
    rates = estimate_row_pass_rates(model_dir, rows, settings.filter_samples, settings.max_completion_length, seed)
    return filter_rows(rows, rates, band, settings.prompts_per_step)


def make_task(
    settings: TaskSettings,
    steps: int,
    seed: int,
    min_prompts: int = 0,
    model_dir: str | Path | None = None,
    rows: Sequence[tuple[str, int, str]] | None = None,
) -> Dataset:
    """The toy dataset: enough rows for `steps` steps (one epoch, seeded order) and at least `min_prompts`.

    Rows cycle through seeded shuffles of the task's distinct prompts ([`training_rows`]; a band filters them on
    the base model in `model_dir`; `rows` are these prompts when already computed), so each appears equally often
    (up to the last, partial cycle).
    """
    num_prompts = max(steps * settings.prompts_per_step, min_prompts)
    if settings.family == "letters" and settings.pass_rate_band is None:
        return make_toy_dataset(num_prompts, seed=seed, targets=settings.targets, counts=settings.counts)
    rows = training_rows(settings, model_dir, seed) if rows is None else list(rows)
    return rows_dataset(rows, num_prompts, seed)


def prepare_model(directory: str | Path, seed: int) -> Path:
    """Build and save the tiny random model and tokenizer (offline); every method starts from these weights."""
    return build_tiny_model(Path(directory), seed=seed)


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------


def _config_kwargs(spec: MethodSpec, settings: TaskSettings, steps: int, seed: int, output_dir: Path) -> dict:
    """Config fields: the toy recommendations and the paper's loss settings, the same for every method."""
    kwargs = toy_grpo_kwargs(
        output_dir=str(output_dir),
        num_generations=spec.num_generations,
        per_device_train_batch_size=settings.prompts_per_step * spec.num_generations,
        max_completion_length=settings.max_completion_length,
        learning_rate=settings.learning_rate,
        max_steps=steps,
        seed=seed,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        scale_rewards="none",
        loss_type="dapo",
        epsilon=0.2,
        epsilon_high=0.28,
        beta=0.0,
    )
    if spec.sampling is not None:  # a preset: Est and plain GRPO refuse the rounds' fields
        kwargs["sampling"] = spec.sampling
    elif spec.uses_reinforce_ada:
        kwargs.update(exit_rule=spec.exit_rule, samples_per_round=spec.samples_per_round, max_rounds=spec.max_rounds)
    if spec.uses_reinforce_ada:
        kwargs.update(spec.options)
    return kwargs


def build_method_trainer(
    spec: MethodSpec,
    model_dir: str | Path,
    dataset: Dataset,
    settings: TaskSettings,
    steps: int,
    seed: int,
    output_dir: Path,
) -> GRPOTrainer:
    """A [`~trl.GRPOTrainer`] (plain GRPO) or [`~trl_ada.ReinforceAdaTrainer`] on the toy reward, from the saved
    model."""
    kwargs = _config_kwargs(spec, settings, steps, seed, output_dir)
    if spec.uses_reinforce_ada:
        from ..config import ReinforceAdaConfig
        from ..trainer import ReinforceAdaTrainer

        return ReinforceAdaTrainer(str(model_dir), [toy_reward], ReinforceAdaConfig(**kwargs), train_dataset=dataset)
    from trl import GRPOConfig, GRPOTrainer

    return GRPOTrainer(str(model_dir), [toy_reward], GRPOConfig(**kwargs), train_dataset=dataset)


def step_record(spec: MethodSpec, logs: dict[str, float], prompts_per_step: int) -> dict[str, float]:
    """One step's numbers from the trainer's log: first-round reward, samples generated and trained (the rows that
    reach the loss: prompts per step × n for every method), zero-std fraction, loss, gradient norm, time."""
    nan = float("nan")
    if spec.uses_reinforce_ada:
        first_round_reward, samples = logs["reinforce_ada/first_round_reward"], logs["reinforce_ada/samples"]
    else:
        first_round_reward, samples = logs["reward"], float(prompts_per_step * spec.num_generations)
    record = {
        "first_round_reward": float(first_round_reward),
        "samples": float(samples),
        "trained_samples": float(prompts_per_step * spec.num_generations),
        "loss": float(logs.get("loss", nan)),
        "grad_norm": float(logs.get("grad_norm", nan)),
        "frac_reward_zero_std": float(logs.get("frac_reward_zero_std", nan)),
        "kept_reward": float(logs.get("reward", nan)),
        "step_time": float(logs.get("step_time", nan)),
    }
    for name in ADAPTIVE_METRICS:  # NaN for plain GRPO: one round, no exit rule
        record[name] = float(logs.get(f"reinforce_ada/{name}", 1.0 if name == "rounds" else nan))
    for name in REFILL_METRICS:  # NaN without candidates beyond the batch
        record[f"refill_{name}"] = float(logs.get(f"reinforce_ada/refill/{name}", nan))
    for r in range(1, RECORDED_ROUNDS + 1):  # what each round generated; a plain GRPO step is one round
        alone = samples if r == 1 and not spec.uses_reinforce_ada else 0.0
        record[f"samples_round_{r}"] = float(logs.get(f"reinforce_ada/samples/round_{r}", alone))
    return record


def sample_task(
    model: Any,
    tokenizer: Any,
    prompt_ids: list[list[int]],
    targets: tuple[Sequence[str], Sequence[int]],
    num_samples: int,
    max_new_tokens: int,
    seed: int,
) -> tuple[list[float], float]:
    """Rewards ([`toy_reward`] against each prompt's (answer, count) in `targets`) of `num_samples` completions per
    prompt, prompt-major, and their mean per-token entropy. Sampled as training samples (temperature 1, no
    top-k/top-p) under a random state of its own seeded by `seed`: the training's stream is left untouched."""
    import torch

    batch = tokenizer.pad({"input_ids": prompt_ids}, padding_side="left", return_tensors="pt").to(model.device)
    was_training = model.training
    model.eval()
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            output = model.generate(
                **batch,
                do_sample=True,
                temperature=TOY_TEMPERATURE,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new_tokens,
                num_return_sequences=num_samples,
                pad_token_id=tokenizer.pad_token_id,
                return_dict_in_generate=True,
                output_logits=True,
            )
    finally:
        model.train(was_training)
    completion_ids = output.sequences[:, batch["input_ids"].shape[1] :]
    texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
    ended = (completion_ids == tokenizer.eos_token_id).cumsum(dim=1)
    live = (ended - (completion_ids == tokenizer.eos_token_id).long()) == 0  # up to and with the end token
    entropy = mean_token_entropy(torch.stack(output.logits, dim=1), live)
    # generate returns the samples of prompt 0 first, then prompt 1, ...
    answers = [a for a in targets[0] for _ in range(num_samples)]
    counts = [k for k in targets[1] for _ in range(num_samples)]
    return toy_reward(texts, answers, counts), entropy


class PassRateProbe:
    """The policy's pass rate on the whole task: `num_samples` completions of every distinct prompt of the task.

    The toy dataset cycles through these prompts, each equally often, so the mean reward over them is an unbiased
    estimate of the expected reward of a uniformly drawn training prompt, whatever prompts a method chose to sample
    or skip. Sampling is the training's (temperature 1, no top-k/top-p, `max_completion_length` tokens) under its own
    random state, seeded by (`seed`, step): the probe leaves the training's random stream untouched, and every method
    is probed with the same draws at the same step.

    `rows` are the distinct prompts as (answer, count, user message) (default: `settings.task_rows()`). After
    [`set_baseline`] (`INITIAL_SAMPLES` completions per prompt from the initial model, drawn as step 0),
    [`measure`] also reports the pass rate per difficulty bucket, pass@k and the policy's entropy.
    """

    def __init__(
        self, tokenizer: Any, settings: TaskSettings, seed: int, rows: list[tuple[str, int, str]] | None = None
    ):
        from ..evaluation import encode_prompts

        rows = settings.task_rows() if rows is None else rows
        self.tokenizer, self.seed, self.num_samples = tokenizer, seed, settings.eval_samples
        self.max_new_tokens = settings.max_completion_length
        self.answers = [target for target, _, _ in rows]
        self.counts = [count for _, count, _ in rows]
        self.prompt_ids = encode_prompts(tokenizer, [[{"role": "user", "content": text}] for _, _, text in rows])
        self.buckets: dict[str, list[int]] = {}

    def sample(self, model: Any, step: int, num_samples: int) -> tuple[list[float], float]:
        """Rewards of `num_samples` completions per prompt (prompt-major) and their mean per-token entropy."""
        seed = self.seed * 100_003 + step  # one stream per (seed, step)
        return sample_task(
            model, self.tokenizer, self.prompt_ids, (self.answers, self.counts), num_samples, self.max_new_tokens, seed
        )

    def correct_counts(self, rewards: list[float], num_samples: int) -> list[int]:
        """Right answers per prompt from prompt-major rewards."""
        return [round(sum(rewards[i : i + num_samples])) for i in range(0, len(rewards), num_samples)]

    def set_baseline(self, model: Any) -> None:
        """Bucket the prompts by the initial model's pass rate from `INITIAL_SAMPLES` completions each."""
        rewards, _ = self.sample(model, 0, INITIAL_SAMPLES)
        self.buckets = difficulty_buckets(self.correct_counts(rewards, INITIAL_SAMPLES))

    def measure(self, model: Any, step: int) -> dict[str, float]:
        """`eval_pass_rate`, `eval_entropy`, and with a baseline the bucket pass rates and `eval_pass_at_<k>`."""
        rewards, entropy = self.sample(model, step, self.num_samples)
        metrics = {"eval_pass_rate": mean(rewards), "eval_entropy": entropy}
        if self.buckets:
            correct = self.correct_counts(rewards, self.num_samples)
            metrics.update(probe_metrics(correct, self.num_samples, self.buckets))
        return metrics

    def metric_names(self) -> list[str]:
        """The keys [`measure`] returns."""
        names = ["eval_pass_rate", "eval_entropy"]
        if self.buckets:
            names += [f"eval_pass_rate_{name}" for name in self.buckets]
            names += [f"eval_pass_at_{k}" for k in PASS_AT_K if k <= self.num_samples]
        return names

    def __call__(self, model: Any, step: int) -> float:
        """Mean [`toy_reward`] of `num_samples` completions per distinct prompt, sampled from `model` now."""
        return self.measure(model, step)["eval_pass_rate"]


class StepRecorder(TrainerCallback):
    """Collects one record per logged training step (see [`run_method`]) and reports it.

    With a `probe`, every `eval_every`-th step's record also holds the probe's metrics (`eval_pass_rate` and the
    others of [`PassRateProbe.measure`]; NaN on the other steps); the probe's baseline is drawn when training starts.
    """

    def __init__(
        self,
        spec: MethodSpec,
        prompts_per_step: int,
        report: Callable[[dict], None] | None = None,
        probe: PassRateProbe | None = None,
        eval_every: int = 0,
    ):
        self.spec, self.prompts_per_step, self.report = spec, prompts_per_step, report
        self.probe, self.eval_every = probe, eval_every
        self.records: list[dict[str, Any]] = []
        self.start = time.perf_counter()
        self.eval_time = 0.0

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.probe is not None:
            self.probe.set_baseline(model)
        self.start = time.perf_counter()

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if logs and "reward" in logs:  # a training step's metrics (not the end-of-training summary)
            probed = None
            if self.probe is not None:
                probed = dict.fromkeys(self.probe.metric_names(), float("nan"))
                if state.global_step % self.eval_every == 0:
                    start = time.perf_counter()
                    probed.update(self.probe.measure(model, state.global_step))
                    self.eval_time += time.perf_counter() - start
            self.add(state.global_step, state.max_steps, logs, probed)

    def add(self, step: int, max_steps: int, logs: dict[str, float], probed: dict[str, float] | None = None) -> None:
        """Append the record of `step` (cumulative samples, probe metrics and wall time included) and report it."""
        record = {"step": step, **step_record(self.spec, logs, self.prompts_per_step)}
        for name in ("samples", "trained_samples"):
            previous = self.records[-1][f"cumulative_{name}"] if self.records else 0.0
            record[f"cumulative_{name}"] = previous + record[name]
        record["eval_pass_rate"] = float("nan")
        record.update(probed or {})
        record["wall_time"] = time.perf_counter() - self.start - self.eval_time  # training only
        self.records.append(record)
        if self.report is not None:
            self.report({**record, "method": self.spec.name, "max_steps": max_steps})


@contextlib.contextmanager
def quiet_training() -> Iterator[None]:
    """Hide transformers' download/save progress bars and its known v6-deprecation FutureWarnings (restored after)."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated and will be removed in v6", category=FutureWarning)
        try:
            yield
        finally:
            if bars:
                hf_logging.enable_progress_bar()


def run_method(
    spec: MethodSpec,
    model_dir: str | Path,
    dataset: Dataset,
    *,
    seed: int,
    steps: int,
    settings: TaskSettings | None = None,
    work_dir: str | Path | None = None,
    report: Callable[[dict], None] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    rows: Sequence[tuple[str, int, str]] | None = None,
) -> list[dict[str, Any]]:
    """Train `spec` for `steps` steps from `model_dir`; return one record per step.

    Each record holds `step`, `first_round_reward`, `samples` (every completion generated in the step, kept or
    not, over all candidates), `cumulative_samples`, `trained_samples` and `cumulative_trained_samples` (rows that
    reached the loss), `loss`, `grad_norm`, `eval_pass_rate` and with a probe its other metrics (see
    [`PassRateProbe`]; NaN unless `settings.eval_every` divides the step), `frac_reward_zero_std`, `kept_reward`
    (mean reward of the groups that reached the loss), `step_time`, `wall_time` (seconds of training since it
    started, probes excluded), the `ADAPTIVE_METRICS` (NaN for plain GRPO, except `rounds` = 1), the
    `REFILL_METRICS` as `refill_<name>`, and `samples_round_<r>` (completions of round r, r <= `RECORDED_ROUNDS`).
    `report` is called with each record; `callbacks` are added to the trainer. `rows` are the prompts the probe
    measures when already computed (default: [`training_rows`], which filters a banded task on the model again).
    """
    from transformers import PrinterCallback

    settings = settings or TaskSettings()
    configure_torch_threads()
    with contextlib.ExitStack() as stack:
        if work_dir is None:
            work_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="trl-ada-toy-"))
        stack.enter_context(quiet_training())
        output_dir = Path(work_dir) / f"trainer-{spec.name}-seed{seed}"  # one run directory per parallel run
        trainer = build_method_trainer(spec, model_dir, dataset, settings, steps, seed, output_dir)
        probe = None
        if settings.eval_every > 0:
            rows = training_rows(settings, model_dir, seed) if rows is None else list(rows)
            probe = PassRateProbe(trainer.processing_class, settings, seed, rows)
        recorder = StepRecorder(spec, settings.prompts_per_step, report, probe, settings.eval_every)
        trainer.remove_callback(PrinterCallback)  # it prints every log dict; the recorder reports instead
        trainer.add_callback(recorder)
        for callback in callbacks:
            trainer.add_callback(callback)
        trainer.train()
    return recorder.records
