"""`skip_zero_advantage_rows`: the forward and backward pass run only on rows whose advantage is not zero, and the
update is the one TRL makes over every row."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from tiny import PeriodicReward, tiny_config
from transformers import set_seed

from trl_ada import ReinforceAdaTrainer
from trl_ada.flat_rows import loss_share, rows_of, signal_rows

pytestmark = pytest.mark.xdist_group("trainer")


def _step(model_dir: str, tmp_path, skip: bool, loss_type: str) -> tuple[dict[str, torch.Tensor], list[int], dict]:
    """One GRPO step (n=4) on a flat prompt ("one in 1": every reward 1) and a mixed one ("one in 2"): the weights
    after it, the rows each forward pass with gradients saw, and the step's log."""
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in ("one in 1", "one in 2")]})
    config = tiny_config(
        tmp_path / f"{skip}-{loss_type}",
        sampling="grpo",
        num_generations=4,
        per_device_train_batch_size=8,
        loss_type=loss_type,
        optim="sgd",  # Adam divides by the gradient's scale: float noise in a zero gradient would become a step
        learning_rate=0.1,
        skip_zero_advantage_rows=skip,
    )
    set_seed(0)
    trainer = ReinforceAdaTrainer(model=model_dir, reward_funcs=[PeriodicReward()], args=config, train_dataset=dataset)
    rows, forward = [], trainer._get_per_token_logps_and_entropies

    def spy(model, input_ids, *args, **kwargs):
        if torch.is_grad_enabled():
            rows.append(input_ids.shape[0])
        return forward(model, input_ids, *args, **kwargs)

    trainer._get_per_token_logps_and_entropies = spy
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    set_seed(0)
    trainer.train()
    after = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the mixed group moved the weights
    return after, rows, trainer.state.log_history[0]


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "bnpo", "dr_grpo"])
def test_skipping_flat_rows_trains_half_the_rows_to_the_same_weights(tiny_model_dir, tmp_path, loss_type):
    full, full_rows, full_log = _step(tiny_model_dir, tmp_path, skip=False, loss_type=loss_type)
    skipped, skipped_rows, log = _step(tiny_model_dir, tmp_path, skip=True, loss_type=loss_type)
    assert full_rows == [8] and skipped_rows == [4]  # the flat group's 4 rows never reach the model
    assert log["reinforce_ada/skipped_row_fraction"] == 0.5
    assert "reinforce_ada/skipped_row_fraction" not in full_log
    assert log["loss"] == pytest.approx(full_log["loss"], rel=1e-5, abs=1e-7)
    for name in full:
        torch.testing.assert_close(skipped[name], full[name], rtol=1e-5, atol=1e-6, msg=name)


def test_signal_rows_keeps_a_row_with_any_nonzero_token_advantage():
    assert signal_rows(torch.tensor([0.0, 0.5, 0.0, -0.25])).tolist() == [1, 3]
    per_token = torch.tensor([[0.0, 0.0], [0.0, 0.3], [0.0, 0.0]])
    assert signal_rows(per_token).tolist() == [1]
    assert signal_rows(torch.zeros(3)).tolist() == []


def test_loss_share_restores_the_mean_over_every_row_or_token():
    inputs = {
        "advantages": torch.tensor([0.0, 1.0, 0.0, -1.0]),
        "completion_mask": torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]]),
        "num_items_in_batch": torch.tensor(9.0),
    }
    kept = rows_of(inputs, signal_rows(inputs["advantages"]))
    assert kept["completion_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert kept["num_items_in_batch"].item() == 9.0  # the generation batch's token count, untouched
    assert loss_share("grpo", inputs, kept) == 0.5  # 2 of 4 rows
    assert loss_share("dr_grpo", inputs, kept) == 0.5
    assert float(loss_share("bnpo", inputs, kept)) == pytest.approx(5 / 9)  # 5 of 9 completion tokens
    assert loss_share("dapo", inputs, kept) == 1.0  # normalised by num_items_in_batch


@pytest.mark.parametrize(
    ("field", "value", "fix"),
    [("beta", 0.04, 0.0), ("top_entropy_quantile", 0.2, 1.0), ("entropy_coef", 0.01, 0.0)],
)
def test_a_term_on_every_row_is_refused_with_a_fix_that_works(tmp_path, field, value, fix):
    with pytest.raises(ValueError) as refused:
        tiny_config(tmp_path, skip_zero_advantage_rows=True, **{field: value})
    message = str(refused.value)
    assert "skip_zero_advantage_rows" in message and field in message and repr(value) in message
    assert f"{field}={fix!r}" in message
    assert tiny_config(tmp_path, skip_zero_advantage_rows=True, **{field: fix}).skip_zero_advantage_rows
