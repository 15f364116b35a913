"""RoBERTa-medium + SimCSE baseline: model, masking, losses, resume, word occurrences, harness round-trip."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from baselines.roberta.data import collate, mask_for_mlm, pack, padded_rows
from baselines.roberta.encoder import find_occurrences
from baselines.roberta.model import (
    RobertaShape,
    SimcseMLP,
    SpecialIds,
    build_mlm_model,
    encode,
    mean_pool,
    non_embedding_parameter_count,
    segments_from_attention,
    set_attention_implementation,
)
from baselines.roberta.simcse import simcse_loss
from baselines.roberta.train import linear_warmup_decay, mlm_loss, mlm_token_losses
from strae import runs

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


def test_collate_gives_the_padded_lists_ids():
    """The array-op collate equals the straightforward one (a Python list per sentence, padded): truncation to
    max_length, an empty sentence, and numpy id arrays of another integer type."""
    from strae.data.batching import pad_batch

    special = tiny_model()[0].special
    rng = np.random.default_rng(3)
    sentences = [rng.integers(0, special.n_pieces, n).astype(dtype) for n, dtype in
                 [(5, np.int32), (0, np.int64), (70, np.uint16), (62, np.int64), (1, np.int32)]]
    for max_length in (64, 8):
        expected, _ = pad_batch([[special.bos, *s[:max_length - 2].tolist(), special.eos] for s in sentences],
                                special.pad)
        ids, attention = collate(sentences, special, max_length)
        assert ids.dtype == torch.long and torch.equal(ids, expected)
        assert torch.equal(attention, (expected != special.pad).long())


def test_default_shape_is_banyan_table6_size():
    # Banyan Table 6: RoBERTa (M) ≈ 10M parameters without the embedding matrix and the LM head
    shape = RobertaShape(n_pieces=16)
    h, f = 256, 2048
    per_layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 2 * 2 * h  # attention, FFN, two LayerNorms
    count = non_embedding_parameter_count(build_mlm_model(shape).roberta)
    assert (shape.hidden_size, shape.num_hidden_layers, shape.num_attention_heads, shape.intermediate_size) == (
        256, 8, 8, 2048)
    assert count == 8 * per_layer + 2 * h  # + the embedding LayerNorm
    assert 10_000_000 < count < 11_000_000


def _positions_matter(model):
    for layer in model.roberta.encoder.layer:  # init std 0.02 hides the effect; make positions matter
        torch.nn.init.normal_(layer.attention.self.distance_embedding.weight, std=1.0)


def test_sdpa_attention_equals_eager_reference():
    shape, model = tiny_model()
    _positions_matter(model)
    model.eval()
    ids, attention = collate(patterned_sentences(5, seed=4), shape.special, 64)
    segments = segments_from_attention(attention)
    out = {}
    for implementation in ("eager", "sdpa"):
        set_attention_implementation(model, implementation)
        model.zero_grad()
        hidden = encode(model.roberta, ids, segments)
        (hidden * attention.unsqueeze(-1)).pow(2).sum().backward()
        out[implementation] = (hidden.detach(), model.roberta.encoder.layer[0].attention.self.query.weight.grad.clone())
    assert torch.allclose(out["sdpa"][0], out["eager"][0], atol=1e-5)
    assert torch.allclose(out["sdpa"][1], out["eager"][1], rtol=1e-4, atol=1e-5)


def test_pack_first_fit_decreasing_layout():
    special = SpecialIds(N_PIECES)
    ids, _ = collate([np.arange(n) + 1 for n in (3, 1, 2)], special, 64)  # 5, 3, 4 ids with <s> </s>
    labels = torch.where(ids < N_PIECES, ids, -100)
    rows = pack(ids, labels, special, 8)
    # decreasing: 5 (sentence 0) opens row 0, 4 (sentence 2) does not fit (9 > 8) and opens row 1, 3 fits row 0
    assert rows.segments.tolist() == [[0, 0, 0, 0, 0, 1, 1, 1], [2, 2, 2, 2, -1, -1, -1, -1]]
    assert rows.inputs[0].tolist() == [special.bos, 1, 2, 3, special.eos, special.bos, 1, special.eos]
    assert rows.labels[1, :4].tolist() == [-100, 1, 2, -100]


def test_pack_moves_every_sentence_as_slice_copies_did():
    """pack() places the ids with one gather; the rows must be those of copying each sentence's slice in turn
    (the earlier implementation, kept here as the reference), for masked batches of many lengths."""
    special = SpecialIds(N_PIECES)
    for seed in range(5):
        ids, _ = collate(patterned_sentences(40, seed=seed), special, 64)
        inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(seed))
        rows = pack(inputs, labels, special, 64)
        lengths = (inputs != special.pad).sum(1).tolist()
        expected_inputs = torch.full_like(rows.inputs, special.pad)
        expected_labels = torch.full_like(rows.labels, -100)
        for row in range(len(rows)):
            at = 0
            for i in dict.fromkeys(rows.segments[row][rows.segments[row] >= 0].tolist()):  # sentences in order
                n = lengths[i]
                expected_inputs[row, at:at + n] = inputs[i, :n]
                expected_labels[row, at:at + n] = labels[i, :n]
                at += n
        assert torch.equal(rows.inputs, expected_inputs) and torch.equal(rows.labels, expected_labels)
        assert rows.inputs.dtype == inputs.dtype and rows.labels.dtype == labels.dtype
        assert rows.segments.dtype == torch.long
        assert sorted(set(rows.segments.flatten().tolist()) - {-1}) == list(range(len(lengths)))


def test_packed_rows_give_the_padded_batch_per_sentence_losses():
    shape, model = tiny_model()
    _positions_matter(model)
    model.eval()  # dropout off: both layouts must compute the same function
    special = shape.special
    sentences = patterned_sentences(12, seed=5)
    ids, _ = collate(sentences, special, 64)
    inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(0), 0.3)
    padded, packed = padded_rows(inputs, labels, special), pack(inputs, labels, special, 32)
    assert len(packed) < len(padded) and (packed.segments.max(1).values > packed.segments[:, 0]).any()
    with torch.no_grad():
        per_sentence = []
        for rows in (padded, packed):
            losses, segments = mlm_token_losses(model, rows)
            per_sentence.append(torch.zeros(12).index_add_(0, segments, losses)
                                / torch.bincount(segments, minlength=12).clamp_min(1))
            assert len(losses) == int((labels != -100).sum())  # the same masked positions
    assert torch.allclose(per_sentence[0], per_sentence[1], atol=1e-5)
    assert per_sentence[0].std() > 0.01  # sentences differ, so a shuffled assignment would be caught


def test_gradient_accumulation_equals_one_pass():
    shape, model = tiny_model()
    model.eval()
    special = shape.special
    ids, _ = collate(patterned_sentences(10, seed=6), special, 64)
    inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(1))
    rows = pack(inputs, labels, special, 24)
    n_predicted = int((labels != -100).sum())
    grads = []
    for n in (1, 3):
        model.zero_grad()
        for chunk in rows.chunks(n):
            (mlm_token_losses(model, chunk)[0].sum() / n_predicted).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert len(rows.chunks(3)) == 3
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


def test_simcse_loss_equals_reference_with_cls_mlp():
    shape, model = tiny_model()
    model.train()  # two dropout passes: the views differ
    mlp = SimcseMLP(shape.hidden_size)
    ids, attention = collate(patterned_sentences(6, seed=7), shape.special, 64)
    torch.manual_seed(11)
    loss, _ = simcse_loss(model, ids, attention, 0.05, "cls", mlp)
    torch.manual_seed(11)  # the same dropout draws, computed by hand
    doubled = torch.cat([attention, attention])
    hidden = encode(model.roberta, torch.cat([ids, ids]), segments_from_attention(doubled))
    z = torch.tanh(hidden[:, 0] @ mlp.dense.weight.T + mlp.dense.bias)
    z1, z2 = z[:6], z[6:]
    assert (z1 - z2).abs().max() > 1e-4
    cos = (z1 / z1.norm(dim=1, keepdim=True)) @ (z2 / z2.norm(dim=1, keepdim=True)).T / 0.05
    reference = -(cos.diagonal() - cos.logsumexp(dim=1)).mean()
    assert torch.allclose(loss, reference, atol=1e-5)
    # the MLP is part of the training loss only through pooler "cls"
    model.eval()
    with torch.no_grad():
        with_mlp, _ = simcse_loss(model, ids, attention, 0.05, "cls", mlp)
        without, _ = simcse_loss(model, ids, attention, 0.05, "cls_before_pooler")
    assert not torch.allclose(with_mlp, without)


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
    _cli("train-roberta", *common, "--out", str(tmp / "straight"), "--checkpoint-every-steps", "100")
    # interrupted after its first step (zero time budget), then resumed with the same command (the first time
    # spelled --checkpoint-every, the flag's earlier name, which still parses)
    budget = subprocess.run([sys.executable, "-m", "strae.cli", "train-roberta", *common, "--out", str(tmp / "resumed"),
                             "--max-minutes", "0", "--checkpoint-every", "100"], capture_output=True, text=True)
    assert budget.returncode == 75, budget.stderr[-2000:]  # unfinished: the workflow must not count it as trained
    _cli("train-roberta", *common, "--out", str(tmp / "resumed"), "--checkpoint-every-steps", "100")
    return tmp


def test_cli_run_directory_and_resume_is_exact(tiny_run):
    straight, resumed = tiny_run / "straight", tiny_run / "resumed"
    for name in ("checkpoint.pt", "model.pt", "tokenizer.model", "train.json", "encoder.json"):
        assert (straight / name).exists(), name
    record = json.loads((straight / "train.json").read_text())
    assert record["status"] == "completed" and record["run"]["model"] == "roberta"
    assert [h["step"] for h in record["history"]] == [1, 2, 3, 4]
    assert record["config"]["cuda_graphs"] == {"mode": "off", "requested": "auto"}  # the default on a CPU
    assert record["provenance"]["determinism"] == {"deterministic": True, "device_type": "cpu"}  # CPU kernels are
    resumed_record = json.loads((resumed / "train.json").read_text())
    assert resumed_record["timings"]["resumed_from_step"] == 1
    a = torch.load(straight / "model.pt", weights_only=False)["state_dict"]
    b = torch.load(resumed / "model.pt", weights_only=False)["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)  # exact: CPU kernels, the same RNG streams resumed
    assert [h["loss"] for h in record["history"]] == [h["loss"] for h in resumed_record["history"]]


def test_refused_resume_leaves_a_finished_record_alone(tiny_run, tmp_path, mirror):
    import shutil

    run = tmp_path / "finished"
    shutil.copytree(tiny_run / "straight", run)
    before = (run / "train.json").read_bytes()
    tokenizer = mirror / "tokenizers" / "en.wiki.bpe.vs25000.model"
    result = subprocess.run([sys.executable, "-m", "strae.cli", "train-roberta", "--lang", "en", "--seed", "0",
                             "--corpus", str(tiny_run / "corpus.txt"), "--tokenizer", str(tokenizer), "--steps", "6",
                             *TINY_ARGS, "--out", str(run)], capture_output=True, text=True)
    assert result.returncode != 0 and "written for 4 steps" in result.stderr
    assert (run / "train.json").read_bytes() == before  # still "completed", untouched


def test_simcse_cli_and_harness_round_trip(tiny_run, tmp_path, repo_root):
    simcse_dir = tmp_path / "simcse"
    _cli("train-simcse", "--init", str(tiny_run / "straight"), "--seed", "0", "--out", str(simcse_dir),
         "--steps", "3", "--batch-size", "8", "--precision", "fp32", "--threads", "1", "--log-every", "1")
    record = json.loads((simcse_dir / "train.json").read_text())
    assert record["status"] == "completed" and record["run"]["model"] == "roberta_simcse"
    config = record["config"]
    assert (config["recipe"], config["train_pooler"], config["mlp_only_train"], config["eval_pooler"]) == (
        "official", "cls", True, "mean")
    assert config["batch_size"] == 8 and config["recipe_overrides"] == ["batch_size"]
    assert torch.load(simcse_dir / "model.pt", weights_only=False)["simcse_mlp"] is not None

    from strae.encode import load_encoder

    # evaluation pools as train.json says (mean, Banyan §6) unless asked; the MLP only under pooler=cls
    default = load_encoder(str(simcse_dir))
    assert default.describe()["sentence_pooling"] == "mean"
    assert default.describe()["word_vectors"]["max_occurrences"] == "all"  # Banyan: all occurrences
    vectors = {name: load_encoder(str(simcse_dir), pooler=name).encode_sentences(["the cat sat", "two dogs"])
               for name in ("mean", "cls_before_pooler", "cls")}
    assert np.allclose(vectors["mean"], default.encode_sentences(["the cat sat", "two dogs"]))
    assert not np.allclose(vectors["mean"], vectors["cls_before_pooler"])
    assert np.abs(vectors["cls"]).max() <= 1.0 and not np.allclose(vectors["cls"], vectors["cls_before_pooler"])
    with pytest.raises(SystemExit, match="no SimCSE MLP head"):
        load_encoder(str(tiny_run / "straight"), pooler="cls")

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


def test_resume_refuses_a_checkpoint_from_other_settings(tmp_path):
    from baselines.roberta.train import run_steps
    from strae.runs import RunRecord

    shape, model = tiny_model()
    special = shape.special
    ids, _ = collate(patterned_sentences(4), special, 64)
    inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(0))

    def forward_backward(step):
        loss = mlm_loss(model, pack(inputs, labels, special, 64))
        loss.backward()
        return loss.detach(), {}

    def run(signature):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay(3, 0))
        record = RunRecord()
        return run_steps(run_dir=tmp_path, record=record, model=model, optimizer=optimizer, scheduler=scheduler,
                         total_steps=3, forward_backward=forward_backward, clip_grad_norm=1.0,
                         checkpoint_every_steps=100, log_every=1, max_minutes=0, description="test",
                         signature=signature)

    assert run({"shape": {"hidden_size": 32}, "lr": 1e-3}) == "stopped"
    with pytest.raises(SystemExit, match=r"other settings \(shape differ\)"):
        run({"shape": {"hidden_size": 64}, "lr": 1e-3})
    # the seed and the data joined the signature later: a checkpoint without them resumes (compared without them),
    # one with them is held to them
    assert run({"shape": {"hidden_size": 32}, "lr": 1e-3, "seed": 1, "tokenizer_sha256": "a"}) == "stopped"
    with pytest.raises(SystemExit, match=r"other settings \(seed differ\)"):
        run({"shape": {"hidden_size": 32}, "lr": 1e-3, "seed": 2, "tokenizer_sha256": "a"})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_packed_loss_matches_cpu():
    shape, model = tiny_model()
    model.eval()
    special = shape.special
    ids, _ = collate(patterned_sentences(8, seed=8), special, 64)
    inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(2))
    rows = pack(inputs, labels, special, 32)
    with torch.no_grad():
        on_cpu = mlm_loss(model, rows)
        on_gpu = mlm_loss(model.cuda(), rows.to(torch.device("cuda")))
    assert torch.allclose(on_cpu, on_gpu.cpu(), atol=1e-4)


def test_throughput_benchmark_prints_one_line_for_both_layouts(repo_root):
    result = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "roberta_throughput.py"), "--vocab", "100",
                             "--layers", "1", "--batch-size", "6", "--steps", "1", "--max-length", "64",
                             "--threads", "1", "--device", "cpu", "--precision", "fp32"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and "none:" in lines[0] and "sentences:" in lines[0], result.stdout
    ratios = [float(x) for x in re.findall(r"ids/token (\S+)", lines[0])]
    assert len(ratios) == 2 and ratios[1] < ratios[0]  # packing wastes fewer ids than padding to the longest


def test_dev_selection_keeps_the_best_scored_weights_and_survives_a_resume(tmp_path):
    # SimCSE's script (--load_best_model_at_end): scored every N steps, a completed run ends on the best weights
    from baselines.roberta.train import DevSelection, run_steps
    from strae.runs import BEST_WEIGHTS_FILE, CHECKPOINT_FILE, RunRecord

    special = tiny_model()[0].special
    ids, _ = collate(patterned_sentences(4), special, 64)
    inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(0))
    scripted = {1: 10.0, 2: 30.0, 3: 30.0, 4: None}  # step 3 ties step 2 (the earlier wins); 4 is undefined

    def run(run_dir, max_minutes):
        _, model = tiny_model()

        def forward_backward(step):
            loss = mlm_loss(model, pack(inputs, labels, special, 64))
            loss.backward()
            return loss.detach(), {}

        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay(4, 0))
        record = RunRecord()
        dev = DevSelection(every=1, metric="scripted", score=lambda m: scripted[len(record.history)])
        status = run_steps(run_dir=run_dir, record=record, model=model, optimizer=optimizer, scheduler=scheduler,
                           total_steps=4, forward_backward=forward_backward, clip_grad_norm=1.0,
                           checkpoint_every_steps=1, log_every=1, max_minutes=max_minutes, description="test", dev=dev)
        return status, model, record

    status, model, record = run(tmp_path / "straight", None)
    assert status == "completed"
    selection = record.blocks["final_weights"]
    assert [e["score"] for e in selection["evaluations"]] == [10.0, 30.0, 30.0, None]
    assert (selection["step"], selection["score"], selection["last_step"]) == (2, 30.0, 4)
    best = torch.load(tmp_path / "straight" / BEST_WEIGHTS_FILE, weights_only=False)
    last = torch.load(tmp_path / "straight" / CHECKPOINT_FILE, weights_only=False)["model"]
    assert best["step"] == 2 and all(torch.equal(v, best["model"][k]) for k, v in model.state_dict().items())
    assert not all(torch.equal(v, last[k]) for k, v in model.state_dict().items())

    # stopped after its first step (zero time budget), then resumed: the same scores, the same weights kept
    assert run(tmp_path / "resumed", 0)[0] == "stopped"
    status, resumed, record = run(tmp_path / "resumed", None)
    assert status == "completed" and record.blocks["final_weights"]["evaluations"] == selection["evaluations"]
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in resumed.state_dict().items())


def test_a_resume_inside_a_log_window_logs_the_whole_windows_mean(tmp_path):
    """The steps since the last history entry are in the checkpoint: stopped after step 1 of a 4-step window and
    resumed, the entry at step 4 is the mean of all four losses, as without the stop (it was of steps 2-4 only)."""
    from baselines.roberta.train import run_steps
    from strae.runs import RunRecord

    special = tiny_model()[0].special
    ids, _ = collate(patterned_sentences(4), special, 64)
    inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(0))

    def run(run_dir, max_minutes):
        torch.manual_seed(0)
        _, model = tiny_model()
        losses = []

        def forward_backward(step):
            loss = mlm_loss(model, pack(inputs, labels, special, 64))
            loss.backward()
            losses.append(float(loss.detach()))
            return loss.detach(), {}

        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay(4, 0))
        record = RunRecord()
        status = run_steps(run_dir=run_dir, record=record, model=model, optimizer=optimizer, scheduler=scheduler,
                           total_steps=4, forward_backward=forward_backward, clip_grad_norm=1.0,
                           checkpoint_every_steps=100, log_every=4, max_minutes=max_minutes, description="test")
        return status, record, losses

    status, straight, losses = run(tmp_path / "straight", None)
    assert status == "completed" and [h["step"] for h in straight.history] == [4]
    assert straight.history[0]["loss"] == pytest.approx(sum(losses) / 4)
    assert run(tmp_path / "resumed", 0)[0] == "stopped"  # after its first step
    status, resumed, resumed_losses = run(tmp_path / "resumed", None)
    assert status == "completed" and len(resumed_losses) == 3 and [h["step"] for h in resumed.history] == [4]
    assert resumed.history[0]["loss"] == pytest.approx(straight.history[0]["loss"], rel=1e-5)
    assert resumed.history[0]["loss"] != pytest.approx(sum(resumed_losses) / 3, rel=1e-5)


def test_sigterm_stops_after_the_step_with_a_checkpoint_and_resumes_to_the_same_weights(tmp_path, monkeypatch):
    """RoBERTa / SimCSE's step loop under a time-boxed chunk's SIGTERM: the step under way finishes, checkpoint.pt
    is written there, train.json is left alone (a workflow deletes it as incomplete meanwhile), the command exits
    128 + 15, and rerunning it ends on an uninterrupted run's weights."""
    import os
    import signal

    from baselines.roberta.train import run_steps
    from strae.runs import CHECKPOINT_FILE, RunRecord
    from strae.runtime import StoppedBySignal

    special = tiny_model()[0].special
    ids, _ = collate(patterned_sentences(4), special, 64)
    inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(0))

    def run(run_dir, signal_at=None):
        torch.manual_seed(0)
        _, model = tiny_model()  # dropout on: the resumed RNG streams must continue where they stopped

        def forward_backward(step):
            if step == signal_at:
                os.kill(os.getpid(), signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGTERM)  # a supervisor's repeat does not escalate
            loss = mlm_loss(model, pack(inputs, labels, special, 64))
            loss.backward()
            return loss.detach(), {}

        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay(5, 0))
        status = run_steps(run_dir=run_dir, record=RunRecord(), model=model, optimizer=optimizer,
                           scheduler=scheduler, total_steps=5, forward_backward=forward_backward, clip_grad_norm=1.0,
                           checkpoint_every_steps=100, log_every=1, max_minutes=None, description="test")
        return status, model

    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(StoppedBySignal, match="stopped by SIGTERM at step 2/5") as stop:
        run(tmp_path / "stopped", signal_at=1)
    assert stop.value.exit_status == 128 + signal.SIGTERM and signal.getsignal(signal.SIGTERM) is previous
    assert torch.load(tmp_path / "stopped" / CHECKPOINT_FILE, weights_only=False)["step"] == 2
    assert not (tmp_path / "stopped" / "train.json").exists()
    status, resumed = run(tmp_path / "stopped")
    monkeypatch.setattr(runs.ProgressFile, "every_s", 0.0)  # progress.json at every step after the first
    _, straight = run(tmp_path / "straight")
    assert status == "completed"
    written = json.loads((tmp_path / "straight" / runs.PROGRESS_FILE).read_text())
    assert (written["global_step"], written["total_steps"]) == (5, 5) and written["steps_per_second"] > 0
    for name, value in straight.state_dict().items():
        assert torch.equal(resumed.state_dict()[name], value), name
    # train.json names both processes (their commits, devices, where each stopped): provenance names only the last
    sessions = json.loads((tmp_path / "stopped" / "train.json").read_text())["timings"]["sessions"]
    assert [(s["start_step"], s["end_step"], s.get("stopped_by")) for s in sessions] == [(0, 2, "SIGTERM"),
                                                                                         (2, 5, None)]
    assert all("git_sha" in s and s["device"] for s in sessions)


def test_simcse_places_its_default_dev_set_under_resources_dir(tiny_run, tmp_path, mirror):
    # without --dev-file SimCSE reads the registry's STS-B dev from --resources-dir (the config's data.resources_dir,
    # the workflow's evaluation fetch job places it there), resources -> mirror, as every other file
    resources = tmp_path / "store"
    out = tmp_path / "simcse"
    _cli("train-simcse", "--init", str(tiny_run / "straight"), "--seed", "0", "--out", str(out), "--steps", "2",
         "--batch-size", "8", "--precision", "fp32", "--threads", "1", "--dev-every", "2",
         "--resources-dir", str(resources))
    selection = json.loads((out / "train.json").read_text())["final_weights"]
    assert Path(selection["file"]).resolve().is_relative_to(resources.resolve()), selection["file"]
    assert selection["pairs"] == 1500  # STS-B dev, SentEval's sts-dev.csv


def test_simcse_scores_stsb_dev_like_its_script(tiny_run, tmp_path):
    dev_file = tmp_path / "dev.csv"
    dev_file.write_text("sent1,sent2,score\nthe cat sat on the mat,a cat sat on a mat,4.5\n"
                        "two dogs ran,the red mat,0.5\nbig blue cat,the big cat,3.0\nnine dogs,many dogs,2.5\n")
    out = tmp_path / "simcse"
    _cli("train-simcse", "--init", str(tiny_run / "straight"), "--seed", "0", "--out", str(out), "--steps", "4",
         "--batch-size", "8", "--precision", "fp32", "--threads", "1", "--dev-every", "2", "--dev-file", str(dev_file))
    record = json.loads((out / "train.json").read_text())
    selection = record["final_weights"]
    assert (selection["rule"], selection["metric"], selection["pooler"], selection["pairs"]) == (
        "best_dev", "stsb_dev_spearman", "cls_before_pooler", 4)
    assert [e["step"] for e in selection["evaluations"]] == [2, 4] and selection["last_step"] == 4
    scores = [e["score"] for e in selection["evaluations"]]
    assert all(s is None or -100 <= s <= 100 for s in scores) and any(s is not None for s in scores)
    # the kept step is the best-scoring one (the earlier step on a tie), and its score is that evaluation's
    best = max((e for e in selection["evaluations"] if e["score"] is not None), key=lambda e: (e["score"], -e["step"]))
    assert (selection["step"], selection["score"]) == (best["step"], best["score"])
    assert record["config"]["best_checkpoint_selection"]["every_steps"] == 2
    assert record["config"]["recipe_overrides"] == ["batch_size", "dev_every"]
    assert record["config"]["steps_from"] == "--steps"  # not epochs x sentences_per_epoch
    assert selection["pretokenize"] == "none"  # a text corpus: the dev sentences split as it was (not at all)
    # a malformed dev file is a clear error naming it
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\nx,y\n")
    result = subprocess.run([sys.executable, "-m", "strae.cli", "train-simcse", "--init", str(tiny_run / "straight"),
                             "--seed", "0", "--out", str(tmp_path / "bad"), "--steps", "4", "--batch-size", "8",
                             "--dev-every", "2", "--dev-file", str(bad)], capture_output=True, text=True)
    assert result.returncode != 0 and "bad.csv:1: header" in result.stderr and "sent1,sent2,score" in result.stderr


def test_cuda_determinism_record_says_when_sdpa_backward_is_not_guaranteed(monkeypatch, capsys):
    """On CUDA the trainers ask for deterministic kernels; SDPA's memory-efficient backward keeps its key splits
    (torch changes that only in strict mode): order-free for rows of <= 128 ids, said otherwise. Checked with a
    CUDA device object on a CPU (the mode is a process-wide flag, restored here)."""
    from baselines.roberta.train import SDPA_REPEATABLE_KEYS, roberta_determinism

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    flags = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
             torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
             torch.utils.deterministic.fill_uninitialized_memory)
    try:
        short = roberta_determinism(torch.device("cuda"), True, "sdpa", SDPA_REPEATABLE_KEYS)
        assert short["deterministic"] is True and short["cublas_workspace_config"] == ":4096:8"
        assert "at most 2" in short["attention_backward"] and not capsys.readouterr().err
        long = roberta_determinism(torch.device("cuda"), True, "sdpa", 2 * SDPA_REPEATABLE_KEYS)
        assert "not guaranteed repeatable" in long["attention_backward"]
        assert "--max-length 256" in capsys.readouterr().err
        assert "attention_backward" not in roberta_determinism(torch.device("cuda"), True, "eager", 512)
        assert roberta_determinism(torch.device("cuda"), False, "sdpa", 128) == {"deterministic": False,
                                                                               "device_type": "cuda"}
    finally:
        torch.use_deterministic_algorithms(flags[0], warn_only=flags[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = flags[2], flags[3]
        torch.utils.deterministic.fill_uninitialized_memory = flags[4]


def test_the_encoder_splits_text_as_its_training_corpus_was(tiny_run, tmp_path):
    """A RoBERTa run trained on a treebank-pretokenised corpus splits the text it embeds the same way (as a strae run
    does), recorded in describe(); the paper-variant files go in unchanged; an explicit option wins."""
    import shutil

    from baselines.roberta.encoder import RobertaEncoder, corpus_pretokenize
    from strae.evaluate.harness import variant_encoder_options

    run = tmp_path / "treebank_run"
    shutil.copytree(tiny_run / "straight", run)
    record = json.loads((run / "train.json").read_text())
    assert corpus_pretokenize(record["config"]) == "none"  # a text corpus: tokenised as it is
    record["config"]["corpus"] = {"kind": "tokenized", "meta": {"pretokenize": "treebank"}}
    (run / "train.json").write_text(json.dumps(record))
    encoder = RobertaEncoder(run, device="cpu")
    assert encoder.pretokenize == "treebank" and encoder.describe()["pretokenize"] == "treebank"
    raw = RobertaEncoder(run, device="cpu", pretokenize="none")
    assert encoder._encode_text(["it isn't."])[0].tolist() != raw._encode_text(["it isn't."])[0].tolist()
    assert variant_encoder_options(str(run), "paper", None) == {"pretokenize": "none"}
    # inputs no longer than training's (its relative positions beyond were never trained): MLM 128 by default
    assert encoder.max_length == record["config"]["max_length"] == 128 and encoder.describe()["max_length"] == 128
    from baselines.roberta.encoder import trained_length

    assert trained_length({"max_length": 32, "init_config": {"max_length": 128}}) == 128  # SimCSE on an MLM run
    assert trained_length({}) == 512
    assert variant_encoder_options(str(run), "official", None) == {}


def test_a_corpus_tokenised_with_another_tokenizer_is_refused_and_foreign_weights_are_named(tmp_path):
    """The corpus' own record names its tokenizer by sha256: a different model of the same size would otherwise
    pass the vocabulary check. A model.pt that is not a RoBERTa run's is named in the error."""
    import json as _json

    from baselines.roberta.data import load_corpus
    from baselines.roberta.encoder import load_weights
    from strae.data.tokenizer import load_tokenizer
    from tests.test_train import make_tiny_corpus

    data_dir, model = make_tiny_corpus(tmp_path / "data")
    tokenizer = load_tokenizer(model)
    assert len(load_corpus(str(data_dir), None, tokenizer)) > 0
    meta = _json.loads((data_dir / "train.json").read_text())
    (data_dir / "train.json").write_text(_json.dumps({**meta, "tokenizer_sha256": "0" * 64}))
    with pytest.raises(SystemExit, match="tokenised with the tokenizer of sha256 000000000000"):
        load_corpus(str(data_dir), None, tokenizer)
    foreign = tmp_path / "model.pt"
    torch.save({"shape": {"n_layers": 2, "colour": "red"}, "state_dict": {}}, foreign)
    with pytest.raises(SystemExit, match="model.pt: not the weights of a `strae train-roberta`"):
        load_weights(foreign)


def test_a_resumed_dev_selection_must_score_the_way_its_checkpoint_did(tmp_path):
    """The best checkpoint is chosen among the run's dev scores: a resume whose scores would be made another way
    (another file, pooler or pretokenisation) is refused; a checkpoint from before the dev pretokenisation was
    recorded resumes only where the dev sentences still go in raw."""
    from baselines.roberta.train import DevSelection, check_dev_settings

    def described(**settings):
        return DevSelection(every=2, metric="stsb_dev_spearman", score=lambda m: None, settings=settings).describe()

    saved = {**described(pooler="cls_before_pooler", pretokenize="treebank", file="dev.csv"), "step": 4, "score": 70.0,
             "evaluations": [{"step": 2, "score": 60.0}, {"step": 4, "score": 70.0}]}
    check_dev_settings(tmp_path, saved, described(pooler="cls_before_pooler", pretokenize="treebank", file="dev.csv"))
    with pytest.raises(SystemExit, match=r"other settings \(pooler\)"):
        check_dev_settings(tmp_path, saved, described(pooler="mean", pretokenize="treebank", file="dev.csv"))
    older = {k: v for k, v in saved.items() if k != "pretokenize"}
    check_dev_settings(tmp_path, older, described(pooler="cls_before_pooler", pretokenize="none", file="dev.csv"))
    with pytest.raises(SystemExit, match="made on raw text"):
        check_dev_settings(tmp_path, older, described(pooler="cls_before_pooler", pretokenize="treebank",
                                                      file="dev.csv"))


# ---- stops, the run's tokenizer and option checks (no mirror: a SentencePiece model trained on the spot) --------

def _tiny_mlm_args(tmp_path, tokenizer, out, *extra: str) -> list[str]:
    """`strae train-roberta` arguments of a 2-step run on make_tiny_corpus's text (in-process: no --threads, which
    would change the test process' torch setting)."""
    at = TINY_ARGS.index("--threads")
    tiny = TINY_ARGS[:at] + TINY_ARGS[at + 2:]
    return ["--lang", "en", "--seed", "0", "--corpus", str(tmp_path / "a" / "corpus.txt"), "--tokenizer",
            str(tokenizer), "--steps", "2", "--device", "cpu", *tiny, "--out", str(out), *extra]


def test_a_refused_rerun_with_another_tokenizer_keeps_the_runs_tokenizer_and_the_encoder_checks_it(tmp_path):
    """A finished run rerun with another --tokenizer is refused by the resume check: the run's tokenizer.model must
    still be the one it trained with (it used to be copied before that check). A tokenizer.model that is not the
    one train.json records is refused by the encoder, naming the file."""
    import shutil

    from baselines.roberta.encoder import RobertaEncoder
    from baselines.roberta.train import main
    from strae.io import sha256_file
    from tests.test_train import make_tiny_corpus

    _, tokenizer = make_tiny_corpus(tmp_path / "a")
    _, other = make_tiny_corpus(tmp_path / "b", seed=1)
    assert sha256_file(tokenizer) != sha256_file(other)
    run = tmp_path / "run"
    assert main(_tiny_mlm_args(tmp_path, tokenizer, run)) == 0
    kept = (run / "tokenizer.model").read_bytes()
    record = (run / "train.json").read_bytes()
    with pytest.raises(SystemExit, match="tokenizer_sha256"):
        main(_tiny_mlm_args(tmp_path, other, run))
    assert (run / "tokenizer.model").read_bytes() == kept and (run / "train.json").read_bytes() == record
    assert RobertaEncoder(run, device="cpu").tokenizer.vocab_size > 0

    shutil.copyfile(other, run / "tokenizer.model")  # what the refused rerun used to leave behind
    with pytest.raises(SystemExit, match=r"run/tokenizer\.model: sha256 .*not the tokenizer .*train\.json records"):
        RobertaEncoder(run, device="cpu")


def test_a_time_budget_stop_exits_75_with_a_checkpoint_and_no_encoder(tmp_path, capsys):
    """--max-minutes stops an unfinished run: train.json (the workflow's declared output) exists, so exit 0 would
    count it as trained; it exits 75 (EX_TEMPFAIL), says so, and the same command then finishes it."""
    from baselines.roberta.train import main
    from tests.test_train import make_tiny_corpus

    _, tokenizer = make_tiny_corpus(tmp_path / "a")
    run = tmp_path / "run"
    assert main(_tiny_mlm_args(tmp_path, tokenizer, run, "--max-minutes", "0")) == 75
    assert "time budget (--max-minutes), checkpoint written, not finished: exit 75" in capsys.readouterr().err
    assert json.loads((run / "train.json").read_text())["status"] == "running"
    assert (run / "checkpoint.pt").exists()
    assert not any((run / name).exists() for name in ("encoder.json", "model.pt", "tokenizer.model"))
    assert main(_tiny_mlm_args(tmp_path, tokenizer, run)) == 0
    assert json.loads((run / "train.json").read_text())["status"] == "completed" and (run / "encoder.json").exists()


def test_the_stop_checkpoint_is_written_while_the_signal_handlers_are_still_installed(tmp_path, monkeypatch):
    """After SIGTERM the step loop checkpoints inside StopRequest: a supervisor's second SIGTERM during that save is
    ignored, not the default handler's kill (which would leave no checkpoint)."""
    import os
    import signal

    from baselines.roberta.train import StepLoop, run_steps
    from strae.runs import RunRecord
    from strae.runtime import StoppedBySignal

    shape, model = tiny_model()
    ids, _ = collate(patterned_sentences(4), shape.special, 64)
    inputs, labels = mask_for_mlm(ids, shape.special, torch.Generator().manual_seed(0))

    def forward_backward(step):
        if step == 0:
            os.kill(os.getpid(), signal.SIGTERM)
        loss = mlm_loss(model, pack(inputs, labels, shape.special, 64))
        loss.backward()
        return loss.detach(), {}

    handlers = []
    save = StepLoop.save

    def recording_save(self, elapsed, write_record=True):
        handlers.append(signal.getsignal(signal.SIGTERM))
        save(self, elapsed, write_record)

    monkeypatch.setattr(StepLoop, "save", recording_save)
    previous = signal.getsignal(signal.SIGTERM)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, linear_warmup_decay(3, 0))
    with pytest.raises(StoppedBySignal):
        run_steps(run_dir=tmp_path, record=RunRecord(), model=model, optimizer=optimizer, scheduler=scheduler,
                  total_steps=3, forward_backward=forward_backward, clip_grad_norm=1.0, checkpoint_every_steps=100,
                  log_every=1, max_minutes=None, description="test")
    assert len(handlers) == 1  # the stop checkpoint only
    assert handlers[0] not in (signal.SIG_DFL, previous) and callable(handlers[0])
    assert signal.getsignal(signal.SIGTERM) is previous  # restored once the stop is done


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--steps", "0", "argument --steps: must be >= 1, got 0"),
    ("--checkpoint-every-steps", "0", "argument --checkpoint-every-steps/--checkpoint-every: must be >= 1, got 0"),
    ("--log-every", "-1", "argument --log-every: must be >= 1, got -1"),
    ("--batch-size", "0", "argument --batch-size: must be >= 1, got 0"),
    ("--grad-accumulation", "0", "argument --grad-accumulation: must be >= 1, got 0"),
    ("--lr", "nan", "argument --lr: must be a finite number, got nan"),
    ("--lr", "inf", "argument --lr: must be a finite number, got inf"),
    ("--lr", "0", "argument --lr: must be a finite number > 0, got 0"),
    ("--lr", "fast", "argument --lr: not a number: 'fast'"),
    ("--mask-probability", "1", "argument --mask-probability: must be in (0, 1), got 1"),
    ("--warmup-fraction", "1.5", "argument --warmup-fraction: must be in [0, 1), got 1.5"),
    ("--clip-grad-norm", "nan", "argument --clip-grad-norm: must be a finite number, got nan"),
    ("--max-minutes", "-1", "argument --max-minutes: must be a finite number >= 0, got -1"),
    ("--heads", "0", "argument --heads: must be >= 1, got 0"),
    ("--hidden", "-8", "argument --hidden: must be >= 1, got -8"),
])
def test_train_roberta_refuses_impossible_settings_naming_the_option(option, value, message, capsys):
    from baselines.roberta.train import parse_args

    with pytest.raises(SystemExit) as refused:
        parse_args(["--lang", "en", "--seed", "0", "--out", "run", f"{option}={value}"])
    assert refused.value.code == 2 and message in capsys.readouterr().err


def test_train_roberta_refuses_a_hidden_size_the_heads_do_not_divide():
    """Refused when parsed (HF's config would raise only after the corpus is loaded, as a traceback)."""
    from baselines.roberta.train import parse_args

    with pytest.raises(SystemExit, match="hidden size 250 is not a multiple of 4 attention heads"):
        parse_args(["--lang", "en", "--seed", "0", "--out", "run", "--hidden", "250", "--heads", "4"])
    assert parse_args(["--lang", "en", "--seed", "0", "--out", "run", "--hidden", "256", "--heads", "4"]).hidden == 256


def test_a_second_process_on_the_run_directory_is_refused(tmp_path):
    """Two RoBERTa/SimCSE trainers on one --out would interleave checkpoints and train.json: start_record takes the
    run-directory lock every trainer takes, and holds it on args until the command ends."""
    import argparse

    from baselines.roberta.train import start_record
    from strae.runs import lock_run_dir

    out = tmp_path / "run"
    out.mkdir()
    held = lock_run_dir(out, "strae train-roberta")  # noqa: F841 - the other process
    args = argparse.Namespace(out=out, determinism={})
    with pytest.raises(SystemExit, match="another `strae train-roberta` process is training"):
        start_record(args, [], tmp_path / "t.model", language="xx", model="roberta", setting="s", seed=0,
                     config={})
    assert not (out / "train.json").exists()
