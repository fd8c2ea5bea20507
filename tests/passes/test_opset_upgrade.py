#!/usr/bin/env python3
"""The opset upgrade (passes/opset_upgrade.c) over the ONNX conformance models at
ai.onnx opsets 7 to 21 (--testdata): `ampc MODEL --precision bf16 --passes
infer,opset_upgrade --opset-upgrade 22` must, when it raises the opset, give a model that onnx.checker accepts
and that computes the same outputs in onnxruntime as the original (the upgrade alone: no
16-bit node yet); a ResNet-like net at opset 17 gets every Conv in bf16 (`--report`), and
with --opset-upgrade never the amp summary says how many allow-list nodes stay fp32, what
share of the FLOPs they hold, and which flag converts them.

Prints "N upgraded, M kept at their opset (reason)" and "N passed, M failed"; exit 77 when
numpy, onnx or onnxruntime is missing.

usage: test_opset_upgrade.py --ampc PATH --testdata DIR [-v]
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"{e.name} is not installed: skipping")
    sys.exit(77)

ort.set_default_logger_severity(4)
FAILS = []


def fail(what):
    FAILS.append(what)
    print("FAIL:", what)


def opset(m):
    return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)


def ampc(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def load_inputs(d, sess):
    feeds = {}
    for i, info in enumerate(sess.get_inputs()):
        p = os.path.join(d, f"input_{i}.pb")
        if not os.path.exists(p):
            return None
        try:
            t = TensorProto()
            t.ParseFromString(open(p, "rb").read())
            feeds[info.name] = numpy_helper.to_array(t)
        except Exception:  # noqa: BLE001 (a sequence or optional input)
            return None
    return feeds


def corpus(exe, testdata, tmp, verbose):
    upgraded, kept, skipped = 0, {}, 0
    for model in sorted(glob.glob(os.path.join(testdata, "node", "*", "model.onnx"))):
        name = os.path.basename(os.path.dirname(model))
        m = onnx.load(model)
        if not 7 <= opset(m) <= 21 or m.functions:
            continue
        try:
            a = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 (onnxruntime lacks the op: nothing to compare)
            skipped += 1
            continue
        feeds = load_inputs(os.path.join(os.path.dirname(model), "test_data_set_0"), a)
        try:
            ya = a.run(None, feeds) if feeds is not None else None
        except Exception:  # noqa: BLE001
            ya = None
        if ya is None:
            skipped += 1
            continue
        out = os.path.join(tmp, name + ".onnx")
        r = ampc([exe, model, "-o", out, "--precision", "bf16", "--passes", "infer,opset_upgrade",
                  "--opset-upgrade", "22"])
        if r.returncode != 0:
            fail(f"{name}: ampc exit {r.returncode}: {r.stderr.strip()}")
            continue
        up = onnx.load(out)
        if opset(up) == opset(m):
            mo = re.search(r"opset_upgrade: ai.onnx opset stays \d+ \(.*?\): (.*)", r.stderr)
            if mo:
                kept[name] = mo.group(1)
            continue
        upgraded += 1
        try:
            onnx.checker.check_model(up)
            b = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
            yb = b.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            if "NOT_IMPLEMENTED" in str(e):  # onnxruntime lacks the op at the new opset
                skipped += 1
                continue
            fail(f"{name}: opset {opset(m)} -> {opset(up)}: {type(e).__name__}: {str(e)[:300]}")
            continue
        for i, (x, y) in enumerate(zip(ya, yb)):
            x, y = np.asarray(x), np.asarray(y)  # a sequence output: a list of arrays
            same = (np.array_equal(x, y) if x.dtype.kind not in "fc"
                    else np.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True))
            if x.shape != y.shape or x.dtype != y.dtype or not same:
                fail(f"{name}: output {i} differs after opset {opset(m)} -> {opset(up)}")
                break
        else:
            if verbose:
                print(f"ok {name}: opset {opset(m)} -> {opset(up)}")
    for k, v in sorted(kept.items()):
        print(f"kept {k}: {v}")
    print(f"{upgraded} upgraded, {len(kept)} kept at their opset, {skipped} not run by onnxruntime")
    if upgraded < 100:
        fail(f"only {upgraded} conformance models upgraded")


def resnet_like(path):
    """conv-bn-relu stem, two residual blocks, Softmax on axis 1 of a 4-D tensor, opset 17."""
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def w(name, *shape):
        inits.append(numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name))
        return name

    def conv(x, y, cin, cout):
        nodes.append(helper.make_node("Conv", [x, w(y + "_w", cout, cin, 3, 3), w(y + "_b", cout)], [y],
                                      name=y, pads=[1, 1, 1, 1]))

    conv("x", "c0", 3, 8)
    nodes.append(helper.make_node("Relu", ["c0"], ["r0"], name="r0"))
    prev = "r0"
    for k in range(2):
        conv(prev, f"c{k}a", 8, 8)
        nodes.append(helper.make_node("Relu", [f"c{k}a"], [f"r{k}a"], name=f"r{k}a"))
        conv(f"r{k}a", f"c{k}b", 8, 8)
        nodes.append(helper.make_node("Add", [f"c{k}b", prev], [f"s{k}"], name=f"s{k}"))
        nodes.append(helper.make_node("Relu", [f"s{k}"], [f"o{k}"], name=f"o{k}"))
        prev = f"o{k}"
    nodes.append(helper.make_node("MaxPool", [prev], ["mp"], name="mp", kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("Softmax", ["mp"], ["sm"], name="sm", axis=1))
    nodes.append(helper.make_node("ReduceMean", ["sm"], ["y"], name="mean", axes=[2, 3], keepdims=0))
    g = helper.make_graph(nodes, "resnet_like", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    m.ir_version = 7
    onnx.save(m, path)
    return sum(n.op_type == "Conv" for n in nodes)


def resnet(exe, tmp):
    src = os.path.join(tmp, "resnet_like.onnx")
    n_conv = resnet_like(src)
    # The upgrade alone: opset 12 -> 22 (Softmax's axis, ReduceMean's axes adapted), same outputs.
    up = os.path.join(tmp, "resnet_up.onnx")
    r = ampc([exe, src, "-o", up, "--precision", "bf16", "--passes", "infer,opset_upgrade"])
    if r.returncode or "opset 12 -> 22 so that Conv takes bfloat16; 2 nodes adapted" not in r.stderr:
        fail(f"resnet_like upgrade: {r.returncode} {r.stderr.strip()}")
        return
    m = onnx.load(up)
    onnx.checker.check_model(m, full_check=True)
    if opset(m) != 22:
        fail(f"resnet_like: opset {opset(m)}, expected 22")
    x = {"x": np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)}
    ya = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, x)[0]
    yb = ort.InferenceSession(up, providers=["CPUExecutionProvider"]).run(None, x)[0]
    if not np.allclose(ya, yb, rtol=1e-5, atol=1e-6):
        fail(f"resnet_like: upgraded outputs differ by {np.abs(ya - yb).max()}")
    # The default pipeline: every Conv in bf16.
    out = os.path.join(tmp, "resnet_bf16.onnx")
    r = ampc([exe, src, "-o", out, "--precision", "bf16", "--report"])
    row = re.search(r"^Conv\s+(\d+)\s+(\d+)\s+(\d+)", r.stdout, re.M)
    if r.returncode or not row or int(row.group(2)) != n_conv:
        fail(f"resnet_like bf16: Conv row {row and row.group(0)!r}, expected {n_conv} in 16 bits; {r.stderr.strip()}")
    if "100.0% (" not in r.stdout:
        fail(f"resnet_like bf16: FLOPs not all 16-bit: {r.stdout[:400]}")
    # Never: the Convs stay fp32, and the summary says so loudly.
    r = ampc([exe, src, "-o", out, "--precision", "bf16", "--opset-upgrade", "never"])
    want = (f"{n_conv} allow-list nodes (100.0% of GEMM/conv FLOPs) stay fp32: opset 12 takes no bf16 for Conv; "
            "--opset-upgrade auto converts them")
    if r.returncode or want not in r.stderr:
        fail(f"resnet_like never: expected '{want}' in: {r.stderr.strip()}")
    # fp16 needs no upgrade: the opset stays, and no clause is added.
    r = ampc([exe, src, "-o", out])
    if r.returncode or "opset_upgrade:" in r.stderr or "stay fp32" in r.stderr or opset(onnx.load(out)) != 12:
        fail(f"resnet_like fp16: {r.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", required=True)
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        resnet(a.ampc, tmp)
        if os.path.isdir(os.path.join(a.testdata, "node")):
            corpus(a.ampc, a.testdata, tmp, a.v)
    print(f"{0 if FAILS else 1} passed, {len(FAILS)} failed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
