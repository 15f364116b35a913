# one call: correctness of the 2026-11-27 CPU-session changes on CUDA, and their speed against 0360f45 (bundle/old)
set -u
export PYTHONUNBUFFERED=1
T0=$SECONDS
DEV=${DEV:-cuda}; B=${BATCH:-512}; S=${STEPS:-20}; W=${WARMUP:-5}; STOP=${STOP_S:-470}
if [ -z "${SKIP_UNPACK:-}" ]; then
  bash tools/offline_unpack.sh bundle >$OUT/unpack.log 2>&1 || { tail -20 $OUT/unpack.log; exit 1; }
  source bundle/env.sh
fi
echo "unpacked at $((SECONDS-T0)) s"
REPO=$PWD
G=$OUT/gm; mkdir -p $G
snap() { (cd $OUT && tar czf gm.tgz gm); }
late() { if ((SECONDS-T0 > STOP)); then echo "SKIP $1 at $((SECONDS-T0)) s" | tee -a $G/skipped.txt; return 0; fi; return 1; }
if [ "$DEV" = cuda ]; then PYTHONPATH=src timeout 60 python bundle/h2d_check.py 2>&1 | tail -3 | tee $G/h2d.txt; fi
echo "h2d at $((SECONDS-T0)) s"
old() {  # old NAME ARGS...: the 0360f45 benchmark, one line into $G/old.txt
  local name=$1; shift
  late old-$name && return
  (cd bundle/old && PYTHONPATH=$REPO/bundle/old/src:$REPO/bundle/old timeout 90 python benchmarks/train_throughput.py \
     --device $DEV --batch-size $B --steps $S --warmup $W --data-dir $REPO/resources/tokenized/en --threads 2 "$@" \
     >$G/old-$name.out 2>$G/old-$name.err) ; echo "[old-$name] $(tail -c 900 $G/old-$name.out)" | tee -a $G/old.txt
  echo "old-$name at $((SECONDS-T0)) s"; snap
}
new() { late new-$1 && return
  OUT=$G/$1 DEVICE=$DEV GPU_MEASURE_DEADLINE_S=$2 ONLY="$3" bash tools/gpu_measure.sh 2>>$G/new.err | cut -c1-900
  echo "new-$1 at $((SECONDS-T0)) s"; snap; }
new a 150 "objective-precision banyan-handwritten"
old banyan --model banyan --induction-kernel triton --propagation handwritten
CHECK_STEPS=${CHECK_STEPS:-40} new c 170 "cuda-checks-handwritten"
new b 80 "selfstrae-handwritten"
old selfstrae --model selfstrae --objective ceco --induction-kernel triton --propagation handwritten
new d 100 "banyan-handwritten selfstrae-k128"
old banyan2 --model banyan --induction-kernel triton --propagation handwritten
snap; rm -rf $G
echo "all done at $((SECONDS-T0)) s"
