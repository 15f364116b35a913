"""Does strae's SentEval classifier stop before it converges on a trained 2,000-d multi-view vector, and would
SentEval's 2019 solver have scored it differently?

SentEval's scikit-learn path builds ``LogisticRegression(C=reg, random_state=seed)`` and nothing else: the solver
is scikit-learn's default, liblinear until 0.22 (December 2019; what the paper's 2019 evaluation ran), lbfgs since,
which strae runs, both with max_iter 100. On one outer fold of a task (stratified 10-fold, SentEval's seed 1111,
SentEval's row order), for each C of the task's grid: lbfgs at max_iter 100 (strae) and 5,000 (converged), and
liblinear (binary tasks: the same objective but for its penalised intercept) — test accuracy and iterations.

    python reproductions/multiview-vocabulary-floor-cpu-2026-11-29/convergence.py --model RUN [--tasks MR,CR]
        --out OUT.json      (from the repository root; results/config.effective.yaml present)
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def main() -> None:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    from strae.data.registry import load_config
    from strae.encode import load_encoder
    from strae.evaluate import senteval
    from strae.evaluate.tasks import make_resolver
    from strae.io import write_json

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--tasks", default="MR,CR")
    p.add_argument("--config", default="results/config.effective.yaml")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    config = load_config(args.config)
    catalog = senteval.load_senteval_tasks(config["data"]["tasks"])
    resolve = make_resolver(config["data"]["resources_dir"], config["data"]["registry"])
    encoder = load_encoder(args.model, device="cpu")
    out = {"model": args.model, "encoder": encoder.describe(), "tasks": {}}
    for name in args.tasks.split(","):
        task = catalog[name]
        splits, _ = senteval.read_task(task, resolve)
        data = senteval._in_sentevals_order(splits["all"], task.label_ids)
        x = senteval._Embedder(encoder, None)(data.texts)
        y = np.asarray(data.y)
        tr, te = next(StratifiedKFold(n_splits=task.folds, shuffle=True, random_state=1111).split(x, y))
        rows = []
        for c in task.c_grid:
            for solver, build in (("lbfgs-100", lambda: LogisticRegression(C=c, random_state=1111, max_iter=100)),
                                  ("lbfgs-5000", lambda: LogisticRegression(C=c, random_state=1111, max_iter=5000)),
                                  ("liblinear", lambda: LogisticRegression(C=c, random_state=1111,
                                                                           solver="liblinear"))):
                started = time.perf_counter()
                clf = build().fit(x[tr], y[tr])
                row = {"C": c, "solver": solver, "accuracy": round(100 * float(np.mean(clf.predict(x[te]) == y[te])), 2),
                       "iterations": int(np.max(clf.n_iter_)), "seconds": round(time.perf_counter() - started, 1)}
                rows.append(row)
                print(name, row, flush=True)
        out["tasks"][name] = {"n_train": int(len(tr)), "n_test": int(len(te)), "fits": rows}
    write_json(args.out, out)


if __name__ == "__main__":
    main()
