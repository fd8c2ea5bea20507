#!/usr/bin/env bash
# The full test run (CI runs it through .ci/run): installs dependencies, builds in build/
# and runs every ctest test, then builds in build-asan/ with AddressSanitizer and UBSan and
# runs the C tests again there, then makes the profile-guided release build and checks it
# converts as build/ does. Exits non-zero if any of it fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

JOBS="${JOBS:-2}"
t0=$(date +%s)
stamp() { echo "test.sh: $1 ($(( $(date +%s) - t0 ))s elapsed)"; }

bash scripts/setup.sh
# The python3 on PATH is the one with onnx/onnxruntime (pyenv's on CI), not /usr/bin/python3.
PY="$(command -v python3)"

status=0

# The tests of models over 2 GB (external data) write about 5 GB of temporary files, so
# they run when the temporary folder has room for them twice over; AMPC_BIG_TESTS=0 or 1
# decides instead.
if [ -z "${AMPC_BIG_TESTS:-}" ]; then
  free_kb=$(df -Pk "${TMPDIR:-/tmp}" | awk 'NR == 2 { print $4 }')
  if [ "${free_kb:-0}" -ge $((10 * 1024 * 1024)) ]; then export AMPC_BIG_TESTS=1; else export AMPC_BIG_TESTS=0; fi
fi
stamp "tests of models over 2 GB: AMPC_BIG_TESTS=$AMPC_BIG_TESTS"

stamp "configuring build/"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$PY"
cmake --build build -j"$JOBS"
stamp "running all tests in build/"
if ! (cd build && ctest --output-on-failure -j"$JOBS"); then
  echo "test.sh: FAILED: tests in build/"
  status=1
fi

# Sanitized build: C tests only (the python tests drive the same binary over whole corpora
# and are the slow part; the C tests already reach every library path they use).
stamp "configuring build-asan/"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DAMPC_SANITIZE=ON -DAMPC_CUDA=OFF -DAMPC_FUZZ=OFF \
  -DPython3_EXECUTABLE="$PY"
cmake --build build-asan -j"$JOBS"
stamp "running C tests in build-asan/"
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# oneDNN's OpenMP (libgomp) on one thread here: LeakSanitizer cannot stop libgomp's worker
# threads at exit ("Tracer caught signal 11", exit 1, in runs that made a oneDNN primitive
# on 2 threads); the kernels are the same on one thread, and tests/kernels/test_dnnl*.c
# run sanitized in any case.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
# (The fuzzers, sanitized themselves, are built and run in build/ only.)
if ! (cd build-asan && ctest --output-on-failure -j"$JOBS" -E '_py(_sim)?$'); then
  echo "test.sh: FAILED: sanitized tests in build-asan/"
  status=1
fi

# The profile-guided release build (scripts/build_release.sh, what benchmarks use) must
# build and convert exactly as build/ does.
stamp "building the release build (profile-guided) in build-release/"
if bash scripts/build_release.sh build-release >/dev/null; then
  rel_tmp="$(mktemp -d "${TMPDIR:-/tmp}/ampc_rel.XXXXXX")"
  "$PY" tools/gen_graph.py 5000 "$rel_tmp/g.onnx" >/dev/null
  for m in "$rel_tmp/g.onnx" models/*/model.onnx; do
    build/ampc "$m" -o "$rel_tmp/a.onnx" -q && build-release/ampc "$m" -o "$rel_tmp/b.onnx" -q &&
      cmp -s "$rel_tmp/a.onnx" "$rel_tmp/b.onnx" ||
      { echo "test.sh: FAILED: build-release/ampc converts $m differently from build/ampc"; status=1; }
  done
  rm -rf "$rel_tmp"
else
  echo "test.sh: FAILED: scripts/build_release.sh"
  status=1
fi

if [ "$status" -eq 0 ]; then stamp "all tests passed"; else stamp "some tests FAILED"; fi
exit "$status"
