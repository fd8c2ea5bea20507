#!/usr/bin/env python3
"""Writes a synthetic FP32 inference graph of about N nodes for timing the AMP pipeline
(`ampc big.onnx -o out.onnx`): a chain of blocks, each
    MatMul -> Add(bias) -> Relu -> Softmax -> Mul -> ReduceSum -> Add(residual)
so every rule of the colouring has work to do (allow, infer between allow, clear,
deny spreading forward, casts at the boundaries). Weights are a few small [D, D]
matrices shared by all blocks, so the file stays small; names are deterministic.

usage: gen_graph.py N OUT.onnx [--dim D] [--weights K]
"""
import argparse
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    sys.exit("gen_graph.py needs the onnx package (pip install onnx)")

BLOCK = 7  # nodes per block


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, help="number of nodes (rounded up to a whole block)")
    ap.add_argument("out")
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--weights", type=int, default=16, help="distinct weight matrices")
    a = ap.parse_args()
    d, k = a.dim, max(1, a.weights)
    rng = np.random.RandomState(0)
    inits = [numpy_helper.from_array((rng.randn(d, d) / np.sqrt(d)).astype(np.float32), f"W{i}") for i in range(k)]
    inits += [numpy_helper.from_array((rng.randn(d) * 0.1).astype(np.float32), f"B{i}") for i in range(k)]
    inits.append(numpy_helper.from_array(np.array([-1], dtype=np.int64), "axes"))
    nodes = []
    x = "x"
    blocks = max(1, (a.n + BLOCK - 1) // BLOCK)
    for b in range(blocks):
        w, bias, p = f"W{b % k}", f"B{b % k}", f"b{b}/"
        nodes += [
            helper.make_node("MatMul", [x, w], [p + "h"], name=p + "matmul"),
            helper.make_node("Add", [p + "h", bias], [p + "a"], name=p + "add"),
            helper.make_node("Relu", [p + "a"], [p + "r"], name=p + "relu"),
            helper.make_node("Softmax", [p + "r"], [p + "s"], name=p + "softmax", axis=-1),
            helper.make_node("Mul", [p + "s", p + "r"], [p + "m"], name=p + "mul"),
            helper.make_node("ReduceSum", [p + "m", "axes"], [p + "e"], name=p + "reducesum", keepdims=1),
            helper.make_node("Add", [p + "m", p + "e"], [p + "y"], name=p + "residual"),
        ]
        x = p + "y"
    graph = helper.make_graph(nodes, f"gen_graph_{blocks * BLOCK}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", d])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ampc tools/gen_graph.py")
    model.ir_version = 8
    with open(a.out, "wb") as f:
        f.write(model.SerializeToString())
    print(f"wrote {a.out}: {len(nodes)} nodes")


if __name__ == "__main__":
    main()
