"""Recipes: one home (src/strae/recipes.yaml) read by both `strae train` and the workflow; reference values."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import torch
import yaml

from strae import plan, recipes
from strae import train as trainer
from strae.models.config import ModelConfig
from strae.models.model import StraeModel
from test_train import make_tiny_corpus

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_corpus(tmp_path_factory.mktemp("tiny_recipes"))


def test_reference_recipes_hold_the_reference_codes_values():
    banyan = recipes.load("banyan")
    assert banyan.gate_init == (0.6, 0.9) and banyan.embedding_dropout == 0.1 and banyan.dembedding_bias
    assert banyan.loss_precision == "fp32" and banyan.induction_dropout and banyan.clip_grad_norm == 0
    assert banyan.lr == {"ce": 1e-3, "contrastive": 1e-4, "ceco": 1e-3, "strcse": 1e-3}
    selfstrae = recipes.load("selfstrae")
    assert selfstrae.temperature == 0.2 and selfstrae.clip_grad_norm == 1.0 and selfstrae.embedding_dropout == 0.2
    assert selfstrae.lr["contrastive"] == 1e-4 and selfstrae.lr["ceco"] == 1e-3
    assert selfstrae.decoder_child_order == "node_id" and selfstrae.loss_precision == "fp32"
    # paper-text variants change only what the text states
    paper = recipes.load("selfstrae_paper")
    assert paper.temperature == 1.2 and paper.lr["contrastive"] == 1e-3 and not paper.dembedding_bias
    assert paper.clip_grad_norm == selfstrae.clip_grad_norm and paper.embedding_dropout == selfstrae.embedding_dropout
    assert recipes.load("banyan_paper").embedding_dropout == 0.2


def test_overrides_are_typed_validated_and_recorded():
    resolved = recipes.resolve("banyan", [("lr.ce", 5e-4, "cli"), ("epochs", 8, "config"),
                                          ("loss_precision", "fp32", "noop")])
    assert resolved.recipe.lr["ce"] == 5e-4 and resolved.recipe.epochs == 8
    assert resolved.overrides == {"lr.ce": {"value": 5e-4, "recipe_value": 1e-3, "source": "cli"},
                                  "epochs": {"value": 8, "recipe_value": 15, "source": "config"}}
    assert recipes.parse_value("gate_init", "[0.5, 0.7]") == [0.5, 0.7]
    assert recipes.parse_value("induction_dropout", "false") is False
    with pytest.raises(ValueError, match="unknown recipe key 'lr_ce'"):
        recipes.parse_value("lr_ce", "1")
    with pytest.raises(ValueError, match=r"--set lr\.ce=\[1: not a YAML value \(.*\); e\.g\."):
        recipes.parse_value("lr.ce", "[1")
    with pytest.raises(ValueError, match="embedding_dropout must be in"):
        recipes.resolve("banyan", [("embedding_dropout", 1.5, "cli")])
    with pytest.raises(ValueError, match="loss_precision 'fp16' is not one of"):
        recipes.resolve("banyan", [("loss_precision", "fp16", "cli")])
    with pytest.raises(ValueError, match="recipe 'nope': not in"):
        recipes.load("nope")
    with pytest.raises(ValueError, match=r"lr=0.1: lr is one learning rate per objective; set one with lr.<objective>"):
        recipes.resolve("banyan", [("lr", 0.1, "--set")])


def _train_json(argv: list[str]) -> dict:
    assert trainer.train(argv) == 0
    out = Path(argv[argv.index("--out") + 1])
    return json.loads((out / "train.json").read_text())


@pytest.mark.parametrize("model,setting", [("banyan", "ce_diagonal_entangled_k4_u2"),
                                           ("selfstrae", "ceco_linear_sentential_k4_u2")])
def test_workflow_and_cli_resolve_the_same_recipe(tiny, tmp_path, model, setting):
    """The flags the workflow passes and a hand-typed `strae train --model M` give the same recipe values."""
    data_dir, tokenizer = tiny
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    common = ["--lang", "xx", "--seed", "0", "--data-dir", str(data_dir), "--tokenizer", str(tokenizer),
              "--max-steps", "1", "--collapse-cosine", "2", "--checkpoint-every-steps", "0"]
    workflow = shlex.split(plan.train_flags(config, model, setting, "en")) + common + ["--out", str(tmp_path / "w")]
    by_hand = ["--model", model, "--k", "4", "--u", "2", "--device", "cpu"] + common + ["--out", str(tmp_path / "h")]
    from_workflow, from_hand = _train_json(workflow), _train_json(by_hand)
    assert from_workflow["recipe"]["values"] == from_hand["recipe"]["values"] == recipes.load(model).values()
    assert from_workflow["recipe"]["overrides"] == from_hand["recipe"]["overrides"] == {}
    assert from_workflow["config"]["training"]["lr"] == recipes.load(model).lr_for(setting.split("_")[0])
    # and the model.pt of the run carries the recipe too (the encoder rebuilds the model from it)
    payload = torch.load(tmp_path / "h" / "model.pt", weights_only=True)
    assert payload["recipe"]["values"] == from_hand["recipe"]["values"]


def test_config_overrides_reach_train_json(tiny, tmp_path):
    """Experiment and scale overrides (Banyan Table 5's 8 epochs, the quick profile's bf16) travel as --set."""
    data_dir, tokenizer = tiny
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["scale"]["recipe_overrides"] = {"loss_precision": "bf16", "lr": {"ce": 2e-3}}
    flags = plan.train_flags(config, "banyan", "ce_diagonal_entangled_k128_u2", "af")
    assert "--set epochs='8'" in flags  # experiments.banyan_languages.recipe_overrides
    assert "epochs" not in plan.train_flags(config, "banyan", "ce_diagonal_entangled_k128_u2", "en")
    argv = shlex.split(flags) + ["--k", "4", "--device", "cpu", "--lang", "af", "--seed", "0",
                                 "--data-dir", str(data_dir), "--tokenizer", str(tokenizer),
                                 "--max-steps", "1", "--collapse-cosine", "2", "--out", str(tmp_path / "r")]
    record = _train_json(argv)
    assert record["recipe"]["values"]["epochs"] == 8 and record["recipe"]["values"]["loss_precision"] == "bf16"
    assert record["recipe"]["overrides"]["lr.ce"]["recipe_value"] == 1e-3
    assert record["config"]["training"]["lr"] == 2e-3


def test_shared_runs_with_different_overrides_are_a_config_error():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["experiments"]["banyan_channels"]["recipe_overrides"] = {"epochs": 3}
    errors = plan.check_config(config)
    assert any("experiments.banyan_channels.recipe_overrides" in e and "ce_diagonal_entangled_k128_u2" in e
               for e in errors), errors
    config["models"]["banyan"]["recipe"] = "no_such_recipe"
    assert any(e.startswith("models.banyan.recipe: recipe 'no_such_recipe'") for e in plan.check_config(config))


def test_gate_init_range_and_dembedding_bias():
    cfg = ModelConfig(model="banyan", structure="entangled", functions="diagonal", k=8, u=64, vocab_size=40)
    torch.manual_seed(0)
    gates = StraeModel(cfg).functions
    for name in ("compose_gate_left", "compose_gate_right", "decompose_gate_left", "decompose_gate_right"):
        values = getattr(gates, name)
        assert values.min() >= 0.6 and values.max() <= 0.9 and values.max() - values.min() > 0.1, name
    old = StraeModel(cfg, recipes.load("strae_0_1")).functions.compose_gate_left
    assert old.min() >= -0.1 and old.max() <= 0.1
    assert StraeModel(cfg).dembedding.bias is not None
    assert StraeModel(cfg, recipes.load("banyan_paper")).dembedding.bias is None


def test_dembedding_bias_is_trained():
    cfg = ModelConfig(model="banyan", structure="entangled", functions="diagonal", k=4, u=2, vocab_size=12)
    torch.manual_seed(0)
    model = StraeModel(cfg).train()
    before = model.dembedding.bias.detach().clone()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    ids = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 12]])
    loss, _ = model.loss(ids, torch.tensor([5, 4]))
    loss.backward()
    assert model.dembedding.bias.grad.abs().sum() > 0
    optimizer.step()
    assert not torch.equal(before, model.dembedding.bias.detach())


@pytest.mark.parametrize("recipe,expected", [("banyan", False), ("selfstrae", False), ("strae_0_1", True)])
def test_loss_precision_is_the_recipes(monkeypatch, recipe, expected):
    """fp32 CE by default (both references); bf16 only when a recipe or override asks for it."""
    from strae.objectives import base

    seen = []

    def spy(dembedding, leaves, targets, bf16=True):
        seen.append(bf16)
        return leaves.sum() * 0.0

    monkeypatch.setattr(base, "leaf_cross_entropy", spy)
    cfg = ModelConfig(model="banyan", structure="sentential", functions="diagonal", k=4, u=2, vocab_size=12)
    StraeModel(cfg, recipes.load(recipe)).loss(torch.tensor([[1, 2, 3, 4]]), torch.tensor([4]))
    assert seen == [expected]


def test_decoder_child_order_node_id_is_refused_for_entangled_structures():
    cfg = ModelConfig(model="selfstrae", structure="entangled", functions="linear", k=4, u=2, vocab_size=12)
    with pytest.raises(ValueError, match="node_id reproduces the Self-StrAE reference decoder"):
        StraeModel(cfg, recipes.load("selfstrae"))


def test_final_weights_follow_the_reference_scripts_and_old_records_still_load():
    # both reference scripts save the model only when the dev loss improves; strae <= 0.1 kept the last epoch
    assert {name: recipes.load(name).final_weights for name in recipes.names()} == {
        "banyan": "best_dev_loss", "banyan_paper": "best_dev_loss", "selfstrae": "best_dev_loss",
        "selfstrae_paper": "best_dev_loss", "strae_0_1": "last"}
    # a run recorded before the key existed (its model.pt / train.json recipe block lacks it) kept its last weights
    record = recipes.resolve("banyan").record()
    del record["values"]["final_weights"]
    assert recipes.from_record(record).final_weights == "last"
    with pytest.raises(ValueError, match="final_weights"):
        recipes.resolve("banyan", [("final_weights", "best", "test")])


def test_dev_loss_average_follows_the_reference_scripts_and_old_records_still_load():
    # both reference scripts average the dev batches' losses (every batch the same); strae <= 0.1 weighted sentences
    assert {name: recipes.load(name).dev_loss_average for name in recipes.names()} == {
        "banyan": "batches", "banyan_paper": "batches", "selfstrae": "batches", "selfstrae_paper": "batches",
        "strae_0_1": "sentences"}
    record = recipes.resolve("banyan").record()
    del record["values"]["dev_loss_average"]
    assert recipes.from_record(record).dev_loss_average == "sentences"
    with pytest.raises(ValueError, match="dev_loss_average"):
        recipes.resolve("banyan", [("dev_loss_average", "tokens", "test")])
