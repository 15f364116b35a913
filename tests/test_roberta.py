"""RoBERTa-medium + SimCSE baseline: model, masking, losses, resume, word occurrences, harness round-trip."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from baselines.roberta.data import batch_indices, collate, mask_for_mlm, pack, padded_rows
from baselines.roberta.encoder import find_occurrences
from baselines.roberta.model import (RobertaShape, SimcseMLP, SpecialIds, build_mlm_model, encode, mean_pool,
                                     non_embedding_parameter_count, segments_from_attention,
                                     set_attention_implementation)
from baselines.roberta.simcse import simcse_loss
from baselines.roberta.train import linear_warmup_decay, mlm_loss, mlm_token_losses

N_PIECES = 40


def tiny_model(seed: int = 0):
    torch.manual_seed(seed)
    shape = RobertaShape(n_pieces=N_PIECES, num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                         intermediate_size=64, max_position_embeddings=64)
    return shape, build_mlm_model(shape)


def patterned_sentences(n: int, seed: int = 0) -> list[np.ndarray]:
    """Sentences with learnable structure: an arithmetic progression of piece ids (mod N_PIECES)."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(N_PIECES) + np.arange(rng.integers(6, 14)) * rng.integers(1, 3)) % N_PIECES
            for _ in range(n)]


def test_special_ids_follow_pad():
    special = SpecialIds(25000)
    assert (special.pad, special.mask, special.bos, special.eos, special.vocab_size) == (25000, 25001, 25002, 25003,
                                                                                         25004)


def test_relative_positions_replace_absolute_and_ignore_padding():
    shape, model = tiny_model()
    names = [n for n, _ in model.named_parameters()]
    assert not any("position_embeddings" in n for n in names)  # relative only, as transformers 4.x did
    assert sum("distance_embedding" in n for n in names) == shape.num_hidden_layers
    model.eval()
    for layer in model.roberta.encoder.layer:  # init std 0.02 hides the effect; make positions matter
        torch.nn.init.normal_(layer.attention.self.distance_embedding.weight, std=1.0)
    special = shape.special
    ids, attention = collate([np.arange(5), np.arange(9)], special, 64)
    with torch.no_grad():
        batched = model.roberta(input_ids=ids, attention_mask=attention).last_hidden_state
        alone = model.roberta(input_ids=ids[:1, :7], attention_mask=attention[:1, :7]).last_hidden_state
        shifted = torch.roll(ids[1:, :11], 1)  # same tokens, different order
        other = model.roberta(input_ids=shifted, attention_mask=attention[1:, :11]).last_hidden_state
    assert torch.allclose(batched[0, :7], alone[0], atol=1e-5)
    # without positions the encoder would be permutation-equivariant; relative positions must break that
    assert (other - torch.roll(batched[1:, :11], 1, dims=1)).abs().max() > 1e-3


def test_masking_rates_and_specials():
    special = SpecialIds(N_PIECES)
    ids, _ = collate(patterned_sentences(400), special, 64)
    inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(0), 0.15)
    pieces = ids < N_PIECES
    chosen = labels != -100
    assert not chosen[~pieces].any()
    assert 0.13 < chosen.sum() / pieces.sum() < 0.17
    assert torch.equal(labels[chosen], ids[chosen])
    to_mask = (inputs[chosen] == special.mask).float().mean()
    kept = (inputs[chosen] == ids[chosen]).float().mean()
    assert 0.75 < to_mask < 0.85 and 0.07 < kept < 0.16  # 10% kept + random draws that hit the same piece
    assert torch.equal(inputs[~chosen], ids[~chosen])


def test_batches_are_a_function_of_seed_and_step():
    first = batch_indices(100, 32, seed=3, step=4)
    assert np.array_equal(first, batch_indices(100, 32, seed=3, step=4))
    epoch = np.concatenate([batch_indices(100, 32, seed=3, step=s) for s in range(3)])
    assert len(set(epoch.tolist())) == 96  # an epoch visits distinct sentences


def test_schedule_warmup_and_decay():
    factor = linear_warmup_decay(100, 10)
    assert factor(0) == 0 and factor(5) == 0.5 and factor(10) == 1 and factor(55) == 0.5 and factor(100) == 0


def _train(model, loss_fn, steps: int, lr: float) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for step in range(steps):
        loss = loss_fn(step)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_tiny_roberta_mlm_loss_drops():
    shape, model = tiny_model()
    # a few repeated sentences over a quarter of the vocabulary: learnable within a few dozen steps
    templates = [np.array(t) for t in ([1, 2, 3, 4, 5, 6], [7, 8, 9, 1, 2], [3, 5, 7, 9, 2, 4, 6], [8, 6, 4, 2])]
    special = shape.special

    def loss_fn(step):
        ids, attention = collate([templates[i % 4] for i in range(16)], special, 64)
        inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(step))
        return mlm_loss(model, pack(inputs, labels, special, 64))

    losses = _train(model, loss_fn, 30, 3e-3)
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 1.0


def test_simcse_loss_drops():
    shape, model = tiny_model()
    torch.manual_seed(1)
    ids, attention = collate(patterned_sentences(16, seed=2), shape.special, 64)
    losses = _train(model, lambda step: simcse_loss(model, ids, attention, 0.05)[0], 15, 1e-3)
    assert losses[-1] < losses[0] - 0.3


def test_mean_pool_ignores_padding():
    hidden = torch.tensor([[[1.0], [3.0], [100.0]]])
    assert mean_pool(hidden, torch.tensor([[1, 1, 0]])).item() == 2.0


def test_find_occurrences_whole_words_only():
    # pieces: 0 "▁a", 1 "b", 2 "▁c"; word = [0, 1] ("ab") must be followed by a word start or sentence end
    is_word_start = np.array([True, False, True] + [True] * 4)
    sentences = [[0, 1, 2], [0, 1, 1], [2, 0, 1], [0, 2]]
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sentences])])
    ids = np.concatenate(sentences).astype(np.int32)
    order = np.argsort(ids, kind="stable")
    found = find_occurrences([0, 1], ids, offsets, order, ids[order], is_word_start)
    assert sorted(found) == [(0, 0), (2, 1)]  # (1, 0) continues with a non-boundary piece; sentence 3 lacks "b"


# ---- CLI: resume and harness round-trip (need the BPEmb tokenizer from the mirror) ----------------------------

TINY_ARGS = ["--layers", "2", "--heads", "2", "--hidden", "32", "--ffn", "64", "--batch-size", "8",
             "--lr", "1e-3", "--precision", "fp32", "--threads", "1", "--log-every", "1"]


def _cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "strae.cli", *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, mirror):
    tmp = tmp_path_factory.mktemp("roberta")
    corpus = tmp / "corpus.txt"
    lines = [f"the {a} cat sat on the {b} mat near {c} dogs" for a, b, c in
             zip(["big", "small", "red", "old"] * 10, ["blue", "green", "warm"] * 14, ["two", "nine", "many"] * 14)]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tokenizer = mirror / "tokenizers" / "en.wiki.bpe.vs25000.model"
    common = ["--lang", "en", "--seed", "0", "--corpus", str(corpus), "--tokenizer", str(tokenizer), "--steps", "4",
              *TINY_ARGS]
    _cli("train-roberta", *common, "--out", str(tmp / "straight"), "--checkpoint-every", "100")
    # interrupted after its first step (zero time budget), then resumed with the same command
    _cli("train-roberta", *common, "--out", str(tmp / "resumed"), "--max-minutes", "0", "--checkpoint-every", "100")
    _cli("train-roberta", *common, "--out", str(tmp / "resumed"), "--checkpoint-every", "100")
    return tmp


def test_cli_run_directory_and_resume_is_exact(tiny_run):
    straight, resumed = tiny_run / "straight", tiny_run / "resumed"
    for name in ("checkpoint.pt", "model.pt", "tokenizer.model", "train.json", "encoder.json"):
        assert (straight / name).exists(), name
    record = json.loads((straight / "train.json").read_text())
    assert record["status"] == "completed" and record["run"]["model"] == "roberta"
    assert [h["step"] for h in record["history"]] == [1, 2, 3, 4]
    resumed_record = json.loads((resumed / "train.json").read_text())
    assert resumed_record["timings"]["resumed_from_step"] == 1
    a = torch.load(straight / "model.pt", weights_only=False)["state_dict"]
    b = torch.load(resumed / "model.pt", weights_only=False)["state_dict"]
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert [h["loss"] for h in record["history"]] == pytest.approx([h["loss"] for h in resumed_record["history"]])


def test_simcse_cli_and_harness_round_trip(tiny_run, tmp_path, repo_root):
    simcse_dir = tmp_path / "simcse"
    _cli("train-simcse", "--init", str(tiny_run / "straight"), "--seed", "0", "--out", str(simcse_dir),
         "--steps", "3", "--batch-size", "8", "--precision", "fp32", "--threads", "1", "--log-every", "1")
    record = json.loads((simcse_dir / "train.json").read_text())
    assert record["status"] == "completed" and record["run"]["model"] == "roberta_simcse"

    from strae.encode import load_encoder

    encoder = load_encoder(str(simcse_dir), word_occurrences="3")
    words = encoder.encode_words(["cat", "mat", "zebra", "cat"])
    assert words.shape == (4, 32) and np.isfinite(words).all()
    assert np.array_equal(words[0], words[3])
    stats = encoder.describe()["word_vectors"]
    assert stats["from_context"] == 2 and stats["fallback_alone"] == 1  # "zebra" never occurs in the corpus
    sentences = encoder.encode_sentences(["the cat sat", "", "two dogs"])
    assert np.isnan(sentences[1]).all() and np.isfinite(sentences[[0, 2]]).all()

    out = tmp_path / "eval.json"
    result = subprocess.run([sys.executable, "-m", "strae.cli", "evaluate", "--model", str(simcse_dir), "--lang", "en",
                             "--variant", "paper", "--tasks", "simlex,sts12", "--out", str(out), "--quiet",
                             "--encoder-option", "word_occurrences=2"],
                            cwd=repo_root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    evaluation = json.loads(out.read_text())
    assert evaluation["run"]["model"] == "roberta_simcse"
    assert set(evaluation["tasks"]) == {"simlex", "sts12"}
    assert all(-100 <= task["score"] <= 100 for task in evaluation["tasks"].values())
