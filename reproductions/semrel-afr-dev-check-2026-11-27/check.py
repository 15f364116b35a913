"""Which Afrikaans SemRel file does SemEval Table 3's "Afr SemRel (Dev)" (23.4; test 76.5) look like?

Scores two untrained scorers on the pilot dev (20 pairs), dev (375) and test (375) files, and on the table's Dutch
STS-B dev and test (for comparison: the paper reports test 64.5 above dev 52.8): word overlap (Dice over the
case-folded words of `strae.data.coverage.words`) and strae's random-token encoder (seeded random vector per piece,
averaged; the harness's own evaluation, paper variant). Run from the repository root with the mirror:
    STRAE_DATA_MIRROR=../shared/data python reproductions/semrel-afr-dev-check-2026-11-27/check.py
"""
import tempfile

from scipy.stats import spearmanr

from strae.data.coverage import words
from strae.evaluate import harness
from strae.evaluate.tasks import load_tasks, make_resolver, read_pairs

TASKS = ["semrel_afr_pilot_dev", "semrel_afr_dev", "semrel_afr_test", "stsb_nl_dev", "stsb_nl"]


def dice(left: str, right: str) -> float:
    a, b = set(words(left)), set(words(right))
    return 2 * len(a & b) / (len(a) + len(b)) if a or b else 0.0


with tempfile.TemporaryDirectory() as resources:
    catalog, resolve = load_tasks("config/tasks.yaml"), make_resolver(resources)
    floor = harness.evaluate("random-token", "af", "paper", only=TASKS, resources_dir=resources, progress=False)
    print("| file | pairs | Dice overlap | random-token |\n|---|---|---|---|")
    for name in TASKS:
        task = catalog.get(name, "paper")
        pairs = read_pairs(resolve(task.file_spec), task.level, task.rows, file_format=task.format)
        rho = spearmanr([dice(a, b) for a, b in zip(pairs.left, pairs.right)], pairs.gold).statistic * 100
        print(f"| {name} | {len(pairs)} | {rho:.1f} | {floor.tasks[name].score:.1f} |")

