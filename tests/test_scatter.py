"""models/scatter.py: the presorted sums give index_add's numbers bitwise on CPU — as ops, in gradients, and in a
whole model trained a few steps, for every objective and both structures — so `--scatter` is a speed choice only."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from strae.models.model import StraeModel
from strae.models.scatter import Csr, gather_rows, scatter_sum
from strae.objectives import NAMES as OBJECTIVES
from tests.test_models_training import config, trained_briefly

CASES = {  # (index, size): repeated destinations, one item each with gaps, a permutation, nothing
    "repeats": (np.random.default_rng(0).integers(0, 37, 500), 40),
    "injective": (np.random.default_rng(1).permutation(60)[:25], 60),
    "permutation": (np.random.default_rng(2).permutation(33), 33),
    "empty": (np.zeros(0, dtype=np.int64), 7),
}


@pytest.mark.parametrize("case", CASES)
def test_sum_and_gather_match_index_add_bitwise(case):
    index_np, size = CASES[case]
    index = torch.from_numpy(index_np).long()
    csr = Csr.build(index_np, size, torch.device("cpu"))
    assert (csr.pos is not None) == (case != "repeats")  # a gather where no destination takes two items
    torch.manual_seed(0)
    src = torch.randn(len(index_np), 5, dtype=torch.float32, requires_grad=True)
    ours = scatter_sum(src, index, size, csr)
    theirs = scatter_sum(src, index, size, None)
    assert torch.equal(ours, theirs)
    weight = torch.randn(size, 5)
    grad_ours, = torch.autograd.grad((ours * weight).sum(), src)
    grad_theirs, = torch.autograd.grad((theirs * weight).sum(), src)
    assert torch.equal(grad_ours, grad_theirs)
    x = torch.randn(size, 5, requires_grad=True)
    taken, taken_ref = gather_rows(x, index, csr), gather_rows(x, index, None)
    assert torch.equal(taken, taken_ref)
    upstream = torch.randn(len(index_np), 5)
    assert torch.equal(torch.autograd.grad((taken * upstream).sum(), x)[0],
                       torch.autograd.grad((taken_ref * upstream).sum(), x)[0])


def test_an_index_out_of_range_is_refused():
    with pytest.raises(ValueError, match="out of range for 3 rows"):
        Csr.build(np.array([0, 3]), 3, torch.device("cpu"))


def _trained(objective, structure, functions, scatter):
    return trained_briefly(config(objective, structure, functions), 3, scatter=scatter)


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("structure,functions", [("entangled", "diagonal"), ("sentential", "linear")])
def test_presorted_training_is_bitwise_index_add_training(objective, structure, functions):
    losses, weights = _trained(objective, structure, functions, "index_add")
    losses_presorted, weights_presorted = _trained(objective, structure, functions, "presorted")
    assert losses == losses_presorted
    assert all(torch.equal(weights[name], weights_presorted[name]) for name in weights)


def test_an_unknown_scatter_mode_is_refused():
    with pytest.raises(ValueError, match="scatter 'atomic' is not one of index_add, presorted"):
        StraeModel(config("ce", "entangled", "diagonal"), scatter="atomic")


def test_many_segments_at_once_are_the_segments_one_by_one():
    rng = np.random.default_rng(3)
    parts = [rng.integers(0, 9, 30), rng.permutation(12), np.zeros(0, dtype=np.int64), rng.integers(0, 4, 50),
             rng.permutation(20)[:5]]
    sizes = [9, 12, 3, 4, 20]
    index = np.concatenate(parts)
    ends = np.cumsum([len(p) for p in parts])
    segments = {10 + k: (int(end - len(p)), int(end)) for k, (p, end) in enumerate(zip(parts, ends))}
    many = Csr.build_many(index, segments, {10 + k: s for k, s in enumerate(sizes)}, torch.device("cpu"))
    for k, (part, size) in enumerate(zip(parts, sizes)):
        one, batched = Csr.build(part, size, torch.device("cpu")), many[10 + k]
        for name in ("pos", "order", "counts"):
            a, b = getattr(one, name), getattr(batched, name)
            assert (a is None and b is None) or torch.equal(a, b), (k, name)
    with pytest.raises(ValueError, match="out of range"):
        Csr.build_many(np.array([0, 5]), {0: (0, 2)}, {0: 5}, torch.device("cpu"))
