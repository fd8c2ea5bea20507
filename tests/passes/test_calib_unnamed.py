#!/usr/bin/env python3
"""ampc's calibration file reads back for a model whose nodes have no names (issue 43,
item 12: ONNX allows unnamed nodes and many exporters write none; `ampc calibrate` wrote
'reduce 1024 ' lines that `--calibration` then refused, "expected 'reduce LENGTH NODE'").
Now the line names the node by what it writes, and the conversion with the file succeeds.

usage: test_calib_unnamed.py --ampc PATH [--testdata DIR] [--verbose]
Exit 77 (skip) when onnx or numpy is missing."""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ampc_calib_unnamed_")
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]  # no names
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    src, stats, out = (os.path.join(tmp, f) for f in ("m.onnx", "m.stats", "out.onnx"))
    onnx.save(m, src)
    failed = 0
    for args in (["calibrate", src, "-o", stats], [src, "--calibration", stats, "-o", out, "-q"]):
        r = subprocess.run([a.ampc, *args], capture_output=True, text=True)
        if a.verbose:
            print(r.stdout + r.stderr)
        if r.returncode != 0:
            failed += 1
            print(f"FAIL ampc {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    if not failed:
        with open(stats) as f:
            lines = [ln for ln in f if ln.startswith("reduce ")]
        if not lines or any(len(ln.split(" ", 2)) < 3 or not ln.split(" ", 2)[2].strip() for ln in lines):
            failed += 1
            print(f"FAIL reduce lines name no node: {lines}")
        else:
            print(f"ok   calibrate and --calibration on unnamed nodes: {lines[0].strip()}")
    print(f"{1 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
