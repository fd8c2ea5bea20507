#!/usr/bin/env python3
"""Writes a synthetic FP32 training graph of about N nodes, for timing the AMP pipeline on
training graphs (`ampc train.onnx -o out.onnx`, loss scaling included): an L-layer MLP
    h_i = Relu(h_{i-1} @ W_i + b_i)            (forward, 3 nodes a layer)
then SoftmaxCrossEntropyLoss and the backward in standard ops, as tools and onnxruntime
name it: the seed loss_grad, and W_i_grad, b_i_grad for every layer (7 nodes a layer),
the gradients being graph outputs (the mlp_grads form of models/). Names and weights are
deterministic; weights are D x D.

usage: gen_train_graph.py N OUT.onnx [--dim D]
"""
import argparse
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    sys.exit("gen_train_graph.py needs the onnx package (pip install onnx)")

PER_LAYER = 10  # 3 forward + 7 backward nodes
FIXED = 14      # loss, its backward and constants


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("n", type=int, help="number of nodes (about)")
    ap.add_argument("out")
    ap.add_argument("--dim", type=int, default=8)
    a = ap.parse_args()
    d = a.dim
    layers = max(1, (a.n - FIXED) // PER_LAYER)
    rng = np.random.RandomState(0)
    n = helper.make_node

    def const(name, value):
        return n("Constant", [], [name], name=name + "/Constant", value=numpy_helper.from_array(value, name))

    inits, fwd, bwd, grads = [], [], [], []
    h = "x"
    for i in range(layers):
        w, b = f"W{i}", f"b{i}"
        inits += [numpy_helper.from_array((rng.randn(d, d) / np.sqrt(d)).astype(np.float32), w),
                  numpy_helper.from_array(np.zeros(d, np.float32), b)]
        fwd += [n("MatMul", [h, w], [f"z{i}m"], name=f"fc{i}/MatMul"),
                n("Add", [f"z{i}m", b], [f"z{i}"], name=f"fc{i}/Add"),
                n("Relu", [f"z{i}"], [f"h{i}"], name=f"fc{i}/Relu")]
        h = f"h{i}"
    fwd.append(n("SoftmaxCrossEntropyLoss", [h, "labels"], ["loss"], name="loss/SCE", reduction="mean"))
    # Backward of the loss (mean): (softmax - onehot) * loss_grad / N.
    bwd += [const("loss_grad", np.array(1.0, np.float32)),
            n("Softmax", [h], ["grad/probs"], name="grad/loss/Softmax", axis=1),
            const("grad/depth", np.array(d, np.int64)),
            const("grad/onehot_values", np.array([0.0, 1.0], np.float32)),
            n("OneHot", ["labels", "grad/depth", "grad/onehot_values"], ["grad/onehot"], name="grad/loss/OneHot"),
            n("Shape", [h], ["grad/shape"], name="grad/loss/Shape"),
            const("grad/zero_i64", np.array(0, np.int64)),
            n("Gather", ["grad/shape", "grad/zero_i64"], ["grad/batch"], name="grad/loss/Gather", axis=0),
            n("Cast", ["grad/batch"], ["grad/batch_f"], name="grad/loss/Cast", to=TensorProto.FLOAT),
            n("Div", ["loss_grad", "grad/batch_f"], ["grad/scale"], name="grad/loss/Div"),
            n("Sub", ["grad/probs", "grad/onehot"], ["grad/diff"], name="grad/loss/Sub"),
            n("Mul", ["grad/diff", "grad/scale"], [f"{h}_grad"], name="grad/loss/Mul"),
            const("grad/axes0", np.array([0], np.int64)),
            const("grad/zero_f", np.array(0.0, np.float32))]
    for i in reversed(range(layers)):
        prev = "x" if i == 0 else f"h{i - 1}"
        g = f"grad/fc{i}/"
        bwd += [n("Greater", [f"z{i}", "grad/zero_f"], [g + "pos"], name=g + "Greater"),
                n("Where", [g + "pos", f"h{i}_grad", "grad/zero_f"], [f"z{i}_grad"], name=g + "Where"),
                n("ReduceSum", [f"z{i}_grad", "grad/axes0"], [f"b{i}_grad"], name=g + "ReduceSum", keepdims=0),
                n("Transpose", [prev], [g + "prev_T"], name=g + "Transpose_in", perm=[1, 0]),
                n("MatMul", [g + "prev_T", f"z{i}_grad"], [f"W{i}_grad"], name=g + "MatMul_W"),
                n("Transpose", [f"W{i}"], [g + "W_T"], name=g + "Transpose_W", perm=[1, 0]),
                n("MatMul", [f"z{i}_grad", g + "W_T"], [f"{prev}_grad"], name=g + "MatMul_in")]
        grads += [helper.make_tensor_value_info(f"W{i}_grad", TensorProto.FLOAT, [d, d]),
                  helper.make_tensor_value_info(f"b{i}_grad", TensorProto.FLOAT, [d])]
    graph = helper.make_graph(
        fwd + bwd, f"gen_train_graph_{layers}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch"])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])] + grads, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="ampc tools/gen_train_graph.py")
    model.ir_version = 8
    with open(a.out, "wb") as f:
        f.write(model.SerializeToString())
    print(f"wrote {a.out}: {len(graph.node)} nodes, {layers} layers")


if __name__ == "__main__":
    main()
