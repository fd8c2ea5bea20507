#!/usr/bin/env python3
"""Resize-18's keep_aspect_ratio_policy (not_larger, not_smaller) with `sizes`: the shape
function (ir/infer_shape.c) sizes the output as the CPU kernel does (one scale for the
resized axes, the smallest or largest of sizes[i] / dim; each output round(scale * dim),
half up), so a session runs these nodes; before, `ampc run` stopped with "cannot size
output 0". Each case (nearest and linear, up and down, with and without `axes`) is compared
with onnxruntime exactly (nearest) or to 1e-5 (linear). Prints "N passed, M failed" last;
exit 77 when onnx, onnxruntime or numpy is missing.

usage: test_resize_policy.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

CASES = [  # (mode, policy, input shape, sizes, axes)
    ("nearest", "not_larger", (1, 1, 4, 6), (7, 8), (2, 3)),
    ("nearest", "not_smaller", (1, 1, 4, 6), (7, 8), (2, 3)),
    ("nearest", "not_larger", (1, 2, 9, 5), (1, 2, 3, 4), None),  # every axis: one of them rounds to 0
    ("nearest", "not_larger", (1, 2, 9, 5), (3, 4), (2, 3)),
    ("linear", "not_smaller", (2, 2, 9, 5), (2, 2, 3, 4), None),
    ("linear", "not_larger", (2, 3, 5, 7), (10, 9), (2, 3)),  # (negative axes: onnxruntime gives another shape than ONNX shape inference)
]


def model(path, mode, policy, shape, sizes, axes):
    attrs = {"mode": mode, "keep_aspect_ratio_policy": policy}
    if axes is not None:
        attrs["axes"] = list(axes)
    node = h.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="resize", **attrs)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(np.array(sizes, np.int64), "sizes")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, path)


def test_cases(ctx):
    rng = np.random.default_rng(0)
    for k, (mode, policy, shape, sizes, axes) in enumerate(CASES):
        src = os.path.join(ctx.tmp, f"r{k}.onnx")
        model(src, mode, policy, shape, sizes, axes)
        x = rng.standard_normal(shape).astype(np.float32)
        want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        d_in, d_out = os.path.join(ctx.tmp, f"in{k}"), os.path.join(ctx.tmp, f"out{k}")
        os.makedirs(d_in, exist_ok=True)
        with open(os.path.join(d_in, "input_0.pb"), "wb") as f:
            f.write(nh.from_array(x, "x").SerializeToString())
        r = subprocess.run([ctx.ampc, "run", src, "--inputs", d_in, "--outputs", d_out], capture_output=True, text=True)
        assert r.returncode == 0, f"case {k}: {r.stderr}"
        got = nh.to_array(onnx.load_tensor(os.path.join(d_out, "output_0.pb")))
        assert got.shape == want.shape, f"case {k} ({mode}, {policy}): shape {got.shape}, onnxruntime {want.shape}"
        tol = 0 if mode == "nearest" else 1e-5
        if got.size:
            assert np.abs(got - want).max() <= tol, f"case {k}: max difference {np.abs(got - want).max()}"
    ctx.notes.append(f"{len(CASES)} keep_aspect_ratio_policy cases equal onnxruntime's")


class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx()
    ctx.ampc, ctx.tmp, ctx.notes = args.ampc, tl.tempdir("ampc_resize_"), []
    return tl.run([("keep_aspect_ratio_policy", test_cases)], ctx, verbose=args.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
