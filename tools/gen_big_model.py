#!/usr/bin/env python3
"""Writes a big FP32 model with external data, for the load/save benchmark
(tools/bench_extdata.sh): a chain of MatMul nodes Y = X @ W0 @ W1 @ ... whose square
weights total SIZE_MB, stored in OUTDIR/model.onnx.data (64-byte aligned offsets) and
referenced from OUTDIR/model.onnx. The data is written in chunks, so the generator stays
small in memory whatever the size.

usage: gen_big_model.py SIZE_MB OUTDIR [--dim D]
"""
import argparse
import math
import os
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper
except ImportError:
    sys.exit("gen_big_model.py needs the onnx package (pip install onnx)")

CHUNK = 16 << 20  # bytes written per write()


def write_weight(f, index, nbytes):
    """Appends `nbytes` of float32 data (a cheap deterministic pattern) to f."""
    n = nbytes // 4
    start = 0
    while start < n:
        count = min(CHUNK // 4, n - start)
        vals = (np.arange(start, start + count, dtype=np.int64) * 7 + index * 13) % 2001
        f.write(((vals.astype(np.float32) - 1000.0) * np.float32(1e-4)).tobytes())
        start += count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("size_mb", type=float, help="total size of the weights in MiB")
    ap.add_argument("outdir")
    ap.add_argument("--dim", type=int, default=0, help="side of each square weight (default: fit 64 MiB)")
    args = ap.parse_args()

    total = int(args.size_mb * (1 << 20))
    dim = args.dim or min(4096, max(16, int(math.sqrt(total / 4))))
    per = dim * dim * 4
    count = max(1, math.ceil(total / per))
    os.makedirs(args.outdir, exist_ok=True)
    model_path = os.path.join(args.outdir, "model.onnx")
    data_name = "model.onnx.data"

    inits, nodes = [], []
    offset = 0
    with open(os.path.join(args.outdir, data_name), "wb") as f:
        for i in range(count):
            pad = (-offset) % 64
            if pad:
                f.write(b"\0" * pad)
                offset += pad
            write_weight(f, i, per)
            t = TensorProto(name=f"W{i}", data_type=TensorProto.FLOAT, dims=[dim, dim])
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", data_name), ("offset", str(offset)), ("length", str(per))):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
            src = "X" if i == 0 else f"H{i - 1}"
            dst = "Y" if i == count - 1 else f"H{i}"
            nodes.append(helper.make_node("MatMul", [src, f"W{i}"], [dst], name=f"matmul{i}"))
            offset += per

    g = helper.make_graph(nodes, "big_chain",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", dim])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", dim])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="gen_big_model")
    m.ir_version = 8
    with open(model_path, "wb") as f:
        f.write(m.SerializeToString())
    print(f"{model_path}: {count} MatMul weights of {dim}x{dim} fp32, {offset / (1 << 20):.1f} MiB of external data")


if __name__ == "__main__":
    main()
