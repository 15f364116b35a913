#!/usr/bin/env bash
# Turn what GPU chunks brought back (tools/campaign_chunk.sh's campaign.tar.xz, one or more) into a committed
# reproduction record, on the machine that keeps the repository:
#     bash tools/campaign_record.sh NAME CARRY ARCHIVE...
#     bash tools/campaign_record.sh h100-2026-11-27 reproductions/h100-2026-11-26 /path/to/campaign.tar.xz
# NAME: the new record (reproductions/NAME); CARRY: the newest earlier record, whose runs and scores join this one
# (strae aggregate --carry, strae record --carry), or `none` for a campaign's first record; ARCHIVE: the chunks'
# archives, oldest first (a later one's files replace an earlier one's). Steps:
#   1. each archive's evaluation JSONs and the train.json of the runs they evaluate copied into results/ (snapshots
#      and runs without an evaluation are left out: partial runs); its campaign.txt (as campaign-N.txt) and log
#      tails kept for the record's campaign/
#   2. results/scores.csv: results/eval's evaluations + CARRY's scores (strae aggregate --carry)
#   3. the parameter counts (snakemake results/measure/param_counts.json), every paper table (strae report tables)
#      and the figures drawn from scores alone (`from_scores: true` in config/tables.yaml; strae figure)
#   4. strae record --name NAME [--carry CARRY] (README "Results" regenerated), then campaign/ beside it
# Environment: SNAKEMAKE_ARGS, the options the chunks gave snakemake after their targets (e.g. `--configfile
# F`), so the parameter counts come from the same configuration; PYTHON (python); CARRY_ONLY=1 accepts archives with no
# evaluation (CARRY's scores alone: tools/local_record.sh's record of new figures).
# Evaluations already under results/eval that no archive brought (runs made on this machine) are listed and
# refused, before anything is written: move them away, or KEEP_LOCAL=1 to let them join the record. A train.json
# still `running` (a run training here) is left out of the record (strae record).
set -euo pipefail

die() { echo "campaign_record: $*" >&2; exit 1; }
(($# >= 3)) || die "usage: bash tools/campaign_record.sh NAME CARRY ARCHIVE..."
NAME=$1 CARRY=$2
shift 2
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
[ ! -e "reproductions/$NAME" ] || die "reproductions/$NAME exists; records are immutable, choose another NAME"
CARRY_SCORES=() CARRY_RECORD=()
if [ "$CARRY" != none ]; then
    [ -f "$CARRY/scores.csv" ] && [ -f "$CARRY/manifest.json" ] \
        || die "$CARRY: not a record (no scores.csv/manifest.json); \`none\` for a first record"
    CARRY_SCORES=(--carry "$CARRY/scores.csv") CARRY_RECORD=(--carry "$CARRY")
fi
for archive in "$@"; do [ -f "$archive" ] || die "$archive: no such file"; done
# a snakemake run under way in this checkout (a multi-view training, say) reads results/config.effective.yaml, which
# step 1 replaces with the box's, and holds the lock step 3's snakemake needs: refused before anything changes
if compgen -G ".snakemake/locks/*" >/dev/null; then
    die "a snakemake run holds this checkout (.snakemake/locks/); run this after it ends" \
        "(\`snakemake --unlock\` if it was killed)"
fi

PY=${PYTHON:-python}
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/campaign" results

# 0. evaluations here that no archive brings (runs made on this machine) would join the box's record: refused before
#    anything is written, unless KEEP_LOCAL=1; those of the carried record (its scores.csv names them) are its own
shopt -s nullglob
for archive in "$@"; do
    tar -tJf "$archive" | sed 's#^\./##' | grep -E '^results/eval/.+/seed[^/]*\.json$' >>"$STAGE/brought.txt" || true
done
local_only=()
for path in results/eval/*/*/*/seed*.json; do
    case $path in results/eval/*/multiview_*/* | results/eval/*/random-token/*) continue ;; esac
    grep -qxF "$path" "$STAGE/brought.txt" && continue
    [ "$CARRY" != none ] && grep -qF "$path" "$CARRY/scores.csv" && continue
    local_only+=("$path")
done
if ((${#local_only[@]})); then
    printf 'campaign_record: %s is in results/eval, but no archive brings it\n' "${local_only[@]}" >&2
    [ "${KEEP_LOCAL:-0}" = 1 ] \
        || die "${#local_only[@]} evaluation(s) above were made on this machine, not by the archives: move them" \
               "away (they would join the record, beside the box's runs) or set KEEP_LOCAL=1 to keep them"
fi

# 1. the archives' finished runs, in order
for archive in "$@"; do
    unpacked="$STAGE/unpacked"
    rm -rf "$unpacked" && mkdir -p "$unpacked"
    tar -xJf "$archive" -C "$unpacked"
    if [ -d "$unpacked/results/eval" ]; then
        (cd "$unpacked" && find results/eval -name 'seed*.json' -print0 | xargs -0 -r cp --parents -t "$REPO")
    fi
    # a run's train.json only beside an evaluation of it (this archive's or an earlier one's): a run a chunk stopped
    # before its evaluation (or still training) is no result of this record, and strae record would pair it with
    # nothing
    if [ -d "$unpacked/results/runs" ]; then
        while IFS= read -r -d '' record; do
            run=${record%/train.json}
            rel=${run#results/runs/}  # LANG/MODEL/SETTING/seedN; evaluated as SETTING/ or SETTING@OPTION/seedN.*.json
            if compgen -G "$unpacked/results/eval/$rel.*.json" >/dev/null \
                || compgen -G "$unpacked/results/eval/${rel%/*}@*/${rel##*/}.*.json" >/dev/null \
                || compgen -G "results/eval/$rel.*.json" >/dev/null \
                || compgen -G "results/eval/${rel%/*}@*/${rel##*/}.*.json" >/dev/null; then
                (cd "$unpacked" && cp --parents -t "$REPO" "$record")
            else
                echo "campaign_record: $run: no evaluation of it in the archives; its train.json is left out" >&2
            fi
        done < <(cd "$unpacked" && find results/runs -name train.json -print0)
    fi
    [ -f "$unpacked/results/config.effective.yaml" ] && cp "$unpacked/results/config.effective.yaml" results/
    # a box's campaign.txt grows call after call: each archive's copy is kept (campaign-1.txt, campaign-2.txt, ...)
    n=$((${n:-0} + 1))
    [ -f "$unpacked/campaign.txt" ] && cp "$unpacked/campaign.txt" "$STAGE/campaign/campaign-$n.txt"
    [ -d "$unpacked/logs" ] && cp -r "$unpacked/logs" "$STAGE/campaign/"
done
# the multi-view paper's runs and its random-token floor are tools/multiview_record.sh's record, not this one's
evaluations=()
for path in results/eval/*/*/*/seed*.json; do
    case $path in
        results/eval/*/multiview_*/* | results/eval/*/random-token/*) ;;
        *) evaluations+=("$path") ;;
    esac
done
# CARRY_ONLY=1 (tools/local_record.sh with figures and no run): the carried record's scores alone, new figures beside
((${#evaluations[@]})) || { [ "${CARRY_ONLY:-0}" = 1 ] && [ "$CARRY" != none ]; } \
    || die "no evaluation JSON under results/eval after unpacking $*"

# 2. scores: this record's evaluations and the carried record's
strae aggregate --out results/scores.csv "${CARRY_SCORES[@]}" "${evaluations[@]}"

# 3. tables and the figures drawn from scores
# shellcheck disable=SC2086  # SNAKEMAKE_ARGS: the options the campaign's snakemake ran with (e.g. --configfile F)
snakemake --cores 1 results/measure/param_counts.json ${SNAKEMAKE_ARGS:-} >"$STAGE/param_counts.log" 2>&1 \
    || die "param counts failed: $(tail -n 5 "$STAGE/param_counts.log")"
strae report tables --config results/config.effective.yaml --param-counts results/measure/param_counts.json
mkdir -p results/figures
"$PY" - <<'EOF' >"$STAGE/figures.txt"
import yaml
figures = yaml.safe_load(open("config/tables.yaml", encoding="utf-8")).get("figures") or {}
print("\n".join(name for name, spec in figures.items() if spec.get("from_scores")))
EOF
while IFS= read -r figure; do
    strae figure "$figure" --tables config/tables.yaml --config results/config.effective.yaml \
        --scores results/scores.csv --out-png "results/figures/$figure.png" --out-pdf "results/figures/$figure.pdf"
done <"$STAGE/figures.txt"

# 4. the record, and how the box ran beside it
strae record --name "$NAME" "${CARRY_RECORD[@]}"
cp -r "$STAGE/campaign" "reproductions/$NAME/campaign"
echo "wrote reproductions/$NAME (campaign/: each archive's campaign.txt and the log tails); README results regenerated"
