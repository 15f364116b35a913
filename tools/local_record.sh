#!/usr/bin/env bash
# Record runs trained and evaluated in this checkout (CPU runs, say) while other trainings still run here. Their
# snakemake locks and results/ stay untouched: in a fresh clone of HEAD (resources/ linked in), the runs' evaluation
# JSONs, train.json and log tails are packed as one archive for tools/campaign_record.sh, and the record it writes
# (reproductions/NAME) and the regenerated README.md come back here, to commit.
#     bash tools/local_record.sh NAME CARRY RUN...
#     bash tools/local_record.sh cpu-2core-2026-12-02 reproductions/cpu-2core-2026-12-01 \
#         results/runs/en/banyan/ce_diagonal_entangled_k256_u1/seed0
# NAME, CARRY: as tools/campaign_record.sh's (CARRY `none` for a first record). RUN: a run directory under
# results/runs/ whose train.json is completed or failed and that has an evaluation under results/eval (SETTING/ or
# SETTING@OPTION/seedN.*.json): every evaluation of it joins. FIGURES (optional): figure files made here from models
# (e.g. "results/figures/banyan_fig2_node_counts.png results/figures/banyan_fig2_node_counts.pdf" after a retrain),
# put in the record's figures/ beside the ones drawn from scores. SNAKEMAKE_ARGS, PYTHON: as campaign_record.sh's.
# Refused before anything is written: tracked files changed since HEAD (the record names HEAD's commit), an existing
# reproductions/NAME, a RUN outside results/runs, unfinished or not evaluated, a FIGURES file that does not exist.
set -euo pipefail

die() { echo "local_record: $*" >&2; exit 1; }
(($# >= 3)) || die "usage: bash tools/local_record.sh NAME CARRY RUN..."
NAME=$1 CARRY=$2
shift 2
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
[ ! -e "reproductions/$NAME" ] || die "reproductions/$NAME exists; records are immutable, choose another NAME"
[ "$CARRY" = none ] || [ -f "$CARRY/scores.csv" ] || die "$CARRY: not a record (no scores.csv); \`none\` for a first record"
git diff --quiet HEAD -- || die "tracked files differ from HEAD (git status): commit first, the record names HEAD's commit"
read -r -a figures <<<"${FIGURES:-}"
for figure in "${figures[@]}"; do [ -f "$figure" ] || die "FIGURES: $figure: no such file"; done

files=()
shopt -s nullglob
for run in "$@"; do
    run=${run%/}
    case $run in results/runs/*/*/*/seed*) ;; *) die "$run: not a run directory results/runs/LANG/MODEL/SETTING/seedN" ;; esac
    [ -f "$run/train.json" ] || die "$run: no train.json"
    status=$("${PYTHON:-python}" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("status"))' "$run/train.json")
    case $status in completed | failed) ;; *) die "$run: train.json says status $status; record it once it ends" ;; esac
    rel=${run#results/runs/}  # LANG/MODEL/SETTING/seedN
    evaluations=(results/eval/"$rel".*.json results/eval/"${rel%/*}"@*/"${rel##*/}".*.json)
    ((${#evaluations[@]})) || die "$run: no evaluation under results/eval/${rel%/*}[@OPTION]/${rel##*/}.*.json"
    files+=("$run/train.json" "${evaluations[@]}")
    log=logs/train/$rel.log
    [ -f "$log" ] && files+=("$log")
done

STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
# the logs' last 200 lines (a CPU run's tqdm log can be megabytes), under logs/ as campaign_record.sh keeps them
mkdir -p "$STAGE/pack"
for file in "${files[@]}"; do
    mkdir -p "$STAGE/pack/$(dirname "$file")"
    case $file in logs/*) tail -n 200 "$file" >"$STAGE/pack/$file" ;; *) cp "$file" "$STAGE/pack/$file" ;; esac
done
tar -cJf "$STAGE/local.tar.xz" -C "$STAGE/pack" .

git clone -q "$REPO" "$STAGE/clone"
[ -e resources ] && ln -s "$REPO/resources" "$STAGE/clone/resources"
if ((${#figures[@]})); then
    mkdir -p "$STAGE/clone/results/figures"
    cp "${figures[@]}" "$STAGE/clone/results/figures/"
fi
(cd "$STAGE/clone" && bash tools/campaign_record.sh "$NAME" "$CARRY" "$STAGE/local.tar.xz")
cp -r "$STAGE/clone/reproductions/$NAME" "reproductions/$NAME"
cp "$STAGE/clone/README.md" README.md
echo "local_record: wrote reproductions/$NAME from $# run(s) of this checkout at $(git rev-parse --short HEAD)," \
    "and README.md's generated blocks; write reproductions/$NAME/README.md (how the runs were made), then commit"
