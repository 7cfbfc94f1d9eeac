"""Skipping the rows a step cannot learn from (`skip_zero_advantage_rows`).

A completion whose advantage is zero adds nothing to the policy-gradient loss of any TRL loss type: its per-token
loss is the advantage times a factor, so it is zero whatever the policy, and so is its gradient. Its forward and
backward pass are pure cost, and on a training-bound step (a small model, a CPU, long completions) they are most of
the step. Zero is exact here only without a term that acts on every row: the KL penalty (`beta`), the entropy bonus
(`entropy_coef`, `use_adaptive_entropy`), the high-entropy token mask (`top_entropy_quantile`) and a mixture of
experts' router loss. `check_row_skipping` refuses those at construction.

The loss over the kept rows is scaled so that it equals TRL's loss over every row (`loss_share`): loss types that
average over the microbatch's rows (`grpo`, `sapo`, `dr_grpo`, `luspo`) by kept rows over rows, `bnpo` (a mean over
the microbatch's tokens) by kept tokens over tokens; `dapo`, `cispo` and `vespo` divide by the generation batch's
token count, which skipping does not change.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["FIXED_NORMALIZER", "ROW_MEAN", "check_row_skipping", "loss_share", "rows_of", "signal_rows"]

ROW_MEAN = frozenset({"grpo", "sapo", "dr_grpo", "luspo"})
"""Loss types whose microbatch loss is a mean over its rows."""
TOKEN_MEAN = frozenset({"bnpo"})
"""Loss types whose microbatch loss is a mean over its completion tokens."""
FIXED_NORMALIZER = frozenset({"dapo", "cispo", "vespo"})
"""Loss types normalised by the generation batch's token count (`num_items_in_batch`)."""
LOSS_TYPES = ROW_MEAN | TOKEN_MEAN | FIXED_NORMALIZER
"""TRL 1.16's loss types (`GRPOConfig.loss_type`), each of whose normalisation is known here."""
VISION_KEYS = frozenset({"pixel_values", "image_grid_thw", "pixel_attention_mask", "image_sizes", "num_images"})
"""Inputs whose first dimension is not the batch's: a microbatch holding them is trained whole."""

_EVERY_ROW_TERMS = (
    ("beta", lambda v: v != 0.0, "beta=0.0 (no KL term: the paper's setting)"),
    ("entropy_coef", lambda v: v != 0.0, "entropy_coef=0.0"),
    ("use_adaptive_entropy", bool, "use_adaptive_entropy=False"),
    ("top_entropy_quantile", lambda v: v < 1.0, "top_entropy_quantile=1.0"),
)
"""(field, whether its value adds a term on every row, the value that does not)."""


def check_row_skipping(args: Any) -> None:
    """Refuse `skip_zero_advantage_rows=True` beside a setting under which a zero-advantage row still moves the loss
    (the loss type is one of `LOSS_TYPES`, checked by the config)."""
    if not args.skip_zero_advantage_rows:
        return
    for name, adds_a_term, fix in _EVERY_ROW_TERMS:
        value = getattr(args, name)
        if adds_a_term(value):
            raise ValueError(
                f"skip_zero_advantage_rows=True with {name}={value!r}: that term acts on every row, so a row whose "
                f"advantage is zero still changes the loss and cannot be skipped. Set {fix}, or "
                "skip_zero_advantage_rows=False."
            )


def signal_rows(advantages: torch.Tensor) -> torch.Tensor:
    """The indices of the rows whose advantage is not zero (at any token, for per-token advantages), in order."""
    nonzero = advantages != 0
    if nonzero.dim() > 1:
        nonzero = nonzero.flatten(1).any(dim=1)
    return nonzero.nonzero().flatten()


def rows_of(inputs: dict[str, Any], rows: torch.Tensor) -> dict[str, Any]:
    """The microbatch restricted to `rows`: every tensor whose first dimension is the batch's, indexed; the rest
    (`num_items_in_batch`) as it is."""
    size = inputs["advantages"].shape[0]
    return {
        key: value[rows] if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == size else value
        for key, value in inputs.items()
    }


def _tokens(inputs: dict[str, Any]) -> torch.Tensor:
    mask = inputs["completion_mask"]
    return (mask if "tool_mask" not in inputs else mask * inputs["tool_mask"]).sum().clamp(min=1)


def loss_share(loss_type: str, inputs: dict[str, Any], kept: dict[str, Any]) -> torch.Tensor | float:
    """The factor that turns TRL's loss over the `kept` rows into its loss over every row of `inputs` (the skipped
    rows add zero to the sum, but count in a mean over rows or tokens)."""
    if loss_type in ROW_MEAN:
        return kept["advantages"].shape[0] / inputs["advantages"].shape[0]
    if loss_type in TOKEN_MEAN:
        return _tokens(kept) / _tokens(inputs)
    return 1.0
