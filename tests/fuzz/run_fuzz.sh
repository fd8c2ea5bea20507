#!/bin/sh
# Runs a fuzzer (fuzz_load, the loader; fuzz_convert, the conversion; fuzz_ort_checkpoint,
# the checkpoint reader; fuzz_run, the executor) for SECONDS on a scratch copy of the seed
# corpus (tests/fuzz/corpus and the models of models/, and for fuzz_run the node models of
# the conformance data, $AMPC_TESTDATA/node; the checkpoints of models/ort_* for
# fuzz_ort_checkpoint) and prints
# its executions per second. Used by ctest (short runs) and by hand for long runs:
#   tests/fuzz/run_fuzz.sh 600 [FUZZER] [WORKDIR]     (FUZZER: fuzz_load when not given)
# Exit status: 0 when nothing was found, non-zero on a crash, leak, timeout or OOM (the
# reproducer is left in WORKDIR, named crash-*, leak-*, timeout-* or oom-*).
set -u
SECONDS_TO_RUN=${1:-600}
HERE=$(cd "$(dirname "$0")" && pwd)
FUZZER=${2:-}
if [ -z "$FUZZER" ]; then
  for b in "$HERE"/../../build*/tests/fuzz/fuzz_load; do
    [ -x "$b" ] && FUZZER=$b && break
  done
fi
if [ -z "$FUZZER" ] || [ ! -x "$FUZZER" ]; then
  echo "run_fuzz.sh: no fuzz_load binary (build the project with clang available, or pass its path)" >&2
  exit 2
fi
NAME=$(basename "$FUZZER")
WORK=${3:-$(mktemp -d "${TMPDIR:-/tmp}/ampc_fuzz_work.XXXXXX")}
rm -rf "$WORK/corpus"
mkdir -p "$WORK/corpus"
if [ "$NAME" = fuzz_ort_checkpoint ]; then # onnxruntime-training checkpoints, not models
  for c in "$HERE"/../../models/ort_*/checkpoint*; do
    [ -f "$c" ] && cp "$c" "$WORK/corpus/$(basename "$(dirname "$c")")_$(basename "$c")"
  done
else
  cp "$HERE"/corpus/* "$WORK/corpus/"
  for m in "$HERE"/../../models/*/model.onnx; do
    [ -f "$m" ] && cp "$m" "$WORK/corpus/models_$(basename "$(dirname "$m")").onnx"
  done
  if [ "$NAME" = fuzz_run ]; then # the executor: the conformance data's node models too
    for m in "${AMPC_TESTDATA:-/usr/share/libonnx-testdata/data}"/node/*/model.onnx; do
      [ -f "$m" ] && cp "$m" "$WORK/corpus/node_$(basename "$(dirname "$m")").onnx"
    done
  fi
fi
LOG="$WORK/fuzz.log"

# -timeout: one input taking over 10 s is a hang; -rss_limit_mb: a blow-up is a bug;
# -max_len: models bigger than the seeds are allowed to grow to 64 KiB.
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
"$FUZZER" -max_total_time="$SECONDS_TO_RUN" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$WORK/" "$WORK/corpus" >"$LOG" 2>&1
rc=$?

runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$LOG" | tail -n 1)
secs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$LOG" | tail -n 1)
peak=$(sed -n 's/^stat::peak_rss_mb: *//p' "$LOG" | tail -n 1)
corpus=$(ls "$WORK/corpus" | wc -l)
echo "$NAME: ${runs:-?} executions in ${SECONDS_TO_RUN} s, ${secs:-?} exec/s, peak RSS ${peak:-?} MB, corpus ${corpus} inputs"
if [ $rc -ne 0 ]; then
  echo "$NAME: FAILED (exit $rc); reproducer(s):" >&2
  ls "$WORK"/crash-* "$WORK"/leak-* "$WORK"/timeout-* "$WORK"/oom-* 2>/dev/null >&2
  grep -E "ERROR|SUMMARY|$NAME:|runtime error" "$LOG" | head -n 20 >&2
  echo "full log: $LOG" >&2
  exit 1
fi
exit 0
