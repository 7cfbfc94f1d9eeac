"""`AsyncReinforceAdaConfig`: TRL's `AsyncGRPOConfig` plus the adaptive-sampling fields that apply asynchronously."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl.experimental.async_grpo import AsyncGRPOConfig

from ..config import RunDirArguments, SamplingArguments
from ..plan import PRESETS, SamplingPlan, check_type

__all__ = ["AsyncReinforceAdaConfig"]

UNSUPPORTED = {
    "prompt_oversampling": (1.0, "candidates and refill need a step's batch to refill"),
    "rounds_per_prompt": (None, "candidates and refill need a step's batch to refill"),
    "skip_threshold": (None, "pre-rollout skipping picks among a step's candidates"),
    "sample_budget": (None, "a budget is shared by the prompts of one step"),
    "first_round": ("fixed", "there are no rounds: each prompt keeps a window of completions in flight"),
    "later_rounds": ("fixed", "there are no rounds: each prompt keeps a window of completions in flight"),
}
"""Plan fields the asynchronous worker cannot honour, the value that turns them off, and why."""

BASE = {"generation_schedule": "streaming"}
"""The asynchronous trainer's own base defaults: every prompt samples on its own, as streaming does."""


@dataclass
class AsyncReinforceAdaConfig(SamplingArguments, RunDirArguments, AsyncGRPOConfig):
    r"""
    Configuration class for [`AsyncReinforceAdaTrainer`]: every field of TRL's `AsyncGRPOConfig`, the adaptive
    sampling fields and `overwrite_output_dir` of [`ReinforceAdaConfig`] (same names, presets and meanings;
    `docs/configuration.md`), and the fields below. Every prompt samples on its own as in
    `generation_schedule="streaming"` (exits as results arrive, in request order); `sampling="est"` allocates each
    wave of prompts together (`docs/async.md`).

    Parameters:
        max_prompts_in_flight (`int` or `None`, *optional*, defaults to `None`):
            Prompts the worker samples at once. `None`: enough to keep `max_inflight_tasks` completions in flight
            (`max_inflight_tasks // window`, at least 1).
        reward_timeout (`float`, *optional*, defaults to `300.0`):
            Seconds one call of the reward functions may take before the run stops with an error naming it.
        scale_rewards (`str`, *optional*, defaults to `"none"`):
            `"none"` (the paper): A = r − baseline. `"group"`: divided by the std of the baseline's set.
        vllm_mode (`str`, *optional*, defaults to `"server"`):
            Only `"server"`: the asynchronous trainer generates on a separate vLLM server.
    """

    max_prompts_in_flight: int | None = field(
        default=None,
        metadata={"help": "Prompts sampled at once (None: max_inflight_tasks // window, at least 1)."},
    )
    reward_timeout: float = field(
        default=300.0,
        metadata={"help": "Seconds one reward call may take before the run stops with an error."},
    )
    scale_rewards: str = field(
        default="none",
        metadata={"help": "'none' (paper): A = r - baseline. 'group': divided by the std of the baseline's set."},
    )
    vllm_mode: str = field(
        default="server",
        metadata={"help": "Only 'server': asynchronous generation runs on a separate vLLM server."},
    )
    num_generations: int = field(
        default=4,
        metadata={"help": "n: the group size kept per prompt (Est: the average allocation)."},
    )

    def __post_init__(self) -> None:
        _refuse_unsupported_preset(self.sampling, self.num_generations)  # before the fields it would fill
        _check_number_types(self)
        self.apply_preset(BASE)
        _refuse_unsupported(self)  # before the plan's own checks, whose fixes name the synchronous schedules
        _refuse_unusable_window(self.checked_plan(), self.streaming_chunk)
        super().__post_init__()

    @property
    def prompts_in_flight(self) -> int:
        """`max_prompts_in_flight`, or what keeps `max_inflight_tasks` completions in flight."""
        if self.max_prompts_in_flight is not None:
            return self.max_prompts_in_flight
        return max(1, self.max_inflight_tasks // self.sampling_plan.window)


def unsupported_preset_fields(sampling: str, num_generations: int) -> list[str]:
    """The fields the preset `sampling` sets to a value the asynchronous worker cannot honour (`UNSUPPORTED`)."""
    preset = PRESETS[sampling].fields(num_generations)
    return [name for name, (off, _) in UNSUPPORTED.items() if name in preset and preset[name] != off]


def _refuse_unsupported_preset(sampling: object, num_generations: object) -> None:
    """A preset the asynchronous trainer cannot run is refused by its name, not by a field the user never set."""
    if not isinstance(sampling, str) or sampling not in PRESETS or not isinstance(num_generations, int):
        return  # the plan's own checks name the problem
    fields = unsupported_preset_fields(sampling, num_generations)
    if fields:
        supported = [name for name in sorted(PRESETS) if not unsupported_preset_fields(name, num_generations)]
        reasons = "; ".join(dict.fromkeys(UNSUPPORTED[name][1] for name in fields))
        raise ValueError(
            f"sampling={sampling!r} is not supported by the asynchronous trainer: the preset sets "
            f"{', '.join(fields)} ({reasons}). Choose one of {supported}, or train with the synchronous "
            "ReinforceAdaTrainer."
        )


def _check_number_types(config: AsyncReinforceAdaConfig) -> None:
    """The asynchronous numbers are numbers (`max_staleness='2'` is refused here, not by a comparison in TRL)."""
    check_type("max_staleness", config.max_staleness, int, example=4)
    check_type("max_inflight_tasks", config.max_inflight_tasks, int, example=-1)
    check_type("max_prompts_in_flight", config.max_prompts_in_flight, int, optional=True)
    check_type("reward_timeout", config.reward_timeout, float, example=300.0)


def _refuse_unusable_window(plan: SamplingPlan, streaming_chunk: int) -> None:
    if plan.window < streaming_chunk:
        raise ValueError(
            f"streaming_window={plan.window} is smaller than streaming_chunk={streaming_chunk}: a prompt could "
            "never have one request in flight. Raise streaming_window or lower streaming_chunk."
        )


def _refuse_unsupported(config: AsyncReinforceAdaConfig) -> None:
    """One `ValueError` per option the asynchronous worker cannot honour, naming it, its value and the fix."""
    for name, (off, why) in UNSUPPORTED.items():
        if getattr(config, name) not in (None, off):  # None: unset, or unused by the schedule
            raise ValueError(
                f"{name}={getattr(config, name)!r} is not supported by the asynchronous trainer ({why}). Leave it at "
                f"{off!r}, or train with the synchronous ReinforceAdaTrainer."
            )
    if config.generation_schedule == "rounds":
        raise ValueError(
            "generation_schedule='rounds' is not supported by the asynchronous trainer (each prompt samples on its "
            "own, as 'streaming' does). Use generation_schedule='streaming' (the default) or sampling='est'."
        )
    if config.vllm_mode != "server":
        raise ValueError(
            f"vllm_mode={config.vllm_mode!r} is not supported by the asynchronous trainer: generation runs on a "
            "separate vLLM server while the trainer trains. Start one (`vllm serve MODEL`) and set vllm_mode='server'."
        )
    default_timeout = SamplingArguments.__dataclass_fields__["streaming_request_timeout"].default
    if config.streaming_request_timeout != default_timeout:
        raise ValueError(
            f"streaming_request_timeout={config.streaming_request_timeout!r} is not used by the asynchronous trainer: "
            f"each of its requests waits up to request_timeout seconds (TRL's field, now {config.request_timeout!r}). "
            "Set request_timeout instead."
        )
    if config.max_staleness < 0:
        raise ValueError(
            f"max_staleness={config.max_staleness!r}: a sample cannot be trained before its policy exists. Use 0 "
            "(train only samples of the live policy) or more (TRL's default is 4)."
        )
    if config.scale_rewards not in ("none", "group"):
        raise ValueError(
            f"scale_rewards={config.scale_rewards!r}: the asynchronous trainer has no batch to scale by. Choose "
            "'none' or 'group'."
        )
    if config.max_prompts_in_flight is not None and (
        isinstance(config.max_prompts_in_flight, bool)
        or not isinstance(config.max_prompts_in_flight, int)
        or config.max_prompts_in_flight < 1
    ):
        raise ValueError(f"max_prompts_in_flight={config.max_prompts_in_flight!r}: use an integer >= 1, or None.")
    if not config.reward_timeout > 0:
        raise ValueError(f"reward_timeout={config.reward_timeout!r}: use a positive number of seconds.")
