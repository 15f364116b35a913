"""GloVe baseline: exact co-occurrence weights, objective/gradients, training signal, encoder behaviour."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
import yaml

from baselines.glove.cooccurrence import count_cooccurrences, word_tokenize, words_corpus
from baselines.glove.encoder import GloveEncoder, load_run, stopword_set
from baselines.glove.model import GloveModel, RowOptimizer, glove_weight, sum_by_row
from strae.io import read_json, write_json


# -- tokenisation and counting ----------------------------------------------------------------------
def test_word_tokenize_splits_edge_punctuation_only():
    assert word_tokenize("The cat's toy, (really) U.S. made!") == [
        "the", "cat's", "toy", ",", "(", "really", ")", "u.s", ".", "made", "!",
    ]


def test_a_treebank_run_reads_ptb_clitics_as_words_in_training_and_evaluation(tmp_path):
    """--pretokenize treebank: training lines are split as the Treebank tokeniser splits them, and its clitics stay
    words (`'s`, `n't`) instead of losing their apostrophe; the encoder reads text the same way, and the paper
    variant's already PTB-tokenised files (pretokenize none) keep their clitics too."""
    from baselines.glove.cooccurrence import words_of
    from baselines.glove.train import main
    from strae.evaluate.harness import variant_encoder_options

    assert word_tokenize("a woman 's hat is n't here") == ["a", "woman", "'", "s", "hat", "is", "n't", "here"]
    assert words_of("a woman 's hat", "none", "treebank") == ["a", "woman", "'s", "hat"]
    assert words_of("The woman's hat isn't here.", "treebank") == [
        "the", "woman", "'s", "hat", "is", "n't", "here", "."]
    # the Treebank tokeniser's bracket, dash and ellipsis tokens stay whole (the plain split peels them apart)
    assert words_of("He left (then) -- sadly...", "treebank") == [
        "he", "left", "-lrb-", "then", "-rrb-", "--", "sadly", "..."]
    assert word_tokenize("-LRB- a -RRB- --") == ["-", "lrb", "-", "a", "-", "rrb", "-", "-", "-"]
    corpus = tmp_path / "train.txt"
    corpus.write_text("The woman's hat isn't red.\nThe man's hat is red.\n" * 20, encoding="utf-8")
    out = tmp_path / "run"
    assert main(["--lang", "en", "--seed", "0", "--corpus", str(corpus), "--out", str(out), "--dim", "4",
                 "--epochs", "1", "--min-count", "1", "--window", "2", "--pretokenize", "treebank"]) == 0
    record = json.loads((out / "train.json").read_text())
    assert record["config"]["pretokenize"] == "treebank" and record["run"]["setting"] == "words_w2_d4_treebank"
    vocab = set(json.loads((out / "vocab.json").read_text())["tokens"])
    assert {"'s", "n't", "woman", "is"} <= vocab and "woman's" not in vocab and "s" not in vocab
    encoder = load_run(out)
    assert encoder.describe()["pretokenize"] == "treebank" and encoder._words("The woman's hat") == [
        "the", "woman", "'s", "hat"]
    # the paper variant's PTB files go through the treebank tokeniser too, as the training lines did ('s unchanged)
    assert variant_encoder_options(str(out), "paper", None) == {}
    assert encoder._words("the woman 's hat (red)") == encoder._words("The woman's hat (red)")
    paper = load_run(out, pretokenize="none")
    assert paper._words("the woman 's hat") == ["the", "woman", "'s", "hat"]
    # a mid-training export keeps the run's pretokenisation (not the export command's default)
    assert main(["--lang", "en", "--seed", "0", "--out", str(out), "--export-checkpoint", str(tmp_path / "snap")]) == 0
    assert json.loads((tmp_path / "snap" / "encoder.json").read_text())["pretokenize"] == "treebank"
    with pytest.raises(SystemExit, match="--pretokenize treebank: splits the lines of --tokenization words"):
        main(["--lang", "en", "--seed", "0", "--out", str(tmp_path / "sub"), "--tokenization", "subword",
              "--pretokenize", "treebank"])


def test_cooccurrence_weights_are_exact_on_a_hand_checkable_corpus():
    # ids: a=0 b=1 c=2; line 1 "a b c a", line 2 "b c". Window 2, weight 1/distance, symmetric.
    lines = [np.array([0, 1, 2, 0]), np.array([1, 2])]
    matrix = count_cooccurrences(lines, vocab_size=3, window=2, chunk_tokens=3).toarray()
    expected = np.zeros((3, 3))

    def add(i, j, weight):
        expected[i, j] += weight
        expected[j, i] += weight

    # line 1: d=1 pairs (a,b) (b,c) (c,a); d=2 pairs (a,c) (b,a); (a, a) is 3 apart: outside the window
    add(0, 1, 1.0), add(1, 2, 1.0), add(2, 0, 1.0), add(0, 2, 0.5), add(1, 0, 0.5)
    add(1, 2, 1.0)  # line 2; windows never cross the line break (c of line 1 and b of line 2)
    np.testing.assert_allclose(matrix, expected)
    # X[a,b] = 1 (d=1) + 1/2 (b..a, d=2); X[a,c] = 1/2 + 1; X[b,c] = 1 (line 1) + 1 (line 2)
    assert matrix[0, 1] == pytest.approx(1.5) and matrix[0, 2] == pytest.approx(1.5)
    assert matrix[1, 2] == pytest.approx(2.0) and matrix[2, 1] == pytest.approx(2.0) and matrix[0, 0] == 0.0


def test_cooccurrence_self_pairs_and_chunking_do_not_change_counts():
    rng = np.random.default_rng(0)
    lines = [rng.integers(0, 7, size=rng.integers(1, 15)) for _ in range(40)]
    one_chunk = count_cooccurrences(lines, 7, window=10, chunk_tokens=10**9).toarray()
    many_chunks = count_cooccurrences(lines, 7, window=10, chunk_tokens=5).toarray()
    np.testing.assert_allclose(one_chunk, many_chunks)
    # brute force, reference definition
    brute = np.zeros((7, 7))
    for line in lines:
        for i in range(len(line)):
            for j in range(i + 1, min(i + 11, len(line))):
                brute[line[i], line[j]] += 1.0 / (j - i)
                brute[line[j], line[i]] += 1.0 / (j - i)
    np.testing.assert_allclose(one_chunk, brute)


def test_words_corpus_drops_rare_words_before_windowing():
    corpus, vocab = words_corpus(["a b rare a", "b a"], min_count=2)
    assert vocab.tokens == ["a", "b"] and vocab.counts.tolist() == [3, 2]
    assert [line.tolist() for line in corpus.lines()] == [[0, 1, 0], [1, 0]]
    matrix = count_cooccurrences(corpus.lines(), len(vocab), window=1).toarray()
    # "rare" removed, so the two a's of line 1 are 2 apart: no (a, a) pair at window 1
    np.testing.assert_allclose(matrix, [[0.0, 3.0], [3.0, 0.0]])


# -- objective ----------------------------------------------------------------------------------
def test_weighting_function():
    np.testing.assert_allclose(glove_weight(np.array([1.0, 50.0, 100.0, 500.0])),
                               [0.01**0.75, 0.5**0.75, 1.0, 1.0])


def test_closed_form_gradients_match_autograd():
    model = GloveModel(6, 4, generator=torch.Generator().manual_seed(0))
    rows, cols = torch.tensor([0, 1, 1, 5]), torch.tensor([2, 3, 3, 0])
    log_counts, weights = torch.tensor([0.1, 1.0, 1.0, -0.5]), torch.tensor([0.2, 1.0, 1.0, 0.5])
    loss, grad_word, grad_context = model.loss_and_gradients(rows, cols, log_counts, weights)
    model.loss(rows, cols, log_counts, weights).backward()
    assert float(loss) == pytest.approx(model.loss(rows, cols, log_counts, weights).item())
    summed = torch.zeros_like(model.word).index_add_(0, rows, grad_word)
    torch.testing.assert_close(summed, model.word.grad)
    summed = torch.zeros_like(model.context).index_add_(0, cols, grad_context)
    torch.testing.assert_close(summed, model.context.grad)


def test_row_adam_matches_torch_adam_on_touched_rows():
    table = torch.randn(5, 3)
    reference = table.clone().requires_grad_(True)
    reference_opt = torch.optim.Adam([reference], lr=0.1)
    optimizer = RowOptimizer([table], "adam", lr=0.1)
    rows = torch.tensor([1, 3, 1])
    for _ in range(3):  # every step touches rows 1 and 3 only, so lazy Adam == dense Adam on them
        grads = torch.randn(3, 3)
        optimizer.begin_step()
        optimizer.step(0, rows, grads)
        reference_opt.zero_grad()
        reference.grad = torch.zeros(5, 3).index_add_(0, rows, grads)
        reference_opt.step()
    torch.testing.assert_close(table[[1, 3]], reference.detach()[[1, 3]])
    unique, sums = sum_by_row(torch.tensor([4, 2, 4]), torch.ones(3, 2))
    assert unique.tolist() == [2, 4] and sums.tolist() == [[1.0, 1.0], [2.0, 2.0]]


def _toy_corpus(path, n_lines=1500, seed=0):
    rng = random.Random(seed)
    animals, tools = ["cat", "dog", "horse", "cow"], ["hammer", "saw", "drill", "wrench"]
    lines = []
    for i in range(n_lines):
        if i % 2:
            lines.append(f"the {rng.choice(animals)} eats grass and the {rng.choice(animals)} sleeps in the barn .")
        else:
            lines.append(f"a {rng.choice(tools)} cuts wood , the {rng.choice(tools)} hangs in the workshop .")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """A tiny but real training run through the CLI entry point."""
    from baselines.glove.train import main

    base = tmp_path_factory.mktemp("glove")
    corpus = _toy_corpus(base / "train.txt")
    out = base / "run"
    argv = ["--lang", "en", "--seed", "0", "--out", str(out), "--corpus", str(corpus), "--dim", "16",
            "--epochs", "30", "--batch-size", "32", "--min-count", "1", "--lr", "0.05", "--window", "5"]
    assert main(argv) == 0
    return out, argv


def test_training_loss_decreases_and_related_words_are_closer(toy_run):
    out, _ = toy_run
    train = json.loads((out / "train.json").read_text())
    assert train["status"] == "completed" and train["run"]["model"] == "glove"
    losses = [h["loss"] for h in train["history"]]
    assert len(losses) == 30 and losses[-1] < 0.5 * losses[0]
    encoder = load_run(out)
    cat, dog, hammer, saw = encoder.encode_words(["cat", "dog", "hammer", "saw"])

    def cos(a, b):
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    assert cos(cat, dog) > cos(cat, hammer) + 0.2
    assert cos(hammer, saw) > cos(saw, dog) + 0.2


def test_completed_run_is_not_retrained_and_resume_continues(toy_run, tmp_path):
    from baselines.glove.train import main

    out, argv = toy_run
    # a default (raw lines) run's config has no pretokenize key: the config runs before the setting wrote, which
    # therefore resume and count as completed
    assert "pretokenize" not in json.loads((out / "train.json").read_text())["config"]
    before = (out / "vectors.bin").read_bytes()
    assert main(argv) == 0  # already completed: nothing changes
    assert (out / "vectors.bin").read_bytes() == before
    # the stop-word list's language is an evaluation label: a completed run takes a new one into its encoder.json
    # (the workflow reruns the job when languages.<lang>.stopwords_language changes), its vectors untouched
    assert main(argv + ["--stopwords-language", "de"]) == 0
    assert json.loads((out / "encoder.json").read_text())["stopwords_language"] == "de"
    assert load_run(out, stopwords="remove").describe()["stopword_list"] == "stopwordsiso:de"
    assert main(argv) == 0 and json.loads((out / "encoder.json").read_text())["stopwords_language"] == "en"
    assert (out / "vectors.bin").read_bytes() == before
    # resume: a finished 2-epoch run asked for 4 epochs continues from its checkpoint and ends exactly
    # where an uninterrupted 4-epoch run ends (shuffles depend on (seed, epoch) only)
    corpus = out.parent / "train.txt"
    common = ["--lang", "en", "--seed", "1", "--corpus", str(corpus), "--dim", "8", "--batch-size", "64",
              "--min-count", "1", "--window", "3"]
    assert main(common + ["--out", str(tmp_path / "full"), "--epochs", "4"]) == 0
    assert main(common + ["--out", str(tmp_path / "part"), "--epochs", "2"]) == 0
    # a mid-training snapshot is loadable and labelled as such
    assert main(common + ["--out", str(tmp_path / "part"), "--export-checkpoint", str(tmp_path / "snap")]) == 0
    snapshot = json.loads((tmp_path / "snap" / "train.json").read_text())
    assert snapshot["status"] == "running" and snapshot["snapshot"]["epochs_done"] == 2
    two_epochs = load_run(tmp_path / "snap").encode_words(["cat"])
    assert main(common + ["--out", str(tmp_path / "part"), "--epochs", "4"]) == 0
    assert len(json.loads((tmp_path / "part" / "train.json").read_text())["history"]) == 4
    full = load_run(tmp_path / "full").encode_words(["cat", "saw"])
    resumed = load_run(tmp_path / "part").encode_words(["cat", "saw"])
    np.testing.assert_allclose(full, resumed, rtol=1e-5, atol=1e-6)
    assert not np.allclose(two_epochs, resumed[:1])
    # another setting, or fewer epochs than trained, is refused before anything in the directory changes (a
    # changed --lr used to drop the finished run's manifest and rewrite its train.json, then refuse)
    part = tmp_path / "part"
    files = {path.name: path.read_bytes() for path in part.iterdir() if path.is_file()}
    for extra, why in ((["--epochs", "6", "--lr", "0.01"], "made with different lr"),
                       (["--epochs", "3"], "trained 4 epochs, past this command's --epochs 3"),
                       (["--epochs", "4", "--seed", "2"], "made with different seed")):
        with pytest.raises(SystemExit, match=why):
            main([*common, "--out", str(part), *extra])
        assert {path.name: path.read_bytes() for path in part.iterdir() if path.is_file()} == files


# -- encoder ------------------------------------------------------------------------------------
class _Vectors:
    """The slice of gensim's KeyedVectors the encoder uses."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}
        self.key_to_index = {k: i for i, k in enumerate(table)}
        self.vector_size = 2

    def __getitem__(self, key):
        return self.table[key]


def test_sentence_is_exact_mean_of_word_vectors_and_oov_is_nan():
    vectors = _Vectors({"the": [1, 1], "cat": [2, 0], "sat": [0, 4], ".": [3, 3]})
    encoder = GloveEncoder(vectors)
    out = encoder.encode_sentences(["The cat sat.", "cat unknownword", "qqq zzz"])
    np.testing.assert_allclose(out[0], [(1 + 2 + 0 + 3) / 4, (1 + 0 + 4 + 3) / 4])
    np.testing.assert_allclose(out[1], [2, 0])  # OOV words are skipped, not zeros
    assert np.isnan(out[2]).all()
    words = encoder.encode_words(["Cat", "dog"])
    np.testing.assert_allclose(words[0], [2, 0])
    assert np.isnan(words[1]).all()


def test_stopword_removal_uses_the_language_list():
    stop = stopword_set("en")
    assert {"the", "and", "of"} <= stop and "cat" not in stop
    vectors = _Vectors({"the": [100, 100], "cat": [2, 0], "sat": [0, 4]})
    plain = GloveEncoder(vectors, info={"setting": "words_w10_d2"})
    removed = GloveEncoder(vectors, stopwords=stop, info={"setting": "words_w10_d2"})
    np.testing.assert_allclose(removed.encode_sentences(["the cat sat"])[0], [1, 2])
    assert not np.allclose(plain.encode_sentences(["the cat sat"])[0], [1, 2])
    assert np.isnan(removed.encode_sentences(["the and of"])).all()  # nothing left -> no vector
    assert removed.run_info()["setting"] == plain.run_info()["setting"] == "words_w10_d2"  # the run's own label
    with pytest.raises(SystemExit, match="stopwords_language"):
        stopword_set("xx-not-a-language")


def test_sklearn_stopword_list_is_words_only():
    """stopword_list=sklearn (config's stopword_rm): scikit-learn's English list, words only — GloVe here has vectors
    for punctuation tokens, which the paper's row evidently kept (reproductions/glove-en-cpu-2026-11-24)."""
    stop = stopword_set("en", "sklearn")
    assert len(stop) == 318 and {"the", "and", "of", "however"} <= stop
    assert all(any(c.isalpha() for c in word) for word in stop) and "." not in stop
    assert stop != stopword_set("en", "iso")
    with pytest.raises(SystemExit, match="stopword_list=nltk"):
        stopword_set("en", "nltk")
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert stop == frozenset(ENGLISH_STOP_WORDS)  # read from its module file, as the public import gives it


def test_a_stop_word_list_of_another_language_is_refused(repo_root, monkeypatch):
    """scikit-learn's list is English: asked for another language's run it would remove the wrong words silently;
    a code stopwordsiso does not know has no list at all. Both said before any evaluation (check_config too)."""
    from baselines.glove.encoder import stopword_list_error
    from strae.plan import check_config

    monkeypatch.chdir(repo_root)  # the config's relative paths
    assert stopword_list_error("en", "sklearn") is None and stopword_list_error("af", "iso") is None
    assert "another language's stop-words" in stopword_list_error("af", "sklearn")
    with pytest.raises(SystemExit, match="stopwords_language='af'.*use stopword_list=iso"):
        stopword_set("af", "sklearn")
    assert "stopwordsiso has no stop-word list for 'mar'" in stopword_list_error("mar", "iso")
    assert stopword_list_error("en_wiki", "sklearn") is None  # nothing to compare with: not refused
    config = yaml.safe_load((repo_root / "config/config.yaml").read_text(encoding="utf-8"))
    glove = config["baselines"]["glove"]
    glove.update(enabled=True, languages=list(config["languages"]),
                 eval_options={"plain": [], "stopword_rm": ["stopwords=remove"]})
    # Amharic: stopwordsiso has no list (so the shipped config evaluates GloVe in English only)
    assert [e for e in check_config(config) if "stopword" in e] == [
        "baselines.glove.eval_options.stopword_rm for language 'am' (languages.am.stopwords_language: 'am'): "
        "stopwordsiso has no stop-word list for 'am' (set languages.<lang>.stopwords_language, or --encoder-option "
        "stopwords_language=CODE, to a stopwordsiso code)"]
    glove["languages"] = [lang for lang in config["languages"] if lang != "am"]
    assert not [e for e in check_config(config) if "stopword" in e]
    lang = next(lang for lang, block in config["languages"].items() if "stopwords_language" not in block
                and lang != "am")
    config["languages"][lang]["stopwords_language"] = "mar"
    errors = [e for e in check_config(config) if "stopword" in e]
    assert len(errors) == 1 and errors[0].startswith(
        f"baselines.glove.eval_options.stopword_rm for language {lang!r} (languages.{lang}.stopwords_language: "
        "'mar'): stopwordsiso has no stop-word list for 'mar'")
    del config["languages"][lang]["stopwords_language"]
    glove["eval_options"]["stopword_rm"].append("stopword_list=sklearn")  # the English list for every language
    errors = [e for e in check_config(config) if "stopword" in e]
    assert len(errors) == len(glove["languages"]) - 1 and all("another language's" in e for e in errors)
    config["baselines"]["glove"]["enabled"] = False  # a disabled baseline is not evaluated: not checked
    assert not [e for e in check_config(config) if "stopword" in e]


def test_load_run_rejects_unknown_options(toy_run):
    out, _ = toy_run
    from strae.encode import load_encoder

    with pytest.raises(SystemExit, match="--encoder-option pooling: unknown for glove encoders"):
        load_encoder(str(out), pooling="max")
    with pytest.raises(SystemExit, match="stopwords=drop"):
        load_run(out, stopwords="drop")
    assert load_run(out, stopwords="remove").describe()["stopwords"] == "remove"
    with pytest.raises(SystemExit, match="stopword_list=snowball"):
        load_run(out, stopwords="remove", stopword_list="snowball")
    described = load_run(out, stopwords="remove", stopword_list="sklearn").describe()
    assert described["stopword_list"].startswith("sklearn ") and described["n_stopwords"] == 318


@pytest.mark.mirror
def test_encoder_round_trips_through_the_harness(toy_run, mirror, monkeypatch, tmp_path, repo_root):
    """`strae evaluate --model RUN_DIR [--encoder-option stopwords=remove]` on real eval files."""
    from strae.evaluate import harness

    out_dir, _ = toy_run
    monkeypatch.setenv("STRAE_DATA_MIRROR", str(mirror))
    monkeypatch.chdir(repo_root)
    docs = {}
    for label, options in (("plain", ["--device", "cpu"]), ("stopword_rm", ["--encoder-option", "stopwords=remove",
                                                                         "--encoder-option", "stopword_list=sklearn"])):
        out = tmp_path / f"{label}.json"
        assert harness.main(["--model", str(out_dir), "--lang", "en", "--variant", "paper", "--out", str(out),
                             "--tasks", "sts12,simlex", "--resources-dir", str(tmp_path / "resources"),
                             "--quiet", *options]) == 0
        docs[label] = json.loads(out.read_text())
    plain, removed = docs["plain"], docs["stopword_rm"]
    assert plain["run"]["model"] == "glove" and plain["run"]["status"] == "completed"
    # one run, two evaluations: the run's setting, and the evaluation's label that makes the table row SETTING@LABEL
    assert removed["run"]["setting"] == plain["run"]["setting"] == "words_w5_d16"
    # the evaluation setting is recorded with the config's name for it (baselines.glove.eval_options)
    assert removed["evaluation"] == {"label": "stopword_rm",
                                     "options": {"stopwords": "remove", "stopword_list": "sklearn"}}
    assert plain["evaluation"] == {"label": None, "options": {}}  # --device is not part of the setting
    assert removed["encoder"]["stopwords"] == "remove" and plain["encoder"]["stopwords"] == "keep"
    # the toy vocabulary knows "the", "and", "in", ...: most STS sentences get a vector until stop-words go
    sts_plain, sts_removed = plain["tasks"]["sts12"], removed["tasks"]["sts12"]
    assert sts_plain["n_pairs"] == sts_removed["n_pairs"] == 3108
    assert sts_plain["n_oov"] < sts_removed["n_oov"] <= sts_removed["n_pairs"]
    assert plain["tasks"]["simlex"]["n_oov"] > 900  # toy vocabulary: nearly every SimLex pair is OOV
    assert plain["encoder"]["device"] == "cpu (numpy)"  # --device is accepted; static vectors stay on the CPU


@pytest.mark.mirror
def test_subword_mode_names_vectors_by_piece_and_composes_words(mirror, tmp_path):
    """--tokenization subword: pieces are the vocabulary; a word's vector = mean of its pieces' vectors."""
    from baselines.glove.train import main
    from strae.data.tokenizer import load_tokenizer

    model_file = mirror / "tokenizers" / "en.wiki.bpe.vs25000.model"
    corpus = _toy_corpus(tmp_path / "train.txt", n_lines=300)
    out = tmp_path / "run"
    assert main(["--lang", "en", "--seed", "0", "--out", str(out), "--corpus", str(corpus), "--tokenization",
                 "subword", "--tokenizer", str(model_file), "--dim", "8", "--epochs", "2", "--window", "3"]) == 0
    assert (out / "tokenizer.model").exists()
    encoder = load_run(out)
    tokenizer = load_tokenizer(model_file)
    pieces = tokenizer.encode_as_pieces("workshop")
    assert all(p in encoder.vectors.key_to_index for p in pieces)
    expected = np.mean([encoder.vectors[p] for p in pieces], axis=0)
    np.testing.assert_allclose(encoder.encode_words(["Workshop"])[0], expected, rtol=1e-6)
    sentence = encoder.encode_sentences(["the workshop"])[0]
    np.testing.assert_allclose(sentence, (encoder.encode_words(["the"])[0] + expected) / 2, rtol=1e-5)
    # no piece of "jazz" (letters j, a, z) occurs in the toy corpus as the same piece: no vector at all
    assert not any(p in encoder.vectors.key_to_index for p in tokenizer.encode_as_pieces("jazz"))
    assert np.isnan(encoder.encode_words(["jazz"])).all()


def test_a_subword_data_dir_run_evaluates_text_as_its_tokenised_corpus_was_split(mirror, tmp_path, capsys):
    """--data-dir's pieces were encoded from treebank-split text (its train.json says so): the run records that
    pretokeniser and its encoder applies it before SentencePiece, so "don't" reads as the pieces of "do n't", the
    way the corpus had it (it used to read the raw "don't", pieces the run never saw) — once: a word of a split
    sentence is not split again (a lone "mr." would read as "mr ." where the sentence kept "mr.")."""
    from baselines.glove.train import CHECKPOINT_FILE, main
    from strae.data.tokenized import tokenize_split
    from strae.data.tokenizer import load_tokenizer

    model_file = mirror / "tokenizers" / "en.wiki.bpe.vs25000.model"
    text = tmp_path / "train.txt"
    text.write_text("we don't like rain . Mr. Smith doesn't like snow either .\n" * 60, encoding="utf-8")
    tokenizer = load_tokenizer(model_file, pretokenize="treebank")
    data_dir = tmp_path / "tokenized"
    write_json(data_dir / "train.json", tokenize_split(text, tokenizer, data_dir, "train", 1, 200))
    out = tmp_path / "run"
    argv = ["--lang", "en", "--seed", "0", "--out", str(out), "--corpus", str(text), "--tokenization", "subword",
            "--tokenizer", str(model_file), "--data-dir", str(data_dir), "--dim", "8", "--window", "3"]
    assert main(argv + ["--epochs", "1"]) == 0
    assert read_json(out / "train.json")["config"]["pretokenize"] == "treebank"
    assert read_json(out / "encoder.json")["pretokenize"] == "treebank"
    encoder = load_run(out)
    assert encoder.describe()["pretokenize"] == "treebank"

    def mean_of(pieces):
        assert pieces and all(p in encoder.vectors.key_to_index for p in pieces), pieces
        return np.mean([encoder.vectors[p] for p in pieces], axis=0)

    split = tokenizer.encode_as_pieces("don't")  # the pieces of "do n't"
    assert split != load_tokenizer(model_file).encode_as_pieces("don't")  # not those of the raw word
    np.testing.assert_allclose(encoder.encode_words(["don't"])[0], mean_of(split), rtol=1e-6)
    # the sentence is split once: its "mr." stays whole, as in the corpus (split again, alone, it is "mr .")
    sentence = "Mr. Smith doesn't like snow"
    words = tokenizer.normalize(sentence).split()
    assert words[0] == "mr." and tokenizer.encode_as_pieces("mr.") != tokenizer.encode_as_pieces("mr.", True)
    expected = np.mean([mean_of(tokenizer.encode_as_pieces(w, normalized=True)) for w in words], axis=0)
    np.testing.assert_allclose(encoder.encode_sentences([sentence])[0], expected, rtol=1e-5)

    # a run from before the setting (no pretokenize anywhere) is not refused: it resumes on the same ids ...
    record = read_json(out / "train.json")
    del record["config"]["pretokenize"]
    write_json(out / "train.json", record)
    manifest = read_json(out / "encoder.json")
    del manifest["pretokenize"]
    write_json(out / "encoder.json", manifest)
    state = torch.load(out / CHECKPOINT_FILE, weights_only=False)
    del state["config"]["pretokenize"]
    torch.save(state, out / CHECKPOINT_FILE)
    assert main(argv + ["--epochs", "1"]) == 0  # ... completed: its encoder.json gains the split's pretokeniser
    assert "encoder.json's pretokenize set to 'treebank'" in capsys.readouterr().out
    assert read_json(out / "encoder.json")["pretokenize"] == "treebank"
    assert main(argv + ["--epochs", "2"]) == 0  # and asked for more, it trains on
    assert len(read_json(out / "train.json")["history"]) == 2
    assert read_json(out / "encoder.json")["pretokenize"] == "treebank"


def test_a_corpus_that_is_not_utf8_is_named_with_its_line(tmp_path):
    from baselines.glove.cooccurrence import iter_lines

    corpus = tmp_path / "train.txt"
    corpus.write_bytes(b"a fine line\nbad \xff byte\n")
    with pytest.raises(SystemExit, match=r"train.txt:2: not UTF-8"):
        list(iter_lines(corpus))


# -- robustness of train-glove ------------------------------------------------------------------------------
def _tiny_glove_args(corpus, out, *extra):
    return ["--lang", "en", "--seed", "0", "--corpus", str(corpus), "--out", str(out), "--dim", "4",
            "--min-count", "1", "--batch-size", "32", *extra]


def test_a_count_cache_killed_half_written_is_never_read_with_the_old_key(tmp_path, monkeypatch):
    """The cache key lives in vocab.json, the counts in cooccurrence.npz. A recount with other settings (window 3)
    killed after writing the matrix but before the key must not leave the old key (window 2) beside the new
    matrix: a rerun with the old settings would train on window-3 counts."""
    import scipy.sparse as sp

    import baselines.glove.train as glove_train

    corpus = _toy_corpus(tmp_path / "train.txt", n_lines=60)
    out = tmp_path / "run"

    def killed(*_args, **_kwargs):
        raise KeyboardInterrupt("killed")

    # window 2: counted and cached, then killed before the first epoch ended (no checkpoint: the dir is reusable)
    monkeypatch.setattr(glove_train, "build_model", killed)
    with pytest.raises(KeyboardInterrupt):
        glove_train.main(_tiny_glove_args(corpus, out, "--window", "2", "--epochs", "1"))
    monkeypatch.undo()
    # window 3: recounts, killed between the matrix and the key
    real_write_json = glove_train.write_json

    def write_json(path, obj):
        if path.name == glove_train.VOCAB_FILE:
            raise KeyboardInterrupt("killed")
        real_write_json(path, obj)

    monkeypatch.setattr(glove_train, "write_json", write_json)
    with pytest.raises(KeyboardInterrupt):
        glove_train.main(_tiny_glove_args(corpus, out, "--window", "3", "--epochs", "1"))
    monkeypatch.undo()
    # window 2 again: must count window-2 co-occurrences, as a fresh directory does
    assert glove_train.main(_tiny_glove_args(corpus, out, "--window", "2", "--epochs", "1")) == 0
    assert glove_train.main(_tiny_glove_args(corpus, tmp_path / "fresh", "--window", "2", "--epochs", "1")) == 0
    reused = sp.load_npz(out / glove_train.COUNTS_FILE)
    fresh = sp.load_npz(tmp_path / "fresh" / glove_train.COUNTS_FILE)
    assert reused.shape == fresh.shape and abs(reused - fresh).max() == 0
    np.testing.assert_array_equal(load_run(out).encode_words(["cat"]),
                                  load_run(tmp_path / "fresh").encode_words(["cat"]))


@pytest.mark.parametrize("option, value, why", [
    ("--epochs", "0", "must be >= 1, got 0"), ("--batch-size", "0", "must be >= 1, got 0"),
    ("--window", "0", "must be >= 1, got 0"), ("--dim", "-3", "must be >= 1, got -3"),
    ("--lr", "nan", "must be a finite number"), ("--lr", "inf", "must be a finite number"),
    ("--lr", "0", "must be a finite number > 0"), ("--x-max", "-1", "must be a finite number > 0"),
    ("--alpha", "-0.5", "must be a finite number >= 0"),
    ("--alpha", "nan", "must be a finite number"), ("--epochs", "two", "not an integer: 'two'"),
    ("--seed", "-1", "must be >= 0, got -1"),  # (numpy's generators take no negative seed)
])
def test_numeric_options_are_checked_when_parsed(option, value, why, tmp_path, capsys):
    from baselines.glove.train import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--lang", "en", "--seed", "0", "--out", str(tmp_path / "run"), "--corpus", str(tmp_path / "none.txt"),
              option, value])
    assert exit_info.value.code == 2  # argparse's usage error, before any file is read or written
    assert f"argument {option}: {why}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_tables_that_diverge_on_the_last_update_fail_the_run(tmp_path):
    """One batch, one epoch: the only loss is checked before the only update, which an lr of 1e39 (finite, so
    allowed) sends to inf. The run is recorded as failed, as a non-finite loss is, with no vectors written."""
    from baselines.glove.train import main

    corpus = _toy_corpus(tmp_path / "train.txt", n_lines=60)
    out = tmp_path / "run"
    argv = _tiny_glove_args(corpus, out, "--window", "2", "--epochs", "1", "--lr", "1e39") + [
        "--batch-size", "100000", "--record-failure"]
    assert main(argv) == 0  # --record-failure: exit 0 after recording it
    record = json.loads((out / "train.json").read_text())
    assert record["status"] == "failed"
    assert record["failure_reason"] == "non-finite word/context tables after the last update of epoch 1"
    assert not (out / "vectors.bin").exists() and not (out / "encoder.json").exists()
    assert not (out / "checkpoint.pt").exists()


class _ReachedTheSignal(Exception):
    pass


def test_a_sigterm_mid_epoch_stops_at_a_batch_and_keeps_the_last_epoch_checkpoint(tmp_path, monkeypatch, capsys):
    """GloVe resumes per epoch, so a stop mid-epoch drops that epoch's part and exits 128 + SIGTERM at the next
    batch; the previous epoch's checkpoint stays, and the same command then ends where an unstopped run ends."""
    import os
    import signal

    import baselines.glove.train as glove_train

    corpus = _toy_corpus(tmp_path / "train.txt", n_lines=60)
    argv = _tiny_glove_args(corpus, tmp_path / "run", "--window", "2", "--epochs", "3")
    real_step, after_the_signal = glove_train.glove_step, []

    def glove_step(model, optimizer, triples, indices, where):
        if after_the_signal or where == "epoch 2 at entry 32":
            after_the_signal.append(where)
        if where == "epoch 2 at entry 32":
            os.kill(os.getpid(), signal.SIGTERM)  # arrives during this batch
        return real_step(model, optimizer, triples, indices, where)

    def unhandled(*_):  # without the trainer's own handler the test fails here instead of killing pytest
        raise _ReachedTheSignal

    monkeypatch.setattr(glove_train, "glove_step", glove_step)
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        status = glove_train.main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert status == 128 + signal.SIGTERM
    assert after_the_signal == ["epoch 2 at entry 32"]  # the batch under way finished; no further one began
    err = capsys.readouterr().err
    assert "stopped by SIGTERM in epoch 2/3 at entry 64" in err
    assert "SIGTERM: stopping after the current batch, keeping the last finished epoch's checkpoint" in err
    out = tmp_path / "run"
    state = torch.load(out / "checkpoint.pt", weights_only=False)
    assert state["epoch"] == 0 and len(state["history"]) == 1
    record = json.loads((out / "train.json").read_text())
    assert record["status"] == "running" and len(record["history"]) == 1
    assert not (out / "encoder.json").exists()
    monkeypatch.undo()
    assert glove_train.main(argv) == 0
    assert glove_train.main(_tiny_glove_args(corpus, tmp_path / "full", "--window", "2", "--epochs", "3")) == 0
    np.testing.assert_array_equal(load_run(out).encode_words(["cat", "saw"]),
                                  load_run(tmp_path / "full").encode_words(["cat", "saw"]))


def test_a_prepared_corpus_names_its_source_in_the_run_record(tmp_path):
    """GloVe's data block carries the corpus source of a prepared corpus (meta.json beside train.txt), as every
    strae run's does, so a table of GloVe cells says which corpus they trained on."""
    from baselines.glove.train import corpus_source

    (tmp_path / "train.txt").write_text("a b\n")
    assert corpus_source(tmp_path / "train.txt", "abc") == {}
    (tmp_path / "meta.json").write_text(json.dumps({"corpus_source": "paper_source", "train": {"sha256": "abc"}}))
    assert corpus_source(tmp_path / "train.txt", "abc") == {"corpus_source": "paper_source"}
    assert corpus_source(tmp_path / "train.txt", "another file") == {}  # not the corpus the meta.json describes


def test_a_second_process_on_the_run_directory_is_refused(tmp_path):
    """Two `strae train-glove` on one --out would interleave checkpoints and train.json (the run directory lock every
    trainer takes)."""
    from strae.runs import lock_run_dir

    out = tmp_path / "run"
    out.mkdir()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n" * 20)
    import baselines.glove.train as glove_train

    held = lock_run_dir(out, "strae train-glove")  # noqa: F841 - the other process
    with pytest.raises(SystemExit, match="another `strae train-glove` process is training"):
        glove_train.main(_tiny_glove_args(corpus, out, "--epochs", "1"))
    assert not (out / "train.json").exists()


def test_a_corpus_with_nothing_to_count_or_a_bad_data_dir_is_refused_before_anything_is_written(tmp_path, mirror):
    """Lines of one token co-occur with nothing: the run would 'complete' with its random initial vectors. A
    --data-dir without a tokenised split used to be ignored silently (the corpus tokenised instead)."""
    from baselines.glove.train import main

    corpus = tmp_path / "one.txt"
    corpus.write_text("hello\n" * 20, encoding="utf-8")
    with pytest.raises(SystemExit, match=r"one.txt: no two tokens co-occur within --window"):
        main(_tiny_glove_args(corpus, tmp_path / "run", "--epochs", "1"))
    assert not (tmp_path / "run" / "train.json").exists()
    model_file = mirror / "tokenizers" / "en.wiki.bpe.vs25000.model"
    with pytest.raises(SystemExit, match=r"--data-dir .*typo: no tokenised training split"):
        main(_tiny_glove_args(corpus, tmp_path / "sub", "--tokenization", "subword", "--tokenizer", str(model_file),
                              "--data-dir", str(tmp_path / "typo")))
    other = tmp_path / "other"  # a split tokenised with another tokenizer: its ids would take this one's names
    other.mkdir()
    np.save(other / "train.ids.npy", np.zeros(3, dtype=np.int32))
    (other / "train.json").write_text('{"tokenizer_sha256": "' + "a" * 64 + '"}')
    with pytest.raises(SystemExit, match=r"--data-dir .*other: tokenised with another tokenizer"):
        main(_tiny_glove_args(corpus, tmp_path / "sub", "--tokenization", "subword", "--tokenizer", str(model_file),
                              "--data-dir", str(other)))


def test_a_checkpoint_is_never_exported_into_its_own_run_directory(toy_run):
    from baselines.glove.train import main

    out, argv = toy_run
    record = (out / "train.json").read_text()
    for dest in (out, out / "snapshot"):
        with pytest.raises(SystemExit, match="inside the run directory"):
            main(argv + ["--export-checkpoint", str(dest)])
    assert (out / "train.json").read_text() == record
