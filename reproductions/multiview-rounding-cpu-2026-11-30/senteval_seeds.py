"""SICK-R and SICK-E of one run's fixed weights under several SentEval seeds (the seed draws SICK-R's validation
split, batches and initial weights, and seeds SICK-E's classifier): how much of a score is the protocol's draw.
    python senteval_seeds.py RUN OUT.json [SEED ...]   (default seeds: 1111, SentEval's, then 1-4)"""
import json
import sys
import time

import numpy as np

from strae.data.registry import load_config
from strae.encode import load_encoder
from strae.evaluate import harness, senteval
from strae.evaluate.tasks import make_resolver, tasks_file
from strae import paths

run, out = sys.argv[1], sys.argv[2]
seeds = [int(s) for s in sys.argv[3:]] or [1111, 1, 2, 3, 4]
config = load_config("config/config.yaml")
catalog = senteval.load_senteval_tasks(tasks_file(config))
tasks = senteval.select_tasks(catalog, "en", "senteval", ["SICK-R", "SICK-E"], tasks_file(config), {})
resolve = make_resolver(paths.resources_dir(config), (config.get("data") or {}).get("registry"))
encoder = load_encoder(run)
cache, encode = {}, harness.encode_texts


def encode_once(enc, texts, level, batch_size):  # the features are the same for every seed: encoded once
    key = (tuple(texts), level)
    if key not in cache:
        cache[key] = encode(enc, texts, level, batch_size)
    return cache[key]


harness.encode_texts = encode_once
results = {"run": run, "weights_sha256": encoder.describe().get("weights_sha256"), "seeds": seeds, "scores": {}}
for task in tasks:
    for seed in seeds:
        started = time.perf_counter()
        done = senteval.evaluate_task(encoder, task, resolve, seed=seed, jobs=1)
        score = done[task.name].score
        results["scores"].setdefault(task.name, []).append(score)
        print(f"{task.name} seed {seed}: {score:.2f} ({time.perf_counter() - started:.0f} s)", flush=True)
for name, scores in results["scores"].items():
    results.setdefault("summary", {})[name] = {"mean": float(np.mean(scores)), "std": float(np.std(scores)),
                                               "min": min(scores), "max": max(scores)}
json.dump(results, open(out, "w"), indent=1)
print(json.dumps(results["summary"]))
