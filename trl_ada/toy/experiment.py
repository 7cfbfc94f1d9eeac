"""Training experiments on the toy task: plain GRPO against Reinforce-Ada from the same weights and prompts.

The runner ([`run_method`]) trains one [`MethodSpec`] on the toy task with a [`StepRecorder`] callback and returns
one record per step; `trl_ada.toy.results` turns records into results: the summaries ([`summarize`],
[`steps_to_reach`], [`samples_to_reach`]), tables and the reward-curve figure ([`plot_curves`]), all importable from
here too. `trl-ada demo` and the learning benchmark (`docs/benchmarks_learning.md`) are thin layers over the two.
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
from .model import build_tiny_model, configure_torch_threads
from .results import (
    SMOOTHING_WINDOW,
    moving_average,
    plot_curves,
    samples_to_reach,
    steps_to_reach,
    summarize,
    task_title,
)
from .results import method_table as method_table
from .results import reading as reading
from .results import summary_table as summary_table
from .specs import TRAINERS as TRAINERS
from .specs import MethodSpec, TaskSettings, with_rounds
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
    "make_task",
    "moving_average",
    "plot_curves",
    "prepare_model",
    "run_method",
    "samples_to_reach",
    "steps_to_reach",
    "summarize",
    "task_title",
    "with_rounds",
]

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


def make_task(settings: TaskSettings, steps: int, seed: int, min_prompts: int = 0) -> Dataset:
    """The toy dataset: enough rows for `steps` steps (one epoch, seeded order) and at least `min_prompts`.

    Rows cycle through seeded shuffles of the task's distinct prompts, so each appears equally often (up to the last,
    partial cycle).
    """
    num_prompts = max(steps * settings.prompts_per_step, min_prompts)
    return make_toy_dataset(num_prompts, seed=seed, targets=settings.targets, counts=settings.counts)


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
    if spec.sampling is not None:  # a preset: Est refuses the rounds' fields
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
    return record


class PassRateProbe:
    """The policy's pass rate on the whole task: `num_samples` completions of every distinct prompt of the task.

    The toy dataset cycles through these prompts, each equally often, so the mean reward over them is an unbiased
    estimate of the expected reward of a uniformly drawn training prompt, whatever prompts a method chose to sample
    or skip. Sampling is the training's (temperature 1, no top-k/top-p, `max_completion_length` tokens) under its own
    random state, seeded by (`seed`, step): the probe leaves the training's random stream untouched, and every method
    is probed with the same draws at the same step.
    """

    def __init__(self, tokenizer: Any, settings: TaskSettings, seed: int):
        from ..evaluation import encode_prompts

        rows = settings.task_rows()
        self.tokenizer, self.seed, self.num_samples = tokenizer, seed, settings.eval_samples
        self.max_new_tokens = settings.max_completion_length
        self.answers = [target for target, _, _ in rows]
        self.counts = [count for _, count, _ in rows]
        self.prompt_ids = encode_prompts(tokenizer, [[{"role": "user", "content": text}] for _, _, text in rows])

    def __call__(self, model: Any, step: int) -> float:
        """Mean [`toy_reward`] of `num_samples` completions per distinct prompt, sampled from `model` now."""
        import torch

        batch = self.tokenizer.pad({"input_ids": self.prompt_ids}, padding_side="left", return_tensors="pt")
        batch = batch.to(model.device)
        was_training = model.training
        model.eval()
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(self.seed * 100_003 + step)  # one stream per (seed, step)
                output = model.generate(
                    **batch,
                    do_sample=True,
                    temperature=TOY_TEMPERATURE,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=self.max_new_tokens,
                    num_return_sequences=self.num_samples,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
        finally:
            model.train(was_training)
        texts = self.tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        repeat = self.num_samples  # generate returns the samples of prompt 0 first, then prompt 1, ...
        answers = [a for a in self.answers for _ in range(repeat)]
        counts = [k for k in self.counts for _ in range(repeat)]
        return mean(toy_reward(texts, answers, counts))


class StepRecorder(TrainerCallback):
    """Collects one record per logged training step (see [`run_method`]) and reports it.

    With a `probe`, every `eval_every`-th step's record also holds `eval_pass_rate` (NaN on the other steps).
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

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.perf_counter()

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if logs and "reward" in logs:  # a training step's metrics (not the end-of-training summary)
            pass_rate = float("nan")
            if self.probe is not None and state.global_step % self.eval_every == 0:
                start = time.perf_counter()
                pass_rate = self.probe(model, state.global_step)
                self.eval_time += time.perf_counter() - start
            self.add(state.global_step, state.max_steps, logs, pass_rate)

    def add(self, step: int, max_steps: int, logs: dict[str, float], pass_rate: float = float("nan")) -> None:
        """Append the record of `step` (cumulative samples and wall time included) and report it."""
        record = {"step": step, **step_record(self.spec, logs, self.prompts_per_step)}
        for name in ("samples", "trained_samples"):
            previous = self.records[-1][f"cumulative_{name}"] if self.records else 0.0
            record[f"cumulative_{name}"] = previous + record[name]
        record["eval_pass_rate"] = pass_rate
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
) -> list[dict[str, Any]]:
    """Train `spec` for `steps` steps from `model_dir`; return one record per step.

    Each record holds `step`, `first_round_reward`, `samples` (every completion generated in the step, kept or
    not, over all candidates), `cumulative_samples`, `trained_samples` and `cumulative_trained_samples` (rows that
    reached the loss), `loss`, `grad_norm`, `eval_pass_rate` (see [`PassRateProbe`]; NaN unless
    `settings.eval_every` divides the step), `frac_reward_zero_std`, `kept_reward` (mean reward of the groups that
    reached the loss), `step_time`, `wall_time` (seconds of training since it started, probes excluded), the
    `ADAPTIVE_METRICS` (NaN for plain GRPO, except `rounds` = 1) and the `REFILL_METRICS` as `refill_<name>`.
    `report` is called with each record; `callbacks` are added to the trainer.
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
        probe = PassRateProbe(trainer.processing_class, settings, seed) if settings.eval_every > 0 else None
        recorder = StepRecorder(spec, settings.prompts_per_step, report, probe, settings.eval_every)
        trainer.remove_callback(PrinterCallback)  # it prints every log dict; the recorder reports instead
        trainer.add_callback(recorder)
        for callback in callbacks:
            trainer.add_callback(callback)
        trainer.train()
    return recorder.records
