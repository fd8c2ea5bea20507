#!/usr/bin/env python3
"""Does a deep reduction need float32? (issue 25; docs/calibration.md, "Deep reductions")

Plants Y = X @ W (and the same as a Conv over C input channels) for reduction lengths K
from 16 to 65536, converts each with `ampc MODEL -o OUT` (float16) and prints the error
of the 16-bit output against FP32 on ampc's executor (`ampc compare`), for inputs of
two kinds: zero-mean (N(0,1)) and all positive (U(0,1)); the weights are N(0, 1/K).

usage: tools/measure_reduction_depth.py --ampc build/ampc [--tmp DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

M, N = 16, 64


def model(k, conv, path):
    rng = np.random.default_rng(k)
    if conv == "Softmax":  # attention's reduction: Softmax over K keys, then P @ V
        w = rng.standard_normal((k, N)).astype(np.float32)
        nodes = [h.make_node("Softmax", ["x"], ["p"], name="softmax", axis=-1),
                 h.make_node("MatMul", ["p", "w"], ["y"], name="pv")]
        xs, ys = [M, k], [M, N]
    elif conv:  # 1x1 Conv over k channels: the same reduction as a MatMul
        w = (rng.standard_normal((N, k, 1, 1)) / np.sqrt(k)).astype(np.float32)
        nodes = [h.make_node("Conv", ["x", "w"], ["y"], name="deep")]
        xs, ys = [1, k, 4, 4], [1, N, 4, 4]
    else:
        w = (rng.standard_normal((k, N)) / np.sqrt(k)).astype(np.float32)
        nodes = [h.make_node("MatMul", ["x", "w"], ["y"], name="deep")]
        xs, ys = [M, k], [M, N]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, xs)],
                     [h.make_tensor_value_info("y", T.FLOAT, ys)], [nh.from_array(w, "w")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return xs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--tmp")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(dir=a.tmp)
    print("op      K      inputs     max rel (fp16 vs fp32)")
    try:
        for conv in (False, True, "Softmax"):
            for k in (16, 256, 4096, 65536):
                src, dst = os.path.join(tmp, "m.onnx"), os.path.join(tmp, "m16.onnx")
                xs = model(k, conv, src)
                subprocess.run([a.ampc, src, "-o", dst], check=True, capture_output=True)
                rng = np.random.default_rng(1)
                for kind in ("N(0,1)", "U(0,1)"):
                    x = rng.standard_normal(xs) if kind == "N(0,1)" else rng.random(xs)
                    d = os.path.join(tmp, "in")
                    os.makedirs(d, exist_ok=True)
                    with open(os.path.join(d, "input_0.pb"), "wb") as f:
                        f.write(nh.from_array(x.astype(np.float32), "x").SerializeToString())
                    r = subprocess.run([a.ampc, "compare", src, dst, "--inputs", d], capture_output=True, text=True)
                    rel = re.search(r"max rel ([0-9.e+-]+|inf|nan)", r.stdout)
                    print(f"{conv if conv == 'Softmax' else 'Conv' if conv else 'MatMul':7} {k:<6} {kind:10} {rel.group(1) if rel else r.stderr.strip()}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
