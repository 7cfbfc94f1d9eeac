"""`trl-ada evaluate`: sample k completions per problem and print avg@k / pass@k per dataset.

```bash
trl-ada evaluate --model Qwen/Qwen2.5-Math-1.5B --datasets math500=HuggingFaceH4/MATH-500 --k 32 --output report.json
```
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..evaluation import avg_at_k
from ..outputs import check_output, staged_output
from .common import (
    PROG,
    add_data_arguments,
    add_reward_argument,
    add_sampling_arguments,
    answerable_rows,
    check_model,
    check_not_empty,
    fitting_prompts,
    load_split,
    positive_int,
    print_error,
    resolve_reward,
    sampling_settings,
    setup_logging,
)

if TYPE_CHECKING:
    from datasets import Dataset

__all__ = ["main", "make_parser"]

logger = logging.getLogger(__name__)

COMMAND = "evaluate"


def make_parser(prog: str = f"{PROG} {COMMAND}") -> argparse.ArgumentParser:
    """Parser of `trl-ada evaluate`."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Sample k completions per problem and report avg@k (mean accuracy over the k samples) and "
        "pass@k per dataset, plus their size-weighted average.",
    )
    parser.add_argument("--model", required=True, help="Model name on the Hub or local path.")
    parser.add_argument(
        "--datasets",
        nargs="+",
        required=True,
        metavar="NAME_OR_PATH",
        help="Hub datasets or local json/jsonl/parquet/csv files; write LABEL=NAME_OR_PATH to name a table row.",
    )
    add_data_arguments(parser, "test")
    parser.add_argument("--k", type=positive_int, default=32, help="Samples per problem (default: 32).")
    parser.add_argument("--limit", type=positive_int, default=None, help="Evaluate only the first N problems.")
    parser.add_argument("--output", default=None, help="Write the report as JSON to this file.")
    parser.add_argument(
        "--overwrite", action="store_true", help="Replace an existing --output; without it, it is refused."
    )
    add_reward_argument(parser)
    add_sampling_arguments(parser, max_completion_length=4096)
    return parser


def dataset_label(spec: str) -> tuple[str, str]:
    """`LABEL=NAME_OR_PATH` -> (label, source); otherwise a label from the file stem or the repository name. A `=`
    with nothing before or after it (`=data.jsonl`, a stray space in `--datasets =data.jsonl`) is a ValueError."""
    label, sep, source = spec.partition("=")
    if sep and not Path(spec).exists():
        if not label:
            raise ValueError(
                f"--datasets {spec}: starts with '='; write the dataset alone (--datasets {source}) or with a label "
                f"(--datasets LABEL={source})."
            )
        if not source:
            raise ValueError(f"--datasets {spec}: nothing after '='; write --datasets {label}=NAME_OR_PATH.")
    if sep and "/" not in label and not Path(spec).exists():
        return label, source
    path = Path(spec)
    return (path.stem if path.is_file() else spec.rstrip("/").split("/")[-1]), spec


def load_datasets(args: argparse.Namespace) -> dict[str, Dataset]:
    """The `--datasets`, by table label, with their columns checked and the rows without an answer dropped."""
    labels = [dataset_label(spec) for spec in args.datasets]
    names = [label for label, _ in labels]
    if len(set(names)) != len(names):
        raise ValueError(f"--datasets: two datasets share a name in {names}; name them with LABEL=NAME_OR_PATH.")
    datasets = {label: load_split(source, args.split, args.limit) for label, source in labels}
    for label, source in labels:
        check_not_empty(datasets[label], "--datasets", source)
        datasets[label] = answerable_rows(datasets[label], args.problem_column, args.answer_column, source)
    return datasets


def main(argv: Sequence[str] | None = None) -> int:
    """Print the avg@k table and write the JSON report when `--output` is given.

    Every input and `--output` are checked before sampling; the report is written to a temporary sibling and renamed
    into place. A reward function's answer that is not one reward per sample is one line (`RewardError`), exit 2.
    """
    from datasets import disable_caching

    args = make_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    setup_logging()
    disable_caching()  # no cache-*.arrow files next to the inputs
    try:
        reward_func = resolve_reward(args.reward)
        sources = [source for _, source in map(dataset_label, args.datasets)]
        output = args.output and check_output(args.output, option="--output", overwrite=args.overwrite, inputs=sources)
        datasets = load_datasets(args)
        sampling = sampling_settings(args)
        check_model(args.model, "--model")
        datasets = fitting_prompts(datasets, args, "--datasets")
    except (ValueError, OSError) as err:
        return print_error(COMMAND, err)
    from ..checks import RewardError

    try:
        report = avg_at_k(
            args.model,
            datasets,
            k=args.k,
            sampling=sampling,
            problem_column=args.problem_column,
            answer_column=args.answer_column,
            reward_func=reward_func,
        )
    except RewardError as err:  # what the reward returned for the sampled completions
        return print_error(COMMAND, err)
    print(report.table())
    if output:
        with staged_output(output) as staging:
            report.to_json(staging, per_problem=True)
        logger.info("Report written to %s.", args.output)
    return 0
