#!/bin/bash
# Benchmark (not a test): load and save throughput and peak RSS of ampc on big models with
# external data. For each size it generates a MatMul chain (tools/gen_big_model.py), then
# times `ampc verify` (load by mmap; with the page cache dropped for the file, and warm)
# and `ampc MODEL -o OUT --passes none` with --external-data always and auto, under
# /usr/bin/time, and prints MiB/s and peak RSS relative to the model size.
#
#   tools/bench_extdata.sh [AMPC_BINARY] [SIZE_MB ...]     (default sizes: 1024 2560)
#   BENCH_DIR=/scratch KEEP=1 tools/bench_extdata.sh build/ampc 1024
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
AMPC=${1:-}
[ $# -gt 0 ] && shift
if [ -z "$AMPC" ]; then
  for b in "$HERE"/../build/ampc "$HERE"/../build*/ampc; do [ -x "$b" ] && AMPC=$b && break; done
fi
[ -x "${AMPC:-}" ] || { echo "bench_extdata.sh: no ampc binary; pass its path" >&2; exit 2; }
SIZES=${*:-1024 2560}
WORK=${BENCH_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/ampc_bench.XXXXXX")}
mkdir -p "$WORK"
cleanup() { [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT

need_mb=0
for s in $SIZES; do need_mb=$((need_mb + ${s%.*} * 3 + 64)); done
avail_mb=$(df -Pm "$WORK" | awk 'NR==2 {print $4}')
echo "ampc: $AMPC"
echo "work folder: $WORK ($avail_mb MiB free, about $need_mb MiB needed)"
if [ "$avail_mb" -lt "$need_mb" ]; then echo "not enough disk space" >&2; exit 2; fi
echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"

# Drops a file's pages from the page cache (no root needed): a cold load reads the disk.
evict() {
  python3 - "$@" <<'EOF'
import os, sys
for p in sys.argv[1:]:
    if os.path.exists(p):
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
EOF
}

# run LABEL MODEL_BYTES REPS CMD...: runs CMD REPS times and prints one row of the table
# with the median wall time (bash's microsecond clock) and the largest peak RSS.
run() {
  local label=$1 bytes=$2 reps=$3
  shift 3
  local tf="$WORK/time.txt" times=() rss_max=0
  for ((i = 0; i < reps; i++)); do
    local t0=$EPOCHREALTIME
    if ! /usr/bin/time -f "%M" -o "$tf" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt"; then
      echo "  $label: FAILED: $(tail -n 3 "$WORK/err.txt")"
      return 1
    fi
    local t1=$EPOCHREALTIME
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.6f", b - a}')")
    local r
    r=$(tail -n 1 "$tf")
    [ "$r" -gt "$rss_max" ] && rss_max=$r
  done
  local med
  med=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
  awk -v l="$label" -v s="$med" -v r="$rss_max" -v b="$bytes" -v n="$reps" 'BEGIN {
    mib = b / 1048576;
    printf "  %-40s %9.4f s %9.0f MiB/s   peak RSS %6.0f MiB = %.3fx model   (median of %d)\n", l, s, mib / s, r / 1024, (r * 1024) / b, n }'
}

for size in $SIZES; do
  d="$WORK/m$size"
  mkdir -p "$d/in" "$d/always" "$d/auto"
  echo
  python3 "$HERE/gen_big_model.py" "$size" "$d/in"
  in="$d/in/model.onnx"
  bytes=$(( $(stat -c %s "$in") + $(stat -c %s "$in.data") ))
  echo "model: $(awk -v b="$bytes" 'BEGIN {printf "%.1f MiB", b/1048576}') (model.onnx $(stat -c %s "$in") bytes + model.onnx.data)"
  sync
  evict "$in" "$in.data"
  run "load (ampc verify), cold page cache" "$bytes" 1 "$AMPC" verify "$in"
  run "load (ampc verify), warm" "$bytes" 5 "$AMPC" verify "$in"
  cat "$in.data" >/dev/null # warm: the conversions measure ampc, not the disk
  run "load+save --external-data always" "$bytes" 1 "$AMPC" "$in" -o "$d/always/model.onnx" --passes none --external-data always
  run "load+save --external-data auto" "$bytes" 1 "$AMPC" "$in" -o "$d/auto/model.onnx" --passes none --external-data auto
  echo "  outputs: always -> $(ls "$d/always" | tr '\n' ' '); auto -> $(ls "$d/auto" | tr '\n' ' ')"
  if cmp -s "$in.data" "$d/always/model.onnx.data"; then echo "  always: data file byte-identical to the input's"; fi
  for o in "$d/always/model.onnx" "$d/auto/model.onnx"; do
    "$AMPC" verify "$o" >/dev/null 2>&1 && echo "  ampc verify $(basename "$(dirname "$o")")/model.onnx: ok" \
      || echo "  ampc verify $(basename "$(dirname "$o")")/model.onnx: FAILED"
  done
  rm -rf "$d"
done
