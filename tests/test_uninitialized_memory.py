"""No engine reads memory it has not written: the ground for not filling fresh buffers on CUDA.

Under ``torch.use_deterministic_algorithms`` torch fills every fresh buffer (``torch.empty``, ``empty_like``,
``resize_``) with NaN (floats) or the largest integer (``torch.utils.deterministic.fill_uninitialized_memory``),
so that a read of memory nobody wrote is at least repeatable. It is a debugging aid that costs one fill kernel per
buffer: on the H100 ~200 ``aten::fill_`` launches per Banyan step. strae runs CUDA deterministically by default and
turns the fill off (runtime.configure_determinism) because no engine reads unwritten memory, which this checks:
trained with every fresh buffer poisoned (NaN / int max: a read would show as NaN weights, a different result or
an index error) each engine, and the multi-view Tree-LSTMs (whose trainer runs the same mode), gives bit for bit
the weights it gives without the poison. CPU, so the Triton kernels run on the interpreter (conftest.py) over the
same buffers the CUDA launches would get.
"""
from __future__ import annotations

import contextlib

import pytest
import torch

from strae.models.model import StraeModel
from strae.recipes import load as load_recipe
from strae.runtime import configure_determinism
from tests.test_models_training import config, padded, tiny_corpus

ENGINES = {  # induction kernel, propagation: the CPU default, and the CUDA default (Triton induction + levels)
    "torch-autograd": ("torch", "autograd"),
    "triton-handwritten": ("triton", "handwritten"),
}
MODELS = {  # objective, structure, functions, recipe: Banyan's and Self-StrAE's paper settings
    "banyan": ("ce", "entangled", "diagonal", "banyan"),
    "selfstrae": ("ceco", "sentential", "linear", "selfstrae"),
}


@contextlib.contextmanager
def poisoned_buffers(poison: bool):
    """Deterministic mode with (``poison``) or without torch's fill of fresh buffers; both restored after."""
    saved = torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = poison
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0])
        torch.utils.deterministic.fill_uninitialized_memory = saved[1]


def trained(model_name: str, engine: str, poison: bool, steps: int = 2) -> tuple[list[float], dict]:
    objective, structure, functions, recipe_name = MODELS[model_name]
    kernel, propagation = ENGINES[engine]
    recipe = load_recipe(recipe_name)
    with poisoned_buffers(poison):
        torch.manual_seed(0)
        model = StraeModel(config(objective, structure, functions, k=4, u=2), recipe, induction_kernel=kernel,
                           propagation=propagation).train()
        assert model.kernel_choice(torch.device("cpu")).used == kernel
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        ids, lengths = padded(tiny_corpus(10, seed=5))
        losses = []
        for _ in range(steps):
            loss, _ = model.loss(ids, lengths)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(float(loss.detach()))
        if propagation == "handwritten":  # the engine named is the one that ran (no silent fallback to torch levels)
            assert model.levels_choice(torch.device("cpu")).used == ("triton" if kernel == "triton" else "torch")
    return losses, {name: tensor.clone() for name, tensor in model.state_dict().items()}


def test_the_poison_is_real():
    with poisoned_buffers(True):
        assert torch.empty(3).isnan().all()
        assert (torch.empty(2, dtype=torch.long) == torch.iinfo(torch.long).max).all()


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("model_name", list(MODELS))
def test_no_engine_reads_a_buffer_it_has_not_written(model_name, engine):
    if engine.startswith("triton"):
        pytest.importorskip("triton")
    losses, weights = trained(model_name, engine, poison=False)
    poisoned_losses, poisoned_weights = trained(model_name, engine, poison=True)
    assert all(loss == loss for loss in losses)  # finite to begin with, so a NaN below would be the poison's
    assert poisoned_losses == losses
    for name, tensor in weights.items():
        assert torch.equal(poisoned_weights[name], tensor), name


def test_the_objective_terms_read_no_unwritten_block_however_they_are_blocked(monkeypatch):
    """The fused CE and contrastive terms fill preallocated (rows, V) / (M, M) buffers block by block (one block per
    batch on CUDA, several on the CPU): with blocks of 4 rows the multi-block paths run here too."""
    from strae.objectives import terms

    monkeypatch.setattr(terms, "_ROW_BLOCK", 4)
    monkeypatch.setattr(terms, "_CONTRASTIVE_BLOCK", 4)
    results = []
    for poison in (False, True):
        with poisoned_buffers(poison):
            torch.manual_seed(0)
            head = torch.nn.Linear(6, 9)
            leaves = torch.randn(11, 6, requires_grad=True)
            a, b = torch.randn(10, 6, requires_grad=True), torch.randn(10, 6, requires_grad=True)
            loss = terms.leaf_cross_entropy(head, leaves, torch.randint(0, 9, (11,)), bf16=False) + \
                terms.symmetric_contrastive(a, b, 0.2, bf16=False)
            loss.backward()
            results.append([loss.detach(), leaves.grad, a.grad, b.grad, head.weight.grad, head.bias.grad])
    assert results[0][0].isfinite()
    for clean, poisoned in zip(*results):
        assert torch.equal(clean, poisoned)


def multiview_trained(model_name: str, poison: bool, steps: int = 2) -> tuple[list[float], dict]:
    from baselines.multiview.model import make_batch
    from tests.test_multiview import TREES, _tiny

    with poisoned_buffers(poison):
        model = _tiny(model_name).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        batch = make_batch(TREES, model.config.pad_id)
        books, positions = torch.tensor([0, 0, 0, 1]), torch.tensor([0, 1, 2, 0])
        losses = []
        for _ in range(steps):
            loss, _ = model.loss(batch, books, positions)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    return losses, {name: tensor.clone() for name, tensor in model.state_dict().items()}


@pytest.mark.parametrize("model_name", ["ctl", "cl"])
def test_the_multiview_models_read_no_buffer_they_have_not_written(model_name):
    """The multi-view trainer also runs CUDA's deterministic mode (runtime.configure_determinism)."""
    losses, weights = multiview_trained(model_name, poison=False)
    poisoned_losses, poisoned_weights = multiview_trained(model_name, poison=True)
    assert all(loss == loss for loss in losses) and poisoned_losses == losses
    for name, tensor in weights.items():
        assert torch.equal(poisoned_weights[name], tensor), name


def test_cuda_determinism_turns_the_fill_off_and_says_so(monkeypatch):
    saved = torch.utils.deterministic.fill_uninitialized_memory
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda *a, **k: None)  # no CUDA mode on the CPU
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    for flag in ("deterministic", "benchmark"):  # restored after, as the process had them
        monkeypatch.setattr(torch.backends.cudnn, flag, getattr(torch.backends.cudnn, flag))
    try:
        record = configure_determinism(torch.device("cuda"), True)
        assert record["fill_uninitialized_memory"] is False
        assert torch.utils.deterministic.fill_uninitialized_memory is False
        assert "fill_uninitialized_memory" not in configure_determinism(torch.device("cpu"), True)
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = saved
