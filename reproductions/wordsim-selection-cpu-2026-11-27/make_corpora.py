"""Two small English corpora of equal size from the corpus strae trains on (resources/corpora/en/train.txt):
``selected`` = every line holding >= 5 distinct WordSim-353 words (the authors' corpus's apparent rule), ``uniform`` =
a seeded uniform sample of lines with the same number of words. Both get the same dev set (the first 500 lines of
resources/corpora/en/dev.txt). Usage: python make_corpora.py OUT_DIR"""
import csv
import random
import sys
from pathlib import Path

from strae.data.coverage import words

MIRROR_WORD = Path("resources/data/eval/word")
out = Path(sys.argv[1])
wordsim = set()
for name in ("wordsim353_sim", "wordsim353_rel"):
    path = MIRROR_WORD / f"{name}.csv"
    with open(path, encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            wordsim |= {row["word1"].lower(), row["word2"].lower()}
lines = [line.rstrip("\n") for line in open("resources/corpora/en/train.txt", encoding="utf-8") if line.strip()]
selected = [line for line in lines if len(wordsim & set(words(line))) >= 5]
budget = sum(len(line.split()) for line in selected)
order = list(range(len(lines)))
random.Random(20261127).shuffle(order)
uniform, total = [], 0
for index in order:
    if total >= budget:
        break
    uniform.append(lines[index])
    total += len(lines[index].split())
dev = [line.rstrip("\n") for line in open("resources/corpora/en/dev.txt", encoding="utf-8") if line.strip()][:500]
for name, chosen in (("selected", selected), ("uniform", uniform)):
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.txt").write_text("\n".join(chosen) + "\n", encoding="utf-8")
    (folder / "dev.txt").write_text("\n".join(dev) + "\n", encoding="utf-8")
    words_n = sum(len(line.split()) for line in chosen)
    print(f"{name}: {len(chosen)} lines, {words_n} words, {words_n / len(chosen):.1f} words per line")
