"""The flat-group counterfactual `reinforce_ada/grpo_flat_fraction`: mean over prompts of p̂ⁿ + (1 − p̂)ⁿ (the pure
function in `trl_ada.groups`), against hand-computed values and as a property."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from refusals import names, refusal

from trl_ada.groups import flat_group_probability, grpo_flat_fraction

rates = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
sizes = st.integers(min_value=1, max_value=64)


@pytest.mark.parametrize(
    ("pass_rates", "n", "expected"),
    [
        ([0.5], 4, 2 / 16),  # 1/16 all right + 1/16 all wrong
        ([0.25], 4, (1 + 81) / 256),  # (1/4)^4 + (3/4)^4
        ([0.0, 1.0, 0.5, 0.25], 4, (1 + 1 + 2 / 16 + 82 / 256) / 4),
        ([0.5, 0.5], 2, 0.5),
        ([0.1], 8, 0.1**8 + 0.9**8),
        ([0.3, math.nan], 2, 0.09 + 0.49),  # a prompt nothing scored is left out
    ],
)
def test_hand_computed_values(pass_rates, n, expected):
    assert grpo_flat_fraction(pass_rates, n) == pytest.approx(expected, rel=1e-12)


def test_no_prompt_is_nan_and_bad_input_names_its_value():
    assert math.isnan(grpo_flat_fraction([], 4)) and math.isnan(grpo_flat_fraction([math.nan], 4))
    names(refusal(flat_group_probability, [0.5], 0), "group_size=0", ">= 1")
    names(refusal(flat_group_probability, [0.5, 1.5], 4), "pass_rates[1] = 1.5", "[0, 1]")


@given(st.lists(rates, min_size=1, max_size=20), sizes)
def test_it_is_a_probability(pass_rates, n):
    assert 0.0 <= grpo_flat_fraction(pass_rates, n) <= 1.0


@given(st.sampled_from([0.0, 1.0]), sizes)
def test_a_prompt_always_right_or_always_wrong_is_always_flat(p, n):
    assert grpo_flat_fraction([p], n) == 1.0


@given(rates, sizes)
def test_it_is_symmetric_in_right_and_wrong(p, n):
    assert flat_group_probability([p], n)[0] == pytest.approx(flat_group_probability([1.0 - p], n)[0], abs=1e-12)


@given(st.floats(min_value=1e-3, max_value=1 - 1e-3), st.integers(min_value=1, max_value=40))
def test_a_larger_group_is_less_often_flat(p, n):
    smaller, larger = flat_group_probability([p, p], n), flat_group_probability([p, p], n + 1)
    assert larger[0] < smaller[0]


def test_a_group_of_one_is_always_flat():
    assert np.all(flat_group_probability(np.linspace(0, 1, 11), 1) == 1.0)


def test_the_asynchronous_worker_logs_it_per_group(tmp_path):
    """The issue's worker example without staleness: the pool 000011 meets balance and its group is pushed; p̂ = 2/6,
    so the group logs (1/3)⁴ + (2/3)⁴ = 17/81."""
    from test_async_worker import Recorder, metric_total, worker_for
    from transformers import AutoTokenizer

    from trl_ada.toy import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "model", hidden_size=64)
    tiny = (str(model_dir), AutoTokenizer.from_pretrained(model_dir))
    worker = worker_for(tmp_path, tiny, [{"prompt": "hello"}], streaming_window=4, max_prompts_in_flight=1)
    server, active = Recorder(), {}
    stream = {0: [0.0] * 4 + [1.0, 1.0, 0.0, 0.0] + [0.0] * 24}
    worker._admit(active, server)
    worker._use(server.answer(stream), active, server)
    worker._use(server.answer(stream), active, server)
    assert active == {}
    assert metric_total(worker, "reinforce_ada/grpo_flat_fraction") == pytest.approx(17 / 81)
