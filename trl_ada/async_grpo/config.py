"""`AsyncReinforceAdaConfig`: TRL's `AsyncGRPOConfig` plus the adaptive-sampling fields that apply asynchronously."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from trl.experimental.async_grpo import AsyncGRPOConfig

from ..config import RunDirArguments, SamplingArguments, changed_default, host_sampling_field
from ..plan import ASYNCHRONOUS, Host, SamplingPlan
from ..records import check_value

__all__ = ["AsyncReinforceAdaConfig"]


@dataclass
class AsyncReinforceAdaConfig(SamplingArguments, RunDirArguments, AsyncGRPOConfig):
    r"""
    Configuration class for [`AsyncReinforceAdaTrainer`]: every field of TRL's `AsyncGRPOConfig`, the sampling fields
    and `overwrite_output_dir` of [`ReinforceAdaConfig`] (the schedules of `trl_ada.plan.ASYNCHRONOUS`;
    `docs/configuration.md`, `docs/async.md`), and the fields below.

    Parameters:
        max_prompts_in_flight (`int` or `None`, *optional*, defaults to `None`):
            Prompts the worker samples at once. `None`: enough to keep `max_inflight_tasks` completions in flight
            (`max_inflight_tasks // streaming_window`; Est: `// samples_per_round`'s default, 8; at least 1).
        reward_timeout (`float`, *optional*, defaults to `300.0`):
            Seconds one call of the reward functions may take before the run stops with an error naming it.
        scale_rewards (`str`, *optional*, defaults to `"none"`):
            `"none"` (the paper): A = r − baseline. `"group"`: divided by the std of the baseline's set.
        max_staleness (`int`, *optional*, defaults to `4`):
            A sample trains at most `max_staleness` policy versions after the version it was requested under, counted
            where it trains. TRL's trainer counts where a sample is read from the queue, and accelerate reads a
            micro-batch before the weight sync that precedes its training, so TRL's count is one short; the worker
            drops a group that would break the bound (`reinforce_ada/async/staleness_at_training_max` logs it). At
            least 1: with 0 no read-ahead sample could train.
        vllm_mode (`str`, *optional*, defaults to `"server"`):
            Only `"server"`: the asynchronous trainer generates on a separate vLLM server.
    """

    max_prompts_in_flight: int | None = field(
        default=None,
        metadata={
            "help": "Prompts sampled at once (None: max_inflight_tasks // streaming_window, Est: // 8, at least 1).",
        },
    )
    reward_timeout: float = field(
        default=300.0,
        metadata={
            "help": "Seconds one reward call may take before the run stops with an error.",
        },
    )
    scale_rewards: str = changed_default(
        "none", "'none' (paper): A = r - baseline. 'group': divided by the std of the baseline's set."
    )
    max_staleness: int = field(
        default=4,
        metadata={
            "help": "A sample trains at most this many policy versions after the one it was requested under, "
            "counted where it trains (TRL counts where it is read, a weight sync earlier). At least 1.",
        },
    )
    vllm_mode: str = field(
        default="server",
        metadata={"help": "Only 'server': asynchronous generation runs on a separate vLLM server."},
    )
    num_generations: int = changed_default(4, "n: the group size kept per prompt (Est: the average allocation).")
    generation_schedule: str | None = host_sampling_field("generation_schedule", ASYNCHRONOUS)

    sampling_host: ClassVar[Host] = ASYNCHRONOUS
    help_groups: ClassVar[dict[str, str]] = {
        **SamplingArguments.help_groups,
        "max_prompts_in_flight": "AsyncReinforceAdaConfig",
        "reward_timeout": "AsyncReinforceAdaConfig",
    }

    def __post_init__(self) -> None:
        _check_numbers(self)
        _refuse_replaced(self)
        self.resolve_sampling()  # the worker's sections (`plan.ASYNCHRONOUS`): their fields, their refusals
        _refuse_unsupported(self)
        super().__post_init__()

    def check_fields(self) -> SamplingPlan:
        """The checks of construction on the fields as they are now, and the plan resolved from them: the trainer
        runs them when it is built, so a field assigned after construction is refused as at construction."""
        _check_numbers(self)
        _refuse_replaced(self)
        plan = self.sampling_plan
        _refuse_unsupported(self)
        return plan

    @property
    def prompts_in_flight(self) -> int:
        """`max_prompts_in_flight`, or what keeps `max_inflight_tasks` completions in flight (Est: per window of 8)."""
        if self.max_prompts_in_flight is not None:
            return self.max_prompts_in_flight
        plan = self.sampling_plan
        return max(1, self.max_inflight_tasks // plan.section.in_flight(plan.n))  # completions in flight per prompt


def _check_numbers(config: AsyncReinforceAdaConfig) -> None:
    """The asynchronous numbers are numbers in their range (`max_staleness='2'` is refused here, not by a comparison
    in TRL; a staleness of 0 cannot hold where samples train: the dispatcher reads a micro-batch before the weight
    sync that precedes its training, `READ_AHEAD`)."""
    check_value("max_staleness", config.max_staleness, int, example=4, within="[1, inf)")
    check_value("max_inflight_tasks", config.max_inflight_tasks, int, example=-1)
    check_value("queue_maxsize", config.queue_maxsize, int, example=0, within="[0, inf)")
    check_value("weight_sync_steps", config.weight_sync_steps, int, example=1, within="[1, inf)")
    in_flight = config.max_prompts_in_flight
    check_value("max_prompts_in_flight", in_flight, int, optional=True, example=1, within="[1, inf)")
    check_value("reward_timeout", config.reward_timeout, float, example=300.0, within="(0, inf]")
    check_value("vllm_server_timeout", config.vllm_server_timeout, float, example=240.0, within="(0, inf)")


def _refuse_replaced(config: AsyncReinforceAdaConfig) -> None:
    """`streaming_request_timeout` is the synchronous streaming schedule's; the worker's requests wait TRL's own."""
    if config.streaming_request_timeout is not None:
        raise ValueError(
            f"streaming_request_timeout={config.streaming_request_timeout!r} is not used by the asynchronous trainer: "
            f"each of its requests waits up to request_timeout seconds (TRL's field, now {config.request_timeout!r}). "
            "Set request_timeout instead."
        )


def _refuse_unsupported(config: AsyncReinforceAdaConfig) -> None:
    """One `ValueError` per TRL option the asynchronous trainer cannot honour, naming it, its value and the fix."""
    if config.vllm_mode != "server":
        raise ValueError(
            f"vllm_mode={config.vllm_mode!r} is not supported by the asynchronous trainer: generation runs on a "
            "separate vLLM server while the trainer trains. Start one (`vllm serve MODEL`) and set vllm_mode='server'."
        )
    if config.scale_rewards not in ("none", "group"):
        raise ValueError(
            f"scale_rewards={config.scale_rewards!r}: the asynchronous trainer has no batch to scale by. Choose "
            "'none' or 'group'."
        )
