#!/usr/bin/env python3
"""Accuracy and coverage of conversions, compared between ampc builds or options (issue 24's
figures): for each model, precision (fp16, bf16) and SPEC, the float nodes in 16 bits and
the casts (ampc's success line), the nodes, the file's size as a share of FP32's, whether
onnx.checker accepts it, and the first output's largest error relative to FP32's largest
|value|, run by onnxruntime (CPU; bf16 models mostly lack its kernels: n/a) and by
`ampc run`. FP32 is onnxruntime on the original model. Inputs: the model's
test_data_set_0 when it has one, else random token ids (masks all ones, unknown dims 2).

Each SPEC is NAME=AMPC[,ARG...]: an ampc binary and extra conversion arguments
(before=/tmp/base/build/ampc after=build/ampc fused=build/ampc,--opset-upgrade,17).
A measurement, not a test: quote its numbers with the machine and models.

usage: accuracy_ab.py SPEC [SPEC ...] -- MODEL [MODEL ...]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper as nh


def feeds_for(path):
    """The inputs: test_data_set_0's, else random token ids and all-ones masks."""
    d = os.path.join(os.path.dirname(path), "test_data_set_0")
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    if os.path.exists(os.path.join(d, "input_0.pb")):
        ts = [onnx.load_tensor(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.startswith("input_")]
        return {t.name or n: nh.to_array(t) for t, n in zip(ts, names)}
    rng = np.random.RandomState(0)
    feeds = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        shape = [d.dim_value or 2 for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = np.ones(shape, np.int64) if "mask" in i.name else \
            rng.randint(0, 1000, size=shape).astype(np.int64)
    return feeds


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    want = {i.name for i in s.get_inputs()}
    return s.run(None, {k: v for k, v in feeds.items() if k in want})[0].astype(np.float64)


def one(path, prec, name, spec, tmp, ind, ref):
    """One conversion's line."""
    out = os.path.join(tmp, f"{name}_{prec}.onnx")
    r = subprocess.run(spec + [path, "--precision", prec, "-o", out], capture_output=True, text=True)
    mm = re.search(r"(\d+) of (\d+) float nodes in 16 bits, (\d+) casts", r.stderr)
    if r.returncode or not mm:
        return f"convert failed: {r.stderr[-300:]}"
    try:
        onnx.checker.check_model(out)
        chk = "checker ok"
    except Exception as e:  # noqa: BLE001 - reported, not raised
        chk = "checker: " + str(e)[:80]
    scale = np.max(np.abs(ref))
    try:
        e_ort = f"{np.max(np.abs(ort_run(out, feeds_for(path)) - ref)) / scale:.2e}"
    except Exception as e:  # noqa: BLE001
        e_ort = "n/a (" + str(e).split("\n")[0][:40] + ")"
    od = os.path.join(tmp, "out")
    shutil.rmtree(od, ignore_errors=True)
    r2 = subprocess.run([spec[0], "run", out, "--inputs", ind, "--outputs", od], capture_output=True, text=True)
    if r2.returncode == 0:
        got = nh.to_array(onnx.load_tensor(os.path.join(od, "output_0.pb"))).astype(np.float64)
        e_amp = f"{np.max(np.abs(got - ref)) / scale:.2e}"
    else:
        e_amp = "failed: " + r2.stderr[-100:]
    nodes = len(onnx.load(out, load_external_data=False).graph.node)
    size = os.path.getsize(out) / os.path.getsize(path)
    return (f"{mm.group(1)}/{mm.group(2)} float nodes in 16 bits, {mm.group(3)} casts, {nodes} nodes, "
            f"size {size:.3f} of FP32, error: onnxruntime {e_ort}, ampc run {e_amp}; {chk}")


def main():
    if "--" not in sys.argv[1:]:
        sys.exit(__doc__)
    k = sys.argv.index("--")
    specs = [(n, b.split(",")) for n, b in (a.split("=", 1) for a in sys.argv[1:k])]
    tmp = tempfile.mkdtemp(prefix="accuracy_ab_")
    try:
        for path in sys.argv[k + 1:]:
            feeds = feeds_for(path)
            ind = os.path.join(tmp, "in")
            shutil.rmtree(ind, ignore_errors=True)
            os.makedirs(ind)
            for j, (n, a) in enumerate(feeds.items()):
                with open(os.path.join(ind, f"input_{j}.pb"), "wb") as fh:
                    fh.write(nh.from_array(a, n).SerializeToString())
            ref = ort_run(path, feeds)
            shown = os.path.basename(os.path.dirname(path)) if path.endswith("model.onnx") else os.path.basename(path)
            for prec in ("fp16", "bf16"):
                for name, spec in specs:
                    print(f"{shown} {prec} {name}: {one(path, prec, name, spec, tmp, ind, ref)}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
