#!/usr/bin/env bash
# Record runs trained and evaluated in this checkout (CPU runs, say) while other trainings still run here. Their
# snakemake locks and results/ stay untouched: in a fresh clone of HEAD (resources/ linked in), the runs' evaluation
# JSONs, train.json and log tails are packed as one archive for tools/campaign_record.sh, and the record it writes
# (reproductions/NAME) and the regenerated README.md come back here, to commit.
#     bash tools/local_record.sh NAME CARRY RUN...
#     FIGURES="F.png F.pdf" bash tools/local_record.sh NAME CARRY     (no run: CARRY's runs and scores, new figures)
#     bash tools/local_record.sh cpu-2core-2026-12-02 reproductions/cpu-2core-2026-12-01-2 \
#         results/runs/en/banyan/ce_diagonal_entangled_k4_u64/seed0
# NAME, CARRY: as tools/campaign_record.sh's (CARRY `none` for a first record). RUN: a run directory under
# results/runs/ whose train.json is completed or failed and that has an evaluation under results/eval (SETTING/ or
# SETTING@OPTION/seedN.*.json): every evaluation of it joins. FIGURES (optional): figure files made here from models
# (e.g. "results/figures/banyan_fig2_node_counts.png results/figures/banyan_fig2_node_counts.pdf" after a retrain),
# put in the record's figures/ beside the ones drawn from scores. SNAKEMAKE_ARGS, PYTHON: as campaign_record.sh's.
# The clone runs its own code (PYTHONPATH), so the record names the commit it was cloned at. What the workflow reads
# while the record is made must be in that commit or absolute: a `--configfile` of SNAKEMAKE_ARGS (refused if not
# tracked), local `path:` sources of the config; resources/ is linked in.
# Refused before anything is written: tracked files changed since HEAD (the record names HEAD's commit), an existing
# reproductions/NAME, a CARRY not committed as a record, a RUN outside results/runs, unfinished or not evaluated, a
# FIGURES file that does not exist. A commit or a README.md edit made here while it runs is not overwritten: the
# record is then left in the stage folder it names.
set -euo pipefail

die() { echo "local_record: $*" >&2; exit 1; }
(($# >= 3)) || { (($# == 2)) && [ -n "${FIGURES:-}" ]; } \
    || die "usage: bash tools/local_record.sh NAME CARRY RUN... (or FIGURES=... with NAME CARRY alone)"
NAME=$1 CARRY=$2
shift 2
(($#)) || [ "$CARRY" != none ] || die "no RUN and CARRY none: a record of figures alone carries an earlier record's runs"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
[ ! -e "reproductions/$NAME" ] || die "reproductions/$NAME exists; records are immutable, choose another NAME"
head=$(git rev-parse HEAD) || die "$REPO: not a git checkout with a commit"
command -v "${PYTHON:-python}" >/dev/null || die "no ${PYTHON:-python} here: activate the environment or set PYTHON"
CARRY=${CARRY%/} CARRY=${CARRY#"$REPO"/}
# the clone holds HEAD only: the carried record must be committed there (campaign_record.sh reads both files)
if [ "$CARRY" != none ]; then
    for file in scores.csv manifest.json; do
        case $CARRY in
            /*) [ -f "$CARRY/$file" ] ;;
            *) git cat-file -e "HEAD:${CARRY#./}/$file" 2>/dev/null ;;
        esac || die "$CARRY: not a record committed at HEAD (no $file); \`none\` for a first record"
    done
fi
git diff --quiet HEAD -- || die "tracked files differ from HEAD (git status): commit first, the record names HEAD's commit"
read -r -a figures <<<"${FIGURES:-}"
for figure in "${figures[@]}"; do [ -f "$figure" ] || die "FIGURES: $figure: no such file"; done
read -r -a snakemake_args <<<"${SNAKEMAKE_ARGS:-}"
committed() {  # a --configfile the clone's snakemake reads: absolute, or committed at HEAD
    [[ $1 == /* ]] || git ls-files --error-unmatch -- "$1" >/dev/null 2>&1 \
        || die "SNAKEMAKE_ARGS: $1 is not committed, and the clone has HEAD only"
}
configfiles=0
for word in "${snakemake_args[@]}"; do
    case $word in
        --configfile | --configfiles) configfiles=1 ;;
        --configfile=* | --configfiles=*) configfiles=0; committed "${word#*=}" ;;
        -*) configfiles=0 ;;
        *) if ((configfiles)); then committed "$word"; fi ;;
    esac
done

files=()
shopt -s nullglob
for run in "$@"; do
    run=${run%/} run=${run#"$REPO"/} run=${run#./}
    case $run in results/runs/*/*/*/seed*) ;; *) die "$run: not a run directory results/runs/LANG/MODEL/SETTING/seedN" ;; esac
    [ -f "$run/train.json" ] || die "$run: no train.json"
    status=$("${PYTHON:-python}" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("status"))' \
        "$run/train.json" 2>/dev/null) || die "$run/train.json: not readable as JSON"
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
carry_only=$((! $#))  # figures alone: campaign_record.sh takes the carried scores without a new evaluation

git clone -q "$REPO" "$STAGE/clone"
git -C "$STAGE/clone" checkout -q --detach "$head"  # this checkout's commit, whatever branch the clone chose
[ -e resources ] && ln -s "$REPO/resources" "$STAGE/clone/resources"
if ((${#figures[@]})); then
    mkdir -p "$STAGE/clone/results/figures"
    cp "${figures[@]}" "$STAGE/clone/results/figures/"
fi
# the clone's own code and commit (an editable install would run this checkout's and name its HEAD)
(cd "$STAGE/clone" && PYTHONPATH="$STAGE/clone/src:$STAGE/clone${PYTHONPATH:+:$PYTHONPATH}" \
    CARRY_ONLY=$carry_only bash tools/campaign_record.sh "$NAME" "$CARRY" "$STAGE/local.tar.xz")
if [ "$(git rev-parse HEAD)" != "$head" ] || ! git diff --quiet HEAD -- README.md || [ -e "reproductions/$NAME" ]; then
    trap - EXIT
    die "this checkout changed while the record was made (a commit, README.md, or reproductions/$NAME): nothing" \
        "copied; the record is in $STAGE/clone/reproductions/$NAME and its README in $STAGE/clone/README.md"
fi
trap - EXIT  # the stage holds the only copy until it is copied back
mkdir -p reproductions
cp -r "$STAGE/clone/reproductions/$NAME" "reproductions/$NAME"
cp "$STAGE/clone/README.md" README.md
rm -rf "$STAGE"
echo "local_record: wrote reproductions/$NAME from $# run(s) of this checkout at ${head:0:10}," \
    "and README.md's generated blocks; write reproductions/$NAME/README.md (how the runs were made), then commit"
