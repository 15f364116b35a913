#!/usr/bin/env bash
# The GPU measurements of issue 10 in ONE command, for a session with a GPU box and few minutes. On the box, from
# the checkout (README "Training on an offline GPU box"):
#     bash tools/offline_unpack.sh && source bundle/env.sh      # once: venv, wheels, resources/
#     bash tools/gpu_measure.sh                                 # <= 9.5 minutes (GPU_MEASURE_DEADLINE_S)
# Each step prints one line; the lines go to $OUT/gpu_measure.txt (prefixed [step]) and to stdout, each step's
# stdout/stderr to logs/gpu-measure/STAMP/STEP.{out,err} (each concurrent copy's to .../STEP/), packed after every step
# into $OUT/gpu_measure-logs.tar.xz ($OUT holds those two files: a lent box brings back a few files, none from deep
# folders; and a call cut off still brings the logs of the steps it finished). A step that fails or runs
# out of time adds a "[step] FAILED" line with its stderr tail and the next step runs. Steps, in order (budget = its
# own time limit; the whole run also stops starting steps at the deadline, so the sum of the budgets may exceed it):
#   banyan-triton     train_throughput, Banyan, fused Triton induction, autograd passes   budget 90 s (first compile)
#   banyan-handwritten  the same with --propagation handwritten (Triton levels; auto on CUDA)  budget 70 s
#   banyan-host-profile  the same under cProfile: host time by Python function (logs/...txt) budget 60 s
#   banyan-torch-profile  the same under torch.profiler: op tables, GPU busy ms per step    budget 60 s
#   banyan-syncs      the same with every host sync reported, by Python call site (logs/...txt)  budget 90 s
#   banyan-op-sites   banyan-torch-profile with Python stacks: the ops by the lines that launch them  budget 60 s
#   banyan-tail       banyan-handwritten, then the same batches in alternating rounds with a Triton launch per
#                     level and with the top levels of <= 64 nodes in one launch per pass (tail_compare_tokens/s=) budget 90 s
#   banyan-fill       banyan-handwritten, then the same batches with torch's fill of fresh buffers under deterministic
#                     mode on and off, alternating (fill_compare_tokens/s=)                budget 70 s
#   cuda-checks-handwritten  cuda_checks (determinism, resume, SIGTERM) of that engine  budget 180 s
#   banyan-handwritten-nondeterministic  both                                            budget 50 s
#   selfstrae-handwritten  Self-StrAE CECO k16 u16, --propagation handwritten (Triton levels) budget 60 s
#   selfstrae-k128    the same at k128 u2, the campaign's Self-StrAE runs (SemEval Tables 2-3)  budget 60 s
#   selfstrae-concurrent  concurrent_throughput 1,2 copies of selfstrae-k128: does a second Self-StrAE run fill the
#                     card's idle time (host syncs, graph building)? decided 1 such run per GPU session (2026-11-27: +10 %)  budget 150 s
#   selfstrae-beside-banyan  concurrent_throughput --beside: a Banyan k128 u2 copy alone, selfstrae-k128 alone, and
#                     both at once: can a lease's Self-StrAE run take a Banyan run beside it?  budget 120 s
#   selfstrae-tf32    the same with --set loss_precision=tf32 (TF32 objective products)    budget 60 s
#   objective-precision  objective_precision: CE and contrastive terms, fp32/tf32 ms + error    budget 60 s
#   selfstrae-torch-profile  selfstrae-handwritten under torch.profiler (logs/...txt)        budget 60 s
#   selfstrae-host-profile  selfstrae-handwritten under cProfile (logs/...txt)               budget 60 s
#   selfstrae-syncs   selfstrae-handwritten with every host sync reported by call site (logs/...txt) budget 90 s
#   selfstrae-tail    as banyan-tail for Self-StrAE's linear levels (top levels of <= 16 nodes), and as banyan-fill
#                                                                                          budget 90 s
#   cuda-checks-selfstrae-tail  cuda_checks of Self-StrAE (CECO k128 u2, the campaign's) with the 16-node linear tail
#                                                                                          budget 120 s
#   engine-choices    engine_choices: the engines (and their first-use checks) of every setting the config trains
#                                                                                          budget 240 s
#   concurrent-handwritten  concurrent_throughput 1,4,8 copies of banyan-handwritten     budget 200 s
#   threaded-handwritten  threaded_throughput: 1,2,4 runs as threads of ONE process, a CUDA stream each budget 150 s
#   banyan-nondeterministic  banyan-triton with --nondeterministic (what determinism costs) budget 50 s
#   banyan-presorted  deterministic, --scatter presorted (sums without a sort per call)    budget 50 s
#   selfstrae-triton  train_throughput, Self-StrAE CECO k16 u16, Triton       budget  80 s
#   concurrent        concurrent_throughput 1,4,8 copies of banyan-triton     budget 200 s
#   cuda-checks       cuda_checks: determinism, resume, SIGTERM, 60 steps    budget 180 s
#   roberta           roberta_throughput, padded vs packed, bf16, SDPA        budget  60 s
#   roberta-graphs    roberta_throughput, packed, eager vs --cuda-graphs on (40 warm-up steps) budget 90 s
#   roberta-graphs-check  roberta_graphs_check: graphed = eager (no dropout), repeatable  budget 90 s
#   roberta-loop      roberta_loop: strae train-roberta itself, 600 steps, --cuda-graphs off and on budget 150 s
#   roberta-checks    roberta_checks: train-roberta twice (identical?), SIGTERM + resume, --nondeterministic's
#                     steps/s, train-simcse twice                                      budget 150 s
#   multiview         multiview_throughput: the multi-view trainer's step (CTL, CL) on ELTeC-shaped synthetic trees,
#                     paper shapes, batch 100: the whole parse's minutes on a GPU (H200 2026-11-30: 3.3 CTL)  budget 90 s
#   banyan-torch      train_throughput, Banyan, torch induction loop          budget  70 s
# The steps after concurrent-handwritten repeat 2026-11-25's H100 measurements (reproductions/h100-2026-11-25/):
# (the 2026-11-26 H200 call ran the thirteen steps other than selfstrae-tf32 in 364 s); ONLY="name name ..." runs
# just those steps (e.g. a second call).
# Knobs (environment): BASELINE (a commit or a checkout folder: each train_throughput step runs again with that code
# right after, as STEP-baseline, so a change is measured against its parent in one call), ONLY (step names to run; default all), OUT (default ./gpu-measure),
# GPU_MEASURE_LOGS (logs/gpu-measure: each call's step logs in a timestamped folder there), PYTHON (default python),
# GPU_MEASURE_DEADLINE_S (555), DEVICE (cuda), BATCH (512), STEPS (20 timed steps per throughput run), WARMUP (5
# untimed steps first, where the Triton kernels compile; before the 2026-11-26 alignment fix they also recompiled
# inside the timed steps), RUNS (1,4,8), SELFSTRAE_RUNS (1,2), THREADS_RUNS (1,2,4), ROBERTA_LOOP_STEPS (600), ROBERTA_CHECK_STEPS (300), CHECK_STEPS (60),
# MULTIVIEW_STEPS (20), ROBERTA_BATCH (64), ROBERTA_STEPS (100), THREADS (2: CPU threads per engine benchmark, as the workflow's train
# jobs), LANG_KEY (en: resources/tokenized/LANG_KEY, else synthetic/tiny data).
# A CPU dry run of the plumbing: DEVICE=cpu TRITON_INTERPRET=1 BATCH=4 STEPS=1 WARMUP=1 RUNS=1,2 CHECK_STEPS=8 \
#     ROBERTA_BATCH=4 ROBERTA_STEPS=1 bash tools/gpu_measure.sh
set -uo pipefail  # not -e: a failed step is recorded and the next one runs

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
# the benchmarks import strae and baselines from this checkout, with or without bundle/env.sh's venv (2026-11-26:
# roberta-loop failed on ModuleNotFoundError 'baselines' when run without it)
export PYTHONPATH="$REPO/src:$REPO${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-$REPO/gpu-measure}
PY=${PYTHON:-$(command -v python || command -v python3)}  # (the box's bare image has python3 only)
DEADLINE_S=${GPU_MEASURE_DEADLINE_S:-555}  # one <= 570 s (9.5 min) call, with a margin for the last kill
DEVICE=${DEVICE:-cuda}
BATCH=${BATCH:-512}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-5}
RUNS=${RUNS:-1,4,8}
CHECK_STEPS=${CHECK_STEPS:-60}
ROBERTA_BATCH=${ROBERTA_BATCH:-64}
ROBERTA_STEPS=${ROBERTA_STEPS:-100}
# CPU threads of each engine benchmark: the workflow's train jobs run with OMP_NUM_THREADS = scale.train_threads (2);
# until 2026-11-26 (eighth session) the benchmarks took torch's default (every core: 16 on the H100 box). Small
# torch CPU ops are slow when their thread pool waits for busy cores: pack_batch's took 8-14 ms of own time per step
# in the box's cProfile, and 1-47 ms on 2 busy cores here (numpy, now: 0.24 ms)
THREADS=${THREADS:-2}
LANG_KEY=${LANG_KEY:-en}
DATA=resources/tokenized/$LANG_KEY
TOKENIZER=resources/tokenizers/$LANG_KEY.model
RESULTS=$OUT/gpu_measure.txt
LOGS=${GPU_MEASURE_LOGS:-logs/gpu-measure}/$(date -u +%Y%m%dT%H%M%SZ)
LOG_ARCHIVE=$OUT/gpu_measure-logs.tar.xz
mkdir -p "$LOGS" "$OUT"
START=$SECONDS

record() { echo "$1" | tee -a "$RESULTS"; }
# the logs so far as ONE archive in $OUT (members STAMP/...), replaced whole: written beside it, then renamed
rm -f "$LOG_ARCHIVE.part"  # a call cut off mid-pack left it: not a file to bring back
pack_logs() {  # xz -1: a second or two for the profiles, outside every step's budget
    if ! XZ_OPT=-1 tar -C "$(dirname "$LOGS")" -cJf "$LOG_ARCHIVE.part" "$(basename "$LOGS")" 2>"$LOGS.pack.err" \
            || ! mv -f "$LOG_ARCHIVE.part" "$LOG_ARCHIVE"; then
        record "[logs] FAILED to pack $LOGS: $(tail -c 300 "$LOGS.pack.err" | tr '\n' ' ')"
    fi
}

# step NAME BUDGET_S COMMAND...: run COMMAND under `timeout` (its process group: a benchmark's children too)
step() {
    local name=$1 budget=$2
    shift 2
    local left=$((DEADLINE_S - (SECONDS - START)))
    local limit=$((budget < left ? budget : left))
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" ${name%-baseline} "* ]]; then
        return
    fi
    echo "# [$name] budget ${budget} s; ${left} s of ${DEADLINE_S} left" >&2
    if ((limit < 15)); then
        record "[$name] SKIPPED: ${left} s of the ${DEADLINE_S} s deadline left"
        return
    fi
    local started=$SECONDS rc=0
    timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.err" || rc=$?
    local line
    while IFS= read -r line; do
        [ -n "${line// /}" ] && record "[$name] $line"
    done <"$LOGS/$name.out"
    if ((rc != 0)); then
        local why="rc=$rc after $((SECONDS - started)) s"
        if ((rc == 124 || rc == 137)); then why="timed out (limit ${limit} s)"; fi
        record "[$name] FAILED $why; stderr tail: $(tail -c 600 "$LOGS/$name.err" | tr '\n\r' '  ')"
    fi
    pack_logs
    echo "# [$name] took $((SECONDS - started)) s (rc $rc); $((SECONDS - START)) s so far" >&2
}

# throughput NAME BUDGET ARGS...: train_throughput.py with ARGS; with BASELINE set, then the same step with the
# baseline's code (its src/ and benchmarks/), as NAME-baseline: the two in the same call, one after the other. A log
# file named after the step in ARGS ($LOGS/NAME...) is renamed for the copy, so neither overwrites the other.
throughput() {
    local name=$1 budget=$2
    shift 2
    step "$name" "$budget" "${THROUGHPUT[@]}" "$@"
    if [ -n "$BASELINE_DIR" ]; then
        local from="$LOGS/$name" to="$LOGS/$name-baseline" args=() arg
        for arg in "$@"; do args+=("${arg/#"$from"/"$to"}"); done
        step "$name-baseline" "$budget" env PYTHONPATH="$BASELINE_DIR/src:$BASELINE_DIR" "$PY" \
            "$BASELINE_DIR/benchmarks/train_throughput.py" "${THROUGHPUT[@]:2}" "${args[@]}"
    fi
}

CORPUS_ARGS=()
ROBERTA_DATA=()
if [ -f "$DATA/train.json" ] && [ -f "$TOKENIZER" ]; then
    CORPUS_ARGS=(--data-dir "$DATA" --tokenizer "$TOKENIZER")
    ROBERTA_DATA=(--data-dir "$DATA")
else
    echo "# $DATA or $TOKENIZER missing: synthetic batches and a tiny corpus (run tools/offline_unpack.sh first)" >&2
fi
THROUGHPUT=("$PY" benchmarks/train_throughput.py --device "$DEVICE" --batch-size "$BATCH" --steps "$STEPS"
    --warmup "$WARMUP" --data-dir "$DATA" --threads "$THREADS")

record "# gpu_measure $(date -u +%FT%TZ) git=$(git rev-parse --short HEAD 2>/dev/null || echo none) $("$PY" -c '
import torch
try:
    import triton
    version = triton.__version__
except Exception as error:
    version = f"unavailable({type(error).__name__})"
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
print(f"torch={torch.__version__} triton={version} cuda_available={torch.cuda.is_available()} gpu={gpu!r}")
' 2>&1 | tr '\n' ' ')"

# BASELINE (a commit, or a folder holding another checkout's src/ and benchmarks/): the code the throughput steps are
# compared with, unpacked once (git archive) into a folder outside the checkout
BASELINE=${BASELINE:-}
BASELINE_DIR=
if [ -n "$BASELINE" ]; then
    if [ -d "$BASELINE/src" ] && [ -d "$BASELINE/benchmarks" ]; then
        BASELINE_DIR=$(cd "$BASELINE" && pwd)
    else
        BASELINE_DIR=${TMPDIR:-/tmp}/gpu-measure-baseline-$BASELINE
        if [ ! -f "$BASELINE_DIR/.complete" ]; then
            rm -rf "$BASELINE_DIR" && mkdir -p "$BASELINE_DIR" \
                && git archive "$BASELINE" src benchmarks | tar -x -C "$BASELINE_DIR" && touch "$BASELINE_DIR/.complete" \
                || { record "[baseline] FAILED: git archive $BASELINE src benchmarks (no such commit, or no .git here)"
                     BASELINE_DIR=; }
        fi
    fi
    [ -n "$BASELINE_DIR" ] && record "# baseline $BASELINE: each throughput step also runs as STEP-baseline from $BASELINE_DIR"
fi

# budget 90 s: ~15 s start-up (CUDA context, batches) + the first Triton compile and first-use check + 25 steps
throughput banyan-triton 90 --model banyan --induction-kernel triton --propagation autograd
# budget 70 s: the up/down passes as one function with a hand-derived backward, each level one Triton kernel
# (models/propagation.py, propagate_kernel.py; compiles 4 kernels on first use, then a first-use check)
throughput banyan-handwritten 70 --model banyan --induction-kernel triton --propagation handwritten
# budget 60 s: the same steps under cProfile: where the host-bound step's CPU time goes, by Python function
# ($LOGS/banyan-host-profile.txt; its tokens/s is slowed by the profiler and is not a measurement)
throughput banyan-host-profile 60 --model banyan --induction-kernel triton --propagation handwritten \
    --split-steps 0 --host-profile "$LOGS/banyan-host-profile.txt"
# budget 60 s: the same steps under the torch profiler: ops by own host time and by own GPU time, and the GPU's busy
# time per step (what bounds several runs sharing the card) in $LOGS/banyan-torch-profile.txt
throughput banyan-torch-profile 60 --model banyan --induction-kernel triton --propagation handwritten \
    --split-steps 0 --profile "$LOGS/banyan-torch-profile.txt"
# budget 90 s (on a fresh box the first step to run compiles the Triton kernels): the same steps with
# torch.cuda.set_sync_debug_mode("warn"): each host sync (.item(), .cpu(), a blocking copy, nonzero, ...) counted by
# the Python line that made it ($LOGS/banyan-syncs.txt): the 2026-11-26 profile counted 18
# cudaStreamSynchronize per step without saying where
throughput banyan-syncs 90 --model banyan --induction-kernel triton --propagation handwritten \
    --split-steps 0 --sync-report "$LOGS/banyan-syncs.txt"
# budget 60 s: the torch profile with Python stacks ($LOGS/banyan-op-sites.txt): which lines launch the host-bound
# step's ~470 kernels (2026-11-26: ~200 aten::fill_ and 30 aten::arange per step, from lines the op table cannot name)
# (CUDA only: under Triton's CPU interpreter every interpreted op is profiled with its stack, 23 GB for one step)
if [ "$DEVICE" = cuda ]; then
    throughput banyan-op-sites 60 --model banyan --induction-kernel triton --propagation handwritten \
        --split-steps 0 --profile "$LOGS/banyan-op-sites.txt" --profile-stacks
elif [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" banyan-op-sites "* ]]; then
    record "[banyan-op-sites] skipped: DEVICE=$DEVICE (it profiles the CUDA step)"
fi
# budget 90 s: the narrow top levels (~20 of ~30, <= 64 nodes each) in ONE single-program launch per pass instead of
# a launch each (models/propagation.py LEVEL_TAIL_NODES, 64 since 2026-11-27's measurement; LINEAR_LEVEL_TAIL_NODES
# 0 until a GPU check): tokens/s of both in one process, the same batches in alternating rounds (tail_compare_tokens/s=0:X/64:Y, best round of three each)
throughput banyan-tail 90 --model banyan --induction-kernel triton --propagation handwritten \
    --split-steps 0 --compare-level-tail 64
# budget 70 s: torch's fill of every fresh buffer under deterministic mode (NaN / int max; the likely source of the
# ~200 fill kernels per Banyan step) on and off, paired as banyan-tail (fill_compare_tokens/s=on:X/off:Y); strae train
# runs with it off since 2026-11-27 (runtime.FILL_UNINITIALIZED_MEMORY; tests/test_uninitialized_memory.py), so the
# cuda-checks steps check determinism without it
throughput banyan-fill 70 --model banyan --induction-kernel triton --propagation handwritten \
    --split-steps 0 --compare-fill
# budget 180 s: six strae train runs (60 + 60 + 30 + 40 + 31 + 29 steps at batch 512) with the engine a campaign
# would use
step cuda-checks-handwritten 180 "$PY" benchmarks/cuda_checks.py --device "$DEVICE" --batch-size "$BATCH" \
    --steps "$CHECK_STEPS" "${CORPUS_ARGS[@]}" -- --propagation handwritten
throughput banyan-handwritten-nondeterministic 50 --model banyan --induction-kernel triton \
    --propagation handwritten --nondeterministic
# budget 60 s: Self-StrAE's linear functions, the handwritten passes' linear Triton levels
throughput selfstrae-handwritten 60 --model selfstrae --objective ceco --induction-kernel triton \
    --propagation handwritten
# budget 60 s: the same at the channels the campaign trains (k128 u2: SemEval Table 2's 128x2 cell, Table 3's runs),
# whose tokens/s the README's estimate of results/table2.csv's time rests on
throughput selfstrae-k128 60 --model selfstrae --objective ceco --k 128 --u 2 --induction-kernel triton \
    --propagation handwritten
# budget 150 s: two groups (1, 2 copies of selfstrae-k128), each ~30 s of start-up + 20 timed steps; 70 s cap per
# group. Self-StrAE's step is GPU-bound (fp32 GEMMs) but the card idles during its host syncs and graph building (19
# syncs waited 7.9 ms of a step on the H100, 2026-11-26); a second process may fill that. A Self-StrAE English run
# takes ~500 s alone on an H200 (395-420k tokens/s); two fit one 15-minute GPU session only if the aggregate of two
# reaches ~570k (2 x 209M tokens in ~740 s); measured 2026-11-27: 439k, so one
step selfstrae-concurrent 150 "$PY" benchmarks/concurrent_throughput.py --runs "${SELFSTRAE_RUNS:-1,2}" --timeout 70 \
    --log-dir "$LOGS/selfstrae-concurrent" -- --model selfstrae --objective ceco --k 128 --u 2 --device "$DEVICE" \
    --threads "$THREADS" --induction-kernel triton --propagation handwritten --batch-size "$BATCH" --steps "$STEPS" \
    --split-steps 0 --data-dir "$DATA"
# budget 120 s: three groups (an English Banyan k128 u2 copy alone, selfstrae-k128 alone, both at once), each ~30 s
# of start-up + its timed steps; 60 s cap per group. The Self-StrAE step is GPU-bound, the Banyan step host-bound: can
# a lease's Self-StrAE run take a Banyan run beside it (issue 11's Banyan ablations) and still finish in the lease's
# two calls? (alone it needs ~560 s of the ~840 s of calls a lease holds, 2026-11-30: it must keep at least ~2/3 of
# its rate alone; docs/GPU.md). The Banyan copy times 3x the steps (its step is ~2.5x shorter), so its window covers
# the Self-StrAE copy's (its own rate is then partly measured alone: an upper bound)
step selfstrae-beside-banyan 120 "$PY" benchmarks/concurrent_throughput.py --runs 1 --timeout 60 \
    --log-dir "$LOGS/selfstrae-beside-banyan" --beside "--model banyan --device $DEVICE --threads $THREADS \
    --induction-kernel triton --propagation handwritten --batch-size $BATCH --steps $((STEPS * 3)) --split-steps 0 \
    --data-dir $(printf %q "$DATA")" -- --model selfstrae --objective ceco --k 128 --u 2 --device "$DEVICE" --threads "$THREADS" \
    --induction-kernel triton --propagation handwritten --batch-size "$BATCH" --steps "$STEPS" --split-steps 0 \
    --data-dir "$DATA"
# budget 60 s: the same with the objective's products on TF32 tensor cores (a named, non-reference setting)
throughput selfstrae-tf32 60 --model selfstrae --objective ceco --induction-kernel triton \
    --propagation handwritten --set loss_precision=tf32
# budget 60 s: the two terms alone at an English Self-StrAE batch's size, fp32 / tf32: ms per call and the largest
# gradient error against float64 (benchmarks/objective_precision.py)
step objective-precision 60 "$PY" benchmarks/objective_precision.py --device "$DEVICE"
# budget 60 s: selfstrae-handwritten under the torch profiler: how much of its 50 ms step the objective's fp32
# products take on the GPU, and what else ($LOGS/selfstrae-torch-profile.txt)
throughput selfstrae-torch-profile 60 --model selfstrae --objective ceco --induction-kernel triton \
    --propagation handwritten --split-steps 0 --profile "$LOGS/selfstrae-torch-profile.txt"
# budget 60 s: the same under cProfile ($LOGS/selfstrae-host-profile.txt): the host's share of Self-StrAE's step
throughput selfstrae-host-profile 60 --model selfstrae --objective ceco --induction-kernel triton \
    --propagation handwritten --split-steps 0 --host-profile "$LOGS/selfstrae-host-profile.txt"
# budget 90 s (compiles the linear Triton kernels when first): its host syncs by call site
# ($LOGS/selfstrae-syncs.txt; 19 per step waited 7.9 ms on 2026-11-26)
throughput selfstrae-syncs 90 --model selfstrae --objective ceco --induction-kernel triton \
    --propagation handwritten --split-steps 0 --sync-report "$LOGS/selfstrae-syncs.txt"
# budget 90 s: as banyan-tail for the linear levels (a program walks its nodes one at a time, so its tail is kept to
# <= 16 nodes a level)
throughput selfstrae-tail 90 --model selfstrae --objective ceco --induction-kernel triton \
    --propagation handwritten --split-steps 0 --compare-level-tail 16 --compare-fill
# budget 120 s: what a Self-StrAE run checks, with the linear tail on (LINEAR_LEVEL_TAIL_NODES is 0 until this passes:
# provenance.propagation=handwritten/triton(tail=16) and determinism, resume, sigterm identical); 24 steps a run, at
# the channels the campaign trains (SemEval Table 3's and Banyan Table 5's k128 u2), not the preset's k16 u16
step cuda-checks-selfstrae-tail 120 "$PY" benchmarks/cuda_checks.py --device "$DEVICE" --batch-size "$BATCH" \
    --steps 24 --model selfstrae --level-tail 16 "${CORPUS_ARGS[@]}" -- --propagation handwritten --k 128 --u 2
# budget 240 s: every model setting config/config.yaml trains (21: the papers' tables and grids), with the engines
# strae train would pick here, each Triton engine's first-use check compiled for its k and u (~15 distinct shapes of
# the induction and four level kernels; the Triton cache keeps what earlier steps compiled): a setting that falls
# back to torch would run its campaign runs ~2-25x slower (exit 1 and fallback=N on the summary line)
step engine-choices 240 "$PY" benchmarks/engine_choices.py --device "$DEVICE"
# budget 200 s: three groups (1, 4, 8 copies), each ~30 s of start-up + 20 timed steps; 90 s cap per group
step concurrent-handwritten 200 "$PY" benchmarks/concurrent_throughput.py --runs "$RUNS" --timeout 90 \
    --log-dir "$LOGS/concurrent-handwritten" -- --model banyan --device "$DEVICE" --threads "$THREADS" \
    --induction-kernel triton --propagation handwritten --batch-size "$BATCH" --steps "$STEPS" --split-steps 0 --data-dir "$DATA"
# budget 150 s: the same engine as 1, 2, 4 threads of one process (a CUDA stream each): does in-process concurrency
# beat the processes above (kernels of one context's streams can overlap; processes time-slice the card)?
step threaded-handwritten 150 "$PY" benchmarks/threaded_throughput.py --runs "${THREADS_RUNS:-1,2,4}" -- \
    --model banyan --device "$DEVICE" --induction-kernel triton --propagation handwritten --batch-size "$BATCH" \
    --steps "$STEPS" --warmup "$WARMUP" --data-dir "$DATA"
# budget 50 s: banyan-triton without deterministic kernels (strae train --nondeterministic; Triton cache warm now)
throughput banyan-nondeterministic 50 --model banyan --induction-kernel triton --nondeterministic \
    --propagation autograd
# budget 50 s: deterministic again, the message passing's sums presorted on the host (models/scatter.py)
throughput banyan-presorted 50 --model banyan --induction-kernel triton --scatter presorted \
    --propagation autograd
# budget 80 s: Self-StrAE's preset is sentential, linear, CECO, k16 u16 (named here so the line cannot drift)
throughput selfstrae-triton 80 --model selfstrae --objective ceco --induction-kernel triton \
    --propagation autograd
# budget 200 s: three groups (1, 4, 8 copies), each ~30 s of start-up + 20 timed steps; 90 s cap per group
step concurrent 200 "$PY" benchmarks/concurrent_throughput.py --runs "$RUNS" --timeout 90 \
    --log-dir "$LOGS/concurrent" -- --model banyan --device "$DEVICE" --induction-kernel triton --propagation autograd \
    --batch-size "$BATCH" --steps "$STEPS" --split-steps 0 --data-dir "$DATA"
# budget 180 s: six strae train runs (60 + 60 + 30 + 40 + 31 + 29 steps at batch 512) with dev evaluations and
# checkpoints
step cuda-checks 180 "$PY" benchmarks/cuda_checks.py --device "$DEVICE" --batch-size "$BATCH" \
    --steps "$CHECK_STEPS" "${CORPUS_ARGS[@]}" -- --propagation autograd
# budget 60 s: RoBERTa-medium (table6 shape) MLM, batch 64, 100 timed steps per layout at ~20 steps/s
step roberta 60 "$PY" benchmarks/roberta_throughput.py --device "$DEVICE" --batch-size "$ROBERTA_BATCH" \
    --steps "$ROBERTA_STEPS" --precision bf16 --attention sdpa --packing none,sentences "${ROBERTA_DATA[@]}"
# budget 90 s: the CUDA-graph step against the eager one; the warm-up steps capture the buckets a batch meets (an
# English batch of 64 packed sentences met 6 in 400 steps; each first meeting captures one graph pair)
step roberta-graphs 90 "$PY" benchmarks/roberta_throughput.py --device "$DEVICE" --batch-size "$ROBERTA_BATCH" \
    --steps "$ROBERTA_STEPS" --warmup 40 --precision bf16 --attention sdpa --packing sentences --cuda-graphs off,on \
    "${ROBERTA_DATA[@]}"
# budget 90 s: the graphed step computes the eager one's function (dropout off, fp32) and repeats itself exactly
step roberta-graphs-check 90 "$PY" benchmarks/roberta_graphs_check.py --device "$DEVICE" --batch-size "$ROBERTA_BATCH"
# budget 150 s: the trainer's own loop (checkpoint, schedule, next batch prepared during the backward, captures) on
# the English corpus, eager then graphed: steps/s of the whole run and of its last 100 steps
step roberta-loop 150 "$PY" benchmarks/roberta_loop.py --device "$DEVICE" --steps "${ROBERTA_LOOP_STEPS:-600}" \
    --lang "$LANG_KEY"
# budget 150 s: the RoBERTa and SimCSE trainers themselves (the graphed step alone was repeatable, roberta-graphs-check):
# four 300-step MLM runs (~70 steps/s graphed, a few captures each) and two 100-step SimCSE runs
step roberta-checks 150 "$PY" benchmarks/roberta_checks.py --device "$DEVICE" --batch-size "$ROBERTA_BATCH" \
    --steps "${ROBERTA_CHECK_STEPS:-300}" "${CORPUS_ARGS[@]}"
# budget 90 s: CTL and CL, 20 timed steps each (2.2-2.5 s a step on one CPU thread, 2026-11-28; on an H200, 2026-11-30:
# CTL 0.034 s, CL 0.020 s)
step multiview 90 "$PY" benchmarks/multiview_throughput.py --device "$DEVICE" --steps "${MULTIVIEW_STEPS:-20}" \
    --warmup 3 --threads "$THREADS"
# budget 70 s: the torch induction loop (the baseline of 2026-11-25's table)
throughput banyan-torch 70 --model banyan --induction-kernel torch

record "# gpu_measure done in $((SECONDS - START)) s"
