#!/usr/bin/env python3
"""ampc's own CPU kernels give the same bytes on 1 thread and on 2 (ir/parallel.h).

The elementwise family (same-shape and row-broadcast binary ops, float32 and bfloat16 in
AVX-512 rows, float maps, the bfloat16 lookup tables), Cast, Softmax, LayerNormalization,
BatchNormalization, 2-D MaxPool, the float32 sums of the Reduce ops, strided copies
(Transpose), the float32 fused chains and SubScaled slice their work over libgomp's team
from 32K elements on; every element is computed by the same code whichever thread runs it. Models
large enough to be sliced, without matrix products (oneDNN's may cut their sums by thread
count): inference graphs of those ops, FP32 and converted to bf16, run with --threads 1
and --threads 2, outputs byte for byte; and `ampc grad` training graphs (an elementwise
model of a 256 x 1024 weight: SGD through SubScaled, momentum through the fused chains),
3 steps each way, the same losses and the same checkpoint bytes.

usage: test_threads.py --ampc PATH [--testdata DIR] [--verbose]
"""
import os
import re
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ampc_testlib as tl  # noqa: E402

SHAPE = [8, 64, 1024]  # 524288 elements: 16 slices' worth


class Ctx:
    def __init__(self, args):
        self.ampc = args.ampc
        self.verbose = args.verbose
        self.tmp = tl.tempdir("ampc-threads-")
        self.notes = []


def sh(ctx, *argv):
    r = tl.ampc(ctx.ampc, *argv, verbose=ctx.verbose)
    assert r.returncode == 0, f"ampc {' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()[-600:]}"
    return r.stdout


def write_inputs(ctx, tag, arrays):
    data = os.path.join(ctx.tmp, f"{tag}_in")
    os.makedirs(data, exist_ok=True)
    for i, (name, a) in enumerate(arrays):
        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
            f.write(nh.from_array(a, name).SerializeToString())
    return data


def outputs(folder):
    got = {}
    for f in sorted(os.listdir(folder)):
        t = onnx.TensorProto()
        with open(os.path.join(folder, f), "rb") as fh:
            t.ParseFromString(fh.read())
        got[f] = t.SerializeToString()
    return got


def ops_model(ctx):
    rng = np.random.default_rng(11)
    d = SHAPE[-1]
    inits = [nh.from_array(rng.standard_normal(d).astype(np.float32), n) for n in ("bvec", "scale", "bias")]
    nodes = [
        h.make_node("Add", ["x", "x"], ["a"]),                       # one row
        h.make_node("Add", ["a", "bvec"], ["b"]),                    # rows, a broadcast input
        h.make_node("Softmax", ["b"], ["s"], axis=-1),
        h.make_node("LayerNormalization", ["b", "scale", "bias"], ["l"], axis=-1),
        h.make_node("Mul", ["s", "l"], ["m"]),
        h.make_node("Erf", ["m"], ["e"]),                            # a float map
        h.make_node("Cast", ["e"], ["c16"], to=T.BFLOAT16),
        h.make_node("Erf", ["c16"], ["e16"]),                        # bfloat16: the lookup table
        h.make_node("Mul", ["c16", "e16"], ["m16"]),                 # bfloat16 rows
        h.make_node("Cast", ["m16"], ["y"], to=T.FLOAT),
        h.make_node("ReduceSum", ["b", "axes02"], ["r02"], keepdims=0),   # [N, C, HW]: per channel
        h.make_node("ReduceSum", ["b", "axes0"], ["r0"], keepdims=0),     # [R, K, 1]: over the batch
        h.make_node("Transpose", ["b"], ["bt"], perm=[0, 2, 1]),          # a strided copy
    ]
    inits += [nh.from_array(np.array([0, 2], np.int64), "axes02"), nh.from_array(np.array([0], np.int64), "axes0")]
    g = h.make_graph(nodes, "threads_ops", [h.make_tensor_value_info("x", T.FLOAT, SHAPE)],
                     [h.make_tensor_value_info("y", T.FLOAT, SHAPE), h.make_tensor_value_info("l", T.FLOAT, SHAPE),
                      h.make_tensor_value_info("r02", T.FLOAT, [SHAPE[1]]),
                      h.make_tensor_value_info("r0", T.FLOAT, SHAPE[1:]),
                      h.make_tensor_value_info("bt", T.FLOAT, [SHAPE[0], SHAPE[2], SHAPE[1]])],
                     inits)
    path = os.path.join(ctx.tmp, "ops.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    return path, write_inputs(ctx, "ops", [("x", rng.standard_normal(SHAPE).astype(np.float32))])


def pool_model(ctx):
    """MaxPool 3x3 stride 2 over [2, 64, 32, 32], with and without Indices; BatchNormalization."""
    rng = np.random.default_rng(17)
    shape, out = [2, 64, 32, 32], [2, 64, 16, 16]
    nodes = [h.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("MaxPool", ["x"], ["q", "qi"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["x", "sc", "bi", "mu", "var"], ["bn"])]
    inits = [nh.from_array(rng.standard_normal(shape[1]).astype(np.float32), n) for n in ("sc", "bi", "mu")]
    inits.append(nh.from_array(rng.uniform(0.5, 2.0, shape[1]).astype(np.float32), "var"))
    g = h.make_graph(nodes, "threads_pool", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                     [h.make_tensor_value_info("p", T.FLOAT, out), h.make_tensor_value_info("q", T.FLOAT, out),
                      h.make_tensor_value_info("qi", T.INT64, out), h.make_tensor_value_info("bn", T.FLOAT, shape)],
                     inits)
    path = os.path.join(ctx.tmp, "pool.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    return path, write_inputs(ctx, "pool", [("x", rng.standard_normal(shape).astype(np.float32))])


def inference(precision, make=ops_model):
    def run(ctx):
        path, data = make(ctx)
        if precision != "fp32":
            conv = os.path.join(ctx.tmp, f"{make.__name__}_{precision}.onnx")
            sh(ctx, path, "-o", conv, "--precision", precision)
            path = conv
        got = []
        for t in (1, 2):
            out = os.path.join(ctx.tmp, f"{make.__name__}_{precision}_t{t}")
            sh(ctx, "run", path, "--inputs", data, "--outputs", out, "--threads", str(t), "--backend", "cpu")
            got.append(outputs(out))
        assert got[0].keys() == got[1].keys() and got[0], f"outputs {sorted(got[0])} vs {sorted(got[1])}"
        for k in got[0]:
            assert got[0][k] == got[1][k], f"{precision}: {k} differs between 1 and 2 threads"
        ctx.notes.append(f"{make.__name__} {precision}: {len(got[0])} outputs the same bytes")
    return (f"{make.__name__}_{precision}", run)


def train_model(ctx, tag):
    """y = x * w + c (w [256, 1024], c [1024]), MSE against t: no matrix product."""
    rng = np.random.default_rng(13)
    shape = [256, 1024]
    inits = [nh.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), "w"),
             nh.from_array((rng.standard_normal(shape[1]) * 0.1).astype(np.float32), "c")]
    nodes = [h.make_node("Mul", ["x", "w"], ["xw"]), h.make_node("Add", ["xw", "c"], ["y"])]
    g = h.make_graph(nodes, tag, [h.make_tensor_value_info("x", T.FLOAT, shape),
                                  h.make_tensor_value_info("t", T.FLOAT, shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, shape)], inits)
    path = os.path.join(ctx.tmp, f"{tag}.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    return path, write_inputs(ctx, tag, [("x", rng.standard_normal(shape).astype(np.float32)),
                                         ("t", rng.standard_normal(shape).astype(np.float32))])


def training(optimizer):
    tag = f"train_{optimizer}"

    def run(ctx):
        path, data = train_model(ctx, tag)
        train = os.path.join(ctx.tmp, f"{tag}_train.onnx")
        sh(ctx, "grad", path, "-o", train, "--loss", "mse", "--labels", "t", "--optimizer", optimizer, "--lr", "0.05")
        losses, states, fused = [], [], ""
        for t in (1, 2):
            state = os.path.join(ctx.tmp, f"{tag}_t{t}.state")
            printed = sh(ctx, "run", train, "--steps", "3", "--inputs", data, "--backend", "cpu", "--seed", "7",
                         "--threads", str(t), "--save-state", state)
            losses.append(re.findall(r"^step \d+: loss (\S+)", printed, re.M))
            with open(state, "rb") as f:
                states.append(f.read())
            m = re.search(r"^fused: .*\((.*)\)$", printed, re.M)
            fused = m.group(1) if m else fused
        assert len(losses[0]) == 3, f"{tag}: {losses[0]}"
        assert losses[0] == losses[1], f"{tag}: losses on 1 thread {losses[0]}, on 2 {losses[1]}"
        assert states[0] == states[1], f"{tag}: the checkpoints differ between 1 and 2 threads"
        ctx.notes.append(f"{tag}: losses {losses[0]}; fused {fused or 'nothing'}")
    return (tag, run)


def main():
    args = tl.args(__doc__)
    ctx = Ctx(args)
    tests = [inference(p, m) for m in (ops_model, pool_model) for p in ("fp32", "bf16")]
    tests += [training(o) for o in ("sgd", "momentum")]
    return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
