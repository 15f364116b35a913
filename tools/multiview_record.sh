#!/usr/bin/env bash
# The multi-view paper's runs under results/ (after `snakemake multiview`, any overlay) -> a committed record:
#     bash tools/multiview_record.sh NAME
#     bash tools/multiview_record.sh multiview-cpu-full-2026-11-29
# reproductions/NAME/ gets, in the layout of reproductions/multiview-cpu-2026-11-28/:
#   parse_meta.json                       the runs' parse (meta.json of the directory their train.json names)
#   runs/<model>/seed<N>/train.json       each run of the config's models x seeds, failed seeds too (results/runs/<lang>/multiview_*/...)
#   eval/<model>.seed<N>.<variant>.json   its evaluations: senteval (Table 1), probing (Table 2) where scored,
#                                         paper (zero-shot); the random-token floors' as random-token.<variant>.json
#                                         (256-d) and random-token.dim<N>.<variant>.json (the config's other widths;
#                                         the runs' language; without results/config.effective.yaml the 256-d one)
#   curve/<model>.seed<N>.json            a run's training curve (multiview.curve: strae evaluate --suite senteval --curve)
#   scores.csv                            strae aggregate of eval/ (source_json = the record's own files)
#   table1.{csv,md}, table2.{csv,md}      strae report table of scores.csv
#   figure2.{png,pdf}                     the paper's Figure 2 from curve/ (strae figure multiview_fig2_training_curve)
# README.md is for you to write (what ran, where, how long, what the tables say). Refused before anything is
# written: an existing NAME (records are immutable), a run still under way (train.json status neither completed nor
# failed; a failed seed is recorded as failed), a model x seed of results/config.effective.yaml without a run, runs
# of two parses or of two settings of one model, a run or a configured floor without its senteval JSON (unless
# the config scores no SentEval task of the runs' language: strae.evaluate.senteval.suite_tasks). An
# interrupted or failed build leaves no reproductions/NAME. The record is the model x seed set of
# results/config.effective.yaml: run directories of other seeds still under way (a seed training beside it) are left
# out, each named on stderr; a finished run outside that set is refused, since that file is the config of the last
# snakemake run that executed jobs, whatever its target (rerun `snakemake multiview` with the record's overlay, adding
# `--forcerun multiview_scores` when nothing is left to do, or move the run away). Environment: PYTHON (python).
set -euo pipefail

die() { echo "multiview_record: $*" >&2; exit 1; }
(($# == 1)) || die "usage: bash tools/multiview_record.sh NAME"
NAME=$1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
OUT="reproductions/$NAME"
[ ! -e "$OUT" ] || die "$OUT exists; records are immutable, choose another NAME"
PY=${PYTHON:-python}
STAGE=$(mktemp -d)
DONE=""
# an interrupted or failed build removes what it had placed: a half-made record would be refused as immutable
trap 'rm -rf "$STAGE"; if [ -z "$DONE" ] && [ -n "${PLACED:-}" ]; then rm -rf "$OUT"; fi' EXIT

# what to copy, checked first (nothing is written unless every check passes)
"$PY" - "$STAGE" <<'EOF'
import json
import sys
from pathlib import Path

from baselines.multiview.parse import parse_identity, recorded_recipe
from strae.runs import RunRecord

stage = Path(sys.argv[1])
runs = sorted(Path("results/runs").glob("*/multiview_*/*/seed*/train.json"))
if not runs:
    sys.exit("multiview_record: no multi-view run under results/runs (run `snakemake multiview` first)")
config_path = Path("results/config.effective.yaml")
block, full = {}, {}
if config_path.exists():
    import yaml

    full = yaml.safe_load(config_path.read_text()) or {}
    block = full.get("multiview") or {}
    block = block if block.get("enabled", True) else {}


def scores_transfer(lang):
    """Whether the workflow scored SentEval for ``lang``: a language none of whose own tasks is configured
    (strae.evaluate.senteval.suite_tasks) has no SentEval job, so no senteval JSON or floor to require."""
    if not block:
        return True
    from strae.evaluate.senteval import load_senteval_tasks, suite_tasks

    tasks_path = (full.get("data") or {}).get("tasks", "config/tasks.yaml")
    return bool(suite_tasks(load_senteval_tasks(tasks_path), lang, block.get("senteval") or {}, tasks_path))


def keeps_curve(lang, seed):
    """Whether the workflow kept and scored a training curve for this run (multiview.curve)."""
    curve = block.get("curve") or {}
    if not (curve.get("every_sentences") and int(seed) in curve.get("seeds", [0]) and curve.get("tasks")):
        return False
    from strae.evaluate.senteval import load_senteval_tasks, suite_tasks

    tasks_path = (full.get("data") or {}).get("tasks", "config/tasks.yaml")
    return bool(suite_tasks(load_senteval_tasks(tasks_path), lang, {"tasks": curve["tasks"]}, tasks_path))


# the config's model x seed pairs, in its order; the record is that set, other seeds' directories stay out of it
wanted = [(f"multiview_{m}", f"seed{s}") for m in block.get("models", []) for s in block.get("seeds", [0])]
if wanted:
    outside = [r for r in runs if (r.parts[-4], r.parts[-2]) not in wanted]
    runs = [r for r in runs if (r.parts[-4], r.parts[-2]) in wanted]
    # config.effective.yaml is rewritten by any snakemake run that executes jobs, so a finished run outside it may
    # be one this record is meant to hold: never dropped silently
    finished = [str(r.parent) for r in outside if json.loads(r.read_text()).get("status") in ("completed", "failed")]
    if finished:
        sys.exit(f"multiview_record: finished runs outside the models x seeds of {config_path} "
                 f"({' '.join(m + ' ' + s for m, s in wanted)}): {', '.join(finished)}. That file is the config of "
                 "the last snakemake run that executed jobs, whatever its target: rerun `snakemake multiview` with "
                 "this record's overlay (add `--forcerun multiview_scores` when nothing is left to do), or move those "
                 "runs away")
    for record in outside:
        print(f"multiview_record: {record.parent}: under way and not a model x seed of {config_path}; left out",
              file=sys.stderr)
copies, parses, identities, settings = [], set(), set(), {}
for record in runs:
    lang, model, setting, seed_dir = record.parts[-5:-1]
    document = json.loads(record.read_text())
    if document.get("status") not in ("completed", "failed"):
        sys.exit(f"multiview_record: {record}: status {document.get('status')!r}: the run is under way; finish it "
                 "(rerun `snakemake multiview`) first")
    parses.add((document.get("data") or {}).get("parses"))
    # the parse a run trained on, by identity (corpus sha256, paragraphs, sentences), as train-multiview compares it
    identities.add(json.dumps(recorded_recipe(RunRecord.from_disk(record.parent)).get("parse"), sort_keys=True))
    settings.setdefault(model, set()).add((lang, setting))
    copies.append((str(record), f"runs/{model}/{seed_dir}/train.json"))
    evals = Path("results/eval", lang, model, setting)
    seed = seed_dir.removeprefix("seed")
    if scores_transfer(lang) and not (evals / f"seed{seed}.senteval.json").exists():
        sys.exit(f"multiview_record: {evals}/seed{seed}.senteval.json missing; run `snakemake multiview` to the end")
    for variant in ("senteval", "probing", "paper", "official"):
        source = evals / f"seed{seed}.{variant}.json"
        if source.exists():
            copies.append((str(source), f"eval/{model}.seed{seed}.{variant}.json"))
    curve = Path("results/curves", lang, model, setting, f"{seed_dir}.json")
    if curve.exists():
        copies.append((str(curve), f"curve/{model}.seed{seed}.json"))
    elif document.get("status") == "completed" and keeps_curve(lang, seed):
        sys.exit(f"multiview_record: {curve} missing (multiview.curve keeps this run's); run `snakemake multiview` "
                 "to the end")
if block:  # every run the workflow's config asked for is here (a seed never started is not skipped)
    have = {(r.parts[-4], r.parts[-2]) for r in runs}
    missing = [f"{m} {s}" for m, s in wanted if (m, s) not in have]
    if missing:
        sys.exit(f"multiview_record: {config_path} asks for runs that results/runs lacks: {', '.join(missing)}")
two = {m: sorted(s) for m, s in settings.items() if len(s) > 1}
if two:
    sys.exit(f"multiview_record: several settings of one model under results/runs: {two}; move the others away")
if len(identities) != 1:
    sys.exit(f"multiview_record: the runs trained on {len(identities)} parses ({sorted(identities)}); one record, "
             "one parse")
# the parse's meta.json, from a directory a run names, checked to be of the parse the runs trained on (a directory
# parsed again since would describe another)
metas = [Path(p) / "meta.json" for p in sorted(p for p in parses if p) if (Path(p) / "meta.json").exists()]
meta = next((m for m in metas if json.dumps(parse_identity(json.loads(m.read_text())), sort_keys=True)
             in identities), None)
if meta is None:
    sys.exit(f"multiview_record: no meta.json of the runs' parse in {sorted(map(str, parses))} (parsed again since?)")
copies.append((str(meta), "parse_meta.json"))
# the random-token floors of the runs' language at the widths the config scores (multiview.senteval.random_token;
# without the config, the 256-d floor, the one row its table then has): another width's floor is not this record's
from baselines.multiview import FLOOR_DIM, floor_dims

languages = sorted({r.parts[-5] for r in runs})
widths = floor_dims({"multiview": block}) if block else [FLOOR_DIM]
floors = []
for lang in languages:
    for width in widths:
        found = sorted(Path("results/eval", lang, "random-token", f"dim{width}").glob("seed0.*.json"))
        if block and scores_transfer(lang) and not any(f.name == "seed0.senteval.json" for f in found):
            sys.exit(f"multiview_record: results/eval/{lang}/random-token/dim{width}/seed0.senteval.json missing (the "
                     f"{width}-d floor {config_path} asks for); run `snakemake multiview` to the end")
        floors += found
if len(languages) > 1 and floors:
    sys.exit(f"multiview_record: runs of several languages ({', '.join(languages)}) and their floors; one record, "
             "one language")
for floor in floors:
    # the 256-d floor keeps the name records have always given it; another width is named by its setting
    name = "random-token" if floor.parent.name == "dim256" else f"random-token.{floor.parent.name}"
    copies.append((str(floor), f"eval/{name}.{floor.name.split('.', 1)[1]}"))
(stage / "copies.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in copies))
print(f"multiview_record: {len(runs)} runs, {sum(b.startswith('eval/') for _, b in copies)} evaluations, parse {meta.parent}")
EOF

while IFS=$'\t' read -r source target; do
    mkdir -p "$STAGE/record/$(dirname "$target")"
    cp "$source" "$STAGE/record/$target"
done < "$STAGE/copies.tsv"
tables() {  # scores.csv and the two tables, read from the record's own files (source_json names them)
    "$PY" -m strae.cli aggregate --out "$OUT/scores.csv" "$OUT"/eval/*.json || return 1
    # the runs' config: its multi-view models' settings are what the tables' rows read (config/quick.yaml: ctl_h64_e32)
    local config=()
    [ -f results/config.effective.yaml ] && config=(--config results/config.effective.yaml)
    for n in 1 2; do
        "$PY" -m strae.cli report table --table "multiview_table$n" --tables config/tables.yaml \
            --scores "$OUT/scores.csv" --paper-dir paper_tables "${config[@]}" --out-csv "$OUT/table$n.csv" \
            --out-md "$OUT/table$n.md" || return 1
    done
    if compgen -G "$OUT/curve/*.json" > /dev/null; then  # the paper's Figure 2, from the record's own curves
        "$PY" -m strae.cli figure multiview_fig2_training_curve --tables config/tables.yaml "${config[@]}" \
            --curves "$OUT"/curve/*.json --paper-dir paper_tables --out-png "$OUT/figure2.png" \
            --out-pdf "$OUT/figure2.pdf" || return 1
    fi
}
mkdir -p "$(dirname "$OUT")"
mkdir "$OUT" || die "$OUT appeared meanwhile; records are immutable"
PLACED=1
cp -r "$STAGE/record/." "$OUT/"
tables || die "building scores.csv or the tables failed; nothing kept"
DONE=1
echo "multiview_record: wrote $OUT (add its README.md, then commit)"
