#!/usr/bin/env bash
# The release build of ampc that benchmarks quote: -O3, optimized with the profile of its
# own conversions (GCC profile-guided optimization). It builds an instrumented ampc into
# BUILD (default build-release), converts a training set with it (synthetic inference
# graphs of 1k to 30k nodes in fp16 and bf16, a synthetic training graph, the bundled
# models), then rebuilds BUILD with the profile. The tests use the ordinary build (build/);
# this one changes speed only: its output is the same byte for byte.
#   bash scripts/build_release.sh [BUILD]          then BUILD/ampc
# AMPC_PGO=OFF in the environment builds plain -O3 instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD="${1:-build-release}"
JOBS="${JOBS:-$(nproc)}"
PGO="${AMPC_PGO:-ON}"

configure() {
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DAMPC_TESTS=OFF -DAMPC_CUDA=OFF -DAMPC_PGO="$1" >/dev/null
}

if [ "$PGO" = "OFF" ]; then
  configure OFF
  cmake --build "$BUILD" -j"$JOBS" --target ampc
  exit 0
fi

configure GENERATE
PROFILE="$(sed -n 's/^AMPC_PGO_DIR:PATH=//p' "$BUILD/CMakeCache.txt")"
rm -rf "$PROFILE"
cmake --build "$BUILD" -j"$JOBS" --target ampc

TRAIN="$(mktemp -d "${TMPDIR:-/tmp}/ampc_pgo.XXXXXX")"
trap 'rm -rf "$TRAIN"' EXIT
echo "build_release.sh: profiling conversions in $TRAIN"
for n in 1000 10000 30000; do
  python3 tools/gen_graph.py "$n" "$TRAIN/g$n.onnx" >/dev/null
  "$BUILD/ampc" "$TRAIN/g$n.onnx" -o "$TRAIN/out.onnx" -q
  "$BUILD/ampc" "$TRAIN/g$n.onnx" -o "$TRAIN/out.onnx" -q --precision bf16
done
python3 tools/gen_train_graph.py 10000 "$TRAIN/train.onnx" >/dev/null
"$BUILD/ampc" "$TRAIN/train.onnx" -o "$TRAIN/out.onnx" -q
for m in models/*/model.onnx; do
  "$BUILD/ampc" "$m" -o "$TRAIN/out.onnx" -q
done

configure USE
cmake --build "$BUILD" -j"$JOBS" --target ampc
echo "build_release.sh: $BUILD/ampc (profile-guided; profile in $PROFILE)"
