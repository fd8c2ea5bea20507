#!/usr/bin/env bash
# Packs the built test suite of build/ to run on a machine that has none of the build's
# packages (a GPU machine with the CUDA driver, Python, onnx and onnxruntime, but no
# protobuf-c, Criterion, OpenBLAS or ONNX conformance data): the build without object
# files, debug info stripped; the shared libraries its binaries load, except the C and C++
# runtimes; and the conformance data. On that machine, from a checkout of the same commit
# at the same path as here, `bash scripts/pack_tests.sh --run DIR` unpacks and runs ctest.
#
# usage: scripts/pack_tests.sh DIR          writes DIR/pack.tar.xz and DIR/testdata.tar.xz
#        scripts/pack_tests.sh --exec DIR CMD...   (there) unpacks them once and runs CMD
#                                           with the packed and the CUDA libraries found
#        scripts/pack_tests.sh --run DIR [CTEST ARGS...]
#                                           (there) unpacks them and runs ctest: every test,
#                                           or as the arguments say (-R ms_ops -V, say);
#                                           cuBLAS(Lt) and cuDNN are not packed: that
#                                           machine's toolkit or Python wheels give them
# Environment for --run: JOBS (default: the number of cores), AMPC_BIG_TESTS (default 1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

if [ "${1:-}" = "--run" ] || [ "${1:-}" = "--exec" ]; then
  mode=$1
  D=$(cd "${2:?usage: pack_tests.sh --run DIR}" && pwd)
  if [ "$(readlink build 2>/dev/null)" != "$D/build" ]; then # unpack once
    if [ -e build ] && [ ! -L build ]; then
      echo "pack_tests.sh: build/ is a real build here; --run replaces it, so it runs only where there is none" >&2
      exit 1
    fi
    tar -C "$D" -xJf "$D/pack.tar.xz"
    data=$(grep '^AMPC_TESTDATA:PATH=' "$D/build/CMakeCache.txt" | cut -d= -f2)
    mkdir -p "$data" && tar -C "$data" -xJf "$D/testdata.tar.xz"
    rm -rf build && ln -sfn "$D/build" build
    # ctest calls the python3 of the packing machine by its path: use this one's.
    sed -i "s#\"[^\"]*python3[^\"]*\"#\"$(command -v python3)\"#g" build/tests/CTestTestfile.cmake
  fi
  # cuBLASLt and cuDNN of that machine: its CUDA toolkit's, or the Python wheels' (nvidia-*)
  cudalibs=$( (find /usr/local/cuda*/lib* /usr/lib/x86_64-linux-gnu \
                 $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
                 -maxdepth 4 \( -name 'libcublasLt.so.*' -o -name 'libcudnn.so.*' \) 2>/dev/null || true) |
             xargs -r -n1 dirname | awk '!seen[$0]++' | paste -sd: -)
  echo "pack_tests.sh: CUDA libraries from ${cudalibs:-nowhere (none found)}" >&2
  export LD_LIBRARY_PATH="$D/lib${cudalibs:+:$cudalibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export AMPC_BIG_TESTS="${AMPC_BIG_TESTS:-1}"
  if [ "$mode" = "--exec" ]; then # a command of the caller's, with the libraries found
    shift 2
    exec "$@"
  fi
  cd build
  exec ctest --output-on-failure -j"${JOBS:-$(nproc)}" "${@:3}"
fi

OUTDIR=${1:?usage: pack_tests.sh DIR}
mkdir -p "$OUTDIR"
[ -x build/ampc ] || { echo "pack_tests.sh: build/ampc not found: build first (cmake --build build)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cp -r build "$TMP/build"
find "$TMP/build" -name CMakeFiles -type d -prune -exec rm -rf {} +
find "$TMP/build" -name '*.a' -delete
find "$TMP/build" -type f -perm -u+x -exec strip --strip-debug {} + 2>/dev/null || true

# Every library the binaries load (OpenBLAS is opened with dlopen, so its file is named),
# except the C library and the C++ / GCC runtimes, which the other machine has.
mkdir -p "$TMP/lib"
blas=$(grep '^OPENBLAS_LIB:' build/CMakeCache.txt | cut -d= -f2)
blas=${blas:+$(readlink -f "$blas")}
for bin in $(find build -type f -perm -u+x ! -name '*.sh') ${blas:+"$blas"}; do
  for lib in $(ldd "$bin" 2>/dev/null | awk '/=> \//{print $3}'); do
    case $(basename "$lib") in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libresolv.so* | libstdc++.so* | libgcc_s.so*) ;;
      # cuBLAS(Lt) and cuDNN are hundreds of MiB: the GPU machine has its own (found by --run)
      libcublas*.so* | libcudnn*.so*) ;;
      *) cp -Ln "$lib" "$TMP/lib/" ;;
    esac
  done
done
[ -n "$blas" ] && cp -Ln "$blas" "$TMP/lib/libopenblas.so.0"

tar -C "$TMP" -cf - build lib | xz -T0 -6 >"$OUTDIR/pack.tar.xz"
data=$(grep -o '^AMPC_TESTDATA:PATH=.*' build/CMakeCache.txt | cut -d= -f2)
tar -C "$data" -cf - . | xz -T0 -6 >"$OUTDIR/testdata.tar.xz"
echo "pack_tests.sh: $(du -sh "$OUTDIR" | cut -f1) in $OUTDIR (build of $(git -C "$ROOT" rev-parse --short HEAD))"
