"""The table of the check: per corpus and seed, the lexical scores (numeric Spearman; the reference's string-ranked
protocol in brackets) and the STS average, from the evaluation JSONs glove.sh (or banyan.sh) wrote.
Usage: python summarise.py WORK_DIR [PREFIX]   (PREFIX glove- for glove.sh's evaluations)"""
import json
import statistics
import sys
from pathlib import Path

work = Path(sys.argv[1])
prefix = sys.argv[2] if len(sys.argv) > 2 else ""
LEXICAL = ("simlex", "wordsim_sim", "wordsim_rel")
STS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "semrel")
rows, by_corpus = [], {}
for path in sorted(work.glob(f"{prefix}eval-*-*.json")):
    corpus, seed = path.stem.rsplit("-", 2)[1:]
    tasks = json.loads(path.read_text())["tasks"]
    lexical = [tasks[name]["score"] for name in LEXICAL]
    oov = sum(tasks[name]["n_oov"] or 0 for name in LEXICAL)
    reference = [tasks[name]["scores"]["spearman_reference_strings"] for name in LEXICAL]
    sts = statistics.mean(tasks[name]["score"] for name in STS)
    by_corpus.setdefault(corpus, []).append((*lexical, statistics.mean(lexical), sts))
    rows.append(f"| {corpus} | {seed} | " + " | ".join(f"{n:.2f} ({r:.2f})" for n, r in zip(lexical, reference))
                + f" | {statistics.mean(lexical):.2f} | {sts:.2f} | {oov} |")
print("| corpus | seed | SimLex | WordSim-S | WordSim-R | lexical avg | STS avg (8) | lexical pairs "
      "without a vector |\n"
      "|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
for corpus, values in by_corpus.items():
    means = [statistics.mean(column) for column in zip(*values)]
    print(f"| {corpus} | mean of {len(values)} | " + " | ".join(f"{m:.2f}" for m in means) + " |")
