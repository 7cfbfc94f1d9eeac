"""avg@k and pass@k: per-dataset scores ([`DatasetScore`]), the report ([`EvalReport`]) and [`avg_at_k`]."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..utils import format_table, mean
from . import generation
from .generation import SamplingSettings, _check_positive_int
from .scoring import _format, _pass_rate, _split_by_sizes, reward_name, score_completions

if TYPE_CHECKING:
    from datasets import Dataset

    from ..rewards import RewardFunc


@dataclass
class DatasetScore:
    """One benchmark's result: avg@k (mean per-problem pass rate) and pass@k (share with >= 1 correct sample)."""

    name: str
    num_problems: int
    avg_at_k: float
    pass_at_k: float

    @classmethod
    def from_correct(cls, name: str, correct: Sequence[Sequence[bool]]) -> DatasetScore:
        """Aggregate per-sample correctness of each problem."""
        return cls(
            name=name,
            num_problems=len(correct),
            avg_at_k=mean((_pass_rate(samples) for samples in correct), default=0.0),
            pass_at_k=mean((float(any(samples)) for samples in correct), default=0.0),
        )


def weighted_average(scores: Sequence[DatasetScore], name: str = "average") -> DatasetScore:
    """The problem-count-weighted mean of the scores (the pooled score over all problems)."""
    total = sum(score.num_problems for score in scores)

    def pooled(metric: str) -> float:
        return sum(getattr(s, metric) * s.num_problems for s in scores) / total if total else 0.0

    return DatasetScore(name, total, pooled("avg_at_k"), pooled("pass_at_k"))


@dataclass
class EvalReport:
    """Per-dataset avg@k / pass@k, their size-weighted average, the settings, and per-problem pass rates."""

    model: str
    k: int
    scores: list[DatasetScore]
    settings: dict[str, Any] = field(default_factory=dict)
    pass_rates: dict[str, list[float]] = field(default_factory=dict)

    @property
    def average(self) -> DatasetScore:
        """Size-weighted average over datasets."""
        return weighted_average(self.scores)

    def to_dict(self, per_problem: bool = False) -> dict[str, Any]:
        """JSON-ready dict; `per_problem=True` adds every problem's pass rate."""
        out: dict[str, Any] = {
            "model": self.model,
            "k": self.k,
            "settings": self.settings,
            "datasets": [asdict(score) for score in self.scores],
            "average": asdict(self.average),
        }
        if per_problem:
            out["pass_rates"] = self.pass_rates
        return out

    def to_json(self, path: str | Path | None = None, per_problem: bool = False) -> str:
        """The report as JSON text, also written to `path` when given."""
        text = json.dumps(self.to_dict(per_problem=per_problem), indent=2)
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text + "\n")
        return text

    def table(self) -> str:
        """A plain-text table: one row per dataset, then the size-weighted average."""
        header = ("dataset", "#problems", f"avg@{self.k}", f"pass@{self.k}")
        rows = [
            (s.name, str(s.num_problems), f"{100 * s.avg_at_k:.2f}", f"{100 * s.pass_at_k:.2f}")
            for s in [*self.scores, self.average]
        ]
        return format_table(header, rows[:-1], footer=rows[-1:])


def avg_at_k(
    model: str | Path,
    datasets: dict[str, Dataset],
    k: int = 32,
    *,
    sampling: SamplingSettings | None = None,
    problem_column: str | None = None,
    answer_column: str | None = None,
    reward_func: RewardFunc | None = None,
) -> EvalReport:
    """Sample `k` completions per problem of every dataset and report avg@k and pass@k per dataset.

    avg@k of a dataset = mean over problems of the fraction of its k samples that are correct (`reward_func`,
    default [`~trl_ada.rewards.math_reward`], above `CORRECT_THRESHOLD`). The datasets need a problem and an answer
    column (see `trl_ada.data.resolve_columns`) and get the paper's prompt. All prompts go to the backend in one
    call, so the model is loaded once. `sampling` defaults to `SamplingSettings()`.
    """
    _check_positive_int(k, "k")
    if not datasets:
        raise ValueError("datasets is empty: pass at least one {name: Dataset}.")
    sampling = sampling or SamplingSettings()
    formatted = {name: _format(ds, problem_column, answer_column) for name, ds in datasets.items()}
    prompts = [prompt for ds in formatted.values() for prompt in ds["prompt"]]
    answers = [answer for ds in formatted.values() for answer in ds["answer"]]
    completions = generation.generate_completions(model, prompts, k, **sampling.generate_kwargs())
    correct = score_completions(completions, answers, reward_func=reward_func)
    sizes = [len(ds) for ds in formatted.values()]
    per_dataset = dict(zip(formatted, _split_by_sizes(correct, sizes), strict=True))
    settings = {name: getattr(sampling, name) for name in ("temperature", "top_p", "max_new_tokens", "seed")}
    settings |= {"backend": generation.resolve_backend(sampling.backend), "reward": reward_name(reward_func)}
    return EvalReport(
        model=str(model),
        k=k,
        scores=[DatasetScore.from_correct(name, c) for name, c in per_dataset.items()],
        settings=settings,
        pass_rates={name: [_pass_rate(s) for s in c] for name, c in per_dataset.items()},
    )
