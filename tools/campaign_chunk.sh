#!/usr/bin/env bash
# Run workflow targets in time-boxed chunks: one call = one chunk that ends within CHUNK_S seconds and brings back
# what was reached, finished or not; calling it again resumes (README "Training on an offline GPU box"). For a GPU box
# lent in <= 10 minute calls, or a SLURM allocation with a wall-time (CHUNK_S a little under it, PROFILE=profiles/slurm
# or a local profile inside the allocation).
#     bash tools/campaign_chunk.sh results/eval/en/banyan/ce_diagonal_entangled_k128_u2/seed{0,1,2,3}.paper.json
# Every argument goes to snakemake after the profile (targets, and options such as `--configfile F` LAST).
# Steps, each recorded as lines in logs/campaign/campaign.txt (copied to $OUT) and on stdout; a failing step is
# recorded and the next runs:
#   1. snakemake --profile $PROFILE --rerun-incomplete ARGS until CHUNK_S - SNAPSHOT_S (or, when every run training
#      then will end and be evaluated in time at its recent rate, until CHUNK_S - WRAPUP_S - KILL_S at the latest);
#      a training job cut off checkpoints after its current step (strae train on SIGTERM) and resumes there on the
#      next call
#   2. snapshot (until CHUNK_S - WRAPUP_S): each unfinished run's checkpoint exported with the run's own flags to
#      results/snapshots/<lang>/<model>/<setting>/seed<N>/step<STEP> and evaluated (paper variant) to
#      ...step<STEP>.paper.json (python -m strae.report.progress snapshot; a step already evaluated is skipped)
#      A target whose run finished training but whose evaluation the stop cut off is evaluated meanwhile (snakemake
#      on that target alone, `python -m strae.report.progress unevaluated`): its weights may not outlive a lent box
#   3. one summary line per run: status, epoch/step of the planned epochs, latest STS average
#   4. $OUT/campaign.tar.xz (an early copy is written after step 1, and replaced here): every train.json and
#      evaluation JSON under results/ (finished runs' and snapshots'), scores and tables, the last 50 lines of each
#      log under logs/, campaign.txt. No weights. $OUT holds only campaign.tar.xz and campaign.txt.
# Exit status: 0 the targets are done; 75 the chunk ran out of time (call again); 1 snakemake failed otherwise.
# Knobs (environment): CHUNK_S (560: one <= 10 minute call with a margin), SNAPSHOT_S (90: the tail after snakemake
# is stopped), WRAPUP_S (20: summary + archive, inside the tail), ARCHIVE_S (8: the archive's least time, never
# given to the summary; also the early copy's most), KILL_S (15: snakemake's shutdown grace, inside the tail),
# FINISH_EVAL_S (30: what a finished run's evaluation is allowed when deciding to let it finish),
# SNAPSHOT_JOBS (4: runs exported/evaluated at once), SNAPSHOT_KEEP_WEIGHTS (0; 1 keeps each evaluated snapshot's
# model.pt: the archive still brings none, they stay in the work tree, e.g. a cluster's), PROFILE (profiles/gpu),
# OUT (campaign-out/ in the checkout; a relative OUT counts from the checkout root), PYTHON (python), SNAKEMAKE
# (snakemake).
set -uo pipefail  # not -e: a failed step is recorded and the next one runs

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
START=$SECONDS
CHUNK_S=${CHUNK_S:-560}
SNAPSHOT_S=${SNAPSHOT_S:-90}
WRAPUP_S=${WRAPUP_S:-20}
KILL_S=${KILL_S:-15}
FINISH_EVAL_S=${FINISH_EVAL_S:-30}
ARCHIVE_S=${ARCHIVE_S:-8}
SNAPSHOT_JOBS=${SNAPSHOT_JOBS:-4}
KEEP_WEIGHTS=()
case ${SNAPSHOT_KEEP_WEIGHTS:-0} in
    0) ;;
    1) KEEP_WEIGHTS=(--keep-weights) ;;
    *) echo "campaign_chunk: SNAPSHOT_KEEP_WEIGHTS=${SNAPSHOT_KEEP_WEIGHTS}: 0 or 1" >&2; exit 2 ;;
esac
PROFILE=${PROFILE:-profiles/gpu}
OUT=${OUT:-$REPO/campaign-out}
PY=${PYTHON:-python}
SNAKEMAKE=${SNAKEMAKE:-snakemake}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
# kept in the work tree across calls; $OUT gets only the archive and a copy of the records (a lent box brings
# back a few files)
RECORDS=logs/campaign/campaign.txt
CHUNK=logs/campaign/chunk-$STAMP
SNAKEMAKE_LOG=$CHUNK.log
# no target would make snakemake run `rule all` (every table, figure and multi-view job) inside a lent call; so would
# variables set only on the machine that prepared the call (`$S`), which expand to nothing on the box: refused here
TARGETS=() OPTIONS=()
for arg in "$@"; do
    if ((${#OPTIONS[@]})) || [[ $arg == -* ]]; then OPTIONS+=("$arg"); else TARGETS+=("$arg"); fi  # options come last
done
if ((${#TARGETS[@]} == 0)); then
    echo "campaign_chunk: no target given (the workflow's every job would run); name the evaluation JSONs to make" >&2
    exit 2
fi

mkdir -p "$OUT" logs/campaign

if ((SNAPSHOT_S < KILL_S + WRAPUP_S || CHUNK_S <= SNAPSHOT_S)); then
    echo "campaign_chunk: need CHUNK_S > SNAPSHOT_S >= KILL_S + WRAPUP_S (got $CHUNK_S, $SNAPSHOT_S, $KILL_S," \
        "$WRAPUP_S)" >&2
    exit 2
fi

# the tools the chunk needs after its training, checked before it: a PYTHON exported for tools/offline_unpack.sh
# (the box's bare interpreter) cannot import strae, and would lose the eta, snapshot and archive steps
# (find_spec: whether it can, without the seconds the import itself takes on a loaded box)
if ! "$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("strae") is None)' 2>/dev/null; then
    echo "campaign_chunk: $PY cannot import strae; PYTHON here is the interpreter of strae's environment (source" \
        "bundle/env.sh, or unset a PYTHON exported for tools/offline_unpack.sh)" >&2
    exit 2
fi
if ! command -v "$SNAKEMAKE" >/dev/null; then
    echo "campaign_chunk: $SNAKEMAKE: not found (source bundle/env.sh)" >&2
    exit 2
fi

# each line also copied to $OUT at once: a call killed from outside (the device tool's time limit) before the
# archive still brings back what it did
record() { echo "$1" | tee -a "$RECORDS"; cp "$RECORDS" "$OUT/campaign.txt" 2>/dev/null || true; }
left_until() { echo $(($1 - (SECONDS - START))); }  # seconds from now until $1 seconds after the start
PROGRESS=("$PY" -m strae.report.progress)
# the one archive that comes back (steps 1b and 4), its output to $1, under `timeout` with the rest of the arguments
archive_to() {
    local log=$1
    shift
    timeout "$@" "${PROGRESS[@]}" archive "$OUT/campaign.tar.xz" --extra "$RECORDS" >"$log" 2>&1
}

record "# chunk $STAMP git=$(git rev-parse --short HEAD 2>/dev/null || echo none) CHUNK_S=$CHUNK_S: $*"
# The "let it finish" window at the cut is SNAPSHOT_S - WRAPUP_S - KILL_S: with less than a run's evaluation
# (FINISH_EVAL_S) in it, no run can be let finish, however close to its end (2026-11-27, H200: CHUNK_S=285
# SNAPSHOT_S=35 stopped a run ~7 s of training short; only a still-warm box let the next call finish it)
if ((SNAPSHOT_S - WRAPUP_S - KILL_S < FINISH_EVAL_S)); then
    record "[warning] SNAPSHOT_S - WRAPUP_S - KILL_S = $((SNAPSHOT_S - WRAPUP_S - KILL_S)) s < FINISH_EVAL_S\
 ($FINISH_EVAL_S s): a run still training at the cut is stopped there even if it is about to end; on a box about to\
 be given back, raise SNAPSHOT_S"
fi

# 1. the workflow until the tail. SIGTERM to snakemake's process group (timeout's) stops the training jobs too, each
#    after checkpointing where it stands; snakemake deletes their train.json as incomplete, checkpoint.pt stays.
#    At the cut (CHUNK_S - SNAPSHOT_S) the training is stopped unless every run training then ends, its evaluation
#    included, before the hard stop (CHUNK_S - WRAPUP_S - KILL_S) at its recent rate (`python -m
#    strae.report.progress eta`, from the runs' progress.json): then snakemake goes on, and the snapshots get the
#    time that is left. A run a few steps from its end finishes in this call instead of needing another one.
# a call killed from outside (not by this script's own timeout, whose 137 is handled below) leaves snakemake's lock,
# which would fail this call's snakemake at once: nothing else runs snakemake in this checkout on the box
if compgen -G ".snakemake/locks/*" >/dev/null && ! pgrep -f "snakemake --profile" >/dev/null; then
    record "[snakemake] removed the lock a killed earlier call left"
    rm -f .snakemake/locks/*
fi
rc=0
stopped=0
hard=$((CHUNK_S - WRAPUP_S - KILL_S))
cut=$((CHUNK_S - SNAPSHOT_S))
timeout --kill-after="$KILL_S" "$(left_until "$hard")" \
    "$SNAKEMAKE" --profile "$PROFILE" --rerun-incomplete "$@" >"$SNAKEMAKE_LOG" 2>&1 &
workflow=$!
stop_workflow() { stopped=1; kill -TERM "$workflow" 2>/dev/null; }
trap stop_workflow INT TERM  # the chunk itself asked to stop: the jobs checkpoint, the tail still runs
running() { kill -0 "$workflow" 2>/dev/null; }
while running && (($(left_until "$cut") > 0)); do sleep 1; done
if running && ((!stopped)); then
    window=$(left_until "$hard")
    # bounded by the window itself: an eta stalled on a loaded box must not push the tail past the call's end
    if timeout "$((window > 1 ? window : 1))" "${PROGRESS[@]}" eta --within "$window" --eval-s "$FINISH_EVAL_S" \
        >"$CHUNK.eta.txt" 2>&1; then
        record "[snakemake] not cut off at $((SECONDS - START)) s: every run training now ends within ${window} s"
    else
        stop_workflow
    fi
    while IFS= read -r line; do record "[eta] $line"; done <"$CHUNK.eta.txt"
fi
while :; do  # a trapped signal interrupts wait while the workflow still runs: wait again
    wait "$workflow"
    rc=$?
    running || break
done
trap - INT TERM
# snakemake can exit before its training jobs (same process group, timeout's) have written their last checkpoint:
# the snapshots below would read it half-way (up to KILL_S more; the snapshot step re-exports a moved checkpoint)
for ((waited = 0; waited < KILL_S; waited++)); do kill -0 -- "-$workflow" 2>/dev/null || break; sleep 1; done
if ((rc == 0)); then
    status=0
    record "[snakemake] done: every target is up to date ($((SECONDS - START)) s)"
elif ((stopped || rc == 124 || rc == 137)); then
    status=75
    record "[snakemake] stopped after $((SECONDS - START)) s (rc $rc): call again to resume"
    # killed hard, it left its lock behind; nothing else runs in this directory now
    # (`snakemake --unlock` would parse the Snakefile in the wrap-up's time; it only deletes these files)
    if ((rc == 137)); then rm -f .snakemake/locks/*; fi
else
    status=1
    record "[snakemake] FAILED rc $rc: $(tail -n 5 "$SNAKEMAKE_LOG" | tr '\n' ' ')"
fi

# 1b. an early copy of the archive (under a second here): a call killed from outside later in the tail (the device
#    tool's limit) still brings back what snakemake finished. Step 4's archive replaces it (both written atomically).
#    At most ARCHIVE_S, and never out of the two ARCHIVE_S before the end (step 4's, and the margin the tail keeps
#    when snakemake's jobs took all of KILL_S to stop): then it is skipped, step 4 brings the same
early=$(($(left_until "$CHUNK_S") - 2 * ARCHIVE_S))
early=$((early < ARCHIVE_S ? early : ARCHIVE_S))
if ((early >= 1)); then
    archive_to "$CHUNK.early.txt" --kill-after=2 "$early" \
        || record "[archive] early copy FAILED rc $?: $(tail -c 200 "$CHUNK.early.txt" | tr '\n' ' ')"
fi

# 2a. a target whose run finished training but whose evaluation the stop cut off (its training ended before the cut
#    while another run trained on, or just before the hard stop) is evaluated now, beside the snapshots: it is no
#    snapshot (encoder.json is written), and on a lent box its weights would be lost with the box. Only after a stop
#    (status 75): after a failure a missing evaluation is the failed job itself (the gpu profile keeps going)
finishing=0 pending=()
if ((status == 75)); then
    limit=$(left_until $((CHUNK_S - WRAPUP_S)))
    timeout "$((limit > 1 ? limit : 1))" "${PROGRESS[@]}" unevaluated "${TARGETS[@]}" >"$CHUNK.finish.txt" \
        2>"$CHUNK.finish.err" || record "[finish] FAILED to list: $(tail -c 400 "$CHUNK.finish.err" | tr '\n' ' ')"
    mapfile -t pending <"$CHUNK.finish.txt"
fi
deadline=$(left_until $((CHUNK_S - WRAPUP_S)))
if ((${#pending[@]})) && ((deadline - KILL_S < FINISH_EVAL_S)); then
    record "[finish] skipped, $((deadline - KILL_S)) s left (< FINISH_EVAL_S): not evaluated, ${pending[*]}"
elif ((${#pending[@]})); then
    record "[finish] evaluating what the stop cut off: ${pending[*]}"
    timeout --kill-after="$KILL_S" "$((deadline - KILL_S))" "$SNAKEMAKE" --profile "$PROFILE" --rerun-incomplete \
        "${pending[@]}" "${OPTIONS[@]}" >"$CHUNK.finish.log" 2>&1 &
    finishing=$!
fi

# 2b. snapshots of unfinished runs, each job ending by the deadline it is given
timeout --kill-after=5 "$((deadline > 1 ? deadline : 1))" "${PROGRESS[@]}" snapshot --deadline-s "$((deadline - 5))" \
    --jobs "$SNAPSHOT_JOBS" "${KEEP_WEIGHTS[@]}" >"$CHUNK.snapshot.txt" 2>"$CHUNK.snapshot.err" \
    || record "[snapshot] FAILED rc $?: $(tail -c 400 "$CHUNK.snapshot.err" | tr '\n' ' ')"
while IFS= read -r line; do record "[snapshot] $line"; done <"$CHUNK.snapshot.txt"
if ((finishing)); then
    wait "$finishing"
    finish_rc=$?
    if ((finish_rc == 0)); then
        record "[finish] evaluated ($((SECONDS - START)) s): ${pending[*]}"
        missing=0
        for target in "${TARGETS[@]}"; do [ -e "$target" ] || missing=$((missing + 1)); done
        if ((missing == 0)); then
            status=0
            record "[snakemake] done: every target is up to date ($((SECONDS - START)) s)"
        fi
    else
        record "[finish] FAILED rc $finish_rc: $(tail -n 5 "$CHUNK.finish.log" | tr '\n' ' ')"
        # killed hard, it left its lock behind, which would fail the next call's snakemake; no other snakemake runs
        # here now, and `snakemake --unlock` (a Snakefile parse, in the little time left) only deletes these files
        if ((finish_rc == 137)); then rm -f .snakemake/locks/*; fi
    fi
fi

# 3. one line per run: 15 s, or up to half the wrap-up before the end when the chunk ended early (on a loaded machine
#    the command's imports alone took over 15 s: a chunk whose targets were done reported no run)
#    — never into the archive's last ARCHIVE_S: the archive is what brings the results back
limit=$(left_until $((CHUNK_S - WRAPUP_S / 2)))
limit=$((limit > 15 ? limit : 15))
room=$(($(left_until "$CHUNK_S") - ARCHIVE_S))
limit=$((limit < room ? limit : room))
if ((limit >= 1)); then
    timeout "$limit" "${PROGRESS[@]}" summary >"$CHUNK.summary.txt" 2>"$CHUNK.summary.err" \
        || record "[summary] FAILED rc $?: $(tail -c 400 "$CHUNK.summary.err" | tr '\n' ' ')"
    while IFS= read -r line; do record "[summary] $line"; done <"$CHUNK.summary.txt"
else
    record "[summary] skipped: the time left is the archive's"
fi

# 4. the one archive that comes back
record "# chunk $STAMP ends after $((SECONDS - START)) s"
limit=$(left_until "$CHUNK_S")
limit=$((limit > ARCHIVE_S ? limit : ARCHIVE_S))
archive_to "$CHUNK.archive.txt" "$limit" \
    || { status=1; echo "[archive] FAILED: $(tail -c 400 "$CHUNK.archive.txt")" >&2; }
cat "$CHUNK.archive.txt"
cp "$RECORDS" "$OUT/campaign.txt"
exit "$status"
