"""Gradients, learning on a tiny synthetic corpus, determinism — for every objective."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.func import functional_call

from strae.models.config import ModelConfig
from strae.models.model import StraeModel
from strae.objectives import NAMES as OBJECTIVES
from strae.objectives import terms
from strae.objectives.terms import leaf_cross_entropy, symmetric_contrastive

VOCAB = 16


def tiny_corpus(n: int = 48, seed: int = 0) -> list[list[int]]:
    # Repeated phrases over a small vocabulary, so there is something to learn and entangle.
    rng = np.random.default_rng(seed)
    phrases = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10, 11], [12, 13, 14], [15, 0]]
    return [sum((phrases[i] for i in rng.integers(0, len(phrases), size=int(rng.integers(1, 4)))), [])
            for _ in range(n)]


def padded(sentences):
    width = max(len(s) for s in sentences)
    ids = torch.full((len(sentences), width), VOCAB, dtype=torch.long)
    for b, s in enumerate(sentences):
        ids[b, :len(s)] = torch.tensor(s)
    return ids, torch.tensor([len(s) for s in sentences])


def trained_briefly(cfg: ModelConfig, steps: int, n_sentences: int = 24, **engine) -> tuple[list[float], dict]:
    """Seed 0, Adam lr 1e-2, ``steps`` steps on a tiny corpus with the recipe's dropouts on (so the dropout masks
    must match draw for draw too); ``engine``: StraeModel's engine choices (scatter, propagation, induction kernel).
    Returns the losses and the final weights."""
    torch.manual_seed(0)
    model = StraeModel(cfg, **engine).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    ids, lengths = padded(tiny_corpus(n_sentences))
    losses = []
    for _ in range(steps):
        loss, _ = model.loss(ids, lengths)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses, model.state_dict()


def config(objective: str, structure: str, functions: str, **extra) -> ModelConfig:
    values = dict(model="banyan", structure=structure, functions=functions, objective=objective, k=4, u=2,
                  vocab_size=VOCAB)
    values.update(extra)
    return ModelConfig(**values)


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("structure,functions", [("entangled", "diagonal"), ("sentential", "linear")])
def test_gradients_reach_every_parameter(objective, structure, functions):
    torch.manual_seed(0)
    model = StraeModel(config(objective, structure, functions))
    ids, lengths = padded(tiny_corpus(12))
    model.train()
    loss, metrics = model.loss(ids, lengths)
    loss.backward()
    used = torch.unique(ids[ids < VOCAB])
    assert model.embedding.weight.grad[used].abs().sum(1).gt(0).all(), "a used token's embedding got no gradient"
    for name, p in model.functions.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, f"no gradient reached functions.{name}"
    if objective != "contrastive":  # the dembedding is only used by objectives with a CE term
        assert model.dembedding.weight.grad.abs().sum() > 0
    assert np.isfinite(metrics["loss"])


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("structure,functions", [("entangled", "diagonal"), ("sentential", "linear")])
def test_gradcheck_float64(objective, structure, functions):
    """Finite differences vs autograd through induction-fixed structure, up/down passes and objective."""
    torch.manual_seed(1)
    cfg = config(objective, structure, functions, k=2, u=2)
    model = StraeModel(cfg).double().eval()  # eval: no dropout, so the function is deterministic
    ids, lengths = padded([[1, 2, 3, 1, 2], [4, 5], [6], [1, 2, 7]])
    names = ["embedding.weight"] + [f"functions.{n}" for n, _ in model.functions.named_parameters()]
    params = dict(model.named_parameters())
    inputs = tuple(params[n].detach().clone().requires_grad_(True) for n in names)

    def loss_of(*values):
        return _loss(model, dict(zip(names, values)), ids, lengths)

    assert torch.autograd.gradcheck(loss_of, inputs, eps=1e-6, atol=1e-6, rtol=1e-4, fast_mode=True)


def _loss(model, overrides, ids, lengths):
    # functional_call needs a forward; route loss() through a tiny wrapper module call.
    class LossCall(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, ids, lengths):
            return self.inner.loss(ids, lengths)[0]

    wrapper = LossCall(model)
    return functional_call(wrapper, {f"inner.{k}": v for k, v in overrides.items()}, (ids, lengths))


def train_curve(objective: str, structure: str, functions: str, seed: int, steps: int = 25) -> list[float]:
    torch.manual_seed(seed)
    model = StraeModel(config(objective, structure, functions))
    lr = 3e-2
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    corpus = tiny_corpus(48)
    model.train()
    curve = []
    for step in range(steps):
        batch = corpus[(step % 3) * 16:(step % 3 + 1) * 16]
        ids, lengths = padded(batch)
        loss, _ = model.loss(ids, lengths)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        curve.append(float(loss.detach()))
    return curve


@pytest.mark.parametrize("objective", OBJECTIVES)
@pytest.mark.parametrize("structure,functions", [("entangled", "diagonal"), ("sentential", "linear")])
def test_loss_decreases(objective, structure, functions):
    curve = train_curve(objective, structure, functions, seed=8)
    # Batches cycle with period 3, so both means are over the same three batches.
    first, last = np.mean(curve[:3]), np.mean(curve[-3:])
    assert last < first - 0.1, f"{objective}: loss did not decrease ({first:.3f} -> {last:.3f})"


@pytest.mark.parametrize("objective,structure,functions", [("ce", "entangled", "diagonal"),
                                                           ("strcse", "sentential", "linear")])
def test_same_seed_same_loss_curve(objective, structure, functions):
    curve = train_curve(objective, structure, functions, seed=11, steps=6)
    assert curve == train_curve(objective, structure, functions, seed=11, steps=6)
    assert curve != train_curve(objective, structure, functions, seed=12, steps=6)


@pytest.mark.parametrize("rows", [5, 1500])  # 1500: more than one fused block
@pytest.mark.parametrize("one_block", [False, True])  # True: a GPU's block size (the whole matrix at once)
def test_contrastive_matches_closed_form(rows, one_block, monkeypatch):
    if one_block:
        monkeypatch.setattr(terms, "_CONTRASTIVE_BLOCK", terms._CONTRASTIVE_BLOCK_GPU)
    torch.manual_seed(0)
    a = torch.randn(rows, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(rows, 6, dtype=torch.float64, requires_grad=True)
    tau = 0.7
    cos = torch.nn.functional.cosine_similarity(a.unsqueeze(1), b.unsqueeze(0), dim=-1) * np.exp(tau)
    expected = -0.5 * (torch.log_softmax(cos, 1).diagonal().mean() + torch.log_softmax(cos, 0).diagonal().mean())
    got = symmetric_contrastive(a, b, tau)
    torch.testing.assert_close(got, expected)
    for g, e in zip(torch.autograd.grad(got * 2, (a, b)), torch.autograd.grad(expected * 2, (a, b))):
        torch.testing.assert_close(g, e)
    with torch.no_grad():
        torch.testing.assert_close(symmetric_contrastive(a, b, tau), expected)


@pytest.mark.parametrize("bias", [True, False])
def test_fused_leaf_cross_entropy_matches_plain(bias):
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 30, bias=bias).double()
    x = torch.randn(600, 8, dtype=torch.float64, requires_grad=True)  # more rows than one fused block
    y = torch.randint(0, 30, (600,))
    fused = leaf_cross_entropy(layer, x, y, bf16=False) * 3.0
    grads = torch.autograd.grad(fused, [x] + list(layer.parameters()))
    plain = torch.nn.functional.cross_entropy(layer(x), y) * 3.0
    expected = torch.autograd.grad(plain, [x] + list(layer.parameters()))
    torch.testing.assert_close(fused, plain)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)
    with torch.no_grad():
        torch.testing.assert_close(leaf_cross_entropy(layer, x, y, bf16=False) * 3.0, plain)


@pytest.mark.parametrize("spread", [1.0, 40.0])
def test_fused_leaf_cross_entropy_in_fp32_on_a_cpu_reads_the_loss_from_the_target_probability(spread):
    """fp32 on a CPU takes -log p_target from the softmax (no max sweep); where p_target is too small for that (a
    spread of 40 gives rows with losses in the hundreds, p_target underflowing to 0) the row falls back to
    lse = max - log(p at the max). Both against float64."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 300)
    x = torch.randn(600, 8) * spread  # more rows than one fused block
    y = torch.randint(0, 300, (600,))
    x.requires_grad_(True)
    fused = leaf_cross_entropy(layer, x, y, bf16=False)
    grads = torch.autograd.grad(fused, [x] + list(layer.parameters()))
    x64, layer64 = x.detach().double().requires_grad_(True), torch.nn.Linear(8, 300).double()
    layer64.load_state_dict({key: value.double() for key, value in layer.state_dict().items()})
    plain = torch.nn.functional.cross_entropy(layer64(x64), y)
    expected = torch.autograd.grad(plain, [x64] + list(layer64.parameters()))
    if spread > 1:
        row_losses = torch.nn.functional.cross_entropy(layer64(x64), y, reduction="none")
        assert row_losses.max() > 2 * 60.0  # the fallback rows are there
    assert torch.isfinite(fused) and abs(fused.item() - plain.item()) <= 1e-5 * plain.item()
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-6)


def test_fast_dropout_statistics_and_gradient():
    from strae.models.model import fast_dropout

    torch.manual_seed(0)
    x = torch.ones(200_000, dtype=torch.float64, requires_grad=True)
    y = fast_dropout(x, 0.2)
    kept = (y != 0).double().mean().item()
    assert abs(kept - 0.8) < 0.005
    assert torch.allclose(y[y != 0], torch.full_like(y[y != 0], 1 / 0.8), atol=1e-4)
    assert abs(y.mean().item() - 1.0) < 0.01  # inverted dropout keeps the expectation
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # d(x * mask)/dx = mask
    assert fast_dropout(x, 0.0) is x


def test_fused_leaf_cross_entropy_bf16_close_to_fp32(monkeypatch):
    import strae.objectives.terms as objectives

    monkeypatch.setattr(objectives, "bf16_autocast_supported", lambda device: True)
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 300, bias=False)
    x = torch.randn(300, 16, requires_grad=True)
    y = torch.randint(0, 300, (300,))
    low = leaf_cross_entropy(layer, x, y, bf16=True)
    grad_low = torch.autograd.grad(low, x)[0]
    full = torch.nn.functional.cross_entropy(layer(x), y)
    grad_full = torch.autograd.grad(full, x)[0]
    assert abs(low.item() - full.item()) < 0.02 * full.item()
    assert torch.nn.functional.cosine_similarity(grad_low.flatten(), grad_full.flatten(), dim=0) > 0.99
