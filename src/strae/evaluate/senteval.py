"""``strae evaluate --suite senteval``: SentEval-style transfer evaluation of any strae encoder (linear probes).

    strae evaluate --suite senteval --model SPEC --lang L --out PATH.json [--tasks MR,CR,...]
                   [--variant senteval|probing] [--inner-folds K] [--config config/config.yaml]
                   [--tasks-file config/tasks.yaml]

The tasks are data: ``senteval_tasks:`` of ``config/tasks.yaml`` (files = registry names of SentEval's own
processed files, the reader, the protocol, the feature recipe, the regularisation grid). The protocols re-implement
SentEval's scikit-learn path (facebookresearch/SentEval ``senteval/tools/validation.py``, ``relatedness.py``):

- ``inner_kfold`` (MR, CR, SUBJ, MPQA): stratified K-fold (shuffled, seed 1111); in each outer fold the inverse
  regularisation C is chosen by an inner stratified K-fold on the training part; score = mean test accuracy.
- ``kfold_test`` (TREC, MRPC): C chosen by K-fold cross-validation on the train split, refit on all of it, scored
  on the test split (MRPC: accuracy and F1 of the positive class).
- ``split`` (SICK-E, probing tasks): C chosen on the dev split, scored on test.
- ``relatedness`` (SICK-R): SentEval's recipe — the gold score y in [1, 5] becomes a distribution over 1..5
  (weight on floor(y) and floor(y)+1), a softmax layer (Linear(d, 5)) is trained with summed squared error to it
  (Adam, batch 64, rounds of 50 epochs, early stopping on dev Pearson after 4 rounds without improvement);
  prediction = expected score; Pearson / Spearman x 100 and MSE on test.

Pair features follow each task's ``features`` list (SentEval: [|u-v|, u*v] for SICK and MRPC). Classifier
(``multiview.senteval.classifier``, ``--classifier``): ``sklearn`` (default),
``sklearn.linear_model.LogisticRegression(C, random_state=seed)`` (lbfgs, multinomial for >2 classes) over each task's
``c_grid``; or ``pytorch``, SentEval's own default path (``usepytorch: True``, :class:`SentevalLogReg`: Adam, L2
weight decay chosen from 1e-5..1e-2 by the same protocols, early stopping on the scored fold / dev split). Scores are
accuracy x 100 (classification), Pearson x 100 (relatedness); a NaN vector from an encoder becomes zeros (counted
in ``n_oov``). Results: the same versioned JSON as the zero-shot suite, so ``strae aggregate`` puts them in
``scores.csv``; MRPC adds a task ``MRPC_f1`` whose score is the F1. Two variants, one per task group, each its own
JSON: ``senteval`` = the transfer tasks (default: those of ``multiview.senteval.tasks`` that are the language's,
else every transfer task of the language), ``probing`` = SentEval's probing tasks (every one of the language's;
their files are in no data mirror, so scoring them separately keeps the transfer scores whatever becomes of the
probing files). Every task's file is placed
(fetched and checked) before the encoder loads: a missing file fails at once, not after hours of other tasks.
"""
from __future__ import annotations

import argparse
import codecs
import contextlib
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from strae import paths
from strae.evaluate.result import EvalResult, TaskResult
from strae.io import check_output_file, provenance, sha256_and_git_blob_sha1_file, sha256_file

# the keys of the config's multiview.senteval block this suite reads (the workflow's params: editing one scores
# again); the others choose which evaluations run (floors, probing, extra runs), not how one is scored
CONFIG_KEYS = ("tasks", "inner_folds", "max_iter", "classifier")

SUITE = "senteval"
VARIANT_GROUPS = {"senteval": "transfer", "probing": "probing"}  # the --variant of each task group
READERS = ("binary", "trec", "sick", "mrpc", "probing")
PROTOCOLS = ("inner_kfold", "kfold_test", "split", "relatedness")
FEATURES = ("u", "v", "abs_diff", "product")
SENTEVAL_SEED = 1111  # SentEval's default seed (KFold shuffling and the classifier)


class SentevalError(SystemExit):
    pass


# ----------------------------------------------------------------------------------------------- task catalogue
@dataclass(frozen=True)
class SentevalTask:
    name: str
    reader: str
    protocol: str
    files: dict[str, str]  # role -> registry name (binary: label -> file; others: split -> file)
    encoding: str = "utf-8"
    label: str | None = None  # sick: "entailment" | "relatedness"
    features: tuple[str, ...] = ("abs_diff", "product")
    c_grid: tuple[float, ...] = tuple(2.0 ** t for t in range(-2, 4))
    folds: int = 10
    rows: dict[str, int] = field(default_factory=dict)
    metric: str = "accuracy_x100"
    language: str | None = None  # a config language code (required in tasks.yaml)
    group: str = "transfer"  # transfer | probing
    # SentEval's integer id of each label (binary: of each file role) where it is not the labels' sorted order:
    # the rows are put in SentEval's order, sorted by length then label id, and a binary task's labels are the ids
    label_ids: dict[str, int] | None = None


def load_senteval_tasks(path: str | Path) -> dict[str, SentevalTask]:
    from strae.evaluate.tasks import read_task_list

    resolved, _, entries = read_task_list(path, "senteval_tasks", SentevalError)
    tasks: dict[str, SentevalTask] = {}
    for i, entry in enumerate(entries):
        where = f"{resolved}: senteval_tasks[{i}]"
        try:
            kwargs = dict(entry)
            for key in ("features", "c_grid"):
                if key in kwargs:
                    kwargs[key] = tuple(kwargs[key])
            if "c_grid" in kwargs:
                kwargs["c_grid"] = tuple(float(c) for c in kwargs["c_grid"])
            task = SentevalTask(**kwargs)
        except TypeError as error:
            raise SentevalError(f"{where}: {error}") from error
        if not task.language:
            raise SentevalError(f"{where} ({task.name}): give its `language` (a config language code)")
        if task.reader not in READERS:
            raise SentevalError(f"{where} ({task.name}): reader {task.reader!r}; use one of {READERS}")
        if task.protocol not in PROTOCOLS:
            raise SentevalError(f"{where} ({task.name}): protocol {task.protocol!r}; use one of {PROTOCOLS}")
        bad = [f for f in task.features if f not in FEATURES]
        if bad:
            raise SentevalError(f"{where} ({task.name}): features {bad}; use {FEATURES}")
        if task.reader == "binary" and task.label_ids is not None and set(task.label_ids) != set(task.files):
            raise SentevalError(f"{where} ({task.name}): label_ids must name each of its files' roles "
                                f"{sorted(task.files)}, not {sorted(task.label_ids)}")
        try:
            codecs.lookup(task.encoding)
        except LookupError:
            raise SentevalError(f"{where} ({task.name}): encoding {task.encoding!r} is not one Python knows "
                                "(e.g. utf-8, latin-1)") from None
        if task.name in tasks:
            raise SentevalError(f"{where}: duplicate task name {task.name!r}")
        tasks[task.name] = task
    return tasks


# ----------------------------------------------------------------------------------------------- readers
@dataclass
class Split:
    """One split: ``texts`` (single-sentence tasks) or ``left``/``right`` (pairs), and labels or scores."""

    y: np.ndarray
    texts: list[str] | None = None
    left: list[str] | None = None
    right: list[str] | None = None

    def __len__(self) -> int:
        return len(self.y)


def _lines(path: Path, encoding: str) -> list[str]:
    try:
        with open(path, encoding=encoding, newline="") as handle:
            return [line.rstrip("\r\n") for line in handle]
    except UnicodeDecodeError as error:
        raise SentevalError(f"{path}: not {encoding} text ({error}); set the task's `encoding` in its tasks file") \
            from None


def _sick_score(path: Path, n: int, text: str) -> float:
    """SICK's relatedness_score column, a finite number (float() alone takes "nan" and "inf")."""
    try:
        value = float(text)
    except ValueError:
        raise SentevalError(f"{path}:{n}: relatedness_score {text.strip()!r} is not a number") from None
    if not np.isfinite(value):
        raise SentevalError(f"{path}:{n}: relatedness_score {text.strip()!r} is not finite")
    if not 1.0 <= value <= 5.0:  # SICK's scale; SentEval's label encoding (relatedness_targets) needs it
        raise SentevalError(f"{path}:{n}: relatedness_score {text.strip()!r} is outside SICK's 1..5")
    return value


def _mrpc_label(path: Path, n: int, text: str) -> int:
    """MRPC's Quality column: 1 paraphrase, 0 not (the first line's field may carry the file's byte-order mark)."""
    label = text.lstrip("\ufeff").strip()
    if label not in ("0", "1"):
        raise SentevalError(f"{path}:{n}: Quality {label!r} is not 0 or 1")
    return int(label)


def _tokens(text: str) -> str:
    """SentEval splits on whitespace and hands the tokens on; we hand the encoder the re-joined string."""
    return " ".join(text.split())


def _check_rows(task: SentevalTask, role: str, n: int, path: Path) -> None:
    expected = task.rows.get(role)
    if expected is not None and expected != n:
        raise SentevalError(f"{path}: {n} rows for {task.name}/{role}, config/tasks.yaml says {expected}")


def read_task(task: SentevalTask, resolve: Callable[[str], Path]) -> tuple[dict[str, Split], dict[str, Any]]:
    """The task's splits (``all`` for inner_kfold tasks) and the files read (registry -> {file, sha256})."""
    files = {role: resolve(name) for role, name in task.files.items()}
    if task.reader == "probing":  # registered by their git blob ids (no mirror has them): record that id too
        info = {}
        for role, p in files.items():
            sha256, blob = sha256_and_git_blob_sha1_file(p)
            info[task.files[role]] = {"file": str(p), "sha256": sha256, "git_blob_sha1": blob}
    else:
        info = {task.files[role]: {"file": str(p), "sha256": sha256_file(p)} for role, p in files.items()}
    if task.reader == "binary":
        texts, labels = [], []
        ids = task.label_ids or {role: i for i, role in enumerate(sorted(files))}
        for role, path in sorted(files.items(), key=lambda kv: kv[0]):
            # every line, blank ones too: SentEval's loader keeps them (CR has 2 empty lines -> empty sentences)
            lines = [_tokens(line) for line in _lines(path, task.encoding)]
            _check_rows(task, role, len(lines), path)
            texts += lines
            labels += [ids[role]] * len(lines)
        return {"all": _in_sentevals_order(Split(np.asarray(labels), texts=texts), None)}, info
    splits: dict[str, Split] = {}
    for role, path in files.items():
        if task.reader == "trec":
            texts, labels = [], []
            for n, line in enumerate(_lines(path, task.encoding), 1):
                if not line.strip():
                    continue
                target, _, rest = line.strip().partition(":")
                if not rest or " " not in rest:
                    raise SentevalError(f"{path}:{n}: expected 'COARSE:fine question ...'")
                texts.append(_tokens(rest.split(" ", 1)[1]))
                labels.append(target)
            splits[role] = Split(np.asarray(labels), texts=texts)
        elif task.reader in ("sick", "mrpc"):
            # (line number, columns) of the rows after the header; blank lines skipped but still counted
            rows = [(n, line.split("\t")) for n, line in enumerate(_lines(path, task.encoding), 1)
                    if n > 1 and line.strip()]
            left, right, y = [], [], []
            for n, cols in rows:
                if task.reader == "sick":
                    if len(cols) < 5:
                        raise SentevalError(f"{path}:{n}: expected 5 tab-separated SICK columns")
                    left.append(_tokens(cols[1]))
                    right.append(_tokens(cols[2]))
                    y.append(_sick_score(path, n, cols[3]) if task.label == "relatedness" else cols[4].strip())
                else:
                    if len(cols) < 5:
                        raise SentevalError(f"{path}:{n}: expected 5 tab-separated MRPC columns")
                    left.append(_tokens(cols[3]))
                    right.append(_tokens(cols[4]))
                    y.append(_mrpc_label(path, n, cols[0]))
            splits[role] = Split(np.asarray(y), left=left, right=right)
        elif task.reader == "probing":
            # SentEval's probing layout (senteval/probing.py loadFile): partition (tr/va/te) <TAB> label <TAB> ...
            # <TAB> sentence; "(at least) these fields", the sentence is the LAST one, trailing whitespace dropped
            by_split: dict[str, tuple[list[str], list[str]]] = {"tr": ([], []), "va": ([], []), "te": ([], [])}
            for n, line in enumerate(_lines(path, task.encoding), 1):
                cols = line.rstrip().split("\t")
                if len(cols) < 3 or cols[0] not in by_split:
                    raise SentevalError(f"{path}:{n}: expected 'tr|va|te<TAB>label<TAB>sentence'")
                by_split[cols[0]][0].append(_tokens(cols[-1]))
                by_split[cols[0]][1].append(cols[1])
            for key, role_name in (("tr", "train"), ("va", "dev"), ("te", "test")):
                if not by_split[key][0]:
                    raise SentevalError(f"{path}: no '{key}' lines; a probing file holds train (tr), dev (va) "
                                        f"and test (te) sentences")
                splits[role_name] = Split(np.asarray(by_split[key][1]), texts=by_split[key][0])
        if task.reader != "probing":
            _check_rows(task, role, len(splits[role]), path)
    if task.label_ids:
        for role, split in splits.items():
            unknown = sorted({str(y) for y in split.y} - set(task.label_ids))
            if unknown:
                raise SentevalError(f"{files[role]}: labels {unknown} are not in the task's label_ids "
                                    f"{sorted(task.label_ids)} ({task.name}, config/tasks.yaml)")
    return {name: _in_sentevals_order(split, task.label_ids) for name, split in splits.items()}, info


def _in_sentevals_order(split: Split, label_ids: dict[str, int] | None) -> Split:
    """The split's rows in the order SentEval hands them to its classifiers: every task's ``run`` sorts its rows
    (stably) by token count — both sentences' for a pair — then label (``label_ids``' id where given, else the label
    or score itself), "to reduce padding". The order decides which rows fall in which shuffled K-fold (MR, CR, SUBJ,
    MPQA; TREC's and MRPC's choice of C) and the relatedness regression's batches (SICK-R), so the scores are
    SentEval's only in its order."""
    def label(value):
        return label_ids[str(value)] if label_ids else value.item()
    if split.texts is not None:
        keys = [(len(text.split()), label(y)) for text, y in zip(split.texts, split.y)]
    else:
        keys = [(len(a.split()), len(b.split()), label(y)) for a, b, y in zip(split.left, split.right, split.y)]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return Split(split.y[order], texts=None if split.texts is None else [split.texts[i] for i in order],
                 left=None if split.left is None else [split.left[i] for i in order],
                 right=None if split.right is None else [split.right[i] for i in order])


# ----------------------------------------------------------------------------------------------- classifiers
# SentEval's two logistic regressions (validation.py): `usepytorch: False`, scikit-learn's LogisticRegression over
# the task's C grid; `usepytorch: True` (SentEval's default), its PyTorch MLP with nhid 0 over an L2 weight-decay grid
CLASSIFIERS = ("sklearn", "pytorch")
PYTORCH_L2_GRID = tuple(10.0 ** t for t in range(-5, -1))  # SentEval: [10**t for t in range(-5, -1)], every protocol
# SentEval's MLP defaults (classifier config {'nhid': 0}, what its engine sets when none is given)
PYTORCH_LOGREG = {"optim": "adam", "lr": 1e-3, "batch_size": 64, "tenacity": 5, "epoch_size": 4, "max_epoch": 200,
                  "validation_split": 0.05}


class SentevalLogReg:
    """SentEval's ``PyTorchClassifier``/``MLP`` with ``nhid: 0`` (senteval/tools/classifier.py): Linear(d, classes)
    trained with Adam (lr 1e-3, L2 ``weight_decay``), batches of 64 in a fresh permutation each pass, 4 passes a
    round, the validation accuracy after each round; the best round's weights are kept, and training stops at the
    round that finds ``tenacity`` + 1 rounds in all without a new best (SentEval never resets that count), or when a
    round ends past 200 passes (a round starts while at most 200 are done: 204 at most). The loss is the batch
    mean: SentEval sets ``loss_fn.size_average = False`` after construction, which torch >= 0.4.1 ignores (the loss
    reads ``reduction``). One seeded RandomState draws the validation split and every
    permutation, as SentEval's ``np.random.seed(seed)`` does; the weights take torch's nn.Linear initialisation from
    a generator seeded the same (thread-safe: fits run side by side)."""

    def __init__(self, l2reg: float, seed: int):
        self.l2reg = l2reg
        self.seed = seed
        self.rounds = 0

    def fit(self, x, y, validation) -> SentevalLogReg:
        """``validation``: (x_dev, y_dev) to stop on, or a share of (x, y) held out for it (SentEval's refits)."""
        import torch

        cfg = PYTORCH_LOGREG
        rng = np.random.RandomState(self.seed)
        x, y = np.asarray(x, np.float32), np.asarray(y)
        if isinstance(validation, float):
            order = rng.permutation(len(x))
            k = int(validation * len(x))
            if k == 0:
                raise SentevalError(f"{len(x)} training rows leave no validation row at {validation:.0%} (SentEval's "
                                    "pytorch classifier stops on them); use the sklearn classifier")
            (x_dev, y_dev), (x, y) = (x[order[:k]], y[order[:k]]), (x[order[k:]], y[order[k:]])
        else:
            x_dev, y_dev = np.asarray(validation[0], np.float32), np.asarray(validation[1])
        self.classes = np.unique(np.concatenate([y, y_dev]))
        xt, yt = torch.from_numpy(x), torch.from_numpy(np.searchsorted(self.classes, y).astype(np.int64))
        yd = np.searchsorted(self.classes, y_dev)
        generator = torch.Generator().manual_seed(self.seed)
        bound = 1.0 / np.sqrt(x.shape[1])  # nn.Linear's reset_parameters: kaiming_uniform(a=sqrt(5)) = U(+-1/sqrt(d))
        self.weight = torch.empty(len(self.classes), x.shape[1]).uniform_(-bound, bound, generator=generator)
        self.bias = torch.empty(len(self.classes)).uniform_(-bound, bound, generator=generator)
        self.weight.requires_grad_(True)
        self.bias.requires_grad_(True)
        optimizer = torch.optim.Adam([self.weight, self.bias], lr=cfg["lr"], weight_decay=self.l2reg)
        best, best_state, misses, passes = -1.0, None, 0, 0
        while passes <= cfg["max_epoch"]:
            for _ in range(cfg["epoch_size"]):
                order = rng.permutation(len(xt))
                for i in range(0, len(xt), cfg["batch_size"]):
                    idx = torch.from_numpy(order[i:i + cfg["batch_size"]])
                    loss = torch.nn.functional.cross_entropy(xt[idx] @ self.weight.T + self.bias, yt[idx])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            passes += cfg["epoch_size"]
            self.rounds += 1
            accuracy = float(np.mean(self._predict_ids(x_dev) == yd))
            if accuracy > best:
                best, best_state = accuracy, (self.weight.detach().clone(), self.bias.detach().clone())
            else:
                if misses >= cfg["tenacity"]:
                    break
                misses += 1
        self.weight, self.bias = best_state
        self.passes = passes
        return self

    def _predict_ids(self, x) -> np.ndarray:
        import torch

        with torch.no_grad():
            x = torch.from_numpy(np.asarray(x, np.float32))
            return torch.argmax(x @ self.weight.T + self.bias, dim=1).numpy()

    def predict(self, x) -> np.ndarray:
        return self.classes[self._predict_ids(x)]


def _fit(x_tr, y_tr, c, seed, max_iter, classifier="sklearn", validation=None):
    """One classifier at regularisation ``c`` (sklearn: inverse C; pytorch: L2 weight decay). ``validation``, read
    by the pytorch classifier only: the rows it stops on (SentEval: the scored fold in a cross-validation, the dev
    split in a split task, else a 5 % share of the training rows)."""
    if classifier == "pytorch":
        return SentevalLogReg(c, seed).fit(x_tr, y_tr, PYTORCH_LOGREG["validation_split"]
                                           if validation is None else validation)
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, random_state=seed, max_iter=max_iter).fit(x_tr, y_tr)


def _iterations(clf) -> int:
    """A reported refit's iterations, recorded so convergence can be audited: lbfgs's (its largest over classes;
    = max_iter means it stopped short, which SentEval lets pass), or the pytorch classifier's passes."""
    return int(np.max(clf.n_iter_)) if hasattr(clf, "n_iter_") else int(clf.passes)


def _fit_score(x_tr, y_tr, x_te, y_te, c, seed, max_iter, classifier="sklearn", validation=None) -> tuple[float, Any]:
    # no warnings.catch_warnings() here: it swaps the process-wide filter list and is not thread-safe (fits run on
    # threads, _run_fits); the callers silence ConvergenceWarning once, on the calling thread (_classifier_stage)
    clf = _fit(x_tr, y_tr, c, seed, max_iter, classifier, validation)
    return float(np.mean(clf.predict(x_te) == y_te)), clf


def _classifier_stage(function):
    """Run a protocol (C selection, refit, relatedness regression) on one BLAS/OpenMP thread, with sklearn's
    ConvergenceWarning at max_iter ignored (SentEval lets it pass; other warnings still show), both set once on
    the calling thread for every fit it makes, its worker threads' included. One thread whatever
    OMP_NUM_THREADS says: the thread count changes a fit in the last digits (two BLAS threads moved MR's chosen C on
    the random-token floor) and on a busy 2-core machine ran ~9x slower; the parallelism is ``jobs`` fits at once
    (:func:`_run_fits`). So the scores are those of one job with one thread for every ``jobs``, the reported refit
    included. threadpool_limits is process-wide and must not run beside other numeric work of this process
    (encoding happens before the protocol)."""
    import functools

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        from sklearn.exceptions import ConvergenceWarning
        from threadpoolctl import threadpool_limits

        with warnings.catch_warnings(), threadpool_limits(1):
            warnings.simplefilter("ignore", ConvergenceWarning)
            return function(*args, **kwargs)

    return wrapper


def _run_fits(fits: Sequence[Callable[[], float]], jobs: int) -> list[float]:
    """Each fit's result, in order: one after another, or on ``jobs`` threads (sklearn's lbfgs spends its time in
    numpy products that release the GIL, and each fit has its own estimator and seed, so the results are the fits'
    own whatever runs beside them). Called inside :func:`_classifier_stage` (one BLAS thread, the workers' too):
    the same scores as one job, measured on the floor's eight tasks."""
    if jobs <= 1 or len(fits) <= 1:
        return [fit() for fit in fits]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(jobs, len(fits))) as pool:
        return list(pool.map(lambda fit: fit(), fits))


@_classifier_stage
def _select_c(x, y, c_grid, folds, seed, max_iter, jobs=1, classifier="sklearn") -> tuple[float, list[float]]:
    """C with the best mean accuracy over a stratified shuffled K-fold of (x, y): first best of the accuracies x 100
    rounded to 2 decimals, as SentEval compares them (validation.py), so near-ties go to the smaller C. The
    C x fold fits run on ``jobs`` threads (:func:`_run_fits`)."""
    from sklearn.model_selection import StratifiedKFold

    skf = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    splits = list(skf.split(x, y))

    def fit(c, tr, te):  # SentEval's pytorch fits stop on the fold they are scored on
        return lambda: _fit_score(x[tr], y[tr], x[te], y[te], c, seed, max_iter, classifier, (x[te], y[te]))[0]

    accs = _run_fits([fit(c, tr, te) for c in c_grid for tr, te in splits], jobs)
    means = [round(100 * float(np.mean(accs[k * folds:(k + 1) * folds])), 2) for k in range(len(c_grid))]
    return float(c_grid[int(np.argmax(means))]), means


@_classifier_stage
def inner_kfold(x, y, c_grid, folds, seed=SENTEVAL_SEED, max_iter=100, inner_folds=None, jobs=1,
                classifier="sklearn") -> dict[str, Any]:
    from sklearn.model_selection import StratifiedKFold

    inner_folds = inner_folds or folds
    skf = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    test_acc, dev_acc, chosen, cv_scores, iterations = [], [], [], [], []
    for tr, te in skf.split(x, y):
        c, means = _select_c(x[tr], y[tr], c_grid, inner_folds, seed, max_iter, jobs, classifier)
        acc, clf = _fit_score(x[tr], y[tr], x[te], y[te], c, seed, max_iter, classifier)
        iterations.append(_iterations(clf))
        test_acc.append(100 * acc)
        dev_acc.append(max(means))
        chosen.append(c)
        cv_scores.append(means)  # every C's inner-CV accuracy, per outer fold: the selection can be audited
    return {"score": float(np.mean(test_acc)), "dev_score": float(np.mean(dev_acc)), "fold_scores": test_acc,
            "c_selected": chosen, "cv_scores": cv_scores, "folds": folds, "inner_folds": inner_folds,
            "refit_iterations": iterations}


@_classifier_stage
def kfold_test(x_tr, y_tr, x_te, y_te, c_grid, folds, seed=SENTEVAL_SEED, max_iter=100, jobs=1,
               classifier="sklearn") -> dict[str, Any]:
    c, means = _select_c(x_tr, y_tr, c_grid, folds, seed, max_iter, jobs, classifier)
    acc, clf = _fit_score(x_tr, y_tr, x_te, y_te, c, seed, max_iter, classifier)
    return {"score": 100 * acc, "dev_score": max(means), "c_selected": c, "cv_scores": means, "folds": folds,
            "refit_iterations": _iterations(clf), "predictions": clf.predict(x_te)}


@_classifier_stage
def split_select(x_tr, y_tr, x_dev, y_dev, x_te, y_te, c_grid, seed=SENTEVAL_SEED, max_iter=100,
                 jobs=1, classifier="sklearn") -> dict[str, Any]:
    # SentEval's SplitClassifier: dev accuracy x 100 rounded to 2 decimals, first best; its pytorch fits stop on dev
    def fit(c):
        return lambda: _fit_score(x_tr, y_tr, x_dev, y_dev, c, seed, max_iter, classifier, (x_dev, y_dev))[0]

    devs = [round(100 * acc, 2) for acc in _run_fits([fit(c) for c in c_grid], jobs)]
    c = float(c_grid[int(np.argmax(devs))])
    acc, clf = _fit_score(x_tr, y_tr, x_te, y_te, c, seed, max_iter, classifier, (x_dev, y_dev))
    return {"score": 100 * acc, "dev_score": max(devs), "c_selected": c, "dev_scores": devs,
            "refit_iterations": _iterations(clf)}


def relatedness_targets(scores: np.ndarray, n_classes: int = 5) -> np.ndarray:
    """SentEval's encode_labels: y -> probability floor(y)+1-y on class floor(y), y-floor(y) on floor(y)+1."""
    out = np.zeros((len(scores), n_classes), dtype=np.float32)
    for j, y in enumerate(scores):
        lo = int(np.floor(y))
        if lo < 1 or lo > n_classes or (lo == n_classes and y != lo):
            raise SentevalError(f"relatedness score {y} outside 1..{n_classes}")
        out[j, lo - 1] = lo - y + 1
        if lo < n_classes:
            out[j, lo] = y - lo
    return out


def relatedness(x_tr, s_tr, x_dev, s_dev, x_te, s_te, seed=SENTEVAL_SEED, batch_size=64, epochs_per_round=50,
                max_epochs=1000, patience=3) -> dict[str, Any]:
    """SentEval RelatednessPytorch on the CPU (same loop; ``patience`` = its early_stop_count threshold), on one
    torch thread as the other protocols' fits (:func:`_classifier_stage`)."""
    with _one_torch_thread():
        return _relatedness(x_tr, s_tr, x_dev, s_dev, x_te, s_te, seed, batch_size, epochs_per_round, max_epochs,
                            patience)


@contextlib.contextmanager
def _one_torch_thread():
    """torch on one thread (the torch fits: relatedness, the pytorch classifier), its count given back after.
    The count is read and restored outside the stage's threadpool limit: inside it, torch reports the limit (1), and
    restoring that would leave torch's own MKL, which threadpoolctl cannot see, on one thread after it."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@_classifier_stage
def _relatedness(x_tr, s_tr, x_dev, s_dev, x_te, s_te, seed, batch_size, epochs_per_round, max_epochs,
                 patience) -> dict[str, Any]:
    import copy

    import torch
    from scipy.stats import pearsonr, spearmanr

    rng = np.random.RandomState(seed)
    torch.manual_seed(seed)
    n_classes = 5
    model = torch.nn.Sequential(torch.nn.Linear(x_tr.shape[1], n_classes), torch.nn.Softmax(dim=-1))
    optimizer = torch.optim.Adam(model.parameters(), weight_decay=0.0)
    # the batch mean, as for the classifier (SentEval's `loss_fn.size_average = False`, set after construction, is
    # ignored by torch >= 0.4.1). Until 2026-11-30 strae summed: on two multi-view runs' SICK-R the mean gives
    # +0.02 and +0.03 (Pearson x 100), the same epochs; a score's own draw over SentEval seeds is ~0.7
    loss_fn = torch.nn.MSELoss(reduction="mean")
    xt, yt = torch.from_numpy(np.asarray(x_tr, np.float32)), torch.from_numpy(relatedness_targets(s_tr))
    xd, xe = torch.from_numpy(np.asarray(x_dev, np.float32)), torch.from_numpy(np.asarray(x_te, np.float32))
    r = np.arange(1, n_classes + 1)

    def predict(x):
        model.eval()
        with torch.no_grad():
            return model(x).numpy() @ r

    best, best_state, bad, epoch, rounds = -1.0, None, 0, 0, 0
    while epoch <= max_epochs:
        model.train()
        for _ in range(epochs_per_round):
            perm = rng.permutation(len(xt))
            for i in range(0, len(xt), batch_size):
                idx = torch.from_numpy(perm[i:i + batch_size])
                loss = loss_fn(model(xt[idx]), yt[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        epoch += epochs_per_round
        rounds += 1
        pr = float(pearsonr(predict(xd), s_dev)[0])
        if pr > best:
            best, best_state = pr, copy.deepcopy(model.state_dict())
        else:
            if bad >= patience:
                break
            bad += 1
    model.load_state_dict(best_state)
    yhat = predict(xe)
    return {"score": 100 * float(pearsonr(yhat, s_te)[0]), "metric": "pearson_x100",
            "spearman": 100 * float(spearmanr(yhat, s_te)[0]), "mse": float(np.mean((yhat - s_te) ** 2)),
            "dev_score": 100 * best, "epochs": epoch, "rounds": rounds}


# ----------------------------------------------------------------------------------------------- features
def pair_features(a: np.ndarray, b: np.ndarray, recipe: Sequence[str]) -> np.ndarray:
    parts = {"u": lambda: a, "v": lambda: b, "abs_diff": lambda: np.abs(a - b), "product": lambda: a * b}
    return np.concatenate([parts[name]() for name in recipe], axis=1).astype(np.float32, copy=False)


def f1_positive(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    tp = float(np.sum((y_pred == 1) & (y_true == 1)))
    fp = float(np.sum((y_pred == 1) & (y_true != 1)))
    fn = float(np.sum((y_pred != 1) & (y_true == 1)))
    return 100 * 2 * tp / (2 * tp + fp + fn) if tp else 0.0


# ----------------------------------------------------------------------------------------------- one task
class _Embedder:
    """Encodes texts once per task (unique strings), NaN rows -> zeros (counted); with an encoder that keeps
    ``token_counts``, how many of the task's tokens its vocabulary lacked."""

    def __init__(self, encoder, batch_size: int | None):
        self.encoder = encoder
        self.batch_size = batch_size
        self.n_nan = 0
        self.tokens = {"tokens": 0, "unknown": 0}

    def unknown_tokens(self) -> dict[str, Any] | None:
        """Over each split's distinct texts (each encoded once), or None for an encoder that does not count."""
        if getattr(self.encoder, "token_counts", None) is None:
            return None
        n, unknown = self.tokens["tokens"], self.tokens["unknown"]
        return {"tokens": n, "unknown": unknown, "share": round(unknown / n, 4) if n else None}

    def __call__(self, texts: list[str]) -> np.ndarray:
        from strae.evaluate.harness import encode_texts

        counts = getattr(self.encoder, "token_counts", None)
        before = dict(counts) if counts is not None else None
        vectors = encode_texts(self.encoder, texts, "sentence", self.batch_size)
        if before is not None:
            after = self.encoder.token_counts  # read again: an encoder may replace the dict rather than update it
            for key in self.tokens:
                self.tokens[key] += int(after[key]) - int(before[key])
        bad = ~np.isfinite(vectors).all(axis=1)
        self.n_nan += int(bad.sum())
        vectors = np.array(vectors, dtype=np.float32)
        vectors[bad] = 0.0
        return vectors


def evaluate_task(encoder, task: SentevalTask, resolve, batch_size: int | None = None, inner_folds: int | None = None,
                  max_iter: int = 100, seed: int = SENTEVAL_SEED, jobs: int = 1,
                  classifier: str = "sklearn") -> dict[str, TaskResult]:
    """Score one task; returns {task name: result} (MRPC also gives MRPC_f1). ``jobs``: threads for the
    classifier's fits (:func:`_run_fits`). ``classifier``: SentEval's sklearn path over the task's ``c_grid``, or
    its pytorch path (:class:`SentevalLogReg`) over SentEval's L2 grid; SICK-R's regression is the same for both."""
    if classifier not in CLASSIFIERS:
        raise SentevalError(f"classifier {classifier!r}: use one of {CLASSIFIERS}")
    started = time.perf_counter()
    splits, files = read_task(task, resolve)
    embed = _Embedder(encoder, batch_size)
    torch_fits = classifier == "pytorch"
    grid, grid_key = (PYTORCH_L2_GRID, "l2_grid") if torch_fits else (task.c_grid, "c_grid")
    described = (f"SentEval pytorch LogReg (Adam lr 1e-3, batch 64, L2 grid, early stopping: {PYTORCH_LOGREG})"
                 if torch_fits else f"sklearn LogisticRegression(lbfgs, max_iter={max_iter})")
    base = {"level": "sentence", "suite": SUITE, "protocol": task.protocol, "language": task.language,
            "registry": list(task.files.values()), "files": files, "metric": task.metric, "seed": seed,
            # the regularisation grid searched (the pytorch path's relatedness regression searches none)
            **({} if torch_fits and task.protocol == "relatedness" else {grid_key: list(grid)}),
            "features": list(task.features) if task.reader in ("sick", "mrpc") else None,
            "classifier": described if task.protocol != "relatedness"
            else "softmax regression to the score distribution (torch, Adam, MSE batch mean)"}

    def feats(split: Split) -> np.ndarray:
        if split.texts is not None:
            return embed(split.texts)
        both = embed(split.left + split.right)
        return pair_features(both[: len(split)], both[len(split):], task.features)

    def labels(split: Split) -> np.ndarray:
        # the pytorch classifier's output rows in SentEval's label order (its ids; SICK-E's is not the sorted one),
        # which decides which initial weights each class gets; sklearn's fits do not depend on it
        if torch_fits and task.label_ids and task.reader != "binary":
            return np.asarray([task.label_ids[str(v)] for v in split.y])
        return split.y

    extra: dict[str, dict[str, Any]] = {}
    fits = _one_torch_thread() if torch_fits else contextlib.nullcontext()
    if task.protocol == "inner_kfold":
        data = splits["all"]
        x = feats(data)
        with fits:
            result = inner_kfold(x, labels(data), grid, task.folds, seed, max_iter, inner_folds, jobs, classifier)
        sizes = {"all": len(data)}
        split_name = f"{task.folds}-fold cv"
    elif task.protocol == "kfold_test":
        tr, te = splits["train"], splits["test"]
        x_tr, x_te = feats(tr), feats(te)
        with fits:
            result = kfold_test(x_tr, labels(tr), x_te, labels(te), grid, task.folds, seed, max_iter, jobs, classifier)
        predictions = result.pop("predictions")
        sizes = {"train": len(tr), "test": len(te)}
        split_name = "test"
        if task.reader == "mrpc":
            result["f1"] = f1_positive(te.y, predictions)
            extra[f"{task.name}_f1"] = {"score": result["f1"], "metric": "f1_x100", "derived_from": task.name}
    elif task.protocol == "split":
        tr, dev, te = splits["train"], splits["dev"], splits["test"]
        x_tr, x_dev, x_te = feats(tr), feats(dev), feats(te)
        with fits:
            result = split_select(x_tr, labels(tr), x_dev, labels(dev), x_te, labels(te), grid, seed, max_iter,
                                  jobs, classifier)
        sizes = {"train": len(tr), "dev": len(dev), "test": len(te)}
        split_name = "test"
    else:
        tr, dev, te = splits["train"], splits["dev"], splits["test"]
        result = relatedness(feats(tr), tr.y, feats(dev), dev.y, feats(te), te.y, seed)
        sizes = {"train": len(tr), "dev": len(dev), "test": len(te)}
        split_name = "test"
    if torch_fits and "c_selected" in result:  # the grid's values are weight decays, not C
        result["l2_selected"] = result.pop("c_selected")
    n_items = sizes.get("test", sizes.get("all"))
    unknown = embed.unknown_tokens()
    if unknown is not None:
        base["unknown_tokens"] = unknown
    record = {**base, "metric": result.pop("metric", task.metric), **result, "sizes": sizes, "split": split_name,
              "n_pairs": n_items, "n_oov": embed.n_nan, "n_scored": n_items, "subsets": {},
              "seconds": round(time.perf_counter() - started, 2)}
    out = {task.name: TaskResult.from_dict(record)}
    for name, rec in extra.items():
        out[name] = TaskResult.from_dict({**base, **rec, "sizes": sizes, "split": split_name, "n_pairs": n_items,
                                          "n_oov": embed.n_nan, "n_scored": n_items, "subsets": {}})
    return out


def suite_tasks(catalog: dict[str, SentevalTask], language: str, suite_config: dict[str, Any] | None,
                tasks_path: str | Path) -> list[SentevalTask]:
    """The tasks the transfer suite scores for ``language`` when none is named: those of ``suite_config``'s
    ``tasks`` (the config's ``multiview.senteval.tasks``, one list for every multi-view language) that are this
    language's (config/tasks.yaml's ``language:``), in the list's order, else every transfer task of the language.
    Empty when the language has none, so a multi-view language without SentEval data scores the zero-shot tasks
    only. A name the tasks file does not declare is refused, naming the file."""
    configured = list((suite_config or {}).get("tasks") or [])
    if not configured:
        return [t for t in catalog.values() if t.group == VARIANT_GROUPS[SUITE] and t.language == language]
    unknown = [n for n in configured if n not in catalog]
    if unknown:
        raise SentevalError(f"{tasks_path}: unknown SentEval task(s) {unknown}; known: {sorted(catalog)}")
    return [catalog[n] for n in configured if catalog[n].language == language]


def select_tasks(catalog: dict[str, SentevalTask], language: str, variant: str, names: Sequence[str] | None,
                 tasks_path: str | Path, suite_config: dict[str, Any] | None = None) -> list[SentevalTask]:
    """The tasks one evaluation scores: ``names`` (--tasks), else for the transfer suite :func:`suite_tasks`
    (the configured tasks of this language), else every task of the variant's group for ``language``. Refused,
    naming the tasks file, when a name is unknown, a named task is of another language, a task is of another
    group, or nothing is left. The workflow reads the same selection for its SentEval jobs' task-definition
    param."""
    if variant not in VARIANT_GROUPS:
        raise SentevalError(f"--variant {variant!r}: use one of {sorted(VARIANT_GROUPS)}")
    group = VARIANT_GROUPS[variant]
    if names:
        names = list(names)
    elif variant == SUITE:
        names = [t.name for t in suite_tasks(catalog, language, suite_config, tasks_path)]
    else:
        names = [t for t, v in catalog.items() if v.group == group and v.language == language]
    unknown = [n for n in names if n not in catalog]
    if unknown:
        raise SentevalError(f"{tasks_path}: unknown SentEval task(s) {unknown}; known: {sorted(catalog)}")
    if not names:
        among = " among multiview.senteval.tasks" if (suite_config or {}).get("tasks") and variant == SUITE else ""
        raise SentevalError(f"{tasks_path}: no {group} task for language {language!r}{among} (senteval_tasks)")
    tasks = [catalog[n] for n in names]
    for task in tasks:
        if task.language != language:
            raise SentevalError(f"{tasks_path}: SentEval task {task.name!r} is for language {task.language!r}, "
                                f"not {language!r}")
        if task.group != group:
            raise SentevalError(f"{tasks_path}: SentEval task {task.name!r} is a {task.group} task; score it with "
                                f"--variant {next(v for v, g in VARIANT_GROUPS.items() if g == task.group)}, "
                                f"not {variant} (one JSON per task group)")
    return tasks


# ----------------------------------------------------------------------------------------------- whole run
def evaluate(spec: str, language: str, *, config_path: str = "config/config.yaml", tasks_path: str | None = None,
             only: Sequence[str] | None = None, encoder_options: dict[str, Any] | None = None,
             batch_size: int | None = None, resources_dir: str | None = None, resolve=None,
             inner_folds: int | None = None, max_iter: int = 100, progress: bool = True,
             variant: str = SUITE, jobs: int | None = None, classifier: str | None = None) -> EvalResult:
    from strae.data.registry import load_config
    from strae.encode import load_encoder
    from strae.evaluate.harness import _run_record, evaluation_setting, failed_run_info
    from strae.evaluate.tasks import make_resolver, tasks_file

    config = load_config(config_path)
    data_cfg = config.get("data") or {}
    tasks_path = tasks_path or tasks_file(config)
    catalog = load_senteval_tasks(tasks_path)
    block = (config.get("multiview") or {}).get("senteval") or {}
    suite_cfg = {key: block[key] for key in CONFIG_KEYS if key in block}
    tasks = select_tasks(catalog, language, variant, only, tasks_path, suite_cfg)
    if inner_folds is None:
        inner_folds = suite_cfg.get("inner_folds")
    max_iter = int(suite_cfg.get("max_iter", max_iter))
    classifier = classifier or suite_cfg.get("classifier") or "sklearn"
    if classifier not in CLASSIFIERS:
        raise SentevalError(f"{config_path}: multiview.senteval.classifier {classifier!r}: use one of {CLASSIFIERS}")
    if jobs is None:  # the threads the job was given (OMP_NUM_THREADS: the workflow sets it), else one at a time
        threads = os.environ.get("OMP_NUM_THREADS", "")
        jobs = int(threads) if threads.isdigit() else 1
    jobs = max(1, int(jobs))
    planned = [t.name for t in tasks] + [f"{t.name}_f1" for t in tasks if t.reader == "mrpc"]
    extra_prov = {"command": sys.argv, "config": str(config_path), "tasks_file": str(tasks_path),
                  "encoder_options": encoder_options or {}, "suite": SUITE, "inner_folds": inner_folds,
                  "max_iter": max_iter, "classifier": classifier, "fit_jobs": jobs}
    failed = failed_run_info(spec)
    if failed is not None:  # a failed run is recorded without scores: no file needed
        return EvalResult(suite=SUITE, variant=variant, language=language, run=_run_record(failed, language),
                          evaluation=evaluation_setting(encoder_options, config, failed.get("model")),
                          encoder={"encoder_id": spec, "run_dir": spec}, planned_tasks=planned, tasks={},
                          provenance=provenance(**extra_prov, device=None))
    if resolve is None:
        resolve = make_resolver(resources_dir or paths.resources_dir(config), data_cfg.get("registry"))
    for task in tasks:  # every file placed and checked first: a missing one fails now, not after the other tasks
        for name in task.files.values():
            resolve(name)
    encoder = load_encoder(spec, **(encoder_options or {}))
    described = encoder.describe()
    results: dict[str, TaskResult] = {}
    bar = tqdm(tasks, desc=f"senteval {language}", unit="task", disable=not progress)
    for task in bar:
        bar.set_postfix_str(task.name)
        started = time.perf_counter()
        done = evaluate_task(encoder, task, resolve, batch_size, inner_folds, max_iter, jobs=jobs,
                             classifier=classifier)
        results.update(done)
        if not progress:  # no bar (a workflow's log): one line a task, so a long evaluation shows where it is
            for name, result in done.items():
                print(f"{name}: {result.score:.2f} ({time.perf_counter() - started:.0f} s)", flush=True)
    run = _run_record(encoder.run_info() or {}, language)
    data_files = {name: info["sha256"] for r in results.values()
                  for name, info in (r.details.get("files") or {}).items()}
    return EvalResult(suite=SUITE, variant=variant, language=language, run=run,
                      evaluation=evaluation_setting(encoder_options, config, run.get("model")), encoder=described,
                      planned_tasks=planned, tasks=results,
                      provenance=provenance(**extra_prov, seed=run.get("seed"), device=described.get("device", "cpu"),
                                            batch_size=batch_size, data_files=data_files))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strae evaluate --suite senteval", description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", choices=[SUITE], required=True)
    p.add_argument("--model", required=True, help="builtin encoder or a run directory")
    p.add_argument("--lang", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--variant", default=SUITE, choices=sorted(VARIANT_GROUPS),
                   help="senteval = the transfer tasks (default), probing = SentEval's probing tasks; one JSON each")
    p.add_argument("--tasks", default=None,
                   help="comma-separated (default: the tasks of multiview.senteval.tasks that are --lang's)")
    p.add_argument("--inner-folds", type=int, default=None,
                   help="inner CV folds of inner_kfold tasks (default: the task's folds, SentEval = outer folds)")
    p.add_argument("--classifier", choices=CLASSIFIERS, default=None,
                   help="SentEval's logistic regression: sklearn (usepytorch False, the task's C grid) or pytorch "
                        "(its default usepytorch True: Adam, L2 grid 1e-5..1e-2, early stopping); default: "
                        "multiview.senteval.classifier of the config, else sklearn")
    p.add_argument("--encoder-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--config", default="config/config.yaml")
    p.add_argument("--tasks-file", default=None)
    p.add_argument("--resources-dir", default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--jobs", type=int, default=None,
                   help="classifier fits at once, one BLAS thread each (default: OMP_NUM_THREADS when set, as "
                        "the workflow sets it to scale.eval_threads, else 1); the scores are those of one job "
                        "(encoding uses torch's threads, OMP_NUM_THREADS)")
    p.add_argument("--curve", action="store_true",
                   help="score every point of the run's training curve (strae train-multiview --curve-every) and "
                        "write one curve JSON (strae.evaluate.curve; the multi-view paper's Figure 2)")
    p.add_argument("--while-training", action="store_true",
                   help="with --curve: a run still training has its points so far scored into OUT.partial; the "
                        "same command after it has finished scores the rest and writes OUT")
    p.add_argument("--quiet", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    from strae.evaluate.harness import parse_encoder_option

    args = build_parser().parse_args(argv)
    check_output_file(args.out)
    only = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    options = dict(parse_encoder_option(o) for o in args.encoder_option)
    if args.device is not None:
        options["device"] = args.device
    if args.curve:
        return _curve_main(args, only, options)
    if args.while_training:
        raise SentevalError("--while-training: only with --curve")
    result = evaluate(args.model, args.lang, config_path=args.config, tasks_path=args.tasks_file, only=only,
                      encoder_options=options, batch_size=args.batch_size, resources_dir=args.resources_dir,
                      inner_folds=args.inner_folds, progress=not args.quiet, variant=args.variant,
                      jobs=args.jobs, classifier=args.classifier)
    result.to_disk(args.out)
    if result.failed:
        print(f"{args.out}: run failed ({result.run['failure_reason']}); recorded without scores")
        return 0
    for name, task in result.tasks.items():
        print(f"{name:<10} {task.score:6.2f}  ({task.details['metric']}, n={task.n_pairs})")
    print(f"wrote {args.out}")
    return 0


def _curve_main(args: argparse.Namespace, only: list[str] | None, options: dict[str, Any]) -> int:
    from strae.evaluate import curve

    if args.variant != SUITE:
        raise SentevalError(f"--curve --variant {args.variant}: a curve scores the transfer tasks (--variant {SUITE})")
    document = curve.evaluate_curve(args.model, args.lang, only, args.out, config_path=args.config,
                                    tasks_path=args.tasks_file, encoder_options=options, batch_size=args.batch_size,
                                    resources_dir=args.resources_dir, inner_folds=args.inner_folds, jobs=args.jobs,
                                    classifier=args.classifier, progress=not args.quiet,
                                    while_training=args.while_training)
    if document is not None:
        print(f"wrote {args.out}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
