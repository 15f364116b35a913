"""Print this record's table from its evaluation JSONs (or from measure.sh's OUT folder): one row per scoring of the
same CL weights, with the OpenBLAS kernels it ran, its score, the dev score, the C chosen, and the 4-seed record's
score of the same task beside it. Usage: python compare.py [FOLDER]"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FOLDER = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
RECORD = HERE.parent / "multiview-cpu-full-4seeds-2026-11-29/eval/multiview_cl.seed1.senteval.json"


def fold_mean(value):
    return sum(value) / len(value) if isinstance(value, list) else value


record = json.loads(RECORD.read_text())
print(f"4-seed record (multiview-cpu-full-4seeds-2026-11-29), CL seed 1, code {record['provenance']['git_sha'][:7]}:")
for task in ("SICK-E", "MR"):
    t = record["tasks"][task]
    print(f"  {task}: {t['score']:.14g}  dev {fold_mean(t['dev_score']):.4g}  C {t['c_selected']}")
print()
print("| file | code | OpenBLAS kernels | task | score | dev | C chosen | max_iter | refit iterations | = record |")
print("|---|---|---|---|---|---|---|---|---|---|")
documents = {path: json.loads(path.read_text()) for pattern in ("sick-e.*.json", "mr.*.json")
             for path in FOLDER.glob(pattern)}
for path, document in sorted(documents.items(), key=lambda item: (  # the record's code first, then by task
        item[1]["provenance"]["git_sha"] != record["provenance"]["git_sha"], item[0].name)):
    prov = document["provenance"]
    # ea098a9 recorded no kernels (strae.io.cpu_kernels came later): the file name says which were asked for
    kernels = prov.get("cpu_kernels", {}).get("blas")
    named = path.stem.split(".")[2]
    arch = ", ".join(sorted({b["architecture"] for b in kernels})) if kernels else f"{named} (named)"
    for task, t in document["tasks"].items():
        same = ("—" if prov["git_sha"] != record["provenance"]["git_sha"]  # another code orders the rows otherwise
                else "yes" if t["score"] == record["tasks"][task]["score"] else "no")
        print(f"| {path.name} | {prov['git_sha'][:7]} | {arch} | {task} | {t['score']:.14g} | "
              f"{fold_mean(t['dev_score']):.4g} | {t['c_selected']} | {prov.get('max_iter')} | "
              f"{t.get('refit_iterations', '—')} | {same} |")

isa = json.loads((FOLDER / "ctl-seed1-100steps.torch-isa.json").read_text())
base, other = isa["runs"]["default"], isa["runs"]["avx2"]
differ = [step for step, (a, b) in enumerate(zip(base["loss"], other["loss"]), start=1) if a != b]  # steps count from 1
rounding = json.loads((HERE.parent / "multiview-rounding-cpu-2026-11-30/ctl-seed1-300steps.history.json").read_text())
print()
print(f"Training, CTL seed 1, 100 steps: torch {base['cpu_kernels']['torch']} vs {other['cpu_kernels']['torch']} "
      f"(ATEN_CPU_CAPABILITY): {len(differ)} of {len(base['loss'])} logged losses differ, the first at step "
      f"{differ[0] if differ else None}; weights after 100 steps differ by up to "
      f"{isa['max_abs_weight_difference_after_100_steps']:.3f}. The {base['cpu_kernels']['torch']} run equals "
      f"multiview-rounding-cpu-2026-11-30's 300-step run at e6e97e6 in its first 100 steps: "
      f"{base['loss'] == rounding['runs']['head']['loss'][:100]}")
