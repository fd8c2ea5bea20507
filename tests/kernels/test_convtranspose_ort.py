#!/usr/bin/env python3
"""Differential test of ConvTranspose with output_shape (issue 26, point 9) against
onnxruntime's CPU implementation: with output_shape the pads attribute is ignored and
the total padding (natural size - output_shape) splits with the larger half first, but
for SAME_UPPER. Each case is a one-node model run in onnxruntime and with `ampc run
MODEL --inputs DIR --outputs DIR`. Exit 77 (skipped) without numpy, onnx or onnxruntime.

usage: test_convtranspose_ort.py --ampc PATH [--testdata DIR]   (--testdata is unused)"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"skip: {e}")
    sys.exit(77)

RNG = np.random.default_rng(26)

# (X shape, W shape, attributes): 1-D and 2-D, strides, dilations, output_padding,
# groups, every auto_pad, pads that must be ignored, odd and even total paddings.
CASES = [
    ((1, 1, 4, 4), (1, 1, 2, 2), dict(output_shape=[1, 1])),  # the case
    ((1, 1, 3), (1, 1, 2), dict(output_shape=[3])),
    ((1, 1, 3), (1, 1, 2), dict(output_shape=[2], pads=[0, 1])),
    ((1, 1, 3), (1, 1, 2), dict(output_shape=[3], auto_pad="VALID")),
    ((1, 1, 3), (1, 1, 2), dict(output_shape=[3], auto_pad="SAME_LOWER")),
    ((1, 1, 3), (1, 1, 2), dict(output_shape=[3], auto_pad="SAME_UPPER")),
    ((1, 1, 3), (1, 1, 3), dict(output_shape=[5], strides=[2], output_padding=[1])),
    ((2, 2, 3, 4), (2, 3, 3, 2), dict(output_shape=[5, 6], strides=[2, 2])),
    ((1, 4, 3, 3), (4, 1, 3, 3), dict(output_shape=[4, 5], strides=[2, 2], group=2, pads=[1, 1, 1, 1])),
    ((1, 2, 4, 3), (2, 2, 2, 2), dict(output_shape=[6, 3], strides=[2, 1], dilations=[2, 1])),
    ((1, 2, 4, 3), (2, 2, 2, 2), dict(output_shape=[6, 3], strides=[2, 1], auto_pad="SAME_UPPER")),
]


def build(xs, ws, attrs):
    node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, xs),
                                         helper.make_tensor_value_info("W", TensorProto.FLOAT, ws)],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def run_ampc(ampc, m, feeds, work):
    mp = os.path.join(work, "model.onnx")
    with open(mp, "wb") as f:
        f.write(m.SerializeToString())
    ind, outd = os.path.join(work, "in"), os.path.join(work, "out")
    os.makedirs(ind), os.makedirs(outd)
    for k, name in enumerate(["X", "W"]):
        with open(os.path.join(ind, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[name], name).SerializeToString())
    p = subprocess.run([ampc, "run", mp, "--inputs", ind, "--outputs", outd, "--backend", "cpu"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"ampc exit {p.returncode}: {p.stderr.strip()[-300:]}"
    from onnx import TensorProto as TP
    t = TP()
    with open(os.path.join(outd, "output_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    a = ap.parse_args()
    passed = failed = 0
    for xs, ws, attrs in CASES:
        feeds = {"X": RNG.standard_normal(xs).astype(np.float32), "W": RNG.standard_normal(ws).astype(np.float32)}
        m = build(xs, ws, attrs)
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        with tempfile.TemporaryDirectory() as work:
            got, err = run_ampc(a.ampc, m, feeds, work)
        if err is None and (got.shape != want.shape or not np.allclose(got, want, atol=1e-5, rtol=1e-5)):
            err = f"shape {got.shape} vs {want.shape}, got {got.ravel()[:6]} want {want.ravel()[:6]}"
        if err:
            failed += 1
            print(f"FAIL {xs} {ws} {attrs}: {err}")
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
