"""The objective registry (``strae.objectives``): every objective's loss, metrics and gradients, and the random
numbers a training step draws, are those of the engine before the registry existed.

``data/objectives_expected.json`` was captured from ``StraeModel.loss`` at commit a82c331 (one if/elif per
objective in the model) with ``expected_case`` below, on a CPU; the registry must reproduce it to 1e-6. The four
``*/banyan/entangled/diagonal/train`` cases were re-captured when an entangled sentence root that is also a
constituent of another sentence stopped averaging its own upward embedding into its downward one (the Banyan code's
propagation; ``strae.models.trees.build_graph``): this batch has such roots, the others' values were unchanged.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from strae import recipes
from strae.models.config import ModelConfig
from strae.models.model import StraeModel
from strae.runtime import bf16_autocast_supported

EXPECTED = Path(__file__).parent / "data" / "objectives_expected.json"
VOCAB = 16
# (recipe, structure, functions): both references' recipes (induction dropout, fp32; Self-StrAE's node-id decoder
# order) and strae 0.1's (bf16 loss products, no induction dropout: StrCSE reuses the first pass's trees).
SETUPS = [("banyan", "entangled", "diagonal"), ("banyan", "sentential", "linear"),
          ("selfstrae", "sentential", "linear"), ("strae_0_1", "entangled", "diagonal"),
          ("strae_0_1", "sentential", "linear")]
OBJECTIVE_NAMES = ("ce", "contrastive", "ceco", "strcse")
CASES = [f"{objective}/{recipe}/{structure}/{functions}/{mode}" for objective in OBJECTIVE_NAMES
         for recipe, structure, functions in SETUPS for mode in ("train", "eval")]


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    # Repeated phrases, so entangled graphs share nodes and StrCSE's two passes share some spans.
    rng = np.random.default_rng(3)
    phrases = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10, 11], [12, 13, 14], [15, 0]]
    sentences = [sum((phrases[i] for i in rng.integers(0, len(phrases), size=int(rng.integers(1, 5)))), [])
                 for _ in range(12)]
    ids = torch.full((len(sentences), max(map(len, sentences))), VOCAB, dtype=torch.long)
    for row, sentence in enumerate(sentences):
        ids[row, :len(sentence)] = torch.tensor(sentence)
    return ids, torch.tensor([len(s) for s in sentences])


def expected_case(case: str) -> dict:
    """Loss, metrics, per-parameter gradient sums and squared norms, and the next random number after the step."""
    objective, recipe_name, structure, functions, mode = case.split("/")
    torch.manual_seed(5)
    config = ModelConfig(model="selfstrae" if recipe_name == "selfstrae" else "banyan", structure=structure,
                         functions=functions, objective=objective, k=4, u=2, vocab_size=VOCAB)
    model = StraeModel(config, recipes.load(recipe_name)).train(mode == "train")
    ids, lengths = batch()
    with torch.set_grad_enabled(mode == "train"):
        loss, metrics = model.loss(ids, lengths)
    values = {"loss": float(loss.detach()), "metrics": metrics}
    if mode == "train":
        loss.backward()
        values["grads"] = {name: [float(p.grad.double().sum()), float(p.grad.double().square().sum())]
                           for name, p in model.named_parameters() if p.grad is not None}
    values["rng_after"] = float(torch.rand(()))  # the step drew exactly as many numbers as before
    return values


@pytest.mark.parametrize("case", CASES)
def test_objective_reproduces_the_engine_before_the_registry(case):
    if case.split("/")[1] == "strae_0_1" and not bf16_autocast_supported(torch.device("cpu")):
        pytest.skip("bf16 loss products: this CPU has no bf16 path, the values were captured with one")
    expected = json.loads(EXPECTED.read_text())[case]
    got = expected_case(case)
    assert list(got["metrics"]) == list(expected["metrics"])  # same keys, same order (train.json history)
    close = dict(rel=1e-6, abs=1e-6)
    assert got["loss"] == pytest.approx(expected["loss"], **close)
    for key, value in expected["metrics"].items():
        assert got["metrics"][key] == pytest.approx(value, **close), key
    assert sorted(got.get("grads", {})) == sorted(expected.get("grads", {}))
    for name, value in expected.get("grads", {}).items():
        assert got["grads"][name] == pytest.approx(value, **close), name
    assert got["rng_after"] == expected["rng_after"]


def test_the_registry_is_the_one_list_of_objectives():
    import yaml

    from strae import objectives
    from strae.models import config as model_config

    schema = yaml.safe_load((Path(__file__).parents[1] / "workflow/schemas/config.schema.yaml").read_text())
    assert schema["$defs"]["objective"]["enum"] == list(objectives.NAMES)  # the schema's copy, kept equal
    assert model_config.OBJECTIVES is objectives.NAMES and recipes.OBJECTIVE_NAMES is objectives.NAMES
    overrides = schema["$defs"]["recipe_overrides"]["properties"]
    assert overrides["loss_precision"]["enum"] == list(objectives.LOSS_PRECISIONS)
    assert recipes.LOSS_PRECISIONS is objectives.LOSS_PRECISIONS
    assert tuple(objectives.classes()) == objectives.NAMES  # each class's own name, in the list's order
    for name in objectives.NAMES:
        objective = objectives.create(name, precision="bf16", temperature=0.5)
        assert objective.name == name and objective.bf16 and objective.temperature == 0.5
    with pytest.raises(ValueError, match="objective 'nope': not one of ce, contrastive, ceco, strcse"):
        objectives.create("nope", precision="fp32", temperature=0.2)
    with pytest.raises(ValueError, match="loss_precision 'fp16'"):
        objectives.create("ce", precision="fp16", temperature=0.2)


def test_the_registry_imports_no_torch():
    """Config, recipe and workflow code read the names without paying for torch."""
    import subprocess
    import sys

    code = "import sys, strae.objectives, strae.recipes, strae.models.config; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("recipe_name", ["banyan", "strae_0_1"])
def test_the_objective_takes_precision_and_temperature_from_the_recipe(recipe_name):
    config = ModelConfig(model="banyan", structure="sentential", functions="diagonal", objective="ceco", k=4, u=2,
                         vocab_size=VOCAB)
    recipe = recipes.load(recipe_name)
    model = StraeModel(config, recipe)
    assert model.objective.precision == recipe.loss_precision and model.objective.temperature == recipe.temperature
    model.recipe = recipes.resolve(recipe_name, [("temperature", 0.7, "test")]).recipe  # a new recipe, followed
    assert model.objective.temperature == 0.7


@pytest.mark.parametrize("objective", OBJECTIVE_NAMES)
def test_tf32_loss_precision_is_fp32_off_cuda_and_switches_only_inside_a_term(monkeypatch, objective):
    """``loss_precision: tf32`` (a named speed setting): on a CPU the loss and gradients are the fp32 recipe's, bit
    for bit; on CUDA each term runs with TF32 products and the process' full-fp32 setting comes back after."""
    results = []
    for precision in ("fp32", "tf32"):
        torch.manual_seed(5)
        config = ModelConfig(model="selfstrae", structure="sentential", functions="linear", objective=objective, k=4,
                             u=2, vocab_size=VOCAB)
        recipe = recipes.resolve("selfstrae", [("loss_precision", precision, "test")]).recipe
        model = StraeModel(config, recipe).train()
        assert model.objective.precision == precision
        loss, _ = model.loss(*batch())
        loss.backward()
        results.append([loss.detach()] + [p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert all(torch.equal(a, b) for a, b in zip(*results))
    # the switch itself, as on CUDA: "high" (TF32) inside the block, the process setting restored after
    seen = []
    monkeypatch.setattr(torch, "set_float32_matmul_precision", lambda value: seen.append(value))
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "highest")
    with model.objective.matmul_precision(torch.device("cuda")):
        seen.append("inside")
    assert seen == ["high", "inside", "highest"]
    seen.clear()
    with model.objective.matmul_precision(torch.device("cpu")):  # no TF32 switch off CUDA
        seen.append("inside")
    assert seen == ["inside"]
    with pytest.raises(ValueError, match="tf32"):
        recipes.resolve("selfstrae", [("loss_precision", "tf16", "test")])


def test_an_unknown_loss_precision_is_refused_by_name_wherever_a_recipe_comes_from():
    """A ``loss_precision`` outside LOSS_PRECISIONS (a typo, or a value an older strae had) is refused by a recipe
    override, by a recorded recipe (train.json / model.pt) and by the objective itself, naming the key and the values
    there are."""
    from strae import objectives

    assert objectives.LOSS_PRECISIONS == ("fp32", "bf16", "tf32")
    expected = "loss_precision 'fp16' is not one of fp32, bf16, tf32"
    with pytest.raises(ValueError, match=expected):
        recipes.resolve("selfstrae", [("loss_precision", "fp16", "cli")])
    record = recipes.resolve("selfstrae").record()
    record["values"]["loss_precision"] = "fp16"
    with pytest.raises(ValueError, match=expected):
        recipes.from_record(record)
    with pytest.raises(ValueError, match="loss_precision 'fp16': expected one of fp32, bf16, tf32"):
        objectives.create("ce", precision="fp16", temperature=0.2)


@pytest.mark.parametrize("objective", OBJECTIVE_NAMES)
@pytest.mark.parametrize("structure", ["entangled", "sentential"])
def test_declared_matrix_products_are_the_ones_the_loss_computes(monkeypatch, objective, structure):
    """What the throughput benchmark reads (``gemm_shapes``) = the products the terms form, term by term."""
    from strae.objectives import base, terms

    formed = []
    cross_entropy, contrastive = terms.leaf_cross_entropy, terms.symmetric_contrastive

    def spy_cross_entropy(dembedding, leaves, targets, bf16):
        formed.extend(terms.cross_entropy_gemm_shapes(leaves.shape[0], leaves.shape[1], dembedding.out_features))
        return cross_entropy(dembedding, leaves, targets, bf16)

    def spy_contrastive(a, b, temperature, bf16):
        formed.extend(terms.contrastive_gemm_shapes(a.shape[0], a.shape[1]))
        return contrastive(a, b, temperature, bf16)

    monkeypatch.setattr(base, "leaf_cross_entropy", spy_cross_entropy)
    monkeypatch.setattr(base, "symmetric_contrastive", spy_contrastive)
    config = ModelConfig(model="banyan", structure=structure, functions="diagonal", objective=objective, k=4, u=2,
                         vocab_size=VOCAB)
    # strae 0.1 induces without dropout: both StrCSE passes share their trees, so every non-terminal is paired
    model = StraeModel(config, recipes.load("strae_0_1")).train()
    ids, lengths = batch()
    model.loss(ids, lengths)
    with torch.no_grad():
        graph = model.graph(ids, lengths)
    declared = model.objective.gemm_shapes(graph, config.embedding_size, config.vocab_size)
    assert declared == formed and len(declared) >= 3
