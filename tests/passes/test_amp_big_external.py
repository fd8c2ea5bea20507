#!/usr/bin/env python3
"""Regression: models with external data over 2 GB (a problem users report with other
fp16 converters, which load the whole model into one protobuf). The model has a 2.36 GB
float32 weight read by a MatMul (so converted to a 1.18 GB float16 weight) and a 1.18 GB
float32 weight read by Exp (so kept in float32); both live in a sparse external data file
with a few known values. `ampc MODEL -o OUT` must succeed, store the first weight in
float16 with those values, keep the second in float32, and, the result being over 2 GB,
write it with external data (OUT.data) that onnx can read back.

It writes about 2.4 GB and needs about 1.5 GB of memory, so it runs only with
AMPC_BIG_TESTS=1 (scripts/test.sh sets it when the temporary folder has 10 GB free) and
enough free disk space; otherwise it exits 77 (skip). The small
version (weights in external data, converted) is tests/passes/test_amp_train.c.

usage: test_amp_big_external.py --ampc PATH --testdata DIR
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
except ImportError as e:
    print(f"{e.name} is not installed: skipping")
    sys.exit(77)

K, N1, N2 = 16384, 36000, 18000  # W1 [K, N1] fp32: 2.36 GB; W2 [K, N2]: 1.18 GB
PROBES = [(0, 0, 1.5), (123, 4567, -2.25), (K - 1, N1 - 1, 65504.0)]


def external(name, offset, length):
    tp = onnx.TensorProto()
    tp.name = name
    tp.data_type = TensorProto.FLOAT
    tp.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "big.onnx.data"), ("offset", str(offset)), ("length", str(length))):
        e = tp.external_data.add()
        e.key, e.value = k, v
    return tp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    args = ap.parse_args()
    if os.environ.get("AMPC_BIG_TESTS") != "1":
        print("skipped: set AMPC_BIG_TESTS=1 to run (writes about 2.4 GB)")
        return 77
    tmp = tempfile.mkdtemp(prefix="ampc_big_")
    try:
        if shutil.disk_usage(tmp).free < (6 << 30):
            print("skipped: less than 6 GB free in " + tmp)
            return 77
        n1, n2 = K * N1 * 4, K * N2 * 4
        off2 = (n1 + 63) // 64 * 64
        data = os.path.join(tmp, "big.onnx.data")
        with open(data, "wb") as f:  # sparse: only the probes take disk space
            f.truncate(off2 + n2)
            for r, c, v in PROBES:
                f.seek((r * N1 + c) * 4)
                f.write(np.float32(v).tobytes())
            f.seek(off2 + 4 * 7)
            f.write(np.float32(1e6).tobytes())  # out of fp16's range, but W2 stays fp32 anyway
        w1, w2 = external("W1", 0, n1), external("W2", off2, n2)
        w1.dims.extend([K, N1])
        w2.dims.extend([K, N2])
        g = helper.make_graph(
            [helper.make_node("MatMul", ["x", "W1"], ["y1"], name="mm"), helper.make_node("Exp", ["W2"], ["y2"], name="exp")],
            "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
            [helper.make_tensor_value_info("y1", TensorProto.FLOAT, [1, N1]),
             helper.make_tensor_value_info("y2", TensorProto.FLOAT, [K, N2])], [w1, w2])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        src = os.path.join(tmp, "big.onnx")
        with open(src, "wb") as f:
            f.write(m.SerializeToString())
        out = os.path.join(tmp, "out.onnx")
        p = subprocess.run([args.ampc, src, "-o", out], capture_output=True, text=True, timeout=1200)
        failures = []
        if p.returncode:
            failures.append(f"ampc exited {p.returncode}: {p.stderr.strip()}")
        else:
            print(p.stderr.strip())
            if not os.path.exists(out + ".data"):
                failures.append("the converted model (over 2 GB) has no external data file")
            conv = onnx.load(out, load_external_data=False)
            inits = {t.name: t for t in conv.graph.initializer}
            if inits["W1"].data_type != TensorProto.FLOAT16:
                failures.append(f"W1 is {inits['W1'].data_type}, not float16")
            if inits["W2"].data_type != TensorProto.FLOAT:
                failures.append("W2 (read by Exp) is not float32")
            info = {e.key: e.value for e in inits["W1"].external_data}
            loc = os.path.join(tmp, info.get("location", ""))
            base = int(info.get("offset", "0"))
            with open(loc, "rb") as f:
                for r, c, v in PROBES:
                    f.seek(base + (r * N1 + c) * 2)
                    got = np.frombuffer(f.read(2), dtype=np.float16)[0]
                    if float(got) != v:
                        failures.append(f"W1[{r},{c}] is {got}, want {v}")
        for f in failures:
            print("FAIL " + f)
        print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
        return 1 if failures else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
