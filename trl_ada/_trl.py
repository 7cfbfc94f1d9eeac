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
    "KeptRows",
    "RoundLogs",
    "Joint",
    "check_joints",
    "checkpoint_folder",
    "generate_rows",
    "held_generation_metrics",
    "inside_generation_batch",
    "held_reward_metrics",
    "kept_training_batch",
    "log_kept_generation_metrics",
    "log_metrics",
    "prompts_from_trl_preamble",
    "queue_extra_logs",
    "queue_reward_metrics",
    "render_prompts",
    "replace_advantages",
    "replace_logged_metric",
    "rollout_features",
    "round_prompts",
    "row_statistics",
    "score_rows",
    "server_decoding",
    "sync_weights_once",
    "take_extra_logs",
    "tokenize_prompts",
]

GENERATION_METRICS = ("num_tokens", "completions/", "tools/")  # what TRL's `_generate` logs per call


@dataclass(frozen=True)
class Joint:
    """A private member of `GRPOTrainer` we rely on: a method (with the parameters we pass or receive) or an
    attribute that a built trainer holds."""

    name: str
    kind: str  # "method" or "attribute"
    parameters: tuple[str, ...] = ()
    use: str = ""
    vllm_only: bool = False  # an attribute a trainer holds only with `use_vllm=True`


JOINTS: tuple[Joint, ...] = (
    Joint(
        "_generate_and_score_completions",
        "method",
        ("inputs",),
        "overridden: one training batch; called once per step over the kept rows (and for TRL's preamble)",
    ),
    Joint("_generate", "method", ("prompts",), "overridden (the kept rows) and called: generation of a round's rows"),
    Joint(
        "_generate_single_turn",
        "method",
        ("prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images"),
        "overridden: streamed completions stand in for the backend's",
    ),
    Joint(
        "_calculate_rewards",
        "method",
        ("inputs", "prompts", "completions", "completion_ids_list"),
        "overridden (the kept rows' rewards, not scored twice) and called: scoring a round",
    ),
    Joint("_save_checkpoint", "method", ("model", "trial"), "overridden: checkpoint completeness, sampling state"),
    Joint("_compute_loss", "method", ("model", "inputs"), "overridden and called: the loss over the rows with signal"),
    Joint("_tag_names", "attribute", (), "set: the model card's tags"),
    Joint("_name", "attribute", (), "set: the model card's method name"),
    Joint("_paper", "attribute", (), "set: the model card's paper and citation"),
    Joint("_tokenize_prompts", "method", ("prompts",), "called: prompt ids for streaming requests and length checks"),
    Joint("chat_template", "attribute", (), "read: the template a prompt's length is checked with"),
    Joint("chat_template_kwargs", "attribute", (), "read: the template options a prompt's length is checked with"),
    Joint("_get_output_dir", "method", ("trial",), "called: the run directory of a checkpoint"),
    Joint("_metrics", "attribute", (), "written: per-step metrics; frac_reward_zero_std replaced"),
    Joint("_logs", "attribute", (), "written: our advantages in the completions table instead of TRL's"),
    Joint("_pending_metrics", "attribute", (), "read and written: reward functions' log_metric values"),
    Joint("_pending_extra_logs", "attribute", (), "read and written: reward functions' log_extra columns"),
    Joint("_tokenizer", "attribute", (), "read: pad token id for truncation statistics"),
    Joint("_last_loaded_step", "attribute", (), "read and written: one weight sync per step", vllm_only=True),
    Joint("_is_vlm", "attribute", (), "read: streaming refuses vision-language models"),
    Joint("_step", "attribute", (), "read: is a checkpoint taken inside a generation batch"),
    Joint("_buffered_inputs", "attribute", (), "read: is a checkpoint taken inside a generation batch"),
    Joint("eos_token_ids", "attribute", (), "read: truncation statistics"),
    Joint("num_generations", "attribute", (), "rewritten around `_generate`: copies per request of a round"),
    Joint("vllm_generation", "attribute", (), "read (server mode): sampling settings, client, weight sync", True),
)
"""What `ReinforceAdaTrainer` relies on beyond `GRPOTrainer`'s public API."""


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


@dataclass
class RoundLogs:
    """Per-step accumulators for what reward functions and TRL's `_generate` log while a step generates."""

    metric_sums: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # log_metric value x rows
    metric_rows: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    tool_calls: float = 0.0
    tool_failures: float = 0.0
    tool_rows: int = 0


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
    _ada_streamed_rows: tuple[list, list | None] | None = None

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

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if self._ada_streamed_rows is not None:  # streaming: the server already generated these rows
            return self._ada_streamed_rows
        return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        if self._ada_kept is not None:  # scored while they were generated
            return self._ada_kept.rewards_per_func
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _save_checkpoint(self, model, trial):
        folder = checkpoint_folder(self, trial)
        self.saving_checkpoint(folder, lambda: super(GRPOJoints, self)._save_checkpoint(model, trial), trial)


def kept_training_batch(trainer: GRPOJoints, kept: KeptRows) -> dict:
    """TRL's training batch of the kept rows: one pass through `_generate_and_score_completions`, whose `_generate`
    returns `kept.rows` and whose `_calculate_rewards` returns `kept.rewards_per_func`. TRL pads the rows, computes the
    old and reference log-probs and the importance-sampling ratios, logs its metrics and the completions table, and
    computes its own group advantages (see `replace_advantages`)."""
    trainer._ada_kept = kept
    try:
        return GRPOTrainer._generate_and_score_completions(trainer, kept.inputs)
    finally:
        trainer._ada_kept = None


def replace_advantages(trainer: GRPOJoints, batch: dict, advantages: np.ndarray) -> None:
    """Our advantages (every process's kept rows, in row order) in place of TRL's, in the batch (this process's
    slice) and in the completions table TRL logged.

    TRL 1.16 computes its group advantages inline in `_generate_and_score_completions`, between `_calculate_rewards`
    and its reward metrics, over groups of `num_generations` rows, with no method of its own to override: they are
    computed and replaced here, once per step.
    """
    num_local = len(batch["advantages"])
    rank = trainer.accelerator.process_index
    local = advantages[rank * num_local : (rank + 1) * num_local]
    batch["advantages"] = torch.tensor(local, dtype=torch.float32, device=trainer.accelerator.device)
    logged = trainer._logs["advantages"]
    for _ in range(min(len(advantages), len(logged))):
        logged.pop()
    logged.extend(advantages.tolist())


# ----------------------------------------------------------------------------------------------------------------
# Generation and scoring of a round's rows with TRL's own code
# ----------------------------------------------------------------------------------------------------------------


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


def generate_rows(trainer: GRPOJoints, prompts: list, copies_per_request: int) -> GeneratedRows:
    """TRL's `_generate` for rows of a round; each backend request asks for `copies_per_request` completions."""
    saved, trainer.num_generations = trainer.num_generations, copies_per_request
    try:
        return GeneratedRows(*GRPOTrainer._generate(trainer, prompts))
    finally:
        trainer.num_generations = saved


def decode_server_rows(trainer: GRPOJoints, prompts: list, completion_ids: list, logprobs: list | None):
    """TRL's `_generate` over completions a server already returned (one per row): decoding, tool parsing, logs."""
    trainer._ada_streamed_rows = (completion_ids, logprobs)
    try:
        return generate_rows(trainer, prompts, 1)
    finally:
        trainer._ada_streamed_rows = None


def score_rows(trainer: GRPOJoints, inputs: list[dict], prompts: list, rows: GeneratedRows) -> torch.Tensor:
    """TRL's `_calculate_rewards` of generated rows: (rows, reward functions), NaN where a function declined."""
    return GRPOTrainer._calculate_rewards(trainer, inputs, prompts, rows.completions, rows.completion_ids)


def tokenize_prompts(trainer: GRPOJoints, prompts: list) -> list[list[int]]:
    """Prompt token ids as TRL's generation would send them."""
    return trainer._tokenize_prompts(prompts)[0]


def render_prompts(trainer: GRPOJoints, prompts: list) -> list[str]:
    """The text `_tokenize_prompts` tokenizes: the chat template with the trainer's tools, template and
    `chat_template_kwargs` (for a cheap bound on prompt lengths; `tokenize_prompts` gives the exact ones)."""
    from .data import rendered_prompts

    template = {"tools": trainer.tools or None, "chat_template": trainer.chat_template}
    return rendered_prompts(prompts, trainer.processing_class, trainer.chat_template_kwargs, **template)


def row_statistics(trainer: GRPOJoints, rows: GeneratedRows) -> list[list[int]]:
    """Per row: prompt length, completion length and truncation, as TRL's `_generate` counts them."""
    eos_and_pad = [*trainer.eos_token_ids, trainer._tokenizer.pad_token_id]
    if rows.tool_mask is not None:
        lengths = [sum(mask) for mask in rows.tool_mask]
    else:
        lengths = [len(ids) for ids in rows.completion_ids]
    return [
        [len(p), length, bool(ids) and ids[-1] not in eos_and_pad]
        for p, length, ids in zip(rows.prompt_ids, lengths, rows.completion_ids, strict=True)
    ]


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
# Logs: what TRL's `_generate` and reward functions log per call, held back and logged once per step
# ----------------------------------------------------------------------------------------------------------------


def log_metrics(trainer: Any, metrics: dict[str, float]) -> None:
    """Append one value per training metric, as TRL's own metrics are (averaged over the logging interval; the
    asynchronous trainer reduces a key by its name: `max`, `min`, `total`)."""
    logged = trainer._metrics["train"]
    for name, value in metrics.items():
        logged[name].append(value)


def replace_logged_metric(trainer: GRPOJoints, name: str, value: float) -> None:
    """The value TRL logged for the training metric `name` in this step, replaced by ours (appended if none)."""
    values = trainer._metrics["train"][name]
    if values:
        values[-1] = value
    else:
        values.append(value)


@contextmanager
def held_generation_metrics(trainer: GRPOJoints, logs: RoundLogs, num_rows: int) -> Iterator[None]:
    """Keep what TRL's `_generate` logs per call out of the log; the kept batch is logged once per step."""
    metrics = trainer._metrics["train"]
    saved = {key: list(values) for key, values in metrics.items() if key.startswith(GENERATION_METRICS)}
    tokens_seen = trainer.state.num_input_tokens_seen
    try:
        yield
    finally:
        new = {
            key: values[len(saved.get(key, [])) :]
            for key, values in metrics.items()
            if key.startswith(GENERATION_METRICS)
        }
        if new.get("tools/call_frequency"):  # TRL counts tool calls per call, not per completion
            calls = new["tools/call_frequency"][-1] * num_rows
            logs.tool_calls += calls
            logs.tool_failures += new.get("tools/failure_frequency", [0.0])[-1] * calls
            logs.tool_rows += num_rows
        for key in new:
            if key in saved:
                metrics[key] = saved[key]
            else:
                del metrics[key]
        trainer.state.num_input_tokens_seen = tokens_seen


@contextmanager
def held_reward_metrics(trainer: GRPOJoints, logs: RoundLogs, num_rows: int) -> Iterator[None]:
    """Hold the `log_metric` values of a round's reward call, weighted by the real rows it scored here."""
    pending = trainer._pending_metrics
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


def take_extra_logs(trainer: GRPOJoints, num_rows: int) -> dict[str, list]:
    """Columns reward functions logged with `log_extra` for this round (kept per sample, queued for the kept)."""
    pending = trainer._pending_extra_logs
    logs = {column: values for column, values in pending.items() if len(values) == num_rows}
    pending.clear()
    return logs


def queue_extra_logs(trainer: GRPOJoints, columns: dict[str, list]) -> None:
    """Hand TRL the `log_extra` columns of the rows that reach the loss."""
    for column, values in columns.items():
        trainer._pending_extra_logs[column].extend(values)


def queue_reward_metrics(trainer: GRPOJoints, logs: RoundLogs) -> None:
    """Hand TRL each `log_metric` value so that its cross-process average weighs every real row once."""
    for name, rows in logs.metric_rows.items():
        trainer._pending_metrics[name].extend([logs.metric_sums[name] / rows] * rows)


def log_kept_generation_metrics(trainer: GRPOJoints, kept_stats: np.ndarray, logs: RoundLogs) -> None:
    """TRL's generation metrics (`num_tokens`, `completions/*`, `tools/*`) of the batch that reaches the loss."""
    metrics = trainer._metrics["train"]
    prompt_lengths, lengths, truncated = (torch.as_tensor(column) for column in kept_stats.T)
    truncated = truncated.bool()
    trainer.state.num_input_tokens_seen += int(prompt_lengths.sum() + lengths.sum())
    metrics["num_tokens"] = [trainer.state.num_input_tokens_seen]
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
    Joint("_save_checkpoint", "method", ("model", "trial"), "overridden: the rollout worker's state"),
    Joint("_inner_training_loop", "method", (), "overridden: the rollout worker's state restored on resume"),
    Joint("_trained_groups", "attribute", (), "replaced: the groups settled (`async_grpo.trained.TrainedGroups`)"),
    Joint("_groups_before_resume", "attribute", (), "written: groups trained before a resume (epoch stop)"),
    Joint("model_version", "attribute", (), "read and written: the policy version across a resume"),
    Joint("_metrics", "attribute", (), "appended to: the staleness of the rows that train (`log_metrics`)"),
    Joint("_lora_sync", "attribute", (), "read: TRL publishes the policy as a LoRA adapter"),
    Joint("_lora_name", "attribute", (), "read: the adapter's name, without its version"),
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
