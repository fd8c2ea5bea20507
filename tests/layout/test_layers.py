#!/usr/bin/env python3
"""The layering of docs/design.md ("Layers") as a test: every #include "x.h" of the project's
C, CUDA and header files names a header of a folder the including folder may use.

    ir/            -> ir
    ops/           -> ir, ops                (what every backend computes alike: the
                                            scalar math of the elementwise functions)
    passes/        -> ir, passes
    backend/       -> ir, backend            (the backend interface)
    kernels/cpu/   -> ir, ops, backend, kernels/cpu
    kernels/cuda/  -> ir, ops, backend, kernels/cuda, kernels/cpu   (the CPU reference's attribute
                                            parsing, window geometry and output checks)
    runtime/       -> ir, passes, backend, runtime   (never a kernels/ header)
    tools/         -> anything

So the runtime reaches devices only through backend/backend.h, and nothing includes a
layer above its own. A header named in two folders, or an include the table does not
allow, fails the test with the file and line.

And every include names its header from the repository root ("ir/ir.h",
"kernels/cpu/kernels.h", "tests/runtime/rt_util.h") or, for the public headers of
include/, as "ampc/ampc.h" and "ampc/status.h" (every layer may use status.h; the runtime
and tools ampc.h); only the generated "onnx.pb-c.h" is named bare. So two folders may hold
headers of one name (a `kernels.h` per backend) without an include meaning either.
Prints "N passed, M failed" last.

usage: test_layers.py [--ampc PATH] [--testdata DIR]   (both ignored: no build needed)
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ALLOWED = {
    "ir": {"ir"},
    "ops": {"ir", "ops"},
    "passes": {"ir", "passes"},
    "backend": {"ir", "backend"},
    "kernels/cpu": {"ir", "ops", "backend", "kernels/cpu"},
    "kernels/cuda": {"ir", "ops", "backend", "kernels/cuda", "kernels/cpu"},
    "runtime": {"ir", "passes", "backend", "runtime"},
    "tools": None,  # the command and its benchmarks may use every layer
}
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_files():
    for layer in ALLOWED:
        d = os.path.join(ROOT, layer)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(SOURCE_EXT):
                yield layer, name


def check(files):
    """Returns the list of violations (strings) for files = [(layer, name)]."""
    home, problems = {}, []
    for layer, name in files:
        if name.endswith((".h", ".cuh", ".def")):
            if name in home and home[name] != layer:
                problems.append(f"header {name} is in both {home[name]}/ and {layer}/")
            home[name] = layer
    for layer, name in files:
        allowed = ALLOWED[layer]
        with open(os.path.join(ROOT, layer, name), encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = os.path.basename(m.group(1))
                where = home.get(inc)
                if where is None:
                    continue  # generated (onnx.pb-c.h) or a system header in quotes
                if allowed is not None and where not in allowed:
                    problems.append(f"{layer}/{name}:{lineno}: includes {inc} of {where}/, "
                                    f"which {layer}/ may not use")
    return problems


GENERATED = {"onnx.pb-c.h"}
QUALIFY_DIRS = ("ir", "ops", "passes", "backend", "kernels", "runtime", "tools", "tests", "include")


def unqualified(root):
    """Includes of the tree's own files that do not name them from the root (or ampc/)."""
    problems = []
    for top in QUALIFY_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(1) in GENERATED:
                            continue
                        inc = m.group(1)
                        target = os.path.join(root, "include", inc) if inc.startswith("ampc/") else os.path.join(root, inc)
                        if inc.startswith(".") or "/" not in inc or not os.path.isfile(target):
                            if "/" not in inc and not os.path.isfile(os.path.join(dirpath, inc)) \
                                    and not any(os.path.isfile(os.path.join(root, d, inc)) for d in ALLOWED):
                                continue  # a system header in quotes
                            problems.append(f'{rel}:{lineno}: #include "{inc}" does not name the file from the '
                                            f"repository root (or ampc/ for include/)")
    return problems


def main():
    files = list(layer_files())
    passed = failed = 0
    problems = check(files)
    for p in problems:
        print("FAIL", p)
    failed += bool(problems)
    passed += not problems
    problems = unqualified(os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    for p in problems[:40]:
        print("FAIL", p)
    failed += bool(problems)
    passed += not problems
    # The check itself must be able to fail: a runtime file that includes a CPU kernel
    # header, and a kernel that includes a runtime header, are both caught.
    import tempfile
    global ROOT
    real_root = ROOT
    with tempfile.TemporaryDirectory() as tmp:
        for layer in ("runtime", "kernels/cpu", "backend", "ir"):
            os.makedirs(os.path.join(tmp, layer))
        planted = {
            "runtime/bad.c": '#include "kernels.h"\n',
            "kernels/cpu/kernels.h": "\n",
            "kernels/cpu/bad2.c": '#include "exec.h"\n',
            "runtime/exec.h": "\n",
            "backend/backend.h": "\n",
            "ir/ir.h": "\n",
        }
        for path, text in planted.items():
            with open(os.path.join(tmp, path), "w") as f:
                f.write(text)
        ROOT = tmp
        got = check([(os.path.dirname(p), os.path.basename(p)) for p in planted])
        ROOT = real_root
    if len(got) == 2:
        passed += 1
    else:
        failed += 1
        print("FAIL the planted violations were not both found:", got)
    # ... and so must the qualified-path rule: a bare name and a relative path are caught,
    # a qualified one and the generated header are not
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("ir", "tests/ir", "include/ampc"):
            os.makedirs(os.path.join(tmp, d))
        planted = {"ir/ir.h": "\n", "include/ampc/status.h": "\n", "tests/ir/util.h": "\n",
                   "ir/a.c": '#include "ir.h"\n#include "ir/ir.h"\n#include "ampc/status.h"\n#include "onnx.pb-c.h"\n',
                   "tests/ir/b.c": '#include "../ir/util.h"\n#include "tests/ir/util.h"\n'}
        for path, text in planted.items():
            with open(os.path.join(tmp, path), "w") as f:
                f.write(text)
        got = unqualified(tmp)
    if len(got) == 2 and "ir/a.c:1:" in got[0] and "tests/ir/b.c:1:" in got[1]:
        passed += 1
    else:
        failed += 1
        print("FAIL the planted unqualified includes were not both found:", got)
    print(f"{len(files)} files checked")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
