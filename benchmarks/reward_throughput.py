r"""Throughput of `trl_ada.rewards.math_reward`: completions scored per second, serial vs worker processes.

Two synthetic batches of realistic completions (1-3 KB of reasoning with inline LaTeX, ending in a `\boxed{}`):

* grpo:     N/16 prompts x 16 completions each; completions of a prompt repeat a few answers, as in GRPO.
* distinct: N prompts x 1 completion with randomised answers, so almost every (prediction, gold) pair is new.

Each timed run starts from cold caches and fresh workers, after an untimed warm-up on other pairs; worker start-up
is timed separately. Worker rows always use the workers (`min_parallel_batch=1`); `math_reward` itself only does
so from `MIN_PARALLEL_BATCH` distinct pairs up.

    python -m benchmarks.reward_throughput --n 2000 --workers 1 2 4
"""

from __future__ import annotations

import argparse
import os
import random
import time

from sympy.core.cache import clear_cache as clear_sympy_cache

from trl_ada.rewards import clear_caches, extract_boxed, score_math, shutdown_workers

# (gold, equivalent forms, wrong forms): the kinds of answers found in MATH / OpenR1-Math.
ANSWERS = [
    (r"\frac{1}{2}", ["0.5", r"\frac12", "1/2"], [r"\frac{1}{3}", "2"]),
    ("12", ["12", "12.0"], ["13", "-12"]),
    (r"2\sqrt{2}", [r"\sqrt{8}", r"2\sqrt2"], [r"\sqrt{2}", "4"]),
    ("(1, 2]", ["(1,2]"], ["[1,2]", "(1,2)"]),
    (r"\{1, 2\}", [r"\{2,1\}"], [r"\{1,3\}"]),
    (
        r"\begin{pmatrix}1\\2\end{pmatrix}",
        [r"\begin{bmatrix}1\\2\end{bmatrix}"],
        [r"\begin{pmatrix}2\\0\end{pmatrix}"],
    ),
    ("x^2-1", ["(x-1)(x+1)"], ["x^2+1"]),
    (r"50\%", ["50", "0.5"], [r"25\%"]),
    (r"\frac{\pi}{3}", [r"\frac{1}{3}\pi"], [r"\frac{\pi}{6}"]),
    ("1000", ["1,000", "10^3"], ["100"]),
    (r"\text{(B)}", ["B", r"\textbf{(B)}"], ["C"]),
    ("5", [r"5\text{ cm}"], ["6"]),
    (r"(-\infty, 3)", [r"(-\infty,3)"], [r"(-\infty,3]"]),
    ("2, -3", ["-3, 2"], ["2, 3"]),
    (r"\frac{\sqrt{3}}{3}", [r"\frac{1}{\sqrt{3}}"], [r"\sqrt{3}"]),
]

FILLER = [
    "Let us first simplify the expression.",
    r"We have $a + b = {x}$ and $ab = {y}$, so $a^2 + b^2 = (a+b)^2 - 2ab$.",
    r"Substituting gives $\frac{{{x}}}{{{y}}} \cdot 2 = \frac{{{z}}}{{{y}}}$.",
    "Checking the boundary cases, nothing changes.",
    r"Since $x^2 - {x}x + {y} = 0$, the discriminant is $\Delta = {x}^2 - 4 \cdot {y}$.",
    r"Therefore $\sqrt{{{z}}}$ is not an integer, and we continue with the other case.",
]


def _reasoning(rng: random.Random) -> str:
    """1-3 KB of plausible reasoning text with inline LaTeX."""
    parts = []
    while sum(map(len, parts)) < rng.randint(1000, 3000):
        x, y = rng.randint(2, 99), rng.randint(2, 99)
        parts.append(rng.choice(FILLER).format(x=x, y=y, z=x * y))
    return " ".join(parts)


def _completion(rng: random.Random, gold: str, same: list[str], wrong: list[str]) -> str:
    """A completion whose boxed answer is right (canonical or another form), wrong, missing or truncated."""
    roll = rng.random()
    if roll < 0.05:
        return _reasoning(rng)
    if roll < 0.10:
        return _reasoning(rng) + r" The final answer is $\boxed{\frac{" + gold[:3]
    pred = gold if roll < 0.45 else rng.choice(same) if roll < 0.65 else rng.choice(wrong)
    return _reasoning(rng) + rf" Therefore, the final answer is $\boxed{{{pred}}}$."


def _random_answer(rng: random.Random) -> tuple[str, list[str], list[str]]:
    """A fraction with random terms, so that (prediction, gold) pairs rarely repeat."""
    a, b, k = rng.randint(1, 500), rng.randint(501, 999), rng.randint(2, 9)
    return rf"\frac{{{a}}}{{{b}}}", [rf"\frac{{{k * a}}}{{{k * b}}}", f"{a}/{b}"], [rf"\frac{{{a + 1}}}{{{b}}}"]


def grpo_batch(n: int, group: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    completions, answers = [], []
    for _ in range(n // group):
        gold, same, wrong = rng.choice(ANSWERS)
        completions += [_completion(rng, gold, same, wrong) for _ in range(group)]
        answers += [gold] * group
    return completions, answers


def distinct_batch(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    rows = [_random_answer(rng) for _ in range(n)]
    return [_completion(rng, *row) for row in rows], [row[0] for row in rows]


def timed_run(completions: list[str], answers: list[str], workers: int, warmup: tuple[list[str], list[str]]) -> float:
    """Seconds to score the batch (in `workers` processes, or in-process when 0) with fresh workers and cold caches.

    An untimed warm-up on other pairs pays one-off initialisation (imports, grammars); then every cache that could
    hold a measured pair is cleared: ours, sympy's in this process, and the workers are new.
    """
    shutdown_workers()
    score_math(*warmup, num_workers=workers, min_parallel_batch=1)
    clear_caches()
    clear_sympy_cache()
    start = time.perf_counter()
    score_math(completions, answers, num_workers=workers, min_parallel_batch=1)
    return time.perf_counter() - start


def worker_startup(workers: int) -> float:
    """Seconds to start a pool of `workers` processes and score one pair in it."""
    shutdown_workers()
    clear_caches()
    start = time.perf_counter()
    score_math([r"\boxed{1}"], ["1"], num_workers=workers, min_parallel_batch=1)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="completions per batch")
    parser.add_argument("--group", type=int, default=16, help="completions per prompt in the grpo batch")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="worker counts to try")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    batches = {"grpo": grpo_batch(args.n, args.group, args.seed), "distinct": distinct_batch(args.n, args.seed)}
    warmup = distinct_batch(max(args.workers) * 32, args.seed + 1)
    print(f"CPUs: {os.cpu_count()}  completions per batch: {args.n}\n")
    print(f"{'batch':<9} {'mode':<10} {'pairs':>6} {'seconds':>8} {'compl/s':>8} {'vs serial':>9}")
    startup = {}
    for name, (completions, answers) in batches.items():
        pairs = len({(extract_boxed(c), a) for c, a in zip(completions, answers, strict=True)})
        serial = timed_run(completions, answers, 0, warmup)
        print(f"{name:<9} {'serial':<10} {pairs:>6} {serial:>8.2f} {args.n / serial:>8.0f} {1.0:>9.2f}")
        for workers in args.workers:
            startup[workers] = worker_startup(workers)
            seconds = timed_run(completions, answers, workers, warmup)
            mode = f"{workers} workers"
            print(f"{name:<9} {mode:<10} {pairs:>6} {seconds:>8.2f} {args.n / seconds:>8.0f} {serial / seconds:>9.2f}")
        start = time.perf_counter()
        score_math(completions, answers, num_workers=0)  # every pair is in the score cache now
        cached = time.perf_counter() - start
        print(f"{name:<9} {'cached':<10} {pairs:>6} {cached:>8.2f} {args.n / cached:>8.0f} {serial / cached:>9.2f}")
    print("\nworker start-up (s): " + ", ".join(f"{w} workers {s:.2f}" for w, s in startup.items()))
    shutdown_workers()


if __name__ == "__main__":
    main()
