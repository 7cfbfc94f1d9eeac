"""The real-model learning benchmark's bookkeeping, without an engine: the wall-clock marks and their snapshots, the
run order, resuming, the pass-rate cache, the hardest third, the summary and the arms' configs."""

from __future__ import annotations

import json
import math
import re

import pytest
from refusals import names

from benchmarks import real_learning as rl


class FakeClock:
    """`time.perf_counter` under the test's control."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_each_mark_gets_the_weights_of_the_last_step_ended_by_then(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(rl.time, "perf_counter", clock)
    tokens = iter(range(0, 1000, 10))
    state = {"w": 0}

    def weights():
        clock.now += 0.5  # copying the weights takes time: off the training clock
        return {"w": state["w"]}

    marks = rl.MarkClock([10.0, 20.0, 30.0], weights, lambda: float(next(tokens)))
    marks.begin()
    stops = []
    for step, training_clock in enumerate([4.0, 9.0, 13.0, 25.0, 31.0], start=1):
        state["w"] = step
        clock.now = 100.0 + training_clock + 0.5 * step  # the copies made so far are not training time
        stops.append(marks.step_end(step))
    assert stops == [False, False, False, False, True]
    got = [(s.mark_s, s.clock_s, s.step, s.tokens, s.weights["w"]) for s in marks.snapshots]
    assert got == [(10.0, 9.0, 2, 20.0, 2), (20.0, 13.0, 3, 30.0, 3), (30.0, 25.0, 4, 40.0, 4)]
    assert [s["clock_s"] for s in marks.steps] == [4.0, 9.0, 13.0, 25.0, 31.0]


def test_a_step_past_several_marks_gives_them_the_same_weights_and_a_short_run_its_last(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(rl.time, "perf_counter", clock)
    marks = rl.MarkClock([10.0, 20.0, 30.0], lambda: {"at": clock.now}, lambda: 0.0)
    marks.begin()
    clock.now = 125.0
    assert not marks.step_end(1)  # past 10 and 20: both get the weights at the start
    assert [s.step for s in marks.snapshots] == [0, 0]
    marks.finish()  # stopped before 30 (a fixed number of steps): the last weights
    assert [(s.mark_s, s.step, s.weights["at"]) for s in marks.snapshots] == [
        (10.0, 0, 100.0),
        (20.0, 0, 100.0),
        (30.0, 1, 125.0),
    ]


def test_schedule_evaluates_the_base_first_and_rotates_the_arms_per_seed():
    settings = rl.Settings(seeds=3, first_seed=5, families=("arithmetic", "capitals"), arms=("A", "B", "C"))
    order = rl.schedule(settings)
    assert order[:2] == [(5, "arithmetic", "base"), (5, "capitals", "base")]
    arms_by_seed = {
        seed: [arm for s, family, arm in order if s == seed and family == "capitals" and arm != "base"]
        for seed in (5, 6, 7)
    }
    # rotated by the seed, so that a part starting at seed 2 goes on with the rotation of the part before it
    assert arms_by_seed == {5: ["C", "A", "B"], 6: ["A", "B", "C"], 7: ["B", "C", "A"]}
    assert len(order) == 3 * 2 * (3 + 1)
    assert len(set(order)) == len(order)


def test_a_saved_run_is_reused_and_one_of_other_settings_refused(tmp_path):
    settings = rl.Settings()
    path = rl.run_path(tmp_path, "capitals", "GRPO n=4", 2)
    assert path == tmp_path / "runs" / "shared" / "capitals" / "GRPO_n4-seed2.json"
    assert rl.run_path(tmp_path, "capitals", "GRPO n=4", 2, "separate").parent.parent.name == "separate"
    assert (
        rl.run_path(tmp_path, "capitals", "base", 2, "separate") == tmp_path / "runs" / "capitals" / "base-seed2.json"
    )
    assert rl.load_run(path, settings) is None
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"settings": settings.identity(), "marks": []}))
    assert rl.load_run(path, settings) == {"settings": settings.identity(), "marks": []}
    other = rl.Settings(learning_rate=1e-4)
    with pytest.raises(SystemExit) as refused:
        rl.load_run(path, other)
    names(str(refused.value), str(path), "learning_rate: 0.0002 there, 0.0001 now", "another --out")
    assert rl.Settings(seeds=5, arms=("GRPO n=4",)).identity() == settings.identity()  # more seeds reuse the runs


def test_pass_rates_are_estimated_once_per_prompt_and_cached(tmp_path):
    key = {"samples": 4, "max_tokens": 32}
    asked = []

    def estimate(rows):
        asked.append([row["fact"] for row in rows])
        return [len(row["fact"]) for row in rows]

    rows = [{"family": "f", "fact": "ab"}, {"family": "f", "fact": "abc"}]
    cache = rl.PassRates(tmp_path / "rates.json", key)
    assert cache.rates(rows, "train", estimate) == [0.5, 0.75]
    again = rl.PassRates(tmp_path / "rates.json", key)
    assert again.rates(rows + [{"family": "f", "fact": "a"}], "train", estimate) == [0.5, 0.75, 0.25]
    assert again.rates(rows[:1], "test", estimate) == [0.5]  # another split is another prompt
    assert asked == [["ab", "abc"], ["a"], ["ab"]]
    saved = (tmp_path / "rates.json").read_text()
    with pytest.raises(SystemExit) as refused:  # other sampling settings: refused, the cache kept
        rl.PassRates(tmp_path / "rates.json", {**key, "max_tokens": 48})
    message = str(refused.value)
    assert "rates.json" in message and "max_tokens: 32 there, 48 now" in message and "another --out" in message
    assert (tmp_path / "rates.json").read_text() == saved and len(asked) == 3
    elsewhere = rl.PassRates(tmp_path / "other" / "rates.json", {**key, "max_tokens": 48})  # the fix it names works
    assert elsewhere.rates(rows, "train", estimate) == [0.5, 0.75] and asked[-1] == ["ab", "abc"]


def test_capped_takes_the_kinds_in_turn():
    rows = [{"kind": k, "i": i} for i, k in enumerate("aaabbc")]
    assert [r["i"] for r in rl.capped(rows, 4)] == [0, 3, 5, 1]
    assert len(rl.capped(rows, 10)) == 6


def meta(rates, splits=None):
    splits = splits or ["test"] * len(rates)
    return [
        {"fact": str(i), "kind": "k", "split": s, "pass_rate": r}
        for i, (r, s) in enumerate(zip(rates, splits, strict=True))
    ]


def test_hardest_third_and_accuracies():
    rows = meta([0.5, 0.0, 0.25, 0.0, 0.75, 0.1, 0.0], ["test"] * 6 + ["control"])
    assert rl.hardest_third(rows) == [1, 3]  # ceil(6 / 3) test rows, ties in row order; control rows excluded
    correct = [4, 1, 2, 0, 4, 2, 3]  # of k = 4
    got = rl.accuracies(correct, rows, 4)
    assert got == {
        "avg_at_k": pytest.approx((4 + 1 + 2 + 0 + 4 + 2) / 24),
        "hardest_third": pytest.approx(1 / 8),
        "pass_at_k": pytest.approx(5 / 6),
        "control": pytest.approx(0.75),
    }


def fake_run(family, arm, seed, hardest_correct, marks=(10.0, 20.0)):
    """A run whose evaluations have row 0 (the hardest third of meta([0.0, 0.5, 0.5])) `hardest_correct[i]` of 2
    correct, the other rows always 1 of 2."""
    return {
        "family": family,
        "arm": arm,
        "seed": seed,
        "train_s": 20.0,
        "marks": [
            {
                "mark_s": t,
                "clock_s": t - 1,
                "step": i + 1,
                "tokens": 100.0 * (i + 1),
                "eval": {"correct": [c, 1, 1], "entropy": 1.0, "seconds": 2.0, "sync_gap": 1e-7},
            }
            for i, (t, c) in enumerate(zip((0.0,) if arm == "base" else marks, hardest_correct, strict=False))
        ],
    }


def test_summary_compares_arms_at_equal_wall_time_and_when_they_reach_grpo():
    settings = rl.Settings(
        seeds=2, families=("capitals",), arms=("GRPO n=4", "Est n=8"), budget_s=20.0, marks=2, eval_k=2
    )
    runs = []
    for seed in (0, 1):
        base = fake_run("capitals", "base", seed, [0])
        runs += [
            base,
            fake_run("capitals", "GRPO n=4", seed, [0, 1]),
            fake_run("capitals", "Est n=8", seed, [1, 2 - seed]),
        ]
    summary = rl.summarize(runs, {"capitals": {"evaluation": meta([0.0, 0.5, 0.5])}}, settings)["capitals"]
    assert summary["seeds"] == [0, 1]
    est = summary["arms"]["Est n=8"]["curve"]
    assert [p["hardest_third"]["mean"] for p in est] == [0.0, 0.5, 0.75]
    assert est[2]["hardest_third"]["values"] == [1.0, 0.5]
    assert est[2]["hardest_third"]["std"] == pytest.approx(0.5**0.5 / 2)  # the sample std (ddof 1) of 1.0 and 0.5
    difference = summary["comparisons"]["Est n=8 − GRPO n=4"]["hardest_third"]
    assert (difference[0]["mean"], difference[0]["higher"]) == (0.5, 2)
    assert (difference[1]["mean"], difference[1]["higher"], difference[1]["seeds"]) == (0.25, 1, 2)
    # areas over [0, 20] s: GRPO (0, 0, 0.5) -> 0.125; Est (0, 0.5, 1.0) -> 0.5 and (0, 0.5, 0.5) -> 0.375
    assert summary["arms"]["Est n=8"]["area"]["values"] == [0.5, 0.375]
    assert summary["comparisons"]["Est n=8 − GRPO n=4"]["area"]["values"] == [0.375, 0.25]
    # GRPO n=4's plateau per seed: the mean of its last two marks, (0 + 0.5) / 2 = 0.25, first reached at 20 s
    reach = summary["reach_reference"]
    assert reach["Est n=8"] == {"marks": [10.0, 10.0], "earlier": 2, "seeds": 2, "ratio": [0.5, 0.5]}
    assert reach["GRPO n=4"] == {"marks": [20.0, 20.0], "earlier": 0, "seeds": 2, "ratio": [1.0, 1.0]}
    assert summary["plateau"] == {"last": 0.5, "before": 0.0, "change": 0.5, "std": 0.0, "holds": False}
    text = rl.tables({"capitals": summary}, runs, settings, "header")
    assert "| Est n=8 − GRPO n=4 | 0.500 ± 0.000 (2/2) | 0.250 ± 0.354 (1/2) | 0.312 ± 0.088 (2/2) |" in text
    assert "| Est n=8 | 10 s, 10 s | 0.50, 0.50 | 2/2 |" in text
    assert "GRPO n=4 has not plateaued" in text
    # at equal optimizer steps: Est's final step is 2 on both seeds, where GRPO n=4's curve reads 0.5
    equal = summary["equal_steps"]
    assert list(equal) == ["Est n=8"] and equal["Est n=8"]["difference"]["values"] == [0.5, 0.0]
    assert (equal["Est n=8"]["reference"]["mean"], equal["Est n=8"]["difference"]["higher"]) == (0.5, 1)
    assert "| Est n=8 | 2.0 ± 0.0 | 0.750 ± 0.354 | 0.500 ± 0.000 | 0.250 ± 0.354 (1/2) |" in text


def test_an_arm_is_read_against_grpo_at_the_same_optimizer_step():
    curve = [{"step": 0, "hardest_third": 0.1}, {"step": 10, "hardest_third": 0.3}, {"step": 30, "hardest_third": 0.7}]
    assert rl.at_step(curve, 0) == 0.1 and rl.at_step(curve, 30) == 0.7
    assert rl.at_step(curve, 5) == pytest.approx(0.2) and rl.at_step(curve, 20) == pytest.approx(0.5)
    assert math.isnan(rl.at_step(curve, 31))  # past the last mark: not extrapolated


def test_a_step_costs_what_trl_timed_of_which_the_rounds_generated():
    logs = [
        {"step_time": 10.0, "reinforce_ada/generation_time/round_1": 3.0, "reinforce_ada/generation_time/round_2": 1.0,
         "reinforce_ada/samples": 32.0, rl.MIXED: 0.5},
        {"step_time": 8.0, "reinforce_ada/generation_time/round_1": 2.0,
         "reinforce_ada/samples": 16.0, rl.MIXED: 0.25},
        {"train_runtime": 18.0},  # TRL's closing log is no step
    ]  # fmt: skip
    assert rl.step_cost({"logs": logs}) == {"step_s": 9.0, "generating_s": 3.0, "samples": 24.0, "mixed": 0.375}
    worker = rl.step_cost({"logs": [{"step_time": 4.0}]})  # the asynchronous trainer times its steps only
    assert worker["step_s"] == 4.0 and all(math.isnan(worker[k]) for k in ("generating_s", "samples", "mixed"))


def test_every_arm_trains_the_same_way_but_for_its_sampling():
    from pathlib import Path

    settings = rl.Settings()
    configs = {arm: rl.arm_config(arm, settings, "http://127.0.0.1:1", Path("unused"), 3) for arm in rl.ARMS}
    for arm, config in configs.items():
        sampling, n = rl.ARM_SAMPLING[arm]
        assert config.sampling == sampling and config.num_generations == n
        assert config.per_device_train_batch_size == settings.prompts_per_step * n
        assert (config.learning_rate, config.lr_scheduler_type) == (settings.learning_rate, "constant")
        assert (config.epsilon, config.epsilon_high, config.temperature) == (0.2, 0.28, 1.0)
        assert config.max_completion_length == settings.max_completion_length and config.seed == 3
        assert not config.gradient_checkpointing
    assert configs["Est n=8"].generation_schedule == "est"
    assert configs["Seq-balance"].exit_rule == "balance" and configs["GRPO n=8"].generation_schedule == "grpo"
    for arm in ("async balance", "async GRPO n=4", "async Est n=8"):
        assert rl.asynchronous(arm) and type(configs[arm]).__name__ == "AsyncReinforceAdaConfig"
        assert configs[arm].max_staleness == settings.max_staleness
    assert configs["async GRPO n=4"].sampling_plan.generation_schedule == "grpo"
    assert configs["async Est n=8"].sampling_plan.generation_schedule == "est"
    synchronous = [arm for arm in rl.ARMS if not rl.asynchronous(arm)]
    assert all(configs[arm].shuffle_dataset is False for arm in synchronous)  # the seed's order, unshuffled
    for arm in ("GRPO n=4", "GRPO n=8", "Seq-balance", "Est n=8"):
        assert (configs[arm].beta, configs[arm].loss_type, configs[arm].scale_rewards) == (0.0, "dapo", "none")


def test_only_the_top_layers_train():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    trainable = rl.train_top_layers(model, 1)
    assert set(trainable) == {n for n, _ in model.named_parameters() if n.startswith("model.layers.3.")} | {
        "model.norm.weight"
    }
    assert all(p.requires_grad == (n in trainable) for n, p in model.named_parameters())


def test_mark_times_split_the_budget():
    assert rl.Settings(budget_s=120.0, marks=3).mark_times() == [40.0, 80.0, 120.0]
    assert math.isinf(rl.reached([{"mark_s": 0.0, "hardest_third": 0.1}], 0.2))


def test_figures_and_the_pass_rate_table(tmp_path):
    settings = rl.Settings(
        seeds=1, families=("capitals",), arms=("GRPO n=4",), budget_s=20.0, marks=2, eval_k=2, selection_samples=4
    )
    base = fake_run("capitals", "base", 0, [0])
    rows = meta([0.0, 0.5, 0.5], ["test", "test", "control"])
    summary = rl.summarize(
        [base, fake_run("capitals", "GRPO n=4", 0, [0, 2])], {"capitals": {"evaluation": rows}}, settings
    )
    assert rl.curve_figure("capitals", summary["capitals"], tmp_path / "curve.png").stat().st_size > 0
    tasks = {"capitals": {"candidates": rows[:2], "train": rows[:1], "evaluation": rows}}
    assert rl.pass_rate_figure(tasks, settings, tmp_path / "rates.png").stat().st_size > 0
    table = rl.pass_rate_table(tasks, settings)
    assert "| capitals train candidates | 2 | 1 | 0 | 1 | 0 | 0 | 0.250 |" in table
    assert "| capitals control | 1 | 0 | 0 | 1 | 0 | 0 | 0.500 |" in table


def test_sweep_table_shows_each_rate_before_and_after():
    row = {"family": "capitals", "learning_rate": 2e-4, "steps": 10, "before": 0.1875, "after": 0.84375,
           "hardest_before": 0.09375, "hardest_after": 0.78125, "control_before": 0.078125, "control_after": 0.1484375,
           "entropy_before": 2.346, "entropy": 1.44}  # fmt: skip
    arithmetic = {**row, "family": "arithmetic", "control_before": float("nan"), "control_after": float("nan")}
    table = rl.sweep_table({"rows": [row, arithmetic]}).splitlines()
    assert table[2] == "| capitals | 0.0002 | 10 | 0.188 → 0.844 | 0.094 → 0.781 | 0.078 → 0.148 | 2.35 → 1.44 |"
    assert table[3].endswith("| 0.094 → 0.781 | - | 2.35 → 1.44 |")


def test_a_run_with_fewer_seeds_is_compared_on_the_seeds_both_ran():
    settings = rl.Settings(families=("capitals",), arms=("GRPO n=4", "Seq-balance"), budget_s=20.0, marks=2, eval_k=2)
    runs = []
    for seed in (0, 1, 2):
        base = fake_run("capitals", "base", seed, [0])
        runs += [base, fake_run("capitals", "GRPO n=4", seed, [1, 1 + seed % 2])]
    runs.append(fake_run("capitals", "Seq-balance", 1, [2, 2]))
    summary = rl.summarize(runs, {"capitals": {"evaluation": meta([0.0, 0.5, 0.5])}}, settings)["capitals"]
    assert summary["arms"]["GRPO n=4"]["seeds"] == [0, 1, 2] and summary["arms"]["Seq-balance"]["seeds"] == [1]
    (last,) = summary["comparisons"]["Seq-balance − GRPO n=4"]["hardest_third"][-1:]
    assert (last["values"], last["seeds"], last["higher"]) == ([0.0], 1, 0)
    # GRPO n=4 at the last two marks: means 0.5 then 2/3, std over seeds 0.577: a change of 1/6 is within it
    assert summary["plateau"]["holds"] is True


def test_the_parts_spend_the_budget_on_the_recommendations_comparison_first_and_fit_two_hours(tmp_path):
    first = rl.PARTS[0]
    assert (first.geometry, first.families, first.first_seed, first.seeds) == ("separate", ("capitals",), 0, 1)
    assert set(rl.RECOMMENDATION_ARMS) == {"async balance", "async GRPO n=4", "GRPO n=4", "GRPO n=8"}
    seeds = {}  # (geometry, family, arm) -> the seeds the default parts run
    for part in (p for p in rl.PARTS if p.default):
        for arm in part.arms:
            for family in part.families:
                seeds.setdefault((part.geometry, family, arm), []).extend(
                    range(part.first_seed, part.first_seed + part.seeds)
                )
    for arm in rl.RECOMMENDATION_ARMS:
        assert sorted(seeds["separate", "capitals", arm]) == [0, 1, 2, 3, 4]
    for geometry in rl.GEOMETRIES:  # the controls wherever asynchronous balance runs
        for arm in ("async GRPO n=4", "async Est n=8"):
            assert len(seeds[geometry, "capitals", arm]) >= (3 if geometry == "separate" else 1)
    capitals = [p for p in rl.PARTS if p.default and p.families == ("capitals",)]
    assert all(p.seeds == 1 for p in capitals)  # arms compared on a seed run in one part, on one day
    settings = rl.Settings()
    total = 0.0
    for part in rl.PARTS:
        chosen = part.settings(settings)
        order = rl.schedule(chosen)
        runs = sum(arm != "base" for _, _, arm in order)
        seconds = rl.expected_seconds(chosen, runs, len(order) - runs, 64)
        assert seconds <= 2 * 3600, part
        total += seconds if part.default else 0.0
    assert total <= 10 * 3600  # the default invocation; the optional parts run only when asked for by number
    assert [p.default for p in rl.PARTS] == [True] * 6 + [False] * 7
    listed = rl.main(["--parts", "--out", str(tmp_path)])["parts"].splitlines()
    assert [line.split(":")[0] for line in listed] == [f"part {k}" for k in range(1, 14)]
    assert listed[0].startswith("part 1: separate cores, capitals, async balance, async GRPO n=4, GRPO n=4, GRPO n=8")
    assert all(line.endswith("(optional)") for line in listed[6:])
    assert rl.main(["--parts", "--part", "2", "--out", str(tmp_path)])["parts"].startswith("part 2: ")
    assert rl.Settings().identity() == rl.PARTS[3].settings(settings).identity()  # parts share the run identity
    assert rl.Settings().identity()["order"] == rl.ORDER  # the order rule is part of every run's identity


def test_bad_parts_geometries_and_folders_get_one_line_and_nothing_is_overwritten(tmp_path, capsys):
    with pytest.raises(SystemExit):
        rl.main(["--part", str(len(rl.PARTS) + 1), "--out", str(tmp_path)])
    assert "--part" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--part.*separate.*1 core"):
        rl.check_geometry("separate", None, {0})
    with pytest.raises(SystemExit, match="--server-url"):
        rl.check_geometry("separate", "http://127.0.0.1:1", {0, 1})
    rl.check_geometry("shared", "http://127.0.0.1:1", {0})
    assert rl.pinned_cores("separate", {3, 5, 7}) == ({3}, {5})
    assert rl.pinned_cores("shared", {0, 1}) == (None, {0, 1})
    path = rl.run_path(tmp_path, "capitals", "Est n=8", 0)
    path.parent.mkdir(parents=True)
    other = rl.Settings(budget_s=120.0).identity()
    path.write_text(json.dumps({"settings": other, "marks": []}))
    before = path.read_text()
    with pytest.raises(SystemExit, match="budget_s: 120.0 there, 600.0 now"):
        rl.main(["--part", "1", "--out", str(tmp_path)])
    unordered = {k: v for k, v in rl.Settings().identity().items() if k != "order"}  # drawn before the order rule
    path.write_text(json.dumps({"settings": unordered, "marks": []}))
    before = path.read_text()
    with pytest.raises(SystemExit) as refused:
        rl.main(["--part", "1", "--out", str(tmp_path)])
    names(str(refused.value), "another prompt order", "runs/", "another --out")
    assert str(path) in str(refused.value) and "\n" not in str(refused.value) and path.read_text() == before
    assert path.read_text() == before and sorted(tmp_path.rglob("*")) == [
        path.parent.parent.parent,
        path.parent.parent,
        path.parent,
        path,
    ]
    rates = tmp_path / "rates" / "pass_rates.json"
    rates.parent.mkdir()
    rates.write_text(json.dumps({"key": {**rl.pass_rate_key(rl.Settings()), "samples": 8}, "counts": {"x": 1}}))
    before = rates.read_text()
    with pytest.raises(SystemExit) as refused:
        rl.main(["--part", "1", "--out", str(rates.parent)])
    names(str(refused.value), str(rates), "samples: 8 there, 16 now", "another --out")
    assert rates.read_text() == before and sorted(rates.parent.rglob("*")) == [rates]


def test_the_committed_tables_are_what_the_committed_runs_give(tmp_path):
    """docs/benchmarks_real.md's tables and the README's results table equal `--report` over
    benchmarks/records/real_learning: no benchmark figure a user reads is written by hand."""
    assert (rl.RECORDS / "tasks.json").is_file()
    written = rl.report(rl.RECORDS, rl.Settings(), None, tmp_path)
    for page, begin, end, block in [
        (rl.DOCS, rl.BEGIN, rl.END, written["tables"]),
        (rl.README, rl.README_BEGIN, rl.README_END, written["headline"]),
        *((page, rl.ADVICE_BEGIN, rl.ADVICE_END, written["advice"]) for page in rl.ADVICE_PAGES),
    ]:
        assert rl.generated_block(page, begin, end) == block, (
            f"{page.name}'s generated block differs from the committed records: regenerate it with "
            "`python -m benchmarks.real_learning --report` instead of editing it by hand"
        )


def test_the_guides_row_names_the_sampling_the_measured_advice_names():
    """docs/choosing.md's hand-written row for a vLLM server on its own device recommends what the records measured."""
    advised = re.search(r'`sampling="(\w+)"`', rl.generated_block(rl.ADVICE_PAGES[0], rl.ADVICE_BEGIN, rl.ADVICE_END))
    row = next(line for line in rl.ADVICE_PAGES[0].read_text().splitlines() if "vLLM server on its own device" in line)
    assert advised and f'`sampling="{advised[1]}"`' in row, (
        "regenerate the advice, then make the guide's row follow it"
    )


def test_report_writes_the_generated_blocks_and_keeps_the_rest_of_each_page(tmp_path):
    """The README's results table and the docs' tables land between their markers; what a person wrote around them
    stays; a records folder other than the committed one gets its figures in its own folder."""
    readme, docs, guide = tmp_path / "README.md", tmp_path / "benchmarks_real.md", tmp_path / "choosing.md"
    readme.write_text(f"# intro\n{rl.README_BEGIN}\nhand-edited\n{rl.README_END}\ntail\n")
    docs.write_text(f"head\n{rl.BEGIN}\nold\n{rl.END}\nreading\n")
    guide.write_text(f"rows\n{rl.ADVICE_BEGIN}\n{rl.ADVICE_END}\nmore\n")
    written = rl.report(rl.RECORDS, rl.Settings(), docs, tmp_path / "figures", readme, [guide])
    assert guide.read_text() == f"rows\n{rl.ADVICE_BEGIN}\n\n{written['advice']}\n\n{rl.ADVICE_END}\nmore\n"
    assert written["headline"].endswith(written["advice"])
    assert rl.generated_block(readme, rl.README_BEGIN, rl.README_END) == written["headline"]
    assert readme.read_text().startswith("# intro\n") and readme.read_text().endswith("\ntail\n")
    assert rl.generated_block(docs, rl.BEGIN, rl.END) == written["tables"] and docs.read_text().endswith("reading\n")


def test_the_results_table_pairs_each_arm_with_synchronous_and_asynchronous_grpo():
    settings = rl.Settings(
        families=("capitals",), arms=("GRPO n=4", "async GRPO n=4", "async balance"), budget_s=20.0, marks=2, eval_k=2
    )
    runs = []
    for seed in (0, 1):
        base = fake_run("capitals", "base", seed, [0])
        runs += [
            base,
            fake_run("capitals", "GRPO n=4", seed, [1, 1]),
            fake_run("capitals", "async GRPO n=4", seed, [1, 2]),
        ]
        runs.append(fake_run("capitals", "async balance", seed, [2, 2 - seed]))
    summary = rl.summarize(runs, {"capitals": {"evaluation": meta([0.0, 0.5, 0.5])}}, settings)
    rows = {row[2]: row for row in rl.result_rows("separate", summary)}
    assert rows["GRPO n=4"][5:] == ["(reference)", "-"]
    # async balance ends at 2/2 then 1/2 on the hardest third's one row: +0.5 and 0 over GRPO n=4's 1/2
    assert rows["async balance"][3:] == ["2", "0.750 ± 0.354", "+0.250 ± 0.354 (1/2)", "-0.250 ± 0.354 (0/2)"]
    assert rows["async GRPO n=4"][5:] == ["+0.500 ± 0.000 (2/2)", "(reference)"]
    assert "No run" in rl.result_table([], settings)


def test_generated_tokens_per_trained_token_read_from_each_trainers_logs():
    sync = {"arm": "GRPO n=8", "steps": [{"tokens": 100.0}, {"tokens": 960.0}],
            "logs": [{"completions/mean_length": 10.0}, {"completions/mean_length": 5.0}]}  # fmt: skip
    # 4 prompts x 8 rows a step: 320 + 160 trained tokens for 960 generated
    assert rl.trained_tokens(sync, 32) == 480.0 and rl.generated_per_trained(sync, 4) == 2.0
    worker = {"arm": "async balance", "steps": [{"tokens": 300.0}], "logs": [{"batch/trained_tokens_per_step": 100.0}]}
    assert rl.generated_per_trained(worker, 4) == 3.0
    assert math.isnan(rl.generated_per_trained({"arm": "Est n=8", "steps": [], "logs": []}, 4))


def test_coverage_counts_the_prompts_and_hardest_facts_trained_and_the_signal_a_generated_token_bought():
    family = {"train": [{"fact": f} for f in ("0", "1", "2", "9")], "evaluation": meta([0.0, 0.1, 0.5, 0.6, 0.7, 0.8])}
    run = {
        "coverage": {"order": ["0", "2", "0"], "dropped": {"1": 2}, "signal_tokens": 60.0},
        "steps": [{"step": 1, "tokens": 100.0, "signal": 30.0}, {"step": 2, "tokens": 300.0, "signal": 60.0}],
    }
    # kept prompts 0, 1, 2, 9: 0 and 2 trained; the hardest third is test rows 0 and 1, both train facts: 0 trained
    assert rl.coverage(run, family) == {"prompts": 0.5, "hardest": 0.5, "dropped": 2.0}
    assert rl.signal_per_generated(run) == 0.2 and rl.signal_per_generated(run, steps=1) == 0.3
    assert math.isnan(rl.signal_per_generated(run, steps=0))
    arithmetic = {
        "train": family["train"],
        "evaluation": [dict(row, fact=f"x{row['fact']}") for row in family["evaluation"]],
    }
    assert math.isnan(rl.coverage(run, arithmetic)["hardest"])  # held-out operands: no hardest fact was a train fact


def test_an_asynchronous_arm_is_read_against_the_best_alternative_on_each_seed():
    settings = rl.Settings(
        families=("capitals",), arms=("GRPO n=4", "GRPO n=8", "async GRPO n=4", "async balance"), budget_s=20.0,
        marks=2, eval_k=2,
    )  # fmt: skip
    runs = []
    for seed, (grpo4, grpo8, async_grpo, balance) in enumerate([(1, 2, 1, 2), (2, 1, 1, 1), (0, 0, 1, 2)]):
        base = fake_run("capitals", "base", seed, [0])
        runs += [base] + [
            fake_run("capitals", arm, seed, [0, last])
            for arm, last in zip(settings.arms, (grpo4, grpo8, async_grpo, balance), strict=True)
        ]
    summary = rl.summarize(runs, {"capitals": {"evaluation": meta([0.0, 0.5, 0.5])}}, settings)["capitals"]
    best = summary["against_the_best"]["async balance"]
    # the hardest third is row 0 of 2 samples: balance 1, 1/2, 1 against the best alternative 1, 1, 1/2
    assert best["values"] == [0.0, -0.5, 0.5] and (best["at_or_above"], best["seeds"]) == (2, 3)
    assert "async GRPO n=4" not in summary["against_the_best"]  # it is one of the alternatives


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--budget", "-1"], "--budget -1"),
        (["--budget", "nan"], "--budget nan"),
        (["--budget", "0"], "--budget 0"),
        (["--learning-rate", "-1"], "--learning-rate -1"),
        (["--seeds", "0"], "--seeds 0"),
        (["--seeds", "-1"], "--seeds -1"),
        (["--seed", "-2"], "--seed -2"),
    ],
)
def test_a_bad_option_gets_one_line_naming_it_and_its_value(tmp_path, capsys, argv, named):
    with pytest.raises(SystemExit):
        rl.main([*argv, "--parts", "--out", str(tmp_path)])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert named in last and "must be" in last
    assert rl.main(["--parts", "--out", str(tmp_path)])["parts"]  # without it the same call runs


def test_a_first_seed_or_a_seed_count_given_alone_moves_only_that(tmp_path):
    assert "seeds 7-7: " in rl.main(["--parts", "--part", "2", "--seed", "7", "--out", str(tmp_path)])["parts"]
    assert "seeds 1-3: " in rl.main(["--parts", "--part", "2", "--seeds", "3", "--out", str(tmp_path)])["parts"]
    assert "seeds 0-0: " in rl.main(["--parts", "--part", "1", "--seeds", "1", "--out", str(tmp_path)])["parts"]
    assert (
        "seeds 0-0: "
        in rl.main(["--parts", "--part", "1", "--seeds", "1", "--seed", "0", "--out", str(tmp_path)])["parts"]
    )


@pytest.mark.parametrize(
    ("text", "said"), [("{", "not JSON"), ("[1, 2]", "no settings, marks"), ('{"x": 1}', "no settings")]
)
def test_a_corrupt_or_foreign_record_is_named_in_one_line_and_nothing_is_overwritten(tmp_path, text, said):
    path = rl.run_path(tmp_path, "capitals", "GRPO n=4", 0, "separate")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(SystemExit) as refused:
        rl.main(["--parts", "--out", str(tmp_path)])
    message = str(refused.value)
    assert str(path) in message and said in message and "delete it" in message and "\n" not in message
    assert path.read_text() == text


def test_an_out_that_is_a_file_or_holds_no_records_is_refused_for_a_report(tmp_path, capsys):
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(SystemExit):
        rl.main(["--parts", "--out", str(file)])
    assert f"--out {file}: is a file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        rl.main(["--report", "--out", str(tmp_path / "empty")])
    names(capsys.readouterr().err, f"--out {tmp_path / 'empty'}", "(no tasks.json)", "run a part")


def test_the_engine_speed_is_tokens_generated_per_second_of_evaluation():
    """Longer answers take longer to evaluate at the same speed: the busy table reads tokens per second."""
    marks = [
        {"eval": {"correct": [1, 0, 2], "tokens_per_sample": 10.0, "seconds": 2.0}},
        {"eval": {"correct": [2, 2, 2], "tokens_per_sample": 20.0, "seconds": 4.0}},
    ]
    # 3 prompts x eval_k 2 samples: 60 + 120 tokens in 6 s
    assert rl.evaluation_speed({"marks": marks, "settings": {"eval_k": 2}}) == 30.0


@pytest.mark.parametrize(
    ("hits", "seeds", "verdict"),
    [(4, 5, "yes"), (3, 5, "no"), (5, 5, "yes"), (8, 10, "yes"), (7, 10, "no"), (3, 3, "open"), (2, 3, "open"),
     (1, 3, "no"), (0, 0, "open")],
)  # fmt: skip
def test_a_comparison_is_decided_on_four_of_five_seeds_and_refused_once_two_fail(hits, seeds, verdict):
    assert rl.decided(hits, seeds) == verdict


def advice_runs(seeds, late_balance=(4,)):
    """GRPO n=4 ends at 1 of 2 on seeds 0-2 and 1/2 after; asynchronous GRPO n=4 and GRPO n=8 reach 1/2 at 15 s;
    async balance reaches 1 of 2 at 5 s, but on the seeds `late_balance`, where it follows asynchronous GRPO n=4."""
    late = [0, 0, 1, 1]
    runs = []
    for seed in seeds:
        runs += [
            fake_run("capitals", "base", seed, [0]),
            fake_run("capitals", "GRPO n=4", seed, [0, 1, 2, 2] if seed < 3 else [0, 1, 1, 1], ADVICE_MARKS),
            fake_run("capitals", "GRPO n=8", seed, late, ADVICE_MARKS),
            fake_run("capitals", "async GRPO n=4", seed, late, ADVICE_MARKS),
            fake_run("capitals", "async balance", seed, late if seed in late_balance else [1, 2, 2, 2], ADVICE_MARKS),
        ]
    return runs


ADVICE_MARKS = (5.0, 10.0, 15.0, 20.0)


def test_the_advice_says_whose_gain_it_is_and_whether_it_beats_what_a_user_would_pick_instead():
    settings = rl.Settings(
        families=("capitals",), arms=("GRPO n=4", "GRPO n=8", "async GRPO n=4", "async balance"), budget_s=20.0,
        marks=4, eval_k=2,
    )  # fmt: skip
    rows = {"capitals": {"evaluation": meta([0.0, 0.5, 0.5])}}
    summary = rl.summarize(advice_runs(range(5)), rows, settings)
    # async balance ends 1 against 1/2 on seeds 0-3 and level on seed 4 (5/5 at or above); it reaches asynchronous
    # GRPO's final level (1/2, reached at 15 s) at 5 s, a third of the time, on seeds 0-3 and at 15 s on seed 4
    assert rl.verdicts(summary["capitals"]) == {
        "async balance": {"ends_at_or_above": (5, 5), "reaches_early": (4, 5), "against_the_best": (5, 5)}
    }
    assert rl.verdict_rows(summary["capitals"]) == [
        ["async balance", "5/5: yes", "4/5: yes", "5/5: yes", "yes", "yes"]
    ]
    text = rl.advice({"separate": summary}, settings)
    assert '`sampling="balance"` (async balance) ends +0.400 ± 0.224 (at or above on 5/5 seeds)' in text
    assert "in 0.33× its time (median over seeds)" in text
    # asynchrony alone: asynchronous GRPO n=4 is 1/2 below GRPO n=4 on seeds 0-2, level on 3-4
    assert "synchronous GRPO n=4: -0.300 ± 0.274 (at or above on 2/5 seeds)" in text
    assert "The gain is adaptive sampling's" in text
    assert "+0.100 ± 0.224, at or above on 5/5 seeds: it is the configuration to use" in text
    early = rl.advice({"separate": rl.summarize(advice_runs(range(3)), rows, settings)}, settings)
    assert "not decided yet (a comparison needs 4 of 5 seeds)" in early and early.endswith("not decided yet.")
    assert "recorded yet" in rl.advice({}, settings)
    # level with asynchronous GRPO on every seed (at or above it, with no gain), below GRPO n=4 on seeds 0-2
    level = rl.advice({"separate": rl.summarize(advice_runs(range(5), range(5)), rows, settings)}, settings)
    assert "ends +0.000 ± 0.000 (at or above on 5/5 seeds)" in level and "Neither gain holds" in level
    assert "at or above on 2/5 seeds: it is not the configuration to pick over them" in level
    # ahead of asynchronous GRPO on seeds 0-2 and level on 3-4 (a gain), reaching its level early on 3 seeds only
    slow = rl.advice({"separate": rl.summarize(advice_runs(range(5), (3, 4)), rows, settings)}, settings)
    assert "not asynchrony's, though it is not faster by enough" in slow and "0.7× its time on only 3/5 seeds" in slow
