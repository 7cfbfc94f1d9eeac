"""`trl-ada select-prompts`: estimate each prompt's pass rate and keep the prompts worth training on.

```bash
trl-ada select-prompts --model Qwen/Qwen2.5-Math-1.5B --dataset data/train.jsonl --num_samples 16 --output selected
```
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..evaluation import DEFAULT_MAX_PASS_RATE, save_selection, select_prompts
from ..evaluation.selection import is_selection_file
from ..outputs import check_output, staged_output
from .common import (
    PROG,
    UsageError,
    add_data_arguments,
    add_reward_argument,
    add_sampling_arguments,
    answerable_rows,
    check_model,
    check_not_empty,
    fitting_prompts,
    load_split,
    non_negative_int,
    positive_int,
    print_error,
    probability,
    require_hub_token,
    resolve_reward,
    sampling_settings,
    setup_logging,
)

__all__ = ["main", "make_parser"]

COMMAND = "select-prompts"


def make_parser(prog: str = f"{PROG} {COMMAND}") -> argparse.ArgumentParser:
    """Parser of `trl-ada select-prompts`."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Estimate each prompt's pass rate from num_samples samples and keep those with at least "
        "min_correct correct samples and a pass rate <= max_pass_rate (the paper's difficulty filter).",
    )
    parser.add_argument("--model", required=True, help="Model name on the Hub or local path.")
    parser.add_argument("--dataset", required=True, metavar="NAME_OR_PATH", help="Hub dataset or local data file.")
    add_data_arguments(parser, "train")
    parser.add_argument("--num_samples", type=positive_int, default=16, help="Samples per prompt (default: 16).")
    parser.add_argument(
        "--max_pass_rate",
        type=probability,
        default=DEFAULT_MAX_PASS_RATE,
        help=f"Drop prompts solved more often than this, in (0, 1] (default: {DEFAULT_MAX_PASS_RATE}).",
    )
    parser.add_argument(
        "--min_correct",
        type=non_negative_int,
        default=1,
        help="Drop prompts with fewer correct samples (default: 1).",
    )
    parser.add_argument("--limit", type=positive_int, default=None, help="Use only the first N prompts.")
    parser.add_argument(
        "--output", required=True, help="Directory for the kept prompts (save_to_disk) and DIR/prompts.jsonl."
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="Replace an existing --output that holds an earlier selection (only once the new selection is complete); "
        "without it, or when --output holds other files, it is refused.",
    )
    parser.add_argument("--push_to_hub", default=None, metavar="REPO_ID", help="Also push the kept prompts here.")
    parser.add_argument(
        "--hub_token", default=None, help="Token for --push_to_hub (default: HF_TOKEN or the stored `hf auth login`)."
    )
    add_reward_argument(parser)
    add_sampling_arguments(parser, max_completion_length=2048)
    return parser


def check_filter(num_samples: int, min_correct: int, max_pass_rate: float) -> None:
    """Refuse a filter no prompt can pass: a kept prompt has `min_correct <= k <= max_pass_rate * num_samples`."""
    if min_correct > num_samples:
        raise UsageError(
            f"--min_correct {min_correct} is more than --num_samples {num_samples}: no prompt can be kept. Lower "
            "--min_correct or raise --num_samples."
        )
    most = int(max_pass_rate * num_samples + 1e-9)
    if min_correct > most:
        raise UsageError(
            f"--min_correct {min_correct} with --max_pass_rate {max_pass_rate} and --num_samples {num_samples}: a "
            f"kept prompt has at most {most} correct samples, so none can be kept. Lower --min_correct, or raise "
            "--max_pass_rate or --num_samples."
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Write the kept prompts and their pass rates to `--output`.

    Every input is checked before sampling. The selection is written to a temporary sibling of `--output` and
    renamed into place; an empty selection is not written. A reward function's answer that is not one reward per
    sample is one line (`RewardError`), exit 2.
    """
    from datasets import disable_caching

    args = make_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    setup_logging()
    disable_caching()  # no cache-*.arrow files next to the input (e.g. an earlier selection)
    try:
        check_filter(args.num_samples, args.min_correct, args.max_pass_rate)
        reward_func = resolve_reward(args.reward)
        output = check_output(
            args.output,
            option="--output",
            overwrite=args.overwrite,
            directory=True,
            inputs=[args.dataset],
            owned=is_selection_file,
        )
        dataset = load_split(args.dataset, args.split, args.limit)
        check_not_empty(dataset, "--dataset", args.dataset)
        dataset = answerable_rows(dataset, args.problem_column, args.answer_column, args.dataset)
        sampling = sampling_settings(args)
        if args.push_to_hub:
            require_hub_token(args.hub_token, option=f"--push_to_hub {args.push_to_hub}", before="sampling")
        check_model(args.model, "--model")
        dataset = fitting_prompts({args.dataset: dataset}, args, "--dataset")[args.dataset]
    except (ValueError, OSError) as err:
        return print_error(COMMAND, err)
    from ..checks import RewardError

    try:
        kept = select_prompts(
            args.model,
            dataset,
            num_samples=args.num_samples,
            max_pass_rate=args.max_pass_rate,
            min_correct=args.min_correct,
            sampling=sampling,
            problem_column=args.problem_column,
            answer_column=args.answer_column,
            reward_func=reward_func,
        )
    except RewardError as err:  # what the reward returned for the sampled completions
        return print_error(COMMAND, err)
    if len(kept) == 0:
        print_error(
            COMMAND,
            f"no prompt passed the filter (0 of {len(dataset)} kept; see the counts above); nothing written to "
            f"{args.output}. Loosen --min_correct or --max_pass_rate, or raise --num_samples.",
        )
        return 1
    with staged_output(output, directory=True) as staging:
        save_selection(kept, staging)
    if args.push_to_hub:  # after the selection is in place: a failed upload loses nothing
        kept.push_to_hub(args.push_to_hub, token=args.hub_token)
        print(f"Pushed the kept prompts to https://huggingface.co/datasets/{args.push_to_hub}.")
    jsonl = Path(args.output) / "prompts.jsonl"
    print(f"Kept {len(kept)} of {len(dataset)} prompts -> {args.output} (train on {jsonl}).")
    return 0
