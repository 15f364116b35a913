"""SentEval-style evaluator on small synthetic tasks with known answers, its readers (SentEval's file formats) and
the ``strae evaluate --suite senteval`` entry point (JSON -> scores.csv)."""
from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from strae.encode import Encoder
from strae.evaluate import senteval
from strae.evaluate.senteval import (
    SentevalTask,
    evaluate_task,
    f1_positive,
    inner_kfold,
    load_senteval_tasks,
    pair_features,
    read_task,
    relatedness_targets,
)
from strae.io import git_blob_sha1_file, sha256_file

KEYWORDS = ["good", "bad", "alpha", "beta", "k1", "k2", "k3", "k4", "k5", "anchor", "same"]


class KeywordEncoder(Encoder):
    """Sentence -> counts of a few keywords (NaN row when the text is empty)."""

    encoder_id = "keyword-test"

    def encode_sentences(self, sentences, batch_size=256):
        out = np.zeros((len(sentences), len(KEYWORDS)), dtype=np.float32)
        for i, s in enumerate(sentences):
            if not s.strip():
                out[i] = np.nan
            for w in s.split():
                if w in KEYWORDS:
                    out[i, KEYWORDS.index(w)] += 1
        return out

    def encode_words(self, words, batch_size=1024):
        return self.encode_sentences(words)

    def run_info(self):
        return {"model": "keyword", "setting": "test", "seed": 0}


def make_encoder(**_options):
    return KeywordEncoder()


def _write(path: Path, lines: list[str], encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding=encoding)
    return path


def _sick(path: Path, rows: list[tuple[str, str, float, str]]) -> Path:
    lines = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"]
    lines += [f"{i}\t{a}\t{b}\t{s}\t{e}" for i, (a, b, s, e) in enumerate(rows)]
    return _write(path, lines)


def test_relatedness_targets_and_f1_by_hand():
    np.testing.assert_allclose(relatedness_targets(np.array([3.6, 5.0, 1.0])),
                               [[0, 0, 0.4, 0.6, 0], [0, 0, 0, 0, 1], [1, 0, 0, 0, 0]], atol=1e-6)
    with pytest.raises(SystemExit, match="outside"):
        relatedness_targets(np.array([0.5]))
    # tp=2, fp=1, fn=1 -> 2*2 / (4 + 2) = 66.67
    assert f1_positive(np.array([1, 1, 1, 0, 0]), np.array([1, 1, 0, 1, 0])) == pytest.approx(200 / 3)
    a, b = np.array([[1.0, -2.0]]), np.array([[3.0, 1.0]])
    np.testing.assert_allclose(pair_features(a, b, ["u", "v", "abs_diff", "product"]),
                               [[1, -2, 3, 1, 2, 3, 3, -2]])


def test_binary_separable_is_100_and_uninformative_is_majority(tmp_path):
    files = {"neg": _write(tmp_path / "neg", [f"bad {i}" for i in range(15)]),
             "pos": _write(tmp_path / "pos", [f"good {i}" for i in range(15)])}
    task = SentevalTask(name="BIN", reader="binary", protocol="inner_kfold", files={"neg": "neg", "pos": "pos"},
                        folds=5, rows={"neg": 15, "pos": 15}, c_grid=(0.5, 4.0))
    resolve = lambda name: files[name]  # noqa: E731
    record = evaluate_task(KeywordEncoder(), task, resolve)["BIN"]
    assert record.score == pytest.approx(100.0)
    assert record.n_pairs == 30 and len(record.details["c_selected"]) == 5
    # identical sentences: the classifier can only predict the majority class -> 12 / 20 correct
    files = {"neg": _write(tmp_path / "n2", ["same"] * 8), "pos": _write(tmp_path / "p2", ["same"] * 12)}
    record = evaluate_task(KeywordEncoder(), SentevalTask(name="BIN", reader="binary", protocol="inner_kfold",
                                                          files={"neg": "neg", "pos": "pos"}, folds=4,
                                                          c_grid=(1.0,)),
                           lambda name: files[name])["BIN"]
    assert record.score == pytest.approx(60.0)
    # a row count that disagrees with the task declaration is an error naming the file
    with pytest.raises(SystemExit, match="n2: 8 rows"):
        read_task(SentevalTask(name="BIN", reader="binary", protocol="inner_kfold", files={"neg": "neg", "pos": "pos"},
                               rows={"neg": 9}), lambda name: files[name])


class CountingKeywordEncoder(KeywordEncoder):
    """KeywordEncoder whose vocabulary is KEYWORDS: it keeps ``token_counts`` as a word-vocabulary model does."""

    def __init__(self):
        self.token_counts = {"tokens": 0, "unknown": 0}

    def encode_sentences(self, sentences, batch_size=256):
        for s in sentences:
            self.token_counts["tokens"] += len(s.split())
            self.token_counts["unknown"] += sum(w not in KEYWORDS for w in s.split())
        return super().encode_sentences(sentences, batch_size)


def test_a_word_vocabulary_encoders_unknown_tokens_are_recorded_per_task(tmp_path):
    """An encoder with ``token_counts`` gets each task's unknown-token share in the result (its distinct texts: the
    repeated "good 0" is read once); one without gets no such field."""
    files = {"neg": _write(tmp_path / "neg", [f"bad x{i}" for i in range(10)]),
             "pos": _write(tmp_path / "pos", ["good 0"] * 2 + [f"good {i}" for i in range(1, 9)])}
    task = SentevalTask(name="BIN", reader="binary", protocol="inner_kfold", files={"neg": "neg", "pos": "pos"},
                        folds=5, c_grid=(1.0,))
    encoder = CountingKeywordEncoder()
    encoder.token_counts["tokens"] = 7  # what an earlier task read is not this one's
    record = evaluate_task(encoder, task, lambda name: files[name])["BIN"]
    assert record.details["unknown_tokens"] == {"tokens": 38, "unknown": 19, "share": 0.5}
    assert "unknown_tokens" not in evaluate_task(KeywordEncoder(), task, lambda name: files[name])["BIN"].details


def test_inner_kfold_picks_c_on_inner_folds_only():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3))
    y = (x[:, 0] > 0).astype(int)
    result = inner_kfold(x, y, c_grid=[0.01, 100.0], folds=3, inner_folds=2)
    assert result["inner_folds"] == 2 and len(result["fold_scores"]) == 3
    # each outer fold's per-C inner means are kept, and its C is their first best
    assert [len(m) for m in result["cv_scores"]] == [2, 2, 2]
    assert result["c_selected"] == [[0.01, 100.0][int(np.argmax(m))] for m in result["cv_scores"]]
    assert len(result["refit_iterations"]) == 3 and all(1 <= n <= 100 for n in result["refit_iterations"])
    assert result["score"] > 85


def test_sentevals_pytorch_logreg_keeps_its_best_round_and_stops_as_sentevals_loop_does():
    """SentEval's MLP(nhid 0): a dev accuracy that cannot improve after the first round (100 % at once) ends
    training after tenacity + 1 = 6 rounds without a new best, 7 in all, 4 passes each; the same seed gives the same
    weights; the refit's 5 % validation share must hold a row."""
    import torch

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4)).astype(np.float32)
    y = np.where(x[:, 0] > 0, "pos", "neg")
    x[:, 0] *= 50  # separable by a wide margin: the first round's 4 passes already get every dev row right
    clf = senteval.SentevalLogReg(1e-5, seed=1111).fit(x[:150], y[:150], (x[150:], y[150:]))
    assert (clf.rounds, clf.passes) == (7, 28)
    assert list(clf.classes) == ["neg", "pos"] and (clf.predict(x[150:]) == y[150:]).all()
    again = senteval.SentevalLogReg(1e-5, seed=1111).fit(x[:150], y[:150], (x[150:], y[150:]))
    assert torch.equal(clf.weight, again.weight) and torch.equal(clf.bias, again.bias)
    other = senteval.SentevalLogReg(1e-5, seed=7).fit(x[:150], y[:150], (x[150:], y[150:]))
    assert not torch.equal(clf.weight, other.weight)
    # noise labels: the dev accuracy wanders; the kept weights are the best round's, whatever came after
    noise = rng.permutation(y)
    clf = senteval.SentevalLogReg(1e-2, seed=1111).fit(x[:150], noise[:150], 0.05)
    assert 7 <= clf.rounds <= 51 and clf.passes == 4 * clf.rounds
    with pytest.raises(SystemExit, match="19 training rows leave no validation row at 5%"):
        senteval.SentevalLogReg(1e-5, seed=1).fit(x[:19], y[:19], 0.05)


def test_the_pytorch_classifier_scores_a_task_over_sentevals_l2_grid(tmp_path):
    """`classifier: pytorch` (SentEval's usepytorch default) learns a separable direction; in a task's record the L2
    grid and the chosen weight decays go under their own names (not C); two fit threads give one thread's scores."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(int)
    x[:, 0] *= 20  # Adam's 1e-3 steps turn the random initial boundary within a few rounds
    result = inner_kfold(x, y, c_grid=(1e-5,), folds=3, inner_folds=2, classifier="pytorch")
    assert result["score"] > 85 and result["c_selected"] == [1e-5] * 3
    assert all(p % 4 == 0 and 28 <= p <= 204 for p in result["refit_iterations"])  # passes: 4 a round, 7+ rounds

    files = {"neg": _write(tmp_path / "neg", [f"bad {i}" for i in range(30)]),
             "pos": _write(tmp_path / "pos", [f"good {i}" for i in range(30)])}
    task = SentevalTask(name="BIN", reader="binary", protocol="inner_kfold", files={"neg": "neg", "pos": "pos"},
                        folds=3, c_grid=(0.5, 4.0))
    one = evaluate_task(KeywordEncoder(), task, lambda name: files[name], inner_folds=2, classifier="pytorch")["BIN"]
    assert one.details["l2_grid"] == list(senteval.PYTORCH_L2_GRID) and "c_grid" not in one.details
    assert len(one.details["l2_selected"]) == 3 and "c_selected" not in one.details
    assert set(one.details["l2_selected"]) <= set(senteval.PYTORCH_L2_GRID)
    assert one.details["classifier"].startswith("SentEval pytorch LogReg")
    two = evaluate_task(KeywordEncoder(), task, lambda name: files[name], inner_folds=2, classifier="pytorch",
                        jobs=2)["BIN"]
    assert two.details["fold_scores"] == one.details["fold_scores"]
    assert two.details["cv_scores"] == one.details["cv_scores"]
    with pytest.raises(SystemExit, match="classifier 'svm': use one of"):
        evaluate_task(KeywordEncoder(), task, lambda name: files[name], classifier="svm")


def test_fits_on_several_threads_give_the_same_results_in_the_same_order():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(240, 12))
    y = (x[:, 0] + 0.7 * x[:, 1] + rng.normal(scale=1.0, size=240) > 0).astype(int)
    grid = [0.01, 0.1, 1.0, 10.0]
    one = inner_kfold(x, y, c_grid=grid, folds=4, inner_folds=3, jobs=1)
    three = inner_kfold(x, y, c_grid=grid, folds=4, inner_folds=3, jobs=3)
    assert one == three and len({tuple(m) for m in one["cv_scores"]}) > 1  # not a degenerate grid
    split = [senteval.split_select(x[:160], y[:160], x[160:200], y[160:200], x[200:], y[200:], grid, jobs=j)
             for j in (1, 4)]
    assert split[0] == split[1]
    order = senteval._run_fits([lambda k=k: k for k in range(9)], jobs=4)
    assert order == list(range(9))


def test_every_fit_of_a_protocol_runs_on_one_blas_thread_whatever_the_process_has(monkeypatch):
    """The thread count changes a fit in the last digits, so the C selection and the reported refit both run on one
    BLAS thread, with one job or several, and the process gets its own count back afterwards."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> int:
        return max(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")

    seen, real = [], senteval._fit_score

    def spy(*args):
        seen.append(blas_threads())
        return real(*args)

    monkeypatch.setattr(senteval, "_fit_score", spy)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(120, 6))
    y = (x[:, 0] > 0).astype(int)
    with threadpool_limits(2, user_api="blas"):
        before = blas_threads()
        if before != 2:
            pytest.skip(f"this BLAS cannot run on 2 threads here ({before}): one thread inside would prove nothing")
        senteval.split_select(x[:80], y[:80], x[80:100], y[80:100], x[100:], y[100:], [0.1, 1.0], jobs=1)
        senteval.kfold_test(x[:100], y[:100], x[100:], y[100:], [0.1, 1.0], folds=2, jobs=2)
        assert blas_threads() == before
    assert len(seen) == 2 + 1 + 2 * 2 + 1 and set(seen) == {1}  # the selections' fits and both refits


def test_relatedness_runs_on_one_torch_thread_and_gives_torch_its_count_back_mkl_included(monkeypatch):
    """Inside the stage's threadpool limit torch reports one thread; restoring that count would have left torch's
    MKL (which threadpoolctl cannot see) on one thread for every later CPU encoding of the suite."""
    import torch

    def counts() -> tuple[int, str]:
        mkl = re.search(r"mkl_get_max_threads\(\) : (\d+)", torch.__config__.parallel_info())
        return torch.get_num_threads(), mkl.group(1) if mkl else "no MKL"

    seen, real = [], senteval._relatedness

    def spy(*args):
        seen.append(torch.get_num_threads())
        return real(*args)

    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 4)).astype(np.float32)
    s_all = np.clip(1 + 4 * rng.random(60), 1, 5)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        before = counts()
        if before[0] != 2:
            pytest.skip(f"torch cannot run on 2 threads here ({before})")
        monkeypatch.setattr(senteval, "_relatedness", spy)
        senteval.relatedness(x[:40], s_all[:40], x[40:50], s_all[40:50], x[50:], s_all[50:], epochs_per_round=2,
                             max_epochs=4)
        assert seen == [1]
        assert counts() == before
    finally:
        torch.set_num_threads(previous)


def test_c_is_chosen_as_senteval_compares_accuracies_rounded_to_two_decimals(monkeypatch):
    """SentEval rounds each C's dev / CV accuracy x 100 to 2 decimals before its argmax: a near-tie goes to the
    first (smaller) C. Unrounded, the second C here would win by 0.002 points."""
    accuracy = {0.5: 0.80001, 4.0: 0.80003}
    fitted = SimpleNamespace(n_iter_=np.array([7]))  # what the result records of the refit
    monkeypatch.setattr(senteval, "_fit_score", lambda x_tr, y_tr, x_te, y_te, c, *a: (accuracy[c], fitted))
    x, y = np.zeros((8, 2)), np.array([0, 1] * 4)
    result = senteval.split_select(x, y, x, y, x, y, c_grid=(0.5, 4.0))
    assert result["c_selected"] == 0.5 and result["dev_scores"] == [80.0, 80.0]
    c, means = senteval._select_c(x, y, (0.5, 4.0), folds=2, seed=1111, max_iter=100)
    assert c == 0.5 and means == [80.0, 80.0]


def test_trec_mrpc_sick_readers_and_scores(tmp_path):
    trec_train = [f"{'DESC' if i % 2 else 'NUM'}:x{i} {'alpha' if i % 2 else 'beta'} q {i}" for i in range(40)]
    trec_test = ["DESC:manner alpha how ?", "NUM:count beta how many ?"]
    mrpc_header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    mrpc_rows = [f"{i % 2}\t{i}\t{i + 100}\tanchor {'good' if i % 2 else 'bad'}\tanchor good" for i in range(40)]
    files = {
        "trec_train": _write(tmp_path / "train_5500.label", trec_train, "latin-1"),
        "trec_test": _write(tmp_path / "TREC_10.label", trec_test, "latin-1"),
        "mrpc_train": _write(tmp_path / "mrpc_train.txt", [mrpc_header] + mrpc_rows),
        "mrpc_test": _write(tmp_path / "mrpc_test.txt", [mrpc_header] + mrpc_rows[:10]),
    }
    resolve = lambda name: files[name]  # noqa: E731
    trec = SentevalTask(name="TREC", reader="trec", protocol="kfold_test", encoding="latin-1", folds=4,
                        files={"train": "trec_train", "test": "trec_test"})
    splits, _ = read_task(trec, resolve)
    assert splits["test"].texts == ["alpha how ?", "beta how many ?"] and list(splits["test"].y) == ["DESC", "NUM"]
    assert evaluate_task(KeywordEncoder(), trec, resolve)["TREC"].score == 100.0
    mrpc = SentevalTask(name="MRPC", reader="mrpc", protocol="kfold_test", folds=4,
                        files={"train": "mrpc_train", "test": "mrpc_test"})
    splits, _ = read_task(mrpc, resolve)
    # SentEval's order: by both sentences' lengths (all equal here), then label: the 20 zeros first
    assert splits["train"].left[19:21] == ["anchor bad", "anchor good"]
    assert splits["train"].y.tolist() == [0] * 20 + [1] * 20
    out = evaluate_task(KeywordEncoder(), mrpc, resolve)
    assert out["MRPC"].score == 100.0 and out["MRPC_f1"].score == 100.0
    assert out["MRPC_f1"].details["metric"] == "f1_x100"


def test_sick_relatedness_and_entailment(tmp_path, monkeypatch):
    import functools

    # SentEval's loop (rounds of 50 epochs, early stop) with shorter rounds: same code path, fewer epochs
    monkeypatch.setattr(senteval, "relatedness", functools.partial(senteval.relatedness, epochs_per_round=10,
                                                                  max_epochs=100))
    rng = np.random.default_rng(1)

    def rows(n):
        out = []
        for _ in range(n):
            k = int(rng.integers(1, 6))
            out.append(("anchor", f"k{k}", float(k), ["CONTRADICTION", "NEUTRAL", "ENTAILMENT"][min(k, 3) - 1]))
        return out

    files = {split: _sick(tmp_path / f"{split}.txt", rows(n)) for split, n in
             (("train", 100), ("dev", 40), ("test", 60))}
    resolve = lambda name: files[name]  # noqa: E731
    sick_r = SentevalTask(name="SICK-R", reader="sick", label="relatedness", protocol="relatedness",
                          metric="pearson_x100", files={"train": "train", "dev": "dev", "test": "test"})
    record = evaluate_task(KeywordEncoder(), sick_r, resolve)["SICK-R"]
    assert record.details["metric"] == "pearson_x100" and record.score > 95 and record.details["spearman"] > 90
    sick_e = SentevalTask(name="SICK-E", reader="sick", label="entailment", protocol="split",
                          files={"train": "train", "dev": "dev", "test": "test"})
    assert evaluate_task(KeywordEncoder(), sick_e, resolve)["SICK-E"].score == 100.0
    # the pytorch classifier takes SentEval's label ids (its output rows in SentEval's order) and scores the same
    # strings: every label id the task declares, none missing
    ids = dict(sick_e.__dict__, label_ids={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2})
    record = evaluate_task(KeywordEncoder(), SentevalTask(**ids), resolve, classifier="pytorch")["SICK-E"]
    # (the features separate the classes, as the sklearn path's 100 shows; chance is ~1/3: 82 measured, 2026-11-30)
    assert record.score > 70 and record.details["l2_selected"] in senteval.PYTORCH_L2_GRID


def test_repository_task_declarations_load(repo_root):
    tasks = load_senteval_tasks(repo_root / "config/tasks.yaml")
    assert [n for n, t in tasks.items() if t.group == "transfer"] == [
        "MR", "CR", "SUBJ", "MPQA", "TREC", "SICK-R", "SICK-E", "MRPC"]
    registry = yaml.safe_load((repo_root / "config/registry.yaml").read_text())
    for task in tasks.values():
        assert set(task.files.values()) <= set(registry), task.name
    # the multi-view paper's Table 2: SentEval's ten probing tasks, each a file known by its git blob id
    probing = [n for n, t in tasks.items() if t.group == "probing"]
    assert probing == ["SentLen", "WC", "TreeDepth", "TopConst", "BShift", "Tense", "SubjNum", "ObjNum", "SOMO",
                       "CoordInv"]
    for name in probing:
        task = tasks[name]
        assert (task.reader, task.protocol, task.c_grid) == ("probing", "split", (0.25, 0.5, 1.0, 2.0, 4.0, 8.0))
        (entry,) = [registry[f] for f in task.files.values()]
        assert "sha256" not in entry and len(entry["git_blob_sha1"]) == 40, name
    tables = yaml.safe_load((repo_root / "config/tables.yaml").read_text())["tables"]
    columns = tables["multiview_table2"]["columns"].values()
    assert sorted(c["task"] for c in columns) == sorted(probing) and all(c.get("needs") for c in columns)
    assert tables["multiview_table2"]["variant"] == "probing" and tables["multiview_table1"]["variant"] == "senteval"
    overlay = yaml.safe_load((repo_root / "config/multiview_probing.yaml").read_text())
    assert overlay == {"multiview": {"senteval": {"probing": True}}}


def test_probing_reader_takes_senteval_layout_and_scores_on_test(tmp_path):
    """SentEval's probing files: partition, label, (further fields,) sentence last; C chosen on va, scored on te."""
    lines = [f"tr\t{'PAST' if i % 2 else 'PRES'}\textra field\t{'alpha' if i % 2 else 'beta'} word {i} .  "
             for i in range(40)]
    lines += [f"va\t{'PAST' if i % 2 else 'PRES'}\t{'alpha' if i % 2 else 'beta'} dev {i} ." for i in range(10)]
    lines += ["te\tPAST\talpha test .", "te\tPRES\tbeta test .", "te\tPRES\tbeta again ."]
    # a second file whose test labels are the other way round: scored on te (0 %), C read off va (100 % there)
    flipped = lines[:50] + ["te\tPRES\talpha test .", "te\tPAST\tbeta test ."]
    files = {"tense": _write(tmp_path / "past_present.txt", lines)}
    task = SentevalTask(name="Tense", reader="probing", protocol="split", files={"file": "tense"}, group="probing",
                        c_grid=(0.5, 4.0))
    splits, info = read_task(task, lambda name: files[name])
    assert [len(splits[k]) for k in ("train", "dev", "test")] == [40, 10, 3]
    assert splits["train"].texts[0] == "alpha word 1 ." and splits["test"].y.tolist() == ["PAST", "PRES", "PRES"]
    assert info["tense"]["sha256"] == sha256_file(files["tense"])
    assert info["tense"]["git_blob_sha1"] == git_blob_sha1_file(files["tense"])  # the id the registry pins
    record = evaluate_task(KeywordEncoder(), task, lambda name: files[name])["Tense"]
    assert record.score == 100.0 and record.details["sizes"] == {"train": 40, "dev": 10, "test": 3}
    assert record.details["dev_scores"] == [100.0, 100.0] and record.details["c_selected"] == 0.5  # first best
    files["tense"] = _write(tmp_path / "flipped.txt", flipped)
    record = evaluate_task(KeywordEncoder(), task, lambda name: files[name])["Tense"]
    assert record.score == 0.0 and record.details["dev_score"] == 100.0
    bad = {"tense": _write(tmp_path / "bad.txt", ["tr\tPAST\talpha .", "te\tPRES\tbeta ."])}
    with pytest.raises(SystemExit, match="bad.txt: no 'va' lines"):
        read_task(task, lambda name: bad[name])
    worse = {"tense": _write(tmp_path / "worse.txt", ["tr PAST alpha ."])}
    with pytest.raises(SystemExit, match="worse.txt:1: expected"):
        read_task(task, lambda name: worse[name])


@pytest.mark.mirror
def test_real_files_match_declared_row_counts(repo_root, mirror, tmp_path):
    from strae.evaluate.tasks import make_resolver

    tasks = load_senteval_tasks(repo_root / "config/tasks.yaml")
    resolve = make_resolver(tmp_path / "resources", repo_root / "config/registry.yaml")
    for name in ("CR", "TREC", "SICK-E", "MRPC"):
        splits, _ = read_task(tasks[name], resolve)
        assert all(len(s) > 0 for s in splits.values()), name
    cr, _ = read_task(tasks["CR"], resolve)
    assert len(cr["all"]) == 3775 and int(cr["all"].y.sum()) == 2407


def test_cli_suite_senteval_writes_json_that_aggregates(tmp_path, monkeypatch, capsys):
    from strae.encode import ENCODERS, EncoderKind
    from strae.evaluate import aggregate, harness

    monkeypatch.setitem(ENCODERS, "keyword-test", EncoderKind(make_encoder, builtin=True))
    resources = tmp_path / "resources"
    neg = _write(resources / "data/x/neg.txt", [f"bad {i}" for i in range(10)] + [""])
    pos = _write(resources / "data/x/pos.txt", [f"good {i}" for i in range(10)])
    registry = {name: {"path": f"x/{path.name}", "sha256": sha256_file(path), "kind": "eval_raw", "language": "xx",
                       "license": "test", "source": {"url": "http://invalid"}}
                for name, path in (("x/neg", neg), ("x/pos", pos))}
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(registry))
    (tmp_path / "tasks.yaml").write_text(yaml.safe_dump({"tasks": [], "senteval_tasks": [
        {"name": "BIN", "reader": "binary", "protocol": "inner_kfold", "folds": 2, "language": "xx",
         "files": {"neg": "x/neg", "pos": "x/pos"}, "rows": {"neg": 11, "pos": 10}}]}))
    config = {"data": {"resources_dir": str(resources), "registry": str(tmp_path / "registry.yaml"),
                       "tasks": str(tmp_path / "tasks.yaml")}, "languages": {"xx": {}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "eval.json"
    assert harness.main(["--suite", "senteval", "--model", "keyword-test", "--lang", "xx", "--out", str(out),
                         "--config", str(tmp_path / "config.yaml"), "--quiet"]) == 0
    # no bar in a workflow's log, but a line as each task ends (with its seconds), then the summary
    assert re.search(r"^BIN: \d+\.\d\d \(\d+ s\)$", capsys.readouterr().out, re.MULTILINE)
    document = json.loads(out.read_text())
    assert document["variant"] == "senteval" and document["suite"] == "senteval"
    record = document["tasks"]["BIN"]
    assert record["n_oov"] == 1  # the blank line (kept, as SentEval keeps it) has no vector
    assert record["score"] > 90
    # the kernels the classifier's BLAS ran (they round differently per CPU: strae.io.cpu_kernels)
    kernels = document["provenance"]["cpu_kernels"]
    assert kernels["torch"] and kernels["blas"] and all(blas["version"] for blas in kernels["blas"])
    assert all(blas["architecture"] for blas in kernels["blas"] if blas["internal_api"] == "openblas")
    rows = aggregate.rows_from_document(document, str(out))
    assert [(r["task"], r["variant"], r["model"]) for r in rows] == [("BIN", "senteval", "keyword")]
    assert rows[0]["cpu_kernels"].startswith(f"torch {kernels['torch']}")  # the tidy CSV names them too
    assert all(f"{b['internal_api']} " in rows[0]["cpu_kernels"] for b in kernels["blas"])


def test_the_selection_is_the_named_tasks_else_the_languages_group_and_refuses_by_name(repo_root):
    """select_tasks: the CLI's task choice, which the workflow's SentEval jobs read as their task-definition param
    (an edited definition scores again): names given, or every task of the variant's group for the language."""
    path = repo_root / "config/tasks.yaml"
    catalog = load_senteval_tasks(path)
    transfer = [t.name for t in senteval.select_tasks(catalog, "en", "senteval", None, path)]
    assert transfer == [n for n, t in catalog.items() if t.group == "transfer" and t.language == "en"]
    assert [t.name for t in senteval.select_tasks(catalog, "en", "senteval", ["TREC", "MR"], path)] == ["TREC", "MR"]
    assert {t.group for t in senteval.select_tasks(catalog, "en", "probing", None, path)} == {"probing"}
    for args, message in (((["MR", "nope"],), r"unknown SentEval task\(s\) \['nope'\]"),
                          ((["SentLen"],), r"'SentLen' is a probing task; score it with --variant probing"),
                          ((None, "xx"), r"no transfer task for language 'xx'"),
                          ((["MR"], "xx"), r"'MR' is for language 'en', not 'xx'")):
        names, language = (args + ("en",))[:2]
        with pytest.raises(senteval.SentevalError, match=rf"{re.escape(str(path))}: .*{message}"):
            senteval.select_tasks(catalog, language, "senteval", names, path)
    with pytest.raises(senteval.SentevalError, match=r"--variant 'paper': use one of"):
        senteval.select_tasks(catalog, "en", "paper", None, path)


def test_the_configured_tasks_are_each_languages_own(repo_root):
    """multiview.senteval.tasks is one list for every multi-view language: each scores the listed tasks of its own
    language, in the list's order; a language with none scores none (no SentEval job; the CLI refuses, naming the
    config key); a misspelt name is refused whatever the language."""
    import dataclasses

    path = repo_root / "config/tasks.yaml"
    catalog = load_senteval_tasks(path)
    catalog["XXMR"] = dataclasses.replace(catalog["MR"], name="XXMR", language="xx")
    suite = {"tasks": ["TREC", "XXMR", "MR"]}
    assert [t.name for t in senteval.suite_tasks(catalog, "en", suite, path)] == ["TREC", "MR"]
    assert [t.name for t in senteval.select_tasks(catalog, "xx", "senteval", None, path, suite)] == ["XXMR"]
    assert senteval.suite_tasks(catalog, "yy", suite, path) == []
    with pytest.raises(senteval.SentevalError, match=r"no transfer task for language 'yy' among "
                                                     r"multiview\.senteval\.tasks"):
        senteval.select_tasks(catalog, "yy", "senteval", None, path, suite)
    # none configured: every transfer task of the language; named on the command line: exactly those, checked
    assert [t.name for t in senteval.suite_tasks(catalog, "xx", {}, path)] == ["XXMR"]
    with pytest.raises(senteval.SentevalError, match=r"'MR' is for language 'en', not 'xx'"):
        senteval.select_tasks(catalog, "xx", "senteval", ["MR"], path, suite)
    with pytest.raises(senteval.SentevalError, match=r"unknown SentEval task\(s\) \['NOPE'\]"):
        senteval.suite_tasks(catalog, "yy", {"tasks": ["MR", "NOPE"]}, path)


def test_probing_tasks_are_their_own_variant_and_their_files_are_checked_first(tmp_path, monkeypatch):
    """--variant probing scores the language's probing tasks into their own JSON; a task of the other group is
    refused by name; a probing file that cannot be placed fails before any encoding."""
    from strae.encode import ENCODERS, EncoderKind
    from strae.evaluate import harness

    loaded = []
    monkeypatch.setitem(ENCODERS, "keyword-test", EncoderKind(lambda **o: loaded.append(1) or KeywordEncoder(),
                                                               builtin=True))
    resources = tmp_path / "resources"
    pos = _write(resources / "data/x/pos.txt", [f"good {i}" for i in range(10)])
    neg = _write(resources / "data/x/neg.txt", [f"bad {i}" for i in range(10)])
    probe = _write(resources / "data/x/probe.txt", [f"{p}\t{'G' if i % 2 else 'B'}\t{'good' if i % 2 else 'bad'} {i}"
                                                     for p, n in (("tr", 20), ("va", 6), ("te", 6)) for i in range(n)])
    registry = {name: {"path": f"x/{path.name}", "sha256": sha256_file(path), "kind": "eval_raw", "language": "xx",
                       "license": "test", "source": {"url": "http://invalid"}}
                for name, path in (("x/neg", neg), ("x/pos", pos), ("x/probe", probe))}
    registry["x/absent"] = {"path": "x/absent.txt", "git_blob_sha1": "1" * 40, "kind": "eval_raw", "language": "xx",
                            "license": "test", "source": {"url": "http://127.0.0.1:9/absent.txt"}}
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(registry))
    catalogue = [
        {"name": "BIN", "reader": "binary", "protocol": "inner_kfold", "folds": 2, "language": "xx",
         "files": {"neg": "x/neg", "pos": "x/pos"}},
        {"name": "PROBE", "reader": "probing", "protocol": "split", "group": "probing", "language": "xx",
         "files": {"file": "x/probe"}},
    ]
    (tmp_path / "tasks.yaml").write_text(yaml.safe_dump({"tasks": [], "senteval_tasks": catalogue}))
    config = {"data": {"resources_dir": str(resources), "registry": str(tmp_path / "registry.yaml"),
                       "tasks": str(tmp_path / "tasks.yaml")}, "languages": {"xx": {}}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    common = ["--suite", "senteval", "--model", "keyword-test", "--lang", "xx",
              "--config", str(tmp_path / "config.yaml"), "--quiet"]
    out = tmp_path / "probing.json"
    assert harness.main(common + ["--variant", "probing", "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["variant"] == "probing" and list(document["tasks"]) == ["PROBE"]
    assert document["tasks"]["PROBE"]["score"] == 100.0
    with pytest.raises(SystemExit, match="'PROBE' is a probing task; score it with --variant probing"):
        harness.main(common + ["--tasks", "PROBE", "--out", str(tmp_path / "x.json")])
    # a probing task whose file cannot be had: refused before the encoder is loaded, nothing written
    catalogue.append({"name": "GONE", "reader": "probing", "protocol": "split", "group": "probing",
                      "language": "xx", "files": {"file": "x/absent"}})
    (tmp_path / "tasks.yaml").write_text(yaml.safe_dump({"tasks": [], "senteval_tasks": catalogue}))
    loaded.clear()
    with pytest.raises(SystemExit, match="x/absent"):
        harness.main(common + ["--variant", "probing", "--out", str(tmp_path / "gone.json")])
    assert not loaded and not (tmp_path / "gone.json").exists()


def test_rows_are_in_sentevals_order(tmp_path):
    """Every SentEval task's run() sorts its rows (stably) by token count, then label id, before its classifiers
    see them: the folds depend on it. SUBJ's ids are SentEval's (objective 1: binary.py's first file), not the
    roles' sorted order; SICK-E's are sick.py's label2id."""
    obj = ["a b c", "a", "x y", "p q"]
    subj = ["m n", "k", "u v w x"]
    files = {"obj": _write(tmp_path / "subj.objective", obj, "latin-1"),
             "subj": _write(tmp_path / "subj.subjective", subj, "latin-1")}
    task = SentevalTask(name="SUBJ", reader="binary", protocol="inner_kfold", encoding="latin-1",
                        files={"objective": "obj", "subjective": "subj"},
                        label_ids={"objective": 1, "subjective": 0})
    split = read_task(task, files.__getitem__)[0]["all"]
    # SentEval: samples = obj + subj, labels [1]*len(obj) + [0]*len(subj), sorted by (len(tokens), label)
    expected = sorted(zip([t.split() for t in obj + subj], [1] * len(obj) + [0] * len(subj)),
                      key=lambda z: (len(z[0]), z[1]))
    assert [(t.split(), int(y)) for t, y in zip(split.texts, split.y)] == [(x, y) for x, y in expected]
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"
    sick = [header, "1\ta b\tc\t4.5\tNEUTRAL", "2\ta b\tc\t1.0\tENTAILMENT", "3\ta\tc d\t3.0\tCONTRADICTION",
            "4\ta b\tc\t2.0\tCONTRADICTION"]
    files = {"sick": _write(tmp_path / "SICK_train.txt", sick)}
    entailment = SentevalTask(name="SICK-E", reader="sick", label="entailment", protocol="split",
                              files={"train": "sick"},
                              label_ids={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2})
    assert read_task(entailment, files.__getitem__)[0]["train"].y.tolist() == [
        "CONTRADICTION", "CONTRADICTION", "NEUTRAL", "ENTAILMENT"]  # (1, 2) first, then ids 0, 1, 2
    partial = SentevalTask(name="SICK-E", reader="sick", label="entailment", protocol="split", files={"train": "sick"},
                           label_ids={"CONTRADICTION": 0, "ENTAILMENT": 2})
    with pytest.raises(SystemExit, match=r"SICK_train.txt: labels \['NEUTRAL'\] are not in the task's label_ids"):
        read_task(partial, files.__getitem__)
    relatedness = SentevalTask(name="SICK-R", reader="sick", label="relatedness", protocol="relatedness",
                               files={"train": "sick"})
    assert read_task(relatedness, files.__getitem__)[0]["train"].y.tolist() == [3.0, 1.0, 2.0, 4.5]
    with pytest.raises(SystemExit, match="label_ids must name each of its files' roles"):
        bad = tmp_path / "bad.yaml"
        bad.write_text("tasks: []\nsenteval_tasks:\n"
                       "  - {language: en, name: X, reader: binary, protocol: inner_kfold,\n"
                       "     files: {neg: a, pos: b}, label_ids: {negative: 0, pos: 1}}\n")
        senteval.load_senteval_tasks(bad)


@pytest.mark.parametrize("reader, label, row, message", [
    ("sick", "relatedness", "7\ta b\tc d\tfour\tNEUTRAL", r"bad\.txt:4: relatedness_score 'four' is not a number"),
    ("sick", "relatedness", "7\ta b\tc d\tnan\tNEUTRAL", r"bad\.txt:4: relatedness_score 'nan' is not finite"),
    ("sick", "relatedness", "7\ta b\tc d\t5.5\tNEUTRAL", r"bad\.txt:4: relatedness_score '5.5' is outside SICK's"),
    ("mrpc", None, "yes\t1\t2\ta b\tc d", r"bad\.txt:4: Quality 'yes' is not 0 or 1"),
    ("mrpc", None, "2\t1\t2\ta b\tc d", r"bad\.txt:4: Quality '2' is not 0 or 1"),
])
def test_sick_and_mrpc_name_the_line_of_a_bad_score_or_label(tmp_path, reader, label, row, message):
    """A bad relatedness score or MRPC label is a SentevalError naming file and line (a raw ValueError traceback
    before; a NaN score failed later, in relatedness_targets, naming neither). Line numbers count the blank line."""
    header = {"sick": "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment",
              "mrpc": "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"}[reader]
    good = {"sick": "1\ta b\tc d\t4.5\tNEUTRAL", "mrpc": "1\t1\t2\ta b\tc d"}[reader]
    files = {"bad": _write(tmp_path / "bad.txt", [header, good, "", row])}
    task = SentevalTask(name="X", reader=reader, protocol="relatedness" if label else "split",
                        files={"train": "bad"}, **({"label": label} if label else {}))
    with pytest.raises(senteval.SentevalError, match=message):
        read_task(task, files.__getitem__)


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="OpenBLAS's Haswell kernels are x86-64")
def test_the_recorded_blas_kernels_are_the_ones_openblas_runs_and_openblas_coretype_pins_them():
    # OpenBLAS chooses its kernels per CPU when it loads; OPENBLAS_CORETYPE overrides the choice. A score's
    # provenance must name the kernels that ran, not the CPU's default (reproductions/senteval-blas-kernels-cpu-...).
    code = "import json, numpy, scipy.linalg; from strae.io import cpu_kernels; print(json.dumps(cpu_kernels()))"
    env = {**os.environ, "OPENBLAS_CORETYPE": "Haswell"}
    kernels = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                        check=True).stdout)
    openblas = [blas for blas in kernels["blas"] if blas["internal_api"] == "openblas"]
    if not openblas:
        pytest.skip("numpy and scipy use another BLAS here")
    assert {blas["architecture"] for blas in openblas} == {"Haswell"}
    assert kernels["openblas_coretype"] == "Haswell"
