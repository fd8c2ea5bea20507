#!/usr/bin/env python3
"""`ampc grad` on PyTorch eval-mode exports (issue 23's done-when), committed small in
tests/passes/fixtures/ by models/make_grad_exports.py: a ResNet/MobileNet-shaped CNN
(grad_cnn: Conv with groups and dilation, MaxPool, GlobalAveragePool, HardSwish,
HardSigmoid, Gemm) and a 2-layer torch.nn.TransformerEncoder classifier with LayerNorm as
one op (grad_encoder17) and decomposed (grad_encoder14). For each, the training graph
(cross-entropy over `out`, labels [1])

- passes onnx.checker with full_check, every float initializer of rank >= 1 bound by an
  update_binding and given `<param>_grad`;
- runs in onnxruntime, and each parameter's gradient agrees with central differences of
  the loss along a random direction (float32: |backward - numeric| <= 2e-3 + 3e-2 |numeric|);
- converts with `ampc TRAIN -o AMP` (fp16) with every gradient unscaled;
- grad_cnn trains with `ampc run --steps 3`: the loss falls (the encoders' exports compute
  shapes with Mod, which the CPU executor lacks).
With --train-mode, a CNN with BatchNormalization and a seeded Dropout made here (onnx.helper)
gets both in training mode, its running statistics bound as state; its gradients match
central differences in onnxruntime, it converts, and `ampc run` trains it.
Prints "N passed, M failed" last; exit 77 (skip) when onnx, onnxruntime or numpy is missing.

usage: test_grad_exports.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "passes", "fixtures")
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)


class Ctx:
    pass


def ampc(ctx, *args, rc=0):
    r = subprocess.run([ctx.ampc, *args], capture_output=True, text=True)
    assert r.returncode == rc, f"ampc {' '.join(args)}: exit {r.returncode}, expected {rc}: {r.stderr}"
    return r


def grad(ctx, name):
    """The fixture's training graph (made once) and its parameters' names."""
    out = os.path.join(ctx.tmp, name + "_train.onnx")
    if not os.path.exists(out):  # made here from a fixture (test_train_mode makes its own)
        r = ampc(ctx, "grad", os.path.join(FIXTURES, name + ".onnx"), "-o", out)
        assert "parameters with gradients" in r.stdout, r.stdout
    m = onnx.load(out)
    made = {o for n in m.graph.node for o in n.output}
    params = [t.name for t in m.graph.initializer if t.name + "_grad" in made]
    return out, m, params


def feeds(m):
    rs = np.random.RandomState(3)
    f = {}
    for i in m.graph.input:
        dims = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
        if i.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            f[i.name] = np.full(dims, 7, dtype=np.int64)  # the labels
        else:
            f[i.name] = rs.randn(*dims).astype(np.float32)
    return f


def checked_and_bound(ctx, name):
    _, m, params = grad(ctx, name)
    onnx.checker.check_model(m, full_check=True)
    floats = [t.name for t in m.graph.initializer if t.data_type in FLOATS and len(t.dims) >= 1]
    missing = sorted(set(floats) - set(params))
    assert params and not missing, f"no gradient for {missing}"
    binds = {b.key for t in m.training_info for b in t.update_binding}
    assert sorted(binds) == sorted(floats), f"unbound: {sorted(set(floats) - binds)}"


def gradients_match_differences(ctx, name):
    _, m, params = grad(ctx, name)
    del m.training_info[:]
    for p in params:
        m.graph.output.append(h.make_empty_tensor_value_info(p + "_grad"))
    f = feeds(m)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = dict(zip(["loss"] + params, sess.run(["loss"] + [p + "_grad" for p in params], f)))
    inits = {t.name: t for t in m.graph.initializer}
    rs = np.random.RandomState(5)
    step, worst = 1e-2, 0.0
    for p in params:
        w = nh.to_array(inits[p]).astype(np.float32)
        d = rs.randn(*w.shape).astype(np.float32)
        d /= np.linalg.norm(d)
        loss = []
        for s in (step, -step):
            inits[p].CopyFrom(nh.from_array(w + s * d, p))
            loss.append(ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
                        .run(["loss"], f)[0])
        inits[p].CopyFrom(nh.from_array(w, p))
        num = float(loss[0] - loss[1]) / (2 * step)
        an = float(np.sum(got[p].astype(np.float64) * d))
        err = abs(an - num)
        assert err <= 2e-3 + 3e-2 * abs(num), f"{name}: d loss / d {p} along a direction: backward {an}, numeric {num}"
        worst = max(worst, err)
    ctx.notes.append(f"{name}: {len(params)} gradients match central differences (worst {worst:.1e})")


def converts_unscaled(ctx, name):
    out, _, params = grad(ctx, name)
    amp = os.path.join(ctx.tmp, name + "_amp.onnx")
    r = ampc(ctx, out, "-o", amp)
    assert f"{len(params)} gradients unscaled" in r.stdout + r.stderr, r.stdout + r.stderr
    onnx.checker.check_model(onnx.load(amp), full_check=True)


def test_cnn_trains(ctx):
    out, _, _ = grad(ctx, "grad_cnn")
    r = ampc(ctx, "run", out, "--steps", "3")
    losses = [float(v) for v in re.findall(r"step \d+: loss ([-0-9.e+]+)", r.stdout)]
    assert len(losses) == 3 and all(np.isfinite(losses)) and losses[2] < losses[0], r.stdout


def bn_dropout_cnn(path):
    """Conv -> BatchNormalization (running stats not 0/1) -> Relu -> Dropout (seed) ->
    GlobalAveragePool -> Flatten -> Gemm, an eval-mode export's form, opset 17."""
    rs = np.random.RandomState(4)
    inits = [nh.from_array(a.astype(np.float32), n) for n, a in (
        ("conv.weight", rs.randn(6, 3, 3, 3) * 0.3), ("bn.weight", rs.uniform(0.5, 1.5, 6)),
        ("bn.bias", rs.randn(6) * 0.1), ("bn.running_mean", rs.randn(6) * 0.2),
        ("bn.running_var", rs.uniform(0.5, 2, 6)), ("fc.weight", rs.randn(10, 6) * 0.3), ("fc.bias", np.zeros(10)))]
    nodes = [h.make_node("Conv", ["input", "conv.weight"], ["c"], pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                         ["b"]),
             h.make_node("Relu", ["b"], ["r"]), h.make_node("Dropout", ["r"], ["d"], seed=5),
             h.make_node("GlobalAveragePool", ["d"], ["p"]), h.make_node("Flatten", ["p"], ["f"]),
             h.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["out"], transB=1)]
    g = h.make_graph(nodes, "bn_dropout", [h.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [2, 3, 6, 6])],
                     [h.make_tensor_value_info("out", onnx.TensorProto.FLOAT, [2, 10])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)


def test_train_mode(ctx):
    src, out = os.path.join(ctx.tmp, "bn_dropout.onnx"), os.path.join(ctx.tmp, "bn_dropout_train.onnx")
    bn_dropout_cnn(src)
    r = ampc(ctx, "grad", src, "-o", out, "--train-mode")
    assert "2 running statistics bound" in r.stdout, r.stdout
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    assert len(bn) == 1 and len(bn[0].output) == 3, bn
    assert any(a.name == "training_mode" and a.i == 1 for a in bn[0].attribute), bn[0]
    drop = [n for n in m.graph.node if n.op_type == "Dropout"]
    assert len(drop) == 1 and len(drop[0].input) == 3 and len(drop[0].output) == 2, drop
    binds = {b.key: b.value for b in m.training_info[0].update_binding}
    assert {"bn.running_mean", "bn.running_var", "conv.weight", "bn.weight", "fc.bias"} <= set(binds), binds
    gradients_match_differences(ctx, "bn_dropout")
    converts_unscaled(ctx, "bn_dropout")
    r = ampc(ctx, "run", out, "--steps", "2")
    losses = [float(v) for v in re.findall(r"step \d+: loss ([-0-9.e+]+)", r.stdout)]
    assert len(losses) == 2 and all(np.isfinite(losses)), r.stdout


def cases():
    tests = []
    for name in ("grad_cnn", "grad_encoder17", "grad_encoder14"):
        for f in (checked_and_bound, gradients_match_differences, converts_unscaled):
            tests.append((f"{f.__name__}_{name}", lambda ctx, f=f, name=name: f(ctx, name)))
    return tests + [("cnn_trains", test_cnn_trains), ("train_mode", test_train_mode)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx()
    ctx.ampc, ctx.notes, ctx.tmp = args.ampc, [], tempfile.mkdtemp(prefix="ampc_grad_exports_")
    try:
        return tl.run(cases(), ctx, verbose=args.verbose, notes=ctx.notes)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
