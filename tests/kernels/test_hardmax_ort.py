#!/usr/bin/env python3
"""Differential test of Hardmax against onnxruntime's CPU implementation: opsets 1, 11
(the input coerced to 2-D at axis, default 1) and 13 (along the one axis, default -1),
ranks 1 to 4, every axis (negative ones too), ties (small integers: the first max wins)
and the dtypes onnxruntime runs. Each case is a one-node model run in onnxruntime and
with `ampc run MODEL --inputs DIR --outputs DIR`; outputs must be equal. Exit 77
(skipped) without numpy, onnx or onnxruntime. For the dtypes onnxruntime's CPU lacks
(float16, double) the reference is numpy's argmax over the same rows (onnx.reference
applies opset 13's semantics to every opset), itself checked against onnxruntime on the
float cases.

usage: test_hardmax_ort.py --ampc PATH [--testdata DIR]   (--testdata is unused)"""
import argparse
import os
import shutil
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

RNG = np.random.default_rng(27)
ort.set_default_logger_severity(4)
SHAPES = [(5,), (3, 4), (2, 3, 4), (2, 1, 3, 3)]
DTYPES = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16, np.float64: TensorProto.DOUBLE}


def cases():
    for opset in (1, 11, 13):
        for shape in SHAPES:
            r = len(shape)
            lo = -r if opset >= 11 else 0  # negative axes from opset 11
            for axis in [None] + list(range(lo, r)):
                if opset < 13 and r == 1 and axis in (None, 1):
                    continue  # the 2-D coercion's default axis 1 needs rank 2
                for dt in DTYPES:
                    yield opset, shape, axis, dt


def reference(x, opset, axis):
    """numpy's Hardmax: rows along axis (13+), or the 2-D coercion at axis (before)."""
    r = x.ndim
    if opset >= 13:
        a = (-1 if axis is None else axis) % r
        moved = np.moveaxis(x, a, -1)
        y = np.zeros_like(moved)
        np.put_along_axis(y, np.argmax(moved, axis=-1)[..., None], 1, axis=-1)
        return np.moveaxis(y, -1, a)
    a = 1 if axis is None else axis + r if axis < 0 else axis
    rows = x.reshape(int(np.prod(x.shape[:a], dtype=np.int64)), -1)
    y = np.zeros_like(rows)
    y[np.arange(rows.shape[0]), np.argmax(rows, axis=1)] = 1
    return y.reshape(x.shape)


def build(opset, shape, axis, dt):
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("Hardmax", ["X"], ["Y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", DTYPES[dt], shape)],
                          [helper.make_tensor_value_info("Y", DTYPES[dt], shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m


def run_ampc(ampc, m, x, work):
    os.makedirs(work)
    mp = os.path.join(work, "model.onnx")
    with open(mp, "wb") as f:
        f.write(m.SerializeToString())
    ind, outd = os.path.join(work, "in"), os.path.join(work, "out")
    os.makedirs(ind), os.makedirs(outd)
    with open(os.path.join(ind, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "X").SerializeToString())
    p = subprocess.run([ampc, "run", mp, "--inputs", ind, "--outputs", outd, "--backend", "cpu"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, f"ampc exit {p.returncode}: {p.stderr.strip()[-300:]}"
    t = TensorProto()
    with open(os.path.join(outd, "output_0.pb"), "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    a = ap.parse_args()
    passed = failed = by_numpy = 0
    tmp = tempfile.mkdtemp(prefix="ampc_hardmax_")
    try:
        for k, (opset, shape, axis, dt) in enumerate(cases()):
            x = RNG.integers(-3, 4, size=shape).astype(dt)  # few values: many ties
            m = build(opset, shape, axis, dt)
            what = f"opset {opset} shape {shape} axis {axis} {np.dtype(dt).name}"
            ref = reference(x, opset, axis)
            try:
                sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
                want = sess.run(None, {"X": x})[0]
                if not np.array_equal(ref, want):
                    failed += 1
                    print(f"FAIL {what}: the test's numpy reference disagrees with onnxruntime")
            except Exception:  # onnxruntime lacks this dtype: the numpy reference
                want = ref
                by_numpy += 1
            got, err = run_ampc(a.ampc, m, x, os.path.join(tmp, str(k)))
            if err or got.dtype != want.dtype or not np.array_equal(got, want):
                failed += 1
                print(f"FAIL {what}: {err or f'got {got.ravel().tolist()}, want {want.ravel().tolist()}'}")
            else:
                passed += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed ({by_numpy} against numpy alone: dtypes onnxruntime lacks)")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
