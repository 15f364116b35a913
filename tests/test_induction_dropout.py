"""Trees induced on dropped-out embeddings (both references), keyed masks, the recompute, StrCSE pairing and the
Self-StrAE reference decoder's child order."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import reference_strae as ref
from strae import recipes
from strae.models.config import ModelConfig
from strae.models.dropout import hash32, hash32_reference, keyed_keep, leaf_keys
from strae.models.model import StraeModel
from test_models_engine import make_model, padded, random_batch


def induced(model: StraeModel, sentences, seed: int):
    ids, lengths = padded(sentences)
    torch.manual_seed(seed)
    packed, induction = model.induce(ids, lengths)
    return packed, induction, model.build(induction, packed)


def occurrence_spans(induction, packed) -> list[tuple[int, int, int]]:
    """(sentence, first, last) position of every occurrence."""
    starts = packed.offsets[:-1]
    out = []
    for first, last in zip(induction.span_start.tolist(), induction.span_end.tolist()):
        b = int(np.searchsorted(starts, first, side="right") - 1)
        out.append((b, first - int(starts[b]), last - int(starts[b])))
    return out


def test_int32_hash_equals_exact_reference_and_masks_have_the_right_rate():
    x = torch.randint(-2 ** 31, 2 ** 31, (50_000,), dtype=torch.int64).to(torch.int32)
    assert torch.equal(hash32(x).long() & 0xFFFFFFFF, hash32_reference(x))
    keep = keyed_keep(leaf_keys(torch.arange(4000)), 0.2, seed=7, size=256)
    assert abs(keep.float().mean().item() - 0.8) < 0.005
    # a pure function of (seed, key): same key and seed -> same mask; another seed -> another mask
    assert torch.equal(keep, keyed_keep(leaf_keys(torch.arange(4000)), 0.2, seed=7, size=256))
    assert not torch.equal(keep, keyed_keep(leaf_keys(torch.arange(4000)), 0.2, seed=8, size=256))


@pytest.mark.parametrize("functions", ["linear", "diagonal"])
@pytest.mark.parametrize("structure", ["sentential", "entangled"])
def test_trees_match_the_naive_reference_under_induction_dropout(structure, functions):
    """The batched induction with dropout = per-sentence greedy merging on the same dropped-out embeddings."""
    model = make_model(structure, functions, seed=2).train()
    assert model.recipe.induction_dropout
    sentences = random_batch(2)
    packed, induction, _ = induced(model, sentences, seed=5)
    assert induction.dropout is not None
    spans = occurrence_spans(induction, packed)
    with torch.no_grad():
        for b, tokens in enumerate(sentences):
            root = ref.greedy_tree(tokens, model, induction.dropout, offset=int(packed.offsets[b]))
            expected = {(b,) + node.span: node.up for node in ref.walk(root)}
            got = {span: induction.up[i] for i, span in enumerate(spans) if span[0] == b}
            assert set(got) == set(expected), f"sentence {b}: engine tree differs from the reference's"
            for span, up in expected.items():
                torch.testing.assert_close(got[span], up, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("functions", ["linear", "diagonal"])
@pytest.mark.parametrize("structure", ["sentential", "entangled"])
def test_recompute_reapplies_the_induction_masks(structure, functions):
    """The graph trained is the graph induced: the differentiable up pass reproduces every occurrence's induced
    embedding (entangled: every occurrence of a node got the same mask), roots included."""
    model = make_model(structure, functions, seed=4).train()
    _, induction, graph = induced(model, random_batch(4) + random_batch(5), seed=9)
    up, _ = model.propagate(graph)
    occurrence_up = up[torch.from_numpy(graph.occurrence_node)]
    if functions == "diagonal":  # elementwise functions: bit for bit
        assert torch.equal(up[graph.roots], induction.up[induction.roots])
        assert torch.equal(occurrence_up, induction.up)
    else:  # matrix products over differently sized batches may round differently
        torch.testing.assert_close(occurrence_up, induction.up, rtol=1e-12, atol=1e-13)


def test_different_dropout_seeds_can_give_different_trees_and_the_setting_turns_it_off():
    model = make_model("sentential", "diagonal", seed=6).train()
    sentences = [s for s in random_batch(6) + random_batch(7) + random_batch(8) if len(s) > 3]
    _, first, _ = induced(model, sentences, seed=1)
    _, second, _ = induced(model, sentences, seed=2)
    assert not (torch.equal(first.left, second.left) and torch.equal(first.right, second.right))
    model.recipe = recipes.resolve("banyan", [("induction_dropout", False, "test")]).recipe
    _, a, _ = induced(model, sentences, seed=1)
    _, b, _ = induced(model, sentences, seed=2)
    model.eval()
    _, c, _ = induced(model, sentences, seed=3)
    assert torch.equal(a.left, b.left) and torch.equal(a.left, c.left) and torch.equal(a.right, c.right)
    assert a.keep is None


def test_strcse_pairs_non_terminals_by_span_when_the_two_passes_differ():
    torch.manual_seed(0)
    cfg = ModelConfig(model="selfstrae", structure="sentential", functions="linear", objective="strcse", k=4, u=2,
                      vocab_size=12)
    model = StraeModel(cfg, recipes.resolve("selfstrae", [("embedding_dropout", 0.5, "test")]).recipe).train()
    with torch.no_grad():
        model.embedding.weight.uniform_(-1, 1)
    ids, lengths = padded(random_batch(1) + random_batch(2))
    loss, metrics = model.loss(ids, lengths)
    assert 0 < metrics["strcse_paired"] < 1  # dropout this strong changes some trees between the passes
    loss.backward()
    assert model.embedding.weight.grad.abs().sum() > 0
    model.recipe = recipes.resolve("selfstrae", [("induction_dropout", False, "test")]).recipe
    assert "strcse_paired" not in model.loss(ids, lengths)[1]  # one structure: every non-terminal paired


@pytest.mark.parametrize("order", ["node_id", "position"])
def test_decoder_child_order_on_a_hand_worked_tree(order):
    """[a, b, c] with a ~ b: (a b) merges first (node 3), then ((a b), c) is the root (node 4). The root's
    positional left child is node 3 and its right child the leaf c (node 2). The Self-StrAE reference sends the
    decomposition's first output to the lower node id, i.e. to c; the positional decoder sends it to (a b)."""
    cfg = ModelConfig(model="selfstrae", structure="sentential", functions="linear", objective="ce", k=2, u=2,
                      vocab_size=5)
    torch.manual_seed(0)
    model = StraeModel(cfg, recipes.resolve("selfstrae", [("decoder_child_order", order, "test")]).recipe).eval()
    with torch.no_grad():
        model.embedding.weight.zero_()
        model.embedding.weight[0] = torch.tensor([1.0, 0.0, 0.5, 0.0])  # a
        model.embedding.weight[1] = torch.tensor([1.0, 0.1, 0.5, 0.0])  # b: cos(a, b) ~ 1
        model.embedding.weight[2] = torch.tensor([0.0, 1.0, 0.0, -1.0])  # c: cos(b, c) small
    ids, lengths = torch.tensor([[0, 1, 2]]), torch.tensor([3])
    up, down = model.up_down(ids, lengths)
    graph = model.graph(ids, lengths)
    assert graph.level_offsets == [0, 3, 4, 5]  # leaves a b c, then (a b), then the root
    with torch.no_grad():
        parts = model.functions.decompose(up[4:5])[0]  # root's down = its up; [first output, second output]
        torch.testing.assert_close(down[4], up[4])
        first, second = (parts[0], parts[1])
        if order == "node_id":
            torch.testing.assert_close(down[2], first)   # leaf c (id 2 < 3) gets the first output
            torch.testing.assert_close(down[3], second)
        else:
            torch.testing.assert_close(down[3], first)   # positional left child (a b) gets it
            torch.testing.assert_close(down[2], second)
        # (a b)'s children are leaves in position order: ids and positions agree, no swap either way
        inner = model.functions.decompose(down[3:4])[0]
        torch.testing.assert_close(down[0], inner[0])
        torch.testing.assert_close(down[1], inner[1])
