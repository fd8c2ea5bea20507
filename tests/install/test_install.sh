#!/bin/sh
# `cmake --install` then programs built against the installed package: one through CMake's
# find_package(ampc), one through pkg-config; both run a bundled model in FP32 and mixed
# precision; their outputs must match onnxruntime's (when installed) and each other.
# usage: test_install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1 src=$2
tmp=$(mktemp -d /tmp/ampc_install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
for f in lib/libampc.a lib/libampc.so include/ampc/ampc.h lib/pkgconfig/ampc.pc lib/cmake/ampc/ampcConfig.cmake bin/ampc; do
    test -f "$tmp/prefix/$f" || { echo "FAIL: the install has no $f"; exit 1; }
done
model=$src/models/cnn_infer/model.onnx

# The archive exports the public API and nothing else: every global symbol it defines is a
# function declared in include/ampc (AMP_API), and every one declared there is defined.
lib=$tmp/prefix/lib/libampc.a
nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/exported"
grep -ho '^AMP_API [^(]*(' "$src"/include/ampc/*.h | sed 's/.*[ *]\(amp_[a-z0-9_]*\)($/\1/' | sort -u >"$tmp/declared"
test -s "$tmp/declared" || { echo "FAIL: no AMP_API function found in include/ampc"; exit 1; }
if ! cmp -s "$tmp/exported" "$tmp/declared"; then
    echo "FAIL: libampc.a's global symbols differ from the public API (< exported only, > declared only):"
    diff "$tmp/exported" "$tmp/declared" | grep '^[<>]' | head -20
    exit 1
fi
echo "libampc.a exports the $(wc -l <"$tmp/declared") functions of include/ampc and nothing else"
# The shared library likewise: its dynamic symbol table defines the public API alone.
nm -D --defined-only "$tmp/prefix/lib/libampc.so" | awk 'NF == 3 { print $3 }' | sed 's/@.*//' | sort -u >"$tmp/exported_so"
if ! cmp -s "$tmp/exported_so" "$tmp/declared"; then
    echo "FAIL: libampc.so's dynamic symbols differ from the public API (< exported only, > declared only):"
    diff "$tmp/exported_so" "$tmp/declared" | grep '^[<>]' | head -20
    exit 1
fi
echo "libampc.so exports the same $(wc -l <"$tmp/declared") functions and nothing else"

# CMake: find_package(ampc)
cmake -S "$src/tests/install" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >"$tmp/cm.log" 2>&1 ||
    { cat "$tmp/cm.log"; echo "FAIL: configuring against the package"; exit 1; }
cmake --build "$tmp/cm" >"$tmp/cmb.log" 2>&1 || { cat "$tmp/cmb.log"; echo "FAIL: building against the package"; exit 1; }
"$tmp/cm/demo" "$model" 2 1 16 16 >"$tmp/cmake.txt" 2>"$tmp/cmake.err" || { cat "$tmp/cmake.err"; exit 1; }
cat "$tmp/cmake.err"

# pkg-config
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --exists ampc || { echo "FAIL: pkg-config finds no ampc"; exit 1; }
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -o "$tmp/demo_pc" "$src/tests/install/demo.c" \
    $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs ampc) -lm || { echo "FAIL: cc with pkg-config"; exit 1; }
"$tmp/demo_pc" "$model" 2 1 16 16 >"$tmp/pc.txt" 2>"$tmp/pc.err" || { cat "$tmp/pc.err"; exit 1; }
cmp -s "$tmp/cmake.txt" "$tmp/pc.txt" || { echo "FAIL: the two builds print different outputs"; exit 1; }
n=$(wc -l <"$tmp/cmake.txt")
test "$n" -eq 20 || { echo "FAIL: expected 2x10 logits, got $n values"; exit 1; }
grep -q "AMP max rel difference" "$tmp/cmake.err"
awk '{ if ($NF + 0 > 0.01) { print "FAIL: AMP differs from FP32 by " $NF; exit 1 } }' "$tmp/cmake.err"

# onnxruntime as the reference, when it is installed
if python3 -c "import onnxruntime, numpy" 2>/dev/null; then
    python3 - "$model" "$tmp/cmake.txt" <<'PY'
import sys
import numpy as np
import onnxruntime as ort
x = np.sin(0.1 * np.arange(2 * 16 * 16, dtype=np.float64)).astype(np.float32).reshape(2, 1, 16, 16)
want = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"]).run(None, {"x": x})[0].ravel()
got = np.loadtxt(sys.argv[2], dtype=np.float64)
err = np.abs(got - want).max() / np.abs(want).max()
assert err < 1e-5, f"demo's FP32 output differs from onnxruntime's by {err:.3g}"
print(f"onnxruntime agrees within {err:.2g}")
PY
fi
echo "PASS: cmake --install, find_package(ampc) and pkg-config builds run the bundled CNN"
