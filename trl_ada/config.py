"""`ReinforceAdaConfig`: TRL's `GRPOConfig` plus the sampling fields, the YAML and command-line adapter of the plan.

The sampling fields are flat, as recipes and flags spell them (`samples_per_round: 8`), and are not written here:
`SamplingArguments` is built from the plan's field declarations (`trl_ada.plan.flat_fields`), so a field added to a
section is a config field, a flag with its help, a row of the docs' table and a type check at once. Each holds None
until the plan is resolved ("unset"); the config resolves its plan when it is built, and again whenever a field it
was resolved from has been assigned since (`sampling_plan`): the fields are the truth, and the plan follows them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trl import GRPOConfig

from .flat_rows import LOSS_TYPES, check_row_skipping
from .plan import (
    PRESET_FIELDS,
    PRESETS,
    SAMPLING,
    SYNCHRONOUS,
    FlatField,
    Host,
    SamplingPlan,
    flat_fields,
    given_fields,
)
from .records import check_value

__all__ = [
    "ReinforceAdaConfig",
    "RunDirArguments",
    "SamplingArguments",
    "SamplingConfig",
    "changed_default",
    "host_sampling_field",
]

RUN_DIRECTORY = "the run directory"
"""The `--help` group of `overwrite_output_dir`."""
LOSS = "the loss"
"""The `--help` group of `skip_zero_advantage_rows`."""


class SamplingConfig:
    """Resolve the sampling fields given at construction into a plan, with the host's schedules, and fill the fields
    with the resolved values (None where the schedule does not use one, so that a config rebuilt from its fields is
    the same config). A field assigned later (`args.max_rounds = 9`, as TRL scripts adjust a config before building
    the trainer) is given on top of those given at construction, and the plan is resolved again, with the same
    refusals, the next time it is read: the trainer reads it when it is built."""

    sampling_host: ClassVar[Host] = SYNCHRONOUS
    help_groups: ClassVar[dict[str, str]] = {}  # the `--help` group of each of the config's own fields

    @property
    def sampling_plan(self) -> SamplingPlan:
        """Every step's sampling parameters, resolved and validated from the fields as they are now."""
        resolved, now = self.__dict__["_sampling_resolved_from"], self._sampling_state()
        if now != resolved:
            unset = {spec.name: spec.unset for spec in flat_fields()}
            assigned = {name: value for name, value in now.items() if name in unset and value != resolved[name]}
            given = {**self.__dict__["_sampling_given"], **assigned}
            self.resolve_sampling({name: value for name, value in given.items() if value != unset[name]})
        return self.__dict__["_sampling_plan"]

    def _sampling_state(self) -> dict[str, Any]:
        """What the plan is resolved from: the preset, the group size and the flat fields, as the config holds them."""
        fields = {spec.name: self.__dict__.get(spec.name, spec.unset) for spec in flat_fields()}
        return {"sampling": self.sampling, "num_generations": self.num_generations, **fields}

    def resolve_sampling(self, given: dict[str, Any] | None = None) -> SamplingPlan:
        """Resolve the sampling fields (`given`, default: those the config holds at a value other than unset) into
        `sampling_plan`, the trainer's needs checked too, and fill the fields with the resolved values."""
        given = given_fields(self) if given is None else given
        plan = SamplingPlan.from_config(self, given, self.sampling_host)
        used = plan.fields()
        for spec in flat_fields():
            self.__dict__[spec.name] = used.get(spec.name, spec.unset)
        self.__dict__.update(_sampling_given=given, _sampling_plan=plan)
        self.__dict__["_sampling_resolved_from"] = self._sampling_state()
        return plan


def _preset_help() -> str:
    names = ", ".join(f"'{name}'" for name in PRESETS)
    return (
        f"A preset that fills the sampling fields you leave unset: {names} (docs/configuration.md). A field you set "
        "wins over it, or is refused when the preset's schedule has no use for it."
    )


def _help(spec: FlatField, host: Host = SYNCHRONOUS) -> str:
    """The `--help` of a sampling field, ending with its default on `host` (the preset's first, when it has one)."""
    fallback = host.default if spec.name == "generation_schedule" else spec.default
    default = f"the preset's, else {fallback!r}" if spec.name in PRESET_FIELDS else repr(fallback)
    return f"{spec.help} Default: {default}."


def host_sampling_field(name: str, host: Host) -> Any:
    """The sampling field `name` as a config of `host` declares it: unset by default, its `--help` naming the
    default of `host` (the asynchronous trainer streams where the synchronous one runs rounds)."""
    spec = next(spec for spec in flat_fields(host) if spec.name == name)
    return field(default=spec.unset, metadata={"help": _help(spec, host)})


def changed_default(default: Any, text: str) -> Any:
    """A field whose default differs from TRL's, with that default at the end of its `--help`."""
    return field(default=default, metadata={"help": f"{text} Default: {default!r}."})


SamplingArguments = dataclasses.make_dataclass(
    "SamplingArguments",
    [("sampling", str | None, field(default=None, metadata={"help": _preset_help()}))]
    + [
        (spec.name, spec.kind | None, field(default=spec.unset, metadata={"help": _help(spec)}))
        for spec in flat_fields()
    ],
    bases=(SamplingConfig,),
)
SamplingConfig.help_groups = {
    "sampling": SAMPLING,
    **{spec.name: spec.group for spec in flat_fields()},
    "overwrite_output_dir": RUN_DIRECTORY,
}
SamplingArguments.__module__ = __name__
SamplingArguments.__doc__ = """The sampling fields of `ReinforceAdaConfig` and `AsyncReinforceAdaConfig`: `sampling`
and one per `trl_ada.plan.flat_fields()`, each None until resolved."""


@dataclass
class RunDirArguments:
    """`overwrite_output_dir`, shared by `ReinforceAdaConfig` and `AsyncReinforceAdaConfig` (one run per
    `output_dir`, `trl_ada.run_dir`)."""

    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Delete the checkpoint-* folders of an earlier run in output_dir before training (without it, "
            "training refuses such a directory unless resuming).",
        },
    )


@dataclass
class ReinforceAdaConfig(SamplingArguments, RunDirArguments, GRPOConfig):
    r"""
    Configuration class for [`ReinforceAdaTrainer`]: every field of TRL's [`~trl.GRPOConfig`], the sampling fields
    (one per `trl_ada.plan.flat_fields()`; `trl-ada train --help`, `docs/configuration.md`), `overwrite_output_dir`
    and `skip_zero_advantage_rows`.

    `sampling` names a preset that fills the fields you leave unset: `"grpo"` (plain GRPO), `"balance"` and `"pos"`
    (Reinforce-Ada-Seq), `"est"` (Reinforce-Ada-Est), `"dapo"` (DAPO's dynamic sampling), `"budgeted_balance"` and
    `"pilot_commit"`. A field you set is explicit whatever its value: it wins over the preset when the resolved
    schedule uses it, and is refused when it does not. The defaults that differ from `GRPOConfig` reproduce the
    paper's runs; with `sampling="grpo"` the trainer computes exactly what [`~trl.GRPOTrainer`] computes.
    """

    # Paper defaults where TRL's differ
    num_generations: int | None = changed_default(
        4, "n: the fixed group size that reaches the loss (completions kept per prompt)."
    )
    scale_rewards: str = changed_default(
        "none",
        "'none' (paper): advantages are not divided by a std. 'group': divided by the std of the advantage "
        "baseline's set (pool or group). 'batch': divided by the std of all kept rewards.",
    )
    loss_type: str = changed_default("dapo", "TRL's loss formulation; the paper uses 'dapo'.")
    epsilon: float = changed_default(0.2, "Lower clipping epsilon.")
    epsilon_high: float | None = changed_default(0.28, "Upper clipping epsilon (clip-higher).")
    beta: float = changed_default(0.0, "KL coefficient; the paper uses no KL (0.0).")
    skip_zero_advantage_rows: bool = field(
        default=False,
        metadata={
            "help": "Run the forward and backward pass only on the completions whose advantage is not zero (they "
            "add nothing to the loss: the same update, less compute). Needs beta=0, no entropy bonus and "
            "top_entropy_quantile=1. Default: False."
        },
    )

    help_groups: ClassVar[dict[str, str]] = {**SamplingConfig.help_groups, "skip_zero_advantage_rows": LOSS}

    def __post_init__(self) -> None:
        self.resolve_sampling()
        self._check_values()
        super().__post_init__()
        check_row_skipping(self)

    def check_fields(self) -> SamplingPlan:
        """The checks of construction on the fields as they are now, and the plan resolved from them: the trainer
        runs them when it is built, so a field assigned after construction (`args.beta = 0.5` beside
        `skip_zero_advantage_rows=True`) is refused as it would have been at construction."""
        self._check_values()
        check_row_skipping(self)
        return self.sampling_plan

    def _check_values(self) -> None:
        check_value("vllm_server_timeout", self.vllm_server_timeout, float, example=240.0, within="(0, inf)")
        check_value("loss_type", self.loss_type, str, choices=tuple(sorted(LOSS_TYPES)))
        if self.scale_rewards not in ("none", "group", "batch", True, False):
            raise ValueError(f"scale_rewards={self.scale_rewards!r}: choose one of ['none', 'group', 'batch'].")
