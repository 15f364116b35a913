"""models/propagation.py: the hand-derived passes compute the autograd engine's function — the same forward bit for
bit (same dropout masks, same summation order) and the same gradients to rounding — for both structures, both
decoder child orders, keyed (induction-dropout) and fresh masks, every objective; and a model trained with them
follows the autograd-trained one."""
from __future__ import annotations

import pytest
import torch

from strae.models.model import StraeModel
from strae.objectives import NAMES as OBJECTIVES
from strae.recipes import load as load_recipe
from tests.test_models_training import config, padded, tiny_corpus

CASES = {  # structure, recipe: banyan = keyed masks from the induction; strae_0_1 = fresh masks (no induction
    # dropout); selfstrae = the node_id decoder child order (sentential only)
    "entangled-keyed": ("entangled", "banyan"),
    "entangled-fresh": ("entangled", "strae_0_1"),
    "sentential-keyed": ("sentential", "banyan"),
    "sentential-node-id": ("sentential", "selfstrae"),
}


def _passes(propagation: str, structure: str, recipe: str, dtype: torch.dtype, dropout: bool):
    torch.manual_seed(0)
    model = StraeModel(config("ce", structure, "diagonal", k=8, u=3), load_recipe(recipe),
                       propagation=propagation).to(dtype).train()
    ids, lengths = padded(tiny_corpus(40, seed=2))
    torch.manual_seed(1)
    graph = model.graph(ids, lengths)
    up, down = model.propagate(graph, dropout=dropout)
    weights = torch.linspace(-1.0, 1.0, up.shape[1], dtype=dtype)
    # a loss touching every row of both outputs, nonlinear so each row's gradient differs
    ((up * weights).square().sum() + (down * weights.flip(0)).sin().sum()).backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return up.detach(), down.detach(), grads


@pytest.mark.parametrize("dropout", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_same_forward_bitwise_and_same_gradients(case, dropout):
    structure, recipe = CASES[case]
    up, down, grads = _passes("autograd", structure, recipe, torch.float64, dropout)
    up_h, down_h, grads_h = _passes("handwritten", structure, recipe, torch.float64, dropout)
    assert torch.equal(up, up_h) and torch.equal(down, down_h)
    assert set(grads) == set(grads_h) and len(grads) == 8  # embedding + the 7 diagonal parameters
    for name in grads:
        torch.testing.assert_close(grads_h[name], grads[name], rtol=1e-12, atol=1e-12, msg=name)
    # float32: the forward still bitwise; the backward sums in another order (rounding only)
    up, down, grads = _passes("autograd", structure, recipe, torch.float32, dropout)
    up_h, down_h, grads_h = _passes("handwritten", structure, recipe, torch.float32, dropout)
    assert torch.equal(up, up_h) and torch.equal(down, down_h)
    for name in grads:  # relative to the largest entry: a parameter's entries differ in size by orders
        assert (grads_h[name] - grads[name]).abs().max() <= 1e-5 * grads[name].abs().max(), name


def test_dropout_really_differs_from_no_dropout():
    # guards the test above against masks that silently do nothing
    up, down, _ = _passes("handwritten", "entangled", "banyan", torch.float64, True)
    up_eval, down_eval, _ = _passes("handwritten", "entangled", "banyan", torch.float64, False)
    assert not torch.equal(up, up_eval) and not torch.equal(down, down_eval)


def _trained(objective: str, structure: str, propagation: str):
    torch.manual_seed(0)
    model = StraeModel(config(objective, structure, "diagonal"), propagation=propagation).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    ids, lengths = padded(tiny_corpus(24))
    losses = []
    for _ in range(4):
        loss, _ = model.loss(ids, lengths)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses, model.state_dict()


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("structure", ["entangled", "sentential"])
def test_training_follows_the_autograd_engine(objective, structure):
    losses, weights = _trained(objective, structure, "autograd")
    losses_h, weights_h = _trained(objective, structure, "handwritten")
    assert losses[0] == losses_h[0]  # the first forward is the same function of the same weights and masks
    assert losses_h == pytest.approx(losses, rel=1e-5)
    for name in weights:
        torch.testing.assert_close(weights_h[name], weights[name], rtol=1e-4, atol=1e-5, msg=name)


def test_refused_where_it_is_not_derived():
    with pytest.raises(ValueError, match="derived for diagonal functions"):
        StraeModel(config("ce", "sentential", "linear"), propagation="handwritten")
    with pytest.raises(ValueError, match="propagation 'tape' is not one of autograd, handwritten"):
        StraeModel(config("ce", "entangled", "diagonal"), propagation="tape")
