"""Pilot-Commit (`generation_schedule="pilot_commit"`, `trl_ada/schedules/pilot_commit.py`): the selection (band,
priority, fill) against hand-computed cases, the sampler's two rounds, the refusals word for word, and in the trainer
the exact group shapes, the flat-group counterfactual and the candidate stream across a checkpoint."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from datasets import Dataset
from refusals import names, refusal
from tiny import CountingReward, loss_batches, run_two_processes, tiny_config

from trl_ada import ReinforceAdaTrainer
from trl_ada.plan import PRESETS, SYNCHRONOUS, SamplingPlan
from trl_ada.schedules.pilot_commit import PilotCommit, PilotCommitSampler, pilot_commit_selection

pytestmark = pytest.mark.xdist_group("trainer")


def plan(n: int = 4, **fields) -> SamplingPlan:
    return SamplingPlan.from_fields(generation_schedule="pilot_commit", num_generations=n, **fields)


# -- the section and its preset ---------------------------------------------------------------------------------


def test_the_registry_line_and_the_preset():
    assert SYNCHRONOUS.registry["pilot_commit"] is PilotCommit
    for n, sizes in ((2, (2, 0)), (4, (2, 2)), (8, (4, 4)), (16, (8, 8))):
        preset = PRESETS["pilot_commit"](num_generations=n)
        assert (preset.generation_schedule, preset.section.sizes(n)) == ("pilot_commit", sizes)
    section = plan(8, pilot_samples=2).section
    assert section.sizes(8) == (2, 6)
    assert (section.pilot_band_low, section.pilot_band_high, section.commit_priority) == (0.0, 1.0, "variance")
    assert section.pilot_oversampling == 2.0


@pytest.mark.parametrize(
    ("fields", "fragments"),
    [
        ({"pilot_band_low": 0.6, "pilot_band_high": 0.4}, ["pilot_band_low=0.6", "pilot_band_high=0.4"]),
        ({"pilot_band_low": 0.5, "pilot_band_high": 0.5}, ["pilot_band_low=0.5", "pilot_band_high=0.5"]),
        ({"pilot_band_high": 1.5}, ["pilot_band_high=1.5", "(0, 1]"]),
        ({"pilot_band_low": 0.6, "pilot_band_high": 0.7}, ["pilot_band_low=0.6", "pilot_samples=2", "Widen the band"]),
        ({"commit_samples": -1}, ["commit_samples=-1", "[0, inf)"]),
        ({"commit_samples": 3}, ["commit_samples", "2 + 3", "Set commit_samples=2"]),
        ({"pilot_samples": 6}, ["pilot_samples=6", "at most 4"]),
        ({"pilot_samples": 1}, ["pilot_samples=1", "[2, inf)"]),
        ({"commit_priority": "varaince"}, ["commit_priority='varaince'", "Did you mean 'variance'?"]),
        ({"pilot_oversampling": 0.5}, ["pilot_oversampling=0.5", "[1, inf)"]),
        ({"samples_per_round": 8}, ["samples_per_round=8", "'pilot_commit'", "Remove samples_per_round"]),
    ],
)
def test_bad_input_is_refused_in_one_line_naming_the_field_and_the_fix(fields, fragments):
    message = _refusal(**fields, generation_schedule="pilot_commit")
    assert "\n" not in message and all(fragment in message for fragment in fragments), message


def test_a_pilot_commit_field_under_another_schedule_names_the_schedule_that_uses_it():
    message = _refusal(pilot_samples=4)
    assert all(part in message for part in ("pilot_samples=4", "'rounds'", "'pilot_commit'", "Remove pilot_samples"))
    assert plan(4, pilot_samples=4).section.pilot_samples == 4  # under the schedule that uses it


def _refusal(**fields) -> str:
    try:
        SamplingPlan.from_fields(**fields)
    except ValueError as error:
        return str(error)
    raise AssertionError("accepted")


# -- the selection: band, priority, fill ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rates", "kept", "fields", "uniforms", "committed", "passed"),
    [
        # band (0, 1): the mixed pilots pass; variance .25, .25, .1875, .1875 -> 1 and 5, then 3 before 4 (draw order)
        ([0, 0.5, 1, 0.25, 0.75, 0.5], 3, {}, None, [1, 3, 5], [0, 1, 0, 1, 1, 1]),
        # one passes; the fill takes the flat others in draw order (their variance is 0)
        ([0, 1, 0.5, 0], 3, {}, None, [0, 1, 2], [0, 0, 1, 0]),
        # band (0.2, 0.8), pilot of 8: 0.5 passes; the fill prefers 1/8 (variance 0.109) to the flat pilots
        ([0, 0.125, 0.5, 1], 2, {"pilot_band_low": 0.2, "pilot_band_high": 0.8, "pilot_samples": 8}, None, [1, 2],
         [0, 0, 1, 0]),
        # random: the passing pilots by their uniform draw, whatever their variance
        ([0.5, 0.25, 0.5, 0], 2, {"commit_priority": "random"}, [0.9, 0.1, 0.5, 0.0], [1, 2], [1, 1, 1, 0]),
        # a pilot nothing scored (NaN) never passes and is filled last
        ([math.nan, 0, 0.5], 3, {}, None, [0, 1, 2], [0, 0, 1]),
        ([math.nan, 0, 0.5], 2, {}, None, [1, 2], [0, 0, 1]),
    ],
)  # fmt: skip
def test_the_selection_against_hand_computed_cases(rates, kept, fields, uniforms, committed, passed):
    section = plan(8, **fields).section
    assert pilot_commit_selection(rates, kept, section, uniforms) == (committed, [bool(p) for p in passed])


def test_the_selection_refuses_what_it_cannot_choose():
    section = plan(4, commit_priority="random").section
    names(refusal(pilot_commit_selection, [0.5, 0.5], 3, section, [0.1, 0.2]), "num_kept=3", "[1, candidates=2]")
    names(refusal(pilot_commit_selection, [0.5, 0.5], 1, section), "commit_priority='random'", "uniform draw", "(2)")


# -- the sampler: pilot, selection, commit --------------------------------------------------------------------------


def test_the_sampler_pilots_every_candidate_then_commits_to_the_chosen():
    sampler = PilotCommitSampler(4, plan(4), num_kept=2)
    assert sampler.plan_round() == [0, 1, 2, 3] and sampler.plan_sizes == [2, 2, 2, 2]
    left = sampler.ingest([1, 0, 1, 1, 0, 0, 0, 1])  # pilots 10, 11, 00, 01
    assert (left, sampler.committed, sampler.passed) == ([1, 2], [0, 3], [True, False, False, True])
    assert sampler.candidates(1) == [] and sampler.candidates(0) == [0, 1] and not sampler.done
    assert sampler.plan_round() == [0, 3] and sampler.plan_sizes == [2, 2]
    assert sampler.ingest([1, 1, 0, 0]) == [0, 3] and sampler.done
    assert sampler.kept_prompts() == [0, 3] and sampler.select_groups() == [[0, 1, 2, 3]] * 2
    assert sampler.kept_rewards().tolist() == [[1, 0, 1, 1], [0, 1, 0, 0]]
    metrics = sampler.metrics("p/")
    assert metrics["p/samples"] == 12 and metrics["p/rounds"] == 2
    assert (metrics["p/exit_fraction/round_1"], metrics["p/exit_fraction/round_2"]) == (0.5, 0.5)
    assert metrics["p/first_round_reward"] == 0.5  # the pilots: 4 right of 8
    assert metrics["p/mixed_group_fraction"] == 1.0
    assert metrics["p/pilot_commit/candidates"] == 4 and metrics["p/pilot_commit/in_band_fraction"] == 0.5
    assert metrics["p/pilot_commit/filled_fraction"] == 0.0 and metrics["p/pilot_commit/pilot_pass_rate"] == 0.5

    from trl_ada.trainer import pooled_pass_rates

    assert pooled_pass_rates(sampler).tolist() == [0.75, 1.0, 0.0, 0.25]


def test_a_commit_of_zero_trains_the_pilot_alone():
    sampler = PilotCommitSampler(3, plan(2), num_kept=1)
    sampler.plan_round()
    assert sampler.ingest([1, 1, 1, 0, 0, 0]) == [0, 1, 2] and sampler.done
    assert sampler.kept_prompts() == [1] and sampler.select_groups() == [[0, 1]]
    with pytest.raises(RuntimeError, match="it is done"):
        sampler.plan_round()


# -- in the trainer -------------------------------------------------------------------------------------------------


class KindReward(CountingReward):
    """'right …' always 1, 'wrong …' always 0, 'mixed …' 1/0/1/0 per prompt; counts the completions it scores."""

    __name__ = "kind"

    def rule(self, prompt: str, k: int) -> float:
        return {"right": 1.0, "wrong": 0.0, "mixed": float(k % 2 == 0)}[prompt.split()[0]]


def _dataset(mixed: int, uniform: int) -> Dataset:
    names = [f"mixed {i}" for i in range(mixed)]
    names += [f"{'right' if i % 2 else 'wrong'} {i}" for i in range(uniform)]
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": name}] for name in names]})


def _config(tmp_path, **overrides):
    fields = dict(num_generations=4, per_device_train_batch_size=16, sampling="pilot_commit")  # B = 4, C = 8
    return tiny_config(tmp_path, **(fields | overrides))


def test_a_step_trains_b_groups_of_pilot_plus_commit_filled_to_b(tiny_model_dir, tmp_path):
    # 8 candidates = the whole dataset: the 3 mixed pilots (10) pass, one flat candidate fills the fourth slot
    reward = KindReward()
    trainer = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[reward], args=_config(tmp_path), train_dataset=_dataset(3, 5)
    )
    seen = loss_batches(trainer)
    trainer.train()
    assert seen[0]["completion_ids"].shape[0] == 16  # TRL's shape: B x n
    texts = [trainer.processing_class.decode(ids) for ids in seen[0]["prompt_ids"]]
    kept = Counter(next(name for name in reward.scored if name in text) for text in texts)
    assert sorted(kept.values()) == [4, 4, 4, 4] and {f"mixed {i}" for i in range(3)} <= set(kept)
    assert sorted(reward.scored.values()) == [2] * 4 + [4] * 4  # a pilot of 2 each, a commit of 2 for the kept
    assert all(reward.scored[name] == 4 for name in kept)
    assert sorted(seen[0]["advantages"].tolist()) == [-0.5] * 6 + [0.0] * 4 + [0.5] * 6  # GRPO's group mean
    log = trainer.state.log_history[0]
    assert log["reinforce_ada/samples"] == 8 * 2 + 4 * 2
    assert log["reinforce_ada/pilot_commit/in_band_fraction"] == 3 / 8
    assert log["reinforce_ada/pilot_commit/filled_fraction"] == 1 / 4
    # pooled pass rates: the mixed 0.5 (0.5^4 + 0.5^4 = 1/8), the flat 0 or 1 (1)
    assert log["reinforce_ada/grpo_flat_fraction"] == pytest.approx((3 / 8 + 5) / 8)
    assert log["reinforce_ada/mixed_group_fraction"] == 0.75


def test_a_dataset_smaller_than_one_steps_candidates_names_the_field(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError) as refused:
        ReinforceAdaTrainer(
            model=tiny_model_dir,
            reward_funcs=[KindReward()],
            args=_config(tmp_path, pilot_oversampling=3.0),
            train_dataset=_dataset(4, 4),
        )
    message = str(refused.value)
    assert "pilot_oversampling=3" in message and "only 8" in message and "at most 2.00" in message
    ReinforceAdaTrainer(  # the fix it names works
        model=tiny_model_dir,
        reward_funcs=[KindReward()],
        args=_config(tmp_path, pilot_oversampling=2.0),
        train_dataset=_dataset(4, 4),
    )


def test_checkpoint_restores_the_candidate_stream(tiny_model_dir, tmp_path):
    args = {"max_steps": 2, "save_strategy": "steps", "save_steps": 1}
    first = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[KindReward()], args=_config(tmp_path, **args), train_dataset=_dataset(8, 8)
    )
    states = []
    end_step = first.schedule.end_step

    def record(outcome):
        end_step(outcome)
        states.append(first.schedule.candidate_stream.state_dict())

    first.schedule.end_step = record
    first.train()
    assert states[0] != states[1]
    saved = json.loads((Path(first.args.output_dir) / "checkpoint-1" / "candidate_stream.json").read_text())
    assert saved == {"format": "trl_ada.candidate_stream", "version": 1, **states[0]}
    resumed = ReinforceAdaTrainer(
        model=tiny_model_dir, reward_funcs=[KindReward()], args=_config(tmp_path, **args), train_dataset=_dataset(8, 8)
    )
    resumed.train(resume_from_checkpoint=str(Path(first.args.output_dir) / "checkpoint-1"))
    assert resumed.schedule.candidate_stream.state_dict() == states[1]  # step 2 piloted the same candidates


@pytest.mark.parametrize(
    ("given", "sampling"), [({}, "pilot_commit"), ({"generation_schedule": "pilot_commit"}, None)]
)
def test_the_asynchronous_trainer_refuses_pilot_commit_by_name(given, sampling):
    from trl_ada.plan import ASYNCHRONOUS, resolve

    with pytest.raises(ValueError) as refused:
        resolve(given, sampling=sampling, host=ASYNCHRONOUS)
    assert "pilot_commit" in str(refused.value) and "the asynchronous trainer" in str(refused.value)


@pytest.mark.slow
def test_two_processes_pilot_and_commit_alike(tiny_model_dir, tmp_path):
    result = run_two_processes("distributed_pilot_commit.py", tiny_model_dir, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert len(ranks[0]["steps"]) == 3
    assert ranks[0]["steps"] == ranks[1]["steps"]  # candidates, pilots, band verdicts, commits, stream position
    for step in ranks[0]["steps"]:
        assert len(step["candidates"]) == 6 == len(set(step["candidates"]))  # 2 x 3 candidates, no prompt twice
        assert len(step["committed"]) == 3
        assert all(len(step["pools"][p]) == 4 for p in step["committed"])  # pilot 2 + commit 2
        assert all(len(pool) == 2 for p, pool in enumerate(step["pools"]) if p not in step["committed"])
    assert ranks[0]["rows"] == ranks[1]["rows"] == [6, 6, 6]  # 3 committed prompts x n=4 over 2 ranks, every step
