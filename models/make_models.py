#!/usr/bin/env python3
"""Writes the small models bundled with ampc (models/README.md describes them):

  models/mlp_grads/   MLP classifier: forward, SoftmaxCrossEntropyLoss and the backward
                      pass written out in standard ops; loss and parameter gradients are
                      graph outputs (no optimizer)
  models/mlp_train/   the same graph plus a TrainingInfoProto whose algorithm graph runs
                      ai.onnx.preview.training Momentum and update_binding writes back the
                      parameters, the momentum buffers and the step count
  models/cnn_infer/   a small inference CNN (Conv, Relu, MaxPool, GlobalAveragePool, Gemm)

Each folder has the ONNX conformance layout: model.onnx plus test_data_set_0/ with
input_<i>.pb and output_<i>.pb (TensorProtos named after the graph inputs and outputs);
the expected outputs are computed with onnxruntime. The script is deterministic (fixed
seeds, one onnxruntime thread): running it again rewrites the same bytes on the same
machine. The files are generated but committed; run `python3 models/make_models.py`
after changing this script and commit the result.

Needs numpy, onnx and onnxruntime.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17             # ai.onnx
TRAINING_OPSET = 1     # ai.onnx.preview.training
IR_VERSION = 8         # accepted by onnx.checker and onnxruntime 1.x
PRODUCER = "ampc models/make_models.py"

# MLP sizes: x[N, IN] -> W1[IN, HID] -> Relu -> W2[HID, CLASSES] -> logits[N, CLASSES]
MLP_IN, MLP_HID, MLP_CLASSES = 16, 32, 4
MLP_BATCH = 32          # rows in test_data_set_0 (the graph's batch dim is symbolic)
MLP_PARAMS = ("W1", "b1", "W2", "b2")

# Optimizer of mlp_train: Momentum "standard", i.e. PyTorch SGD(momentum=0.9,
# dampening=0, weight_decay=1e-4): V = alpha*V + beta'*(G + norm*X); X = X - lr*V,
# beta' = beta if step > 0 else 1.
LR, ALPHA, BETA, NORM = 0.1, 0.9, 1.0, 1e-4

# CNN sizes: x[N, 1, 16, 16] -> Conv 8 -> Relu -> MaxPool 2 -> Conv 16 -> Relu -> GAP -> Gemm 10
CNN_BATCH = 2


def f32(a):
    return np.asarray(a, dtype=np.float32)


def const_node(name, value):
    """A Constant node whose output is `name` (value: numpy array)."""
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(value, name))


def make_mlp_params(rng):
    """He-initialised weights, small random biases (non-zero so no gradient is trivially
    symmetric)."""
    return {
        "W1": f32(rng.standard_normal((MLP_IN, MLP_HID)) * np.sqrt(2.0 / MLP_IN)),
        "b1": f32(rng.uniform(-0.1, 0.1, MLP_HID)),
        "W2": f32(rng.standard_normal((MLP_HID, MLP_CLASSES)) * np.sqrt(2.0 / MLP_HID)),
        "b2": f32(rng.uniform(-0.1, 0.1, MLP_CLASSES)),
    }


def make_mlp_data(rng):
    """A learnable batch: labels from a random linear teacher."""
    x = f32(rng.standard_normal((MLP_BATCH, MLP_IN)))
    teacher = rng.standard_normal((MLP_IN, MLP_CLASSES))
    labels = np.argmax(x.astype(np.float64) @ teacher, axis=1).astype(np.int64)
    return x, labels


def mlp_nodes():
    """Forward, loss and backward of the MLP in standard ops. Value names follow
    onnxruntime training: the gradient of X is X_grad, the backward seed is loss_grad.

      z1m = x @ W1            [N, HID]      h1_grad = logits_grad @ W2^T     [N, HID]
      z1 = z1m + b1           [N, HID]      z1_grad = where(z1 > 0, h1_grad, 0)
      h1 = Relu(z1)           [N, HID]      W1_grad = x^T @ z1_grad           [IN, HID]
      z2m = h1 @ W2           [N, C]        b1_grad = sum_rows(z1_grad)       [HID]
      logits = z2m + b2       [N, C]        W2_grad = h1^T @ logits_grad      [HID, C]
      loss = SCE(logits, labels), mean      b2_grad = sum_rows(logits_grad)   [C]
      logits_grad = (Softmax(logits) - OneHot(labels)) * loss_grad / N      [N, C]
    """
    n = helper.make_node
    fwd = [
        n("MatMul", ["x", "W1"], ["z1m"], name="fc1/MatMul"),
        n("Add", ["z1m", "b1"], ["z1"], name="fc1/Add"),
        n("Relu", ["z1"], ["h1"], name="relu1/Relu"),
        n("MatMul", ["h1", "W2"], ["z2m"], name="fc2/MatMul"),
        n("Add", ["z2m", "b2"], ["logits"], name="fc2/Add"),
        n("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"], name="loss/SoftmaxCrossEntropyLoss",
          reduction="mean"),
    ]
    bwd = [
        # Seed of backward: d loss / d loss = 1, a constant shaped like the loss (a scalar).
        const_node("loss_grad", np.array(1.0, dtype=np.float32)),
        # SoftmaxCrossEntropyLoss(mean) backward: (softmax - onehot) * loss_grad / N.
        n("Softmax", ["logits"], ["grad/probs"], name="grad/loss/Softmax", axis=1),
        const_node("grad/depth", np.array(MLP_CLASSES, dtype=np.int64)),
        const_node("grad/onehot_values", f32([0.0, 1.0])),
        n("OneHot", ["labels", "grad/depth", "grad/onehot_values"], ["grad/onehot"], name="grad/loss/OneHot",
          axis=-1),
        n("Shape", ["logits"], ["grad/logits_shape"], name="grad/loss/Shape"),
        const_node("grad/zero_i64", np.array(0, dtype=np.int64)),
        n("Gather", ["grad/logits_shape", "grad/zero_i64"], ["grad/batch"], name="grad/loss/Gather", axis=0),
        n("Cast", ["grad/batch"], ["grad/batch_f"], name="grad/loss/Cast", to=TensorProto.FLOAT),
        n("Div", ["loss_grad", "grad/batch_f"], ["grad/scale"], name="grad/loss/Div"),
        n("Sub", ["grad/probs", "grad/onehot"], ["grad/diff"], name="grad/loss/Sub"),
        n("Mul", ["grad/diff", "grad/scale"], ["logits_grad"], name="grad/loss/Mul"),
        # fc2 backward (the gradient of z2m is logits_grad: Add passes it through).
        const_node("grad/axes0", np.array([0], dtype=np.int64)),
        n("ReduceSum", ["logits_grad", "grad/axes0"], ["b2_grad"], name="grad/fc2/ReduceSum", keepdims=0),
        n("Transpose", ["h1"], ["grad/h1_T"], name="grad/fc2/Transpose_h1", perm=[1, 0]),
        n("MatMul", ["grad/h1_T", "logits_grad"], ["W2_grad"], name="grad/fc2/MatMul_W2"),
        n("Transpose", ["W2"], ["grad/W2_T"], name="grad/fc2/Transpose_W2", perm=[1, 0]),
        n("MatMul", ["logits_grad", "grad/W2_T"], ["h1_grad"], name="grad/fc2/MatMul_h1"),
        # Relu backward: pass the gradient where the input was positive.
        const_node("grad/zero_f", np.array(0.0, dtype=np.float32)),
        n("Greater", ["z1", "grad/zero_f"], ["grad/z1_pos"], name="grad/relu1/Greater"),
        n("Where", ["grad/z1_pos", "h1_grad", "grad/zero_f"], ["z1_grad"], name="grad/relu1/Where"),
        # fc1 backward (no gradient for the input x).
        n("ReduceSum", ["z1_grad", "grad/axes0"], ["b1_grad"], name="grad/fc1/ReduceSum", keepdims=0),
        n("Transpose", ["x"], ["grad/x_T"], name="grad/fc1/Transpose_x", perm=[1, 0]),
        n("MatMul", ["grad/x_T", "z1_grad"], ["W1_grad"], name="grad/fc1/MatMul_W1"),
    ]
    return fwd, bwd


def mlp_io():
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", MLP_IN]),
        helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch"]),
    ]
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    grads = [
        helper.make_tensor_value_info("W1_grad", TensorProto.FLOAT, [MLP_IN, MLP_HID]),
        helper.make_tensor_value_info("b1_grad", TensorProto.FLOAT, [MLP_HID]),
        helper.make_tensor_value_info("W2_grad", TensorProto.FLOAT, [MLP_HID, MLP_CLASSES]),
        helper.make_tensor_value_info("b2_grad", TensorProto.FLOAT, [MLP_CLASSES]),
    ]
    return inputs, loss, grads


def finish(graph, opsets, doc):
    model = helper.make_model(graph, opset_imports=opsets, producer_name=PRODUCER, doc_string=doc)
    model.ir_version = IR_VERSION
    return model


def make_mlp_grads(params):
    fwd, bwd = mlp_nodes()
    inputs, loss, grads = mlp_io()
    inits = [numpy_helper.from_array(params[p], p) for p in MLP_PARAMS]
    graph = helper.make_graph(fwd + bwd, "mlp_grads", inputs, [loss] + grads, initializer=inits)
    return finish(graph, [helper.make_opsetid("", OPSET)],
                  "MLP classifier 16-32-4: forward, SoftmaxCrossEntropyLoss (mean) and backward in "
                  "standard ops; outputs the loss and the gradients of W1, b1, W2, b2.")


def make_mlp_train(params):
    """The mlp_grads graph (outputs: loss only) plus one TrainingInfoProto.

    Mutable state (parameters, momentum buffers, learning rate, step count) are all
    initializers of the main graph: ONNX lets update_binding keys also be initializers
    of the algorithm graph, but keeping them in the main graph is the form every reader
    accepts (ampc's verifier requires it). The algorithm graph has no inputs: its nodes
    read main-graph values (the gradients, the parameters, the state), which ONNX allows
    ("an input of a node in the algorithm graph may reference the output of a node in
    the inference graph")."""
    fwd, bwd = mlp_nodes()
    inputs, loss, _ = mlp_io()
    inits = [numpy_helper.from_array(params[p], p) for p in MLP_PARAMS]
    inits += [numpy_helper.from_array(np.zeros_like(params[p]), p + "_momentum") for p in MLP_PARAMS]
    inits += [numpy_helper.from_array(np.array(LR, dtype=np.float32), "lr"),
              numpy_helper.from_array(np.array(0, dtype=np.int64), "step")]
    graph = helper.make_graph(fwd + bwd, "mlp_train", inputs, [loss], initializer=inits)

    new_x = [p + "_new" for p in MLP_PARAMS]
    new_v = [p + "_momentum_new" for p in MLP_PARAMS]
    alg_nodes = [
        helper.make_node("Momentum",
                         ["lr", "step"] + list(MLP_PARAMS) + [p + "_grad" for p in MLP_PARAMS]
                         + [p + "_momentum" for p in MLP_PARAMS],
                         new_x + new_v, name="optim/Momentum", domain="ai.onnx.preview.training",
                         mode="standard", alpha=ALPHA, beta=BETA, norm_coefficient=NORM),
        const_node("optim/one_i64", np.array(1, dtype=np.int64)),
        helper.make_node("Add", ["step", "optim/one_i64"], ["step_new"], name="optim/step_Add"),
    ]
    shapes = {"W1": [MLP_IN, MLP_HID], "b1": [MLP_HID], "W2": [MLP_HID, MLP_CLASSES], "b2": [MLP_CLASSES]}
    alg_outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[p]) for n, p in zip(new_x, MLP_PARAMS)]
    alg_outputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[p]) for n, p in zip(new_v, MLP_PARAMS)]
    alg_outputs.append(helper.make_tensor_value_info("step_new", TensorProto.INT64, []))
    algorithm = helper.make_graph(alg_nodes, "mlp_train_momentum", [], alg_outputs)
    bindings = {p: p + "_new" for p in MLP_PARAMS}
    bindings.update({p + "_momentum": p + "_momentum_new" for p in MLP_PARAMS})
    bindings["step"] = "step_new"
    info = helper.make_training_info(algorithm, list(bindings.items()), None, None)

    model = finish(graph, [helper.make_opsetid("", OPSET),
                           helper.make_opsetid("ai.onnx.preview.training", TRAINING_OPSET)],
                   "MLP classifier 16-32-4 training graph: forward, SoftmaxCrossEntropyLoss (mean), "
                   f"backward in standard ops; training_info: Momentum (standard, alpha={ALPHA}, "
                   f"beta={BETA}, norm_coefficient={NORM}, lr={LR}) updating W1, b1, W2, b2, their "
                   "momentum buffers and the step count.")
    model.training_info.append(info)
    return model


def make_cnn(rng):
    def he(shape, fan_in):
        return f32(rng.standard_normal(shape) * np.sqrt(2.0 / fan_in))

    inits = [
        numpy_helper.from_array(he((8, 1, 3, 3), 9), "conv1.W"),
        numpy_helper.from_array(f32(rng.uniform(-0.1, 0.1, 8)), "conv1.B"),
        numpy_helper.from_array(he((16, 8, 3, 3), 72), "conv2.W"),
        numpy_helper.from_array(f32(rng.uniform(-0.1, 0.1, 16)), "conv2.B"),
        numpy_helper.from_array(he((10, 16), 16), "fc.W"),
        numpy_helper.from_array(f32(rng.uniform(-0.1, 0.1, 10)), "fc.B"),
    ]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "conv1.W", "conv1.B"], ["c1"], name="conv1/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("Relu", ["c1"], ["r1"], name="relu1/Relu"),
        n("MaxPool", ["r1"], ["p1"], name="pool1/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", "conv2.W", "conv2.B"], ["c2"], name="conv2/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("Relu", ["c2"], ["r2"], name="relu2/Relu"),
        n("GlobalAveragePool", ["r2"], ["g"], name="gap/GlobalAveragePool"),
        n("Flatten", ["g"], ["f"], name="flatten/Flatten", axis=1),
        n("Gemm", ["f", "fc.W", "fc.B"], ["logits"], name="fc/Gemm", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "cnn_infer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
        initializer=inits)
    return finish(graph, [helper.make_opsetid("", OPSET)],
                  "Small inference CNN: 1x16x16 -> Conv(8,3x3) -> Relu -> MaxPool 2 -> Conv(16,3x3) -> "
                  "Relu -> GlobalAveragePool -> Flatten -> Gemm -> 10 logits.")


def run_ort(model, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # unused initializers of mlp_train are expected
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return names, sess.run(names, feeds)


def write_case(root, name, model, feeds):
    """Writes root/name/model.onnx and root/name/test_data_set_0/ (inputs in graph-input
    order, outputs computed by onnxruntime in graph-output order)."""
    onnx.checker.check_model(model, full_check=True)
    folder = os.path.join(root, name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    for old in os.listdir(data):
        if old.endswith(".pb"):
            os.remove(os.path.join(data, old))
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString(deterministic=True))
    for i, inp in enumerate(model.graph.input):
        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[inp.name], inp.name).SerializeToString())
    names, outs = run_ort(model, feeds)
    assert names == [o.name for o in model.graph.output]
    for i, (nm, val) in enumerate(zip(names, outs)):
        with open(os.path.join(data, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(val), nm).SerializeToString())
    return dict(zip(names, outs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="folder to write the model folders into (default: this script's folder)")
    args = ap.parse_args()

    # RandomState, not default_rng: NumPy freezes RandomState's streams (NEP 19), so the
    # weights are the same bytes whatever the NumPy version.
    rng = np.random.RandomState(20240601)
    params = make_mlp_params(rng)
    x, labels = make_mlp_data(rng)
    cnn = make_cnn(rng)
    cnn_x = f32(rng.standard_normal((CNN_BATCH, 1, 16, 16)))

    feeds = {"x": x, "labels": labels}
    out = write_case(args.out, "mlp_grads", make_mlp_grads(params), feeds)
    print(f"mlp_grads: loss {float(out['loss']):.6f}")
    out = write_case(args.out, "mlp_train", make_mlp_train(params), feeds)
    print(f"mlp_train: loss {float(out['loss']):.6f}")
    out = write_case(args.out, "cnn_infer", cnn, {"x": cnn_x})
    print(f"cnn_infer: logits {out['logits'].shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
