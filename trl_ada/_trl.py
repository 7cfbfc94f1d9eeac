"""Every joint with TRL's private surface, in one module.

`ReinforceAdaTrainer` overrides five private methods of TRL's `GRPOTrainer`, calls four more, and reads or writes a
dozen private attributes. They all live here, behind small named functions and `GRPOJoints`, a `GRPOTrainer`
subclass whose overrides forward to hooks with names of our own; nothing else in `trl_ada/` names a TRL-private
member. `JOINTS` lists each one with the parameters we rely on, and `check_joints` compares them with the installed
TRL, so an upgrade that renames or reshapes one fails in one test that names it (`docs/architecture.md`, "Upgrading
TRL").
"""

from __future__ import annotations

import inspect
import textwrap
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

import numpy as np
import torch
import trl
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from .server_requests import decoding_params

__all__ = [
    "JOINTS",
    "GRPOJoints",
    "GeneratedRows",
    "Joint",
    "KeptRows",
    "RoundLogs",
    "RoundRows",
    "RoundScores",
    "TRLRounds",
    "check_joints",
    "checkpoint_folder",
    "inside_generation_batch",
    "kept_training_batch",
    "log_metrics",
    "prompts_from_trl_preamble",
    "render_prompts",
    "rollout_features",
    "round_prompts",
    "server_decoding",
    "sync_weights_once",
    "tokenize_prompts",
]

GENERATION_METRICS = ("num_tokens", "completions/", "tools/")  # what TRL's `_generate` logs per call


@dataclass(frozen=True)
class Joint:
    """A private member of a TRL trainer we rely on: a method (with the parameters we pass or receive) or an
    attribute that a built trainer holds; what we do with it, and what breaks if it moves."""

    name: str
    kind: str  # "method" or "attribute"
    parameters: tuple[str, ...] = ()
    use: str = ""
    vllm_only: bool = False  # an attribute a trainer holds only with `use_vllm=True`
    breaks: str = ""


def _method(name: str, parameters: tuple[str, ...], use: str, breaks: str) -> Joint:
    return Joint(name, "method", parameters, use, breaks=breaks)


def _attribute(name: str, use: str, breaks: str, vllm_only: bool = False) -> Joint:
    return Joint(name, "attribute", (), use, vllm_only, breaks)


JOINTS: tuple[Joint, ...] = (
    _method(
        "_generate_and_score_completions",
        ("inputs",),
        "overridden: one training batch; called once per step over the kept rows (and for TRL's preamble)",
        "every training step",
    ),
    _method(
        "_generate",
        ("prompts",),
        "overridden (the kept rows) and called: generation of a round's rows",
        "every round's generation",
    ),
    _method(
        "_calculate_rewards",
        ("inputs", "prompts", "completions", "completion_ids_list"),
        "overridden (the kept rows' rewards, not scored twice) and called: scoring a round",
        "every round's scores",
    ),
    _method(
        "_save_checkpoint",
        ("model", "trial"),
        "overridden: checkpoint completeness, sampling state",
        "checkpoints and resume",
    ),
    _method(
        "_compute_loss",
        ("model", "inputs"),
        "overridden and called: the loss over the rows with signal",
        "`skip_zero_advantage_rows`",
    ),
    _attribute("_tag_names", "set: the model card's tags", "the model card's tags"),
    _attribute("_name", "set: the model card's method name", "the model card's method name"),
    _attribute("_paper", "set: the model card's paper and citation", "the model card's citation"),
    _method(
        "_tokenize_prompts",
        ("prompts",),
        "called: prompt ids for streaming requests and length checks",
        "streaming; the prompt-length check",
    ),
    _attribute("chat_template", "read: the template a prompt's length is checked with", "the prompt-length check"),
    _attribute(
        "chat_template_kwargs",
        "read: the template options a prompt's length is checked with",
        "the prompt-length check",
    ),
    _method("_get_output_dir", ("trial",), "called: the run directory of a checkpoint", "checkpoints"),
    _attribute("_metrics", "written: per-step metrics; frac_reward_zero_std replaced", "the logged metrics"),
    _attribute("_logs", "written: our advantages in the completions table instead of TRL's", "the completions table"),
    _attribute(
        "_pending_metrics", "read and written: reward functions' log_metric values", "reward functions' `log_metric`"
    ),
    _attribute(
        "_pending_extra_logs", "read and written: reward functions' log_extra columns", "reward functions' `log_extra`"
    ),
    _attribute("_tokenizer", "read: pad token id for truncation statistics", "every step (truncation statistics)"),
    _attribute(
        "_last_loaded_step", "read and written: one weight sync per step", "streaming's weight sync", vllm_only=True
    ),
    _attribute("_is_vlm", "read: streaming refuses vision-language models", "the trainer's construction"),
    _attribute("_step", "read: is a checkpoint taken inside a generation batch", "resume inside a generation batch"),
    _attribute(
        "_buffered_inputs", "read: is a checkpoint taken inside a generation batch", "resume inside a generation batch"
    ),
    _attribute("eos_token_ids", "read: truncation statistics", "every step (truncation statistics)"),
    _attribute(
        "num_generations",
        "rewritten while a step generates: copies per request of a round",
        "vLLM rounds whose prompts ask for fewer samples than n",
    ),
    _attribute("rollout_func", "set around `_generate` (streaming): a server's completions as a rollout", "streaming"),
    _attribute(
        "vllm_generation",
        "read (server mode): sampling settings, client, weight sync",
        "streaming",
        vllm_only=True,
    ),
)
"""What `ReinforceAdaTrainer` relies on beyond `GRPOTrainer`'s public API."""


@dataclass(frozen=True)
class TRLName:
    """A name `trl_ada` imports from TRL (public, or from `trl.experimental`): where it lives, what uses it, and
    what breaks if it moves."""

    module: str
    name: str
    use: str
    breaks: str


TRL_NAMES: tuple[TRLName, ...] = (
    TRLName("trl", "GRPOTrainer", "`ReinforceAdaTrainer`'s base class (through `GRPOJoints`)", "everything"),
    TRLName("trl", "GRPOConfig", "`ReinforceAdaConfig`'s base class", "everything"),
    TRLName("trl", "ScriptArguments", "the recipes' dataset arguments", "`trl-ada train`"),
    TRLName("trl", "TrlParser", "the recipes' YAML, flags and `env:` block", "`trl-ada train`"),
    TRLName("trl", "ModelConfig", "the recipes' model arguments", "`trl-ada train`"),
    TRLName("trl", "get_peft_config", "LoRA from a recipe", "`trl-ada train` with LoRA"),
    TRLName("trl", "get_quantization_config", "quantized loading from a recipe", "`trl-ada train` quantized"),
    TRLName("trl.trainer.utils", "get_callable_name", "a reward function's name in errors", "reward checks"),
    TRLName("trl.trainer.utils", "is_async_callable", "async reward functions", "reward checks"),
    TRLName(
        "trl.generation.vllm_client",
        "parse_logprobs",
        "log-probs of the server's completions",
        "streaming; the asynchronous worker",
    ),
    TRLName(
        "trl.experimental.async_grpo",
        "AsyncGRPOTrainer",
        "`AsyncReinforceAdaTrainer`'s base class",
        "the asynchronous trainer",
    ),
    TRLName(
        "trl.experimental.async_grpo",
        "AsyncGRPOConfig",
        "`AsyncReinforceAdaConfig`'s base class; `trl-ada train-async`",
        "the asynchronous trainer",
    ),
    TRLName(
        "trl.experimental.async_grpo.async_rollout_worker",
        "RolloutSample",
        "what the asynchronous worker queues",
        "the asynchronous trainer",
    ),
    TRLName(
        "trl.experimental.async_grpo.async_grpo_trainer",
        "get_peak_flops_per_device",
        "replaced off CUDA (TRL reads a GPU's name for its MFU metric)",
        "the asynchronous trainer on CPU",
    ),
    TRLName(
        "trl.experimental.async_grpo.packing",
        "TREE_ATTENTION",
        "the attention name a CPU kernel is registered under",
        "the asynchronous trainer on CPU",
    ),
)
"""Every name `trl_ada` imports from TRL (`tests/test_trl_joints.py` checks the package's imports against it)."""


def moved_names(names: tuple[TRLName, ...] = TRL_NAMES) -> list[str]:
    """One line per name of `names` the installed TRL no longer has where `trl_ada` imports it from."""
    import importlib

    problems = []
    for entry in names:
        try:
            present = hasattr(importlib.import_module(entry.module), entry.name)
        except ImportError:
            present = False
        if not present:
            problems.append(
                f"{entry.module}.{entry.name} is gone in TRL {trl.__version__} ({entry.use}; breaks {entry.breaks})."
            )
    return problems


def joints_markdown() -> str:
    """Every TRL name `trl_ada` touches, as Markdown (`docs/architecture.md` includes this text): the private members
    of `GRPOTrainer` and `AsyncGRPOTrainer`, and the names imported from TRL."""
    lines = [
        "| TRL name | kind | what `trl_ada` does with it | what breaks if it moves |",
        "| --- | --- | --- | --- |",
    ]
    for owner, joints in (("GRPOTrainer", JOINTS), ("AsyncGRPOTrainer", ASYNC_JOINTS)):
        for joint in joints:
            lines.append(f"| `{owner}.{joint.name}` | {joint.kind} | {joint.use} | {joint.breaks} |")
    for entry in TRL_NAMES:
        lines.append(f"| `{entry.module}.{entry.name}` | import | {entry.use} | {entry.breaks} |")
    return "\n".join(lines)


def check_joints(trainer: Any = GRPOTrainer) -> list[str]:
    """One line per joint that moved in the installed TRL (empty: all present). Methods are checked on the class;
    attributes on `trainer` when it is a built trainer (a class only has them once `__init__` ran; the vLLM ones
    only with `use_vllm=True`)."""
    return moved_joints(GRPOTrainer, JOINTS, trainer)


def moved_joints(cls: type, joints: tuple[Joint, ...], trainer: Any) -> list[str]:
    """One line per joint of `cls` in `joints` that moved: a method gone or with other leading parameters (checked
    on `cls`), an attribute missing on `trainer` (only when it is a built trainer)."""
    problems = []
    for joint in joints:
        if joint.kind == "method":
            method = getattr(cls, joint.name, None)
            if not callable(method):
                problems.append(f"{cls.__name__}.{joint.name} is gone in TRL {trl.__version__} ({joint.use}).")
                continue
            names = tuple(inspect.signature(method).parameters)[1:]
            missing = [name for name in joint.parameters if name not in names]
            if missing or names[: len(joint.parameters)] != joint.parameters:
                problems.append(
                    f"{cls.__name__}.{joint.name} takes {names} in TRL {trl.__version__}; trl_ada expects "
                    f"{joint.parameters} ({joint.use})."
                )
        elif isinstance(trainer, type) or (joint.vllm_only and not getattr(trainer, "use_vllm", False)):
            continue
        elif not hasattr(trainer, joint.name):
            problems.append(f"{cls.__name__} has no attribute {joint.name} in TRL {trl.__version__} ({joint.use}).")
    return problems


class GeneratedRows(NamedTuple):
    """What TRL's `_generate` returns, by name (one entry per row)."""

    prompt_ids: list
    completion_ids: list
    tool_mask: list | None
    completions: list
    logprobs: list | None
    extra_fields: dict[str, Any]
    images: list | None
    tool_images: list


class KeptRows(NamedTuple):
    """The rows a step keeps, as TRL's one pass over them takes them: this process's input rows and generated rows,
    and the rewards per function of every process's kept rows (TRL's `_calculate_rewards` gathers them)."""

    inputs: list[dict]
    rows: GeneratedRows
    rewards_per_func: torch.Tensor


class _PromptsReady(Exception):
    """Raised inside `_generate` while TRL's preamble prepares rows, to hand back the prompts it built."""

    def __init__(self, prompts: list):
        super().__init__("prompts prepared")
        self.prompts = prompts


class GRPOJoints(GRPOTrainer):
    """`GRPOTrainer` whose private methods forward to hooks that a subclass implements under names of its own:

    - `training_batch(inputs)`: one training batch (TRL's `_generate_and_score_completions` output); a subclass
      generates the step first, then hands the kept rows to `kept_training_batch`.
    - `saving_checkpoint(folder, save)`: a checkpoint save; `save()` writes TRL's part.
    - `training_loss(inputs, loss)`: a training batch's loss; `loss(rows)` is TRL's loss over the rows given.

    Evaluation batches are TRL's own.
    """

    # The model card TRL writes names the method, its tags and the paper.
    _tag_names = ["trl", "grpo", "reinforce-ada"]
    _name = "Reinforce-Ada"
    _paper = {
        "title": "Reinforce-Ada: An Adaptive Sampling Framework for Reinforce-Style LLM Training",
        "id": "2510.04996",
        "citation": textwrap.dedent("""\
            @article{xiong2025reinforceada,
                title        = {{Reinforce-Ada: An Adaptive Sampling Framework for Reinforce-Style LLM Training}},
                author       = {Wei Xiong and Chenlu Ye and Baohao Liao and Hanze Dong and Xinxing Xu and Christof Monz
                                and Jiang Bian and Nan Jiang and Tong Zhang},
                year         = 2025,
                eprint       = {arXiv:2510.04996},
            }"""),
    }

    _ada_preparing_prompts: bool = False
    _ada_kept: KeptRows | None = None  # set while TRL's one pass of the step runs over the kept rows

    def training_batch(self, inputs: list[dict]) -> dict:
        return GRPOTrainer._generate_and_score_completions(self, inputs)

    def saving_checkpoint(self, folder: str, save: Callable[[], None], trial: Any) -> None:
        save()

    def training_loss(self, inputs: dict, loss: Callable[[dict], torch.Tensor]) -> torch.Tensor:
        return loss(inputs)

    def _compute_loss(self, model, inputs):
        def loss(rows: dict) -> torch.Tensor:
            return super(GRPOJoints, self)._compute_loss(model, rows)

        return self.training_loss(inputs, loss) if self.model.training else loss(inputs)

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        return self.training_batch(inputs)

    def _generate(self, prompts):
        if self._ada_preparing_prompts:
            raise _PromptsReady(prompts)
        if self._ada_kept is not None:
            return tuple(self._ada_kept.rows)
        return super()._generate(prompts)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if self._ada_kept is not None:  # scored while they were generated
            return self._ada_kept.rewards_per_func
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _save_checkpoint(self, model, trial):
        folder = checkpoint_folder(self, trial)
        self.saving_checkpoint(folder, lambda: super(GRPOJoints, self)._save_checkpoint(model, trial), trial)


def kept_training_batch(trainer: GRPOJoints, kept: KeptRows, pool: tuple[np.ndarray, float] | None = None) -> dict:
    """TRL's training batch of the kept rows: one pass through `_generate_and_score_completions`, whose `_generate`
    returns `kept.rows` and whose `_calculate_rewards` returns `kept.rewards_per_func`. TRL pads the rows, computes the
    old and reference log-probs and the importance-sampling ratios, logs its metrics and the completions table, and
    computes its own group advantages; `pool`, when given, is ours in their place: the advantages of every process's
    kept rows, in row order, and the fraction of kept groups with zero reward std (TRL's `frac_reward_zero_std`).

    TRL 1.16 computes its group advantages inline, between `_calculate_rewards` and its reward metrics, over groups
    of `num_generations` rows, with no method of its own to override: they are replaced here, once per step, in the
    batch (this process's slice) and in the completions table TRL logged.
    """
    trainer._ada_kept = kept
    try:
        batch = GRPOTrainer._generate_and_score_completions(trainer, kept.inputs)
    finally:
        trainer._ada_kept = None
    if pool is None:
        return batch
    advantages, zero_std_fraction = pool
    num_local = len(batch["advantages"])
    rank = trainer.accelerator.process_index
    local = advantages[rank * num_local : (rank + 1) * num_local]
    batch["advantages"] = torch.tensor(local, dtype=torch.float32, device=trainer.accelerator.device)
    logged = trainer._logs["advantages"]
    for _ in range(min(len(advantages), len(logged))):
        logged.pop()
    logged.extend(advantages.tolist())
    trainer._metrics["train"]["frac_reward_zero_std"][-1:] = [zero_std_fraction]
    return batch


# ----------------------------------------------------------------------------------------------------------------
# A step's rounds: generated and scored by TRL's own code
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class RoundLogs:
    """What reward functions and TRL's `_generate` log while a step generates, held for the step."""

    metric_sums: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # log_metric value x rows
    metric_rows: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    tool_calls: float = 0.0
    tool_failures: float = 0.0
    tool_rows: int = 0


class RoundRows(NamedTuple):
    """A round's rows on this process: its input rows, the prompts TRL's `_generate` took, what it returned."""

    inputs: list[dict]
    prompts: list
    rows: GeneratedRows


class RoundScores(NamedTuple):
    """A round's scores. Per real row of every process (prompt-major): the rewards per function (NaN where a function
    declined), their weighted sum through the reward guard, the row statistics (prompt length, completion length,
    truncated) and whether the row is masked (truncated, under `mask_truncated_completions`). Per row of this
    process: the `log_extra` values reward functions logged."""

    rewards_per_func: np.ndarray
    rewards: np.ndarray
    row_stats: np.ndarray
    masked: np.ndarray
    extra_logs: dict[str, list]


class TRLRounds:
    """TRL's half of a step's rounds: `generate` a round's rows with TRL's `_generate` (vLLM server or colocated,
    transformers, tools, environments, `rollout_func`), `score` them with its `_calculate_rewards`, and, once the
    step is decided, `log_step` what reaches the loss. One per step, as a context manager: what TRL logs per call is
    held for the step (the kept batch is logged once), and `num_generations` is TRL's again on exit."""

    def __init__(self, trainer: GRPOJoints):
        self.trainer = trainer
        self.logs = RoundLogs()
        self._metrics = trainer._metrics["train"]
        self._pending_metrics = trainer._pending_metrics
        self._pending_extra_logs = trainer._pending_extra_logs
        self._eos_and_pad = [*trainer.eos_token_ids, trainer._tokenizer.pad_token_id]
        self._num_generations = self._copies = trainer.num_generations

    def __enter__(self) -> TRLRounds:
        return self

    def __exit__(self, *exc: object) -> None:
        self._ask_copies(self._num_generations)

    def generate(self, inputs: list[dict], copies_per_request: int) -> RoundRows:
        """This process's rows of a round: the prompts TRL's `_generate` takes for `inputs` (`round_prompts`), and
        what it returns when each backend request asks for `copies_per_request` completions."""
        prompts = round_prompts(self.trainer, inputs)
        self._ask_copies(copies_per_request)
        with self._held_generation_metrics(len(inputs)):
            rows = GeneratedRows(*GRPOTrainer._generate(self.trainer, prompts))
        return RoundRows(inputs, prompts, rows)

    def decode(
        self, inputs: list[dict], prompts: list, prompt_ids: list, completion_ids: list, logprobs: list | None
    ) -> RoundRows:
        """This process's rows of completions a vLLM server already returned (one per row), through TRL's `_generate`
        as a `rollout_func` hands them: decoded and logged as TRL's own."""
        trainer, rollout_func = self.trainer, self.trainer.rollout_func
        rollout = {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs}
        trainer.rollout_func = lambda prompts, trainer: rollout
        try:
            with self._held_generation_metrics(len(inputs)):
                rows = GeneratedRows(*GRPOTrainer._generate(trainer, prompts))
        finally:
            trainer.rollout_func = rollout_func
        return RoundRows(inputs, prompts, rows)

    def score(self, generated: RoundRows, num_rows: int, first: int) -> RoundScores:
        """Scores of a round's rows: this process's are the global rows `first, first + 1, ...` of a round of
        `num_rows` real rows (rows past them only even out the processes' shares and count nowhere)."""
        trainer, inputs, rows = self.trainer, generated.inputs, generated.rows
        num_real = max(0, min(len(inputs), num_rows - first))
        merge_extra_fields(inputs, rows.extra_fields)
        with self._held_reward_metrics(num_real):
            rewards = GRPOTrainer._calculate_rewards(
                trainer, inputs, generated.prompts, rows.completions, rows.completion_ids
            )
        rewards = rewards.float().cpu().numpy()[:num_rows]
        stats = self._row_statistics(rows)[:num_rows]
        extra_logs = {column: v for column, v in self._pending_extra_logs.items() if len(v) == len(inputs)}
        self._pending_extra_logs.clear()
        guarded = trainer.reward_guard.aggregate(rewards, rows.completions, offset=first)
        masked = stats[:, 2].astype(bool) if trainer.mask_truncated_completions else np.zeros(num_rows, dtype=bool)
        return RoundScores(rewards, guarded, stats, masked, extra_logs)

    def log_step(self, metrics: dict[str, float], kept_stats: np.ndarray, extra_logs: dict[str, list]) -> None:
        """Log the step's `metrics` and TRL's generation metrics of the kept rows (`kept_stats`, every process's);
        hand TRL the reward functions' `log_metric` values (each real row weighed once) and this process's kept rows'
        `log_extra` columns."""
        for name, value in metrics.items():
            self._metrics[name].append(value)
        self._log_kept_generation_metrics(kept_stats)
        logs = self.logs
        for name, rows in logs.metric_rows.items():
            self._pending_metrics[name].extend([logs.metric_sums[name] / rows] * rows)
        for column, values in extra_logs.items():
            self._pending_extra_logs[column].extend(values)

    def _ask_copies(self, copies: int) -> None:
        """TRL's `_generate` asks each backend request for `num_generations` completions of one prompt."""
        if copies != self._copies:
            self.trainer.num_generations = self._copies = copies

    def _row_statistics(self, rows: GeneratedRows) -> np.ndarray:
        """(rows of every process, 3): prompt length, completion length and truncation, as TRL's `_generate` counts
        them."""
        lengths = [sum(m) for m in rows.tool_mask] if rows.tool_mask is not None else map(len, rows.completion_ids)
        local = [
            [len(p), length, bool(ids) and ids[-1] not in self._eos_and_pad]
            for p, length, ids in zip(rows.prompt_ids, lengths, rows.completion_ids, strict=True)
        ]
        accelerator = self.trainer.accelerator
        stats = torch.tensor(local, dtype=torch.long, device=accelerator.device).reshape(-1, 3)
        return accelerator.gather(stats).cpu().numpy()

    @contextmanager
    def _held_generation_metrics(self, num_local: int) -> Iterator[None]:
        """Keep what TRL's `_generate` logs per call out of the log (tool calls counted per generated row)."""
        metrics, state = self._metrics, self.trainer.state
        saved = {key: list(values) for key, values in metrics.items() if key.startswith(GENERATION_METRICS)}
        tokens_seen = state.num_input_tokens_seen
        try:
            yield
        finally:
            new = {
                key: values[len(saved.get(key, [])) :]
                for key, values in metrics.items()
                if key.startswith(GENERATION_METRICS)
            }
            if new.get("tools/call_frequency"):  # TRL counts tool calls per call, not per completion
                num_rows = num_local * self.trainer.accelerator.num_processes
                calls = new["tools/call_frequency"][-1] * num_rows
                self.logs.tool_calls += calls
                self.logs.tool_failures += new.get("tools/failure_frequency", [0.0])[-1] * calls
                self.logs.tool_rows += num_rows
            for key in new:
                if key in saved:
                    metrics[key] = saved[key]
                else:
                    del metrics[key]
            state.num_input_tokens_seen = tokens_seen

    @contextmanager
    def _held_reward_metrics(self, num_rows: int) -> Iterator[None]:
        """Hold the `log_metric` values of a round's reward call, weighted by the real rows it scored here."""
        pending, logs = self._pending_metrics, self.logs
        saved = {name: list(values) for name, values in pending.items()}
        try:
            yield
        finally:
            for name, values in pending.items():
                for value in values[len(saved.get(name, [])) :]:
                    if num_rows:
                        logs.metric_sums[name] += value * num_rows
                        logs.metric_rows[name] += num_rows
            pending.clear()
            pending.update(saved)

    def _log_kept_generation_metrics(self, kept_stats: np.ndarray) -> None:
        """TRL's generation metrics (`num_tokens`, `completions/*`, `tools/*`) of the batch that reaches the loss."""
        metrics, state, logs = self._metrics, self.trainer.state, self.logs
        prompt_lengths, lengths, truncated = (torch.as_tensor(column) for column in kept_stats.T)
        truncated = truncated.bool()
        state.num_input_tokens_seen += int(prompt_lengths.sum() + lengths.sum())
        metrics["num_tokens"] = [state.num_input_tokens_seen]
        metrics["completions/mean_length"].append(lengths.float().mean().item())
        metrics["completions/min_length"].append(lengths.float().min().item())
        metrics["completions/max_length"].append(lengths.float().max().item())
        metrics["completions/clipped_ratio"].append(truncated.float().mean().item())
        terminated = lengths[~truncated] if (~truncated).any() else torch.zeros(1)
        metrics["completions/mean_terminated_length"].append(terminated.float().mean().item())
        metrics["completions/min_terminated_length"].append(terminated.float().min().item())
        metrics["completions/max_terminated_length"].append(terminated.float().max().item())
        if logs.tool_rows:  # every generated episode: TRL does not count tool calls per completion
            metrics["tools/call_frequency"].append(logs.tool_calls / logs.tool_rows)
            metrics["tools/failure_frequency"].append(logs.tool_failures / logs.tool_calls if logs.tool_calls else 0.0)


def merge_extra_fields(inputs: list[dict], extra_fields: dict[str, Any]) -> None:
    """Give reward functions the fields `rollout_func` returned, row by row, as GRPOTrainer does."""
    for i, row in enumerate(inputs):
        for key, values in extra_fields.items():
            if not isinstance(values, list):
                row[key] = values
            elif i < len(values):
                row[key] = values[i]


def round_prompts(trainer: GRPOJoints, inputs: list[dict]) -> list:
    """The prompts TRL's `_generate` takes for these rows: each row's `prompt`, or, with environments, tools or
    images, what TRL's own preamble makes of them (`prompts_from_trl_preamble`)."""
    if needs_trl_preamble(trainer, inputs):
        return prompts_from_trl_preamble(trainer, inputs)
    return [row["prompt"] for row in inputs]


def needs_trl_preamble(trainer: GRPOJoints, inputs: list[dict]) -> bool:
    """Whether TRL's preamble does more than take each row's `prompt`: environments, tools, or image rows."""
    environments = getattr(trainer, "environment_factories", None) is not None
    return environments or bool(trainer.tools) or "images" in inputs[0] or "image" in inputs[0]


def prompts_from_trl_preamble(trainer: GRPOJoints, inputs: list[dict]) -> list:
    """The prompts TRL's own preamble builds for these rows, by running `_generate_and_score_completions` up to its
    call of `_generate`, where an exception carries the prompts out before anything is generated or scored.

    TRL 1.16 writes that preamble inline at the top of `GRPOTrainer._generate_and_score_completions`, with no method
    of its own: it draws each row's environment from `_environment_pool` and calls its `reset(**row)`, appending the
    observation to the prompt's last message (`environments`, `_batch_environments`); it builds each row's
    `_sync_tool_dicts` and `_async_tool_dicts`; and it turns image rows into multimodal messages. A round's rows need
    exactly that, so this is the one place where we depend on the order of TRL's code rather than on a name, and the
    only control-flow exception: rows without environments, tools or images take their `prompt` (`round_prompts`).
    """
    trainer._ada_preparing_prompts = True
    try:
        GRPOTrainer._generate_and_score_completions(trainer, inputs)
    except _PromptsReady as ready:
        return ready.prompts
    finally:
        trainer._ada_preparing_prompts = False
    raise RuntimeError("GRPOTrainer._generate_and_score_completions returned without calling _generate.")


def tokenize_prompts(trainer: GRPOJoints, prompts: list) -> list[list[int]]:
    """Prompt token ids as TRL's generation would send them."""
    return trainer._tokenize_prompts(prompts)[0]


def render_prompts(trainer: GRPOJoints, prompts: list) -> list[str]:
    """The text `_tokenize_prompts` tokenizes: the chat template with the trainer's tools, template and
    `chat_template_kwargs` (for a cheap bound on prompt lengths; `tokenize_prompts` gives the exact ones)."""
    from .data import rendered_prompts

    template = {"tools": trainer.tools or None, "chat_template": trainer.chat_template}
    return rendered_prompts(prompts, trainer.processing_class, trainer.chat_template_kwargs, **template)


def rollout_features(trainer: GRPOJoints) -> dict[str, bool]:
    """Which multi-turn or multimodal features the trainer was built with."""
    return {
        "tools": bool(trainer.tools),
        "environment_factory": getattr(trainer, "environment_factories", None) is not None,
        "rollout_func": trainer.rollout_func is not None,
        "a vision-language model": bool(getattr(trainer, "_is_vlm", False)),
    }


# ----------------------------------------------------------------------------------------------------------------
# vLLM server mode
# ----------------------------------------------------------------------------------------------------------------


def server_decoding(trainer: GRPOJoints) -> tuple[str, str, dict[str, Any], Callable]:
    """(base URL, model, decoding settings, log-prob parser) of TRL's vLLM server client (`VLLMGeneration`'s)."""
    from trl.generation.vllm_client import parse_logprobs

    generation = trainer.vllm_generation
    decoding = decoding_params(
        temperature=generation.temperature,
        top_p=generation.top_p,
        top_k=generation.top_k,
        min_p=generation.min_p,
        repetition_penalty=generation.repetition_penalty,
        max_tokens=generation.max_completion_length,
        structured_outputs_regex=generation.structured_outputs_regex,
        generation_kwargs=generation.generation_kwargs,
    )
    client = generation.vllm_client
    return client.base_url, client.model, decoding, parse_logprobs


def sync_weights_once(trainer: GRPOJoints) -> None:
    """Send the policy's weights to the vLLM server once per optimizer step, as TRL's `_generate` does."""
    if trainer.state.global_step != trainer._last_loaded_step:
        trainer.vllm_generation.sync_weights()
        trainer._last_loaded_step = trainer.state.global_step


# ----------------------------------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------------------------------


def log_metrics(trainer: Any, metrics: dict[str, float]) -> None:
    """Append one value per training metric, as TRL's own metrics are (averaged over the logging interval; the
    asynchronous trainer reduces a key by its name: `max`, `min`, `total`)."""
    logged = trainer._metrics["train"]
    for name, value in metrics.items():
        logged[name].append(value)


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints
# ----------------------------------------------------------------------------------------------------------------


def inside_generation_batch(trainer: GRPOJoints) -> bool:
    """True when TRL's next training micro-step reuses its buffered generation batch instead of generating one (TRL
    counts micro-steps from 0 in every run, resumed ones included, and checkpoints no buffered batch)."""
    every = trainer.args.steps_per_generation * trainer.num_iterations
    return trainer._buffered_inputs is not None and trainer._step % every != 0


def run_directory(trainer: GRPOJoints, trial: Any) -> str:
    """The directory a checkpoint of this run (or hyper-parameter search trial) is written to."""
    return trainer._get_output_dir(trial=trial)


def checkpoint_folder(trainer: GRPOJoints, trial: Any) -> str:
    """`<run directory>/checkpoint-<global step>`: where `_save_checkpoint` writes."""
    return f"{run_directory(trainer, trial)}/{PREFIX_CHECKPOINT_DIR}-{trainer.state.global_step}"


# ----------------------------------------------------------------------------------------------------------------
# The asynchronous trainer (`trl.experimental.async_grpo.AsyncGRPOTrainer`)
# ----------------------------------------------------------------------------------------------------------------

ASYNC_JOINTS: tuple[Joint, ...] = (
    _method("_save_checkpoint", ("model", "trial"), "overridden: the rollout worker's state", "checkpoints"),
    _method("_inner_training_loop", (), "overridden: the rollout worker's state restored on resume", "resume"),
    _attribute(
        "_trained_groups",
        "replaced: the groups settled (`async_grpo.trained.TrainedGroups`)",
        "the staleness bound at training, the epoch stop",
    ),
    _attribute("_groups_before_resume", "written: groups trained before a resume (epoch stop)", "resume"),
    _attribute("model_version", "read and written: the policy version across a resume", "resume; staleness"),
    _attribute(
        "_metrics", "appended to: the staleness of the rows that train (`log_metrics`)", "the staleness metrics"
    ),
    _attribute("_lora_sync", "read: TRL publishes the policy as a LoRA adapter", "asynchronous LoRA"),
    _attribute("_lora_name", "read: the adapter's name, without its version", "asynchronous LoRA"),
)
"""Private members of `AsyncGRPOTrainer` that `AsyncReinforceAdaTrainer` relies on (`check_async_joints`)."""


@cache
def async_joints() -> type:
    """`AsyncGRPOTrainer` whose private methods forward to hooks with names of our own (built on first use, as
    importing `trl.experimental` warns):

    - `saving_checkpoint(folder, save)`: a checkpoint save into `folder`; `save()` writes TRL's part;
    - `resuming_worker(checkpoint)`: before training starts from `checkpoint` (a path, or None);
    - `set_groups_before_resume(count)`;
    - `trained_staleness(staleness)`: the staleness of each row of the micro-batch about to train.

    Its `_trained_groups` is set by the subclass to a record whose `take_next()` counts the oldest collated
    micro-batch as trained (`async_grpo.trained.TrainedGroups`: a group counts once all its rows were trained, not
    when collated; TRL's collator adds a micro-batch's groups when it collates it, one micro-batch ahead of training,
    and a group's rows may straddle micro-batches); `training_step` calls it.
    """
    from trl.experimental.async_grpo import AsyncGRPOTrainer

    class AsyncGRPOJoints(AsyncGRPOTrainer):
        _tag_names = [*GRPOJoints._tag_names, "async"]
        _name = "Reinforce-Ada (asynchronous)"
        _paper = GRPOJoints._paper

        def saving_checkpoint(self, folder: str, save: Callable[[], None]) -> None:
            save()

        def resuming_worker(self, checkpoint: str | None) -> None: ...

        def training_step(self, model, inputs, num_items_in_batch=None):
            self.trained_staleness(self._trained_groups.take_next(self.model_version))
            return super().training_step(model, inputs, num_items_in_batch)

        def trained_staleness(self, staleness: list[int]) -> None: ...

        def set_groups_before_resume(self, count: int) -> None:
            self._groups_before_resume = count

        def _save_checkpoint(self, model, trial):
            folder = f"{self._get_output_dir(trial=trial)}/{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            self.saving_checkpoint(folder, lambda: super(AsyncGRPOJoints, self)._save_checkpoint(model, trial))

        def _inner_training_loop(self, *args, **kwargs):
            self.resuming_worker(kwargs.get("resume_from_checkpoint"))
            return super()._inner_training_loop(*args, **kwargs)

    return AsyncGRPOJoints


def check_async_joints(trainer: Any = None) -> list[str]:
    """`check_joints` for `ASYNC_JOINTS` on `AsyncGRPOTrainer` (attributes: on a built `trainer`)."""
    from trl.experimental.async_grpo import AsyncGRPOTrainer

    return moved_joints(AsyncGRPOTrainer, ASYNC_JOINTS, AsyncGRPOTrainer if trainer is None else trainer)


@contextmanager
def async_trainer_on_device(device: torch.device, tree_attention: Callable) -> Iterator[None]:
    """Build an `AsyncGRPOTrainer` that can train off CUDA: TRL reads the GPU's name for its MFU metric
    (`trl/trainer/utils.py`, `get_peak_flops_per_device`) and attends with a FlashAttention-3 kernel
    (`trl/experimental/async_grpo/packing.py`, `tree_attention`); off CUDA the MFU metric is off and the tree
    attention is `tree_attention` (the caller's implementation of TRL's kernel)."""
    from transformers import AttentionInterface
    from trl.experimental.async_grpo import async_grpo_trainer, packing

    if device.type == "cuda":
        yield
        return
    original = async_grpo_trainer.get_peak_flops_per_device
    async_grpo_trainer.get_peak_flops_per_device = lambda accelerator, dtype: None
    try:
        yield
    finally:
        async_grpo_trainer.get_peak_flops_per_device = original
        AttentionInterface.register(packing.TREE_ATTENTION, tree_attention)
