"""Check the SentEval evaluator against published numbers: binary bag-of-words + logistic regression.

    .venv/bin/python benchmarks/senteval_bow_check.py [--tasks MR,SUBJ] [--inner-folds K]

Features = binary unigram presence over the task's own whitespace tokens (lowercased), i.e. the classic
"unigram bag-of-words" baseline; the protocol is exactly `strae evaluate --suite senteval`'s (SentEval's
inner_kfold, C grid 2^-2..2^3). Published unigram bag-of-words accuracies to compare with (Wang & Manning 2012,
Table 3, 10-fold CV): MR: SVM-uni 76.2, MNB-uni 77.9; SUBJ: SVM-uni 90.8, MNB-uni 92.6; CR: SVM-uni 79.0,
MNB-uni 79.8; MPQA: SVM-uni 86.1, MNB-uni 85.3. Prints one line per task. Not a timed test.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from strae.evaluate.senteval import inner_kfold, load_senteval_tasks, read_task
from strae.evaluate.tasks import make_resolver

PUBLISHED = {"MR": (76.2, 77.9), "SUBJ": (90.8, 92.6), "CR": (79.0, 79.8), "MPQA": (86.1, 85.3)}


def bow(texts: list[str]) -> sp.csr_matrix:
    vocab: dict[str, int] = {}
    rows, cols = [], []
    for i, text in enumerate(texts):
        for token in set(text.lower().split()):
            rows.append(i)
            cols.append(vocab.setdefault(token, len(vocab)))
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(texts), len(vocab)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="MR,SUBJ")
    parser.add_argument("--inner-folds", type=int, default=None)
    parser.add_argument("--tasks-file", default="config/tasks.yaml")
    args = parser.parse_args()
    catalog = load_senteval_tasks(args.tasks_file)
    resolve = make_resolver("resources", "config/registry.yaml")
    for name in args.tasks.split(","):
        task = catalog[name]
        started = time.perf_counter()
        splits, _ = read_task(task, resolve)
        data = splits["all"]
        result = inner_kfold(bow(data.texts), data.y, task.c_grid, task.folds, inner_folds=args.inner_folds)
        svm, mnb = PUBLISHED.get(name, (float("nan"), float("nan")))
        print(f"{name}: bag-of-words LR {result['score']:.1f} (10-fold, C {sorted(set(result['c_selected']))}); "
              f"published SVM-uni {svm}, MNB-uni {mnb}; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
