#!/usr/bin/env python3
"""`ampc grad` end to end (issue 23): an FP32 MLP classifier made here with onnx.helper
becomes a training graph that

- onnx.checker accepts with full_check, with every float initializer bound by an
  update_binding to its SGD update and gradients named `<param>_grad`;
- onnxruntime runs (the backward is standard ONNX): its parameter gradients match the
  MLP's gradients written out in numpy (float64) to 1e-5;
- `ampc MODEL -o OUT` converts to fp16 with every gradient unscaled, and `ampc run --steps
  50` on a learnable task makes the loss fall, in FP32 and in AMP;
- with --loss mse and --freeze, the frozen parameter keeps no binding;
- --train-mode on BatchNormalizations whose running statistics are Identity nodes of one
  shared initializer (PyTorch's export of equal buffers) gives each its own statistics;
- cross-entropy over [B, T, V] logits (classes last) and [N, C, L] (--class-axis 1)
  matches numpy's loss and gradient;
- an op without a rule on a parameter's path exits 3 naming the node, and is allowed off
  every parameter's path. The optimizers are test_grad_optim.py's.
Prints "N passed, M failed" last; exit 77 (skip) when onnx, onnxruntime or numpy is missing.

usage: test_grad_cli.py --ampc PATH [--testdata DIR] [--verbose]
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
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def mlp(path, extra=None):
    """x [N, 8] -> MatMul+Add -> Relu -> Gemm(transB) -> logits [N, 3]; `extra` op after fc1."""
    rs = np.random.RandomState(1)
    inits = [nh.from_array((rs.randn(8, 16) * 0.4).astype(np.float32), "fc1.weight"),
             nh.from_array((rs.randn(16) * 0.1).astype(np.float32), "fc1.bias"),
             nh.from_array((rs.randn(3, 16) * 0.4).astype(np.float32), "fc2.weight"),
             nh.from_array((rs.randn(3) * 0.1).astype(np.float32), "fc2.bias")]
    nodes = [h.make_node("MatMul", ["x", "fc1.weight"], ["h0"], name="/fc1/MatMul"),
             h.make_node("Add", ["h0", "fc1.bias"], ["h1"], name="/fc1/Add"),
             h.make_node(extra or "Relu", ["h1"], ["h2"], name="/act/" + (extra or "Relu")),
             h.make_node("Gemm", ["h2", "fc2.weight", "fc2.bias"], ["logits"], name="/fc2/Gemm", transB=1)]
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, ["N", 8])],
                     [h.make_tensor_value_info("logits", T.FLOAT, ["N", 3])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return {t.name: nh.to_array(t).astype(np.float64) for t in inits}


def data(n=32):
    """A learnable task: the class is the argmax of a fixed linear map of x."""
    rs = np.random.RandomState(2)
    x = rs.randn(n, 8).astype(np.float32)
    labels = np.argmax(x @ rs.randn(8, 3), axis=1).astype(np.int64)
    return x, labels


def ampc(ctx, *args, rc=0):
    r = subprocess.run([ctx.ampc, *args], capture_output=True, text=True)
    assert r.returncode == rc, f"ampc {' '.join(args)}: exit {r.returncode}, expected {rc}: {r.stderr}"
    return r


def test_checked_and_bound(ctx):
    src, out = os.path.join(ctx.tmp, "mlp.onnx"), os.path.join(ctx.tmp, "train.onnx")
    mlp(src)
    r = ampc(ctx, "grad", src, "-o", out)
    assert "4 parameters" in r.stdout, r.stdout
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    assert len(m.training_info) == 1
    binds = {b.key: b.value for b in m.training_info[0].update_binding}
    assert sorted(binds) == sorted(PARAMS), binds
    made = {o for n in m.graph.node for o in n.output}
    for p in PARAMS:
        assert p + "_grad" in made, f"no {p}_grad"
    assert "loss_grad" in made and "loss" in [o.name for o in m.graph.output]
    labels = [i for i in m.graph.input if i.name == "labels"]
    assert labels and labels[0].type.tensor_type.elem_type == T.INT64


def test_onnxruntime_gradients(ctx):
    src, out = os.path.join(ctx.tmp, "mlp_ort.onnx"), os.path.join(ctx.tmp, "train_ort.onnx")
    w = mlp(src)
    ampc(ctx, "grad", src, "-o", out)
    m = onnx.load(out)
    del m.training_info[:]
    for p in PARAMS:
        m.graph.output.append(h.make_empty_tensor_value_info(p + "_grad"))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x, labels = data(16)
    got = dict(zip(["loss"] + PARAMS, sess.run(["loss"] + [p + "_grad" for p in PARAMS], {"x": x, "labels": labels})))
    # The same MLP's loss and gradients in numpy, float64.
    xd = x.astype(np.float64)
    h1 = xd @ w["fc1.weight"] + w["fc1.bias"]
    h2 = np.maximum(h1, 0)
    z = h2 @ w["fc2.weight"].T + w["fc2.bias"]
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n = len(labels)
    loss = -np.mean(np.log(p[np.arange(n), labels]))
    dz = p.copy()
    dz[np.arange(n), labels] -= 1
    dz /= n
    dh1 = (dz @ w["fc2.weight"]) * (h1 > 0)
    want = {"loss": loss, "fc2.weight": dz.T @ h2, "fc2.bias": dz.sum(0), "fc1.weight": xd.T @ dh1,
            "fc1.bias": dh1.sum(0)}
    for k, v in want.items():
        err = np.max(np.abs(got[k] - v))
        assert err < 1e-5, f"{k}: onnxruntime's gradient differs from numpy's by {err}"
    ctx.notes.append("onnxruntime runs the backward; gradients within 1e-5 of numpy's")


def sequence_model(path, out_dims):
    """x [2, 3, 4] -> MatMul W [4, 5] -> logits [2, 3, 5]; Transpose(0, 2, 1) to [2, 5, 3]
    when out_dims says so (classes on axis 1, as a segmentation net's)."""
    w = (np.random.RandomState(3).randn(4, 5) * 0.5).astype(np.float32)
    nodes = [h.make_node("MatMul", ["x", "W"], ["z"])]
    last = "z"
    if out_dims == [2, 5, 3]:
        nodes.append(h.make_node("Transpose", ["z"], ["zt"], perm=[0, 2, 1]))
        last = "zt"
    nodes.append(h.make_node("Identity", [last], ["logits"]))
    g = h.make_graph(nodes, "seq", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])],
                     [h.make_tensor_value_info("logits", T.FLOAT, out_dims)], [nh.from_array(w, "W")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return w.astype(np.float64)


def test_cross_entropy_class_axis(ctx):
    """Logits [B, T, V] take labels [B, T] (classes last, the default); [N, C, L] with
    --class-axis 1 take labels [N, L]; the loss is the mean over every position."""
    x = np.random.RandomState(4).randn(2, 3, 4).astype(np.float32)
    labels = np.array([[0, 4, 2], [1, 1, 3]], dtype=np.int64)
    for dims, extra in (([2, 3, 5], []), ([2, 5, 3], ["--class-axis", "1"])):
        src, out = os.path.join(ctx.tmp, "seq.onnx"), os.path.join(ctx.tmp, "seq_train.onnx")
        w = sequence_model(src, dims)
        ampc(ctx, "grad", src, "-o", out, *extra)
        m = onnx.load(out)
        onnx.checker.check_model(m, full_check=True)
        lab = [i for i in m.graph.input if i.name == "labels"][0]
        assert [d.dim_value for d in lab.type.tensor_type.shape.dim] == [2, 3], lab
        del m.training_info[:]
        m.graph.output.append(h.make_empty_tensor_value_info("W_grad"))
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        loss, gw = sess.run(["loss", "W_grad"], {"x": x, "labels": labels})
        z = x.astype(np.float64) @ w  # [2, 3, 5]: classes last either way here
        p = np.exp(z - z.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        want = -np.mean(np.log(np.take_along_axis(p, labels[..., None], -1)))
        dz = p.copy()
        np.put_along_axis(dz, labels[..., None], np.take_along_axis(dz, labels[..., None], -1) - 1, -1)
        dz /= labels.size
        want_gw = np.einsum("bti,btv->iv", x.astype(np.float64), dz)
        assert abs(loss - want) < 1e-5, f"{dims}: loss {loss}, numpy's {want}"
        assert np.max(np.abs(gw - want_gw)) < 1e-5, f"{dims}: W's gradient differs from numpy's"
    r = ampc(ctx, "grad", src, "-o", out, "--class-axis", "2", rc=2)
    assert "expected 1 or -1" in r.stderr, r.stderr
    ctx.notes.append("cross-entropy over [B, T, V] (classes last) and [N, C, L] (--class-axis 1) logits")


def losses(text):
    return [float(v) for v in re.findall(r"step \d+: loss ([-0-9.e+]+)", text)]


def test_trains_fp32_and_amp(ctx):
    src, out, amp = (os.path.join(ctx.tmp, f) for f in ("mlp_t.onnx", "train_t.onnx", "amp_t.onnx"))
    mlp(src)
    ampc(ctx, "grad", src, "-o", out, "--lr", "0.5")
    r = ampc(ctx, out, "-o", amp)
    assert "4 gradients unscaled" in r.stdout + r.stderr, r.stdout + r.stderr
    d = os.path.join(ctx.tmp, "data")
    os.makedirs(d, exist_ok=True)
    x, labels = data()
    for i, (name, v) in enumerate([("x", x), ("labels", labels)]):
        with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
            f.write(nh.from_array(v, name).SerializeToString())
    for model in (out, amp):
        ls = losses(ampc(ctx, "run", model, "--steps", "50", "--inputs", d, "--backend", "cpu").stdout)
        assert len(ls) == 50, ls
        assert ls[-1] < 0.5 * ls[0], f"{os.path.basename(model)}: loss {ls[0]} -> {ls[-1]}"
        ctx.notes.append(f"{os.path.basename(model)}: loss {ls[0]:.4f} -> {ls[-1]:.4f} in 50 steps")


def test_mse_and_freeze(ctx):
    src, out = os.path.join(ctx.tmp, "mlp_m.onnx"), os.path.join(ctx.tmp, "train_m.onnx")
    mlp(src)
    r = ampc(ctx, "grad", src, "-o", out, "--loss", "mse", "--freeze", "fc1.*")
    assert "2 parameters" in r.stdout and "2 frozen" in r.stdout, r.stdout
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    assert sorted(b.key for b in m.training_info[0].update_binding) == ["fc2.bias", "fc2.weight"]
    target = [i for i in m.graph.input if i.name == "target"]
    assert target and target[0].type.tensor_type.elem_type == T.FLOAT


def bn_net(path):
    """x [N, 2, 4, 4] -> (Conv -> BatchNormalization -> Relu) x 2 -> pool -> Gemm; both
    BatchNormalizations read their running statistics through Identity nodes of ONE shared
    initializer each (zeros, ones), as PyTorch's exporter writes buffers of equal value."""
    rs = np.random.RandomState(3)
    inits = [nh.from_array((rs.randn(2, 2, 1, 1) * 0.5).astype(np.float32), f"conv{k}.weight") for k in (1, 2)]
    inits += [nh.from_array(np.ones(2, np.float32), f"bn{k}.weight") for k in (1, 2)]
    inits += [nh.from_array(np.zeros(2, np.float32), f"bn{k}.bias") for k in (1, 2)]
    inits += [nh.from_array(np.zeros(2, np.float32), "shared_zeros"), nh.from_array(np.ones(2, np.float32), "shared_ones"),
              nh.from_array((rs.randn(3, 2) * 0.5).astype(np.float32), "fc.weight")]
    nodes, x = [], "x"
    for k in (1, 2):
        nodes += [h.make_node("Conv", [x, f"conv{k}.weight"], [f"c{k}"], name=f"/conv{k}/Conv"),
                  h.make_node("Identity", ["shared_zeros"], [f"bn{k}.running_mean"], name=f"Identity_m{k}"),
                  h.make_node("Identity", ["shared_ones"], [f"bn{k}.running_var"], name=f"Identity_v{k}"),
                  h.make_node("BatchNormalization", [f"c{k}", f"bn{k}.weight", f"bn{k}.bias", f"bn{k}.running_mean",
                                                     f"bn{k}.running_var"], [f"b{k}"], name=f"/bn{k}/BatchNormalization"),
                  h.make_node("Relu", [f"b{k}"], [f"r{k}"], name=f"/relu{k}/Relu")]
        x = f"r{k}"
    nodes += [h.make_node("GlobalAveragePool", [x], ["p"], name="/pool"), h.make_node("Flatten", ["p"], ["f"], name="/flat"),
              h.make_node("Gemm", ["f", "fc.weight"], ["logits"], name="/fc/Gemm", transB=1)]
    g = h.make_graph(nodes, "bn", [h.make_tensor_value_info("x", T.FLOAT, ["N", 2, 4, 4])],
                     [h.make_tensor_value_info("logits", T.FLOAT, ["N", 3])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def test_shared_running_stats(ctx):
    src, out = os.path.join(ctx.tmp, "bn.onnx"), os.path.join(ctx.tmp, "bn_train.onnx")
    bn_net(src)
    r = ampc(ctx, "grad", src, "-o", out, "--train-mode")
    assert "4 running statistics bound" in r.stdout + r.stderr, r.stdout + r.stderr
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    inits = {t.name for t in m.graph.initializer}
    assert not [n for n in m.graph.node if n.op_type == "Identity" and n.input[0].startswith("shared_")]
    stats = [f"bn{k}.running_{s}" for k in (1, 2) for s in ("mean", "var")]
    assert all(s in inits for s in stats), sorted(inits)
    bound = {b.key for ti in m.training_info for b in ti.update_binding}
    assert all(s in bound for s in stats), sorted(bound)
    r = ampc(ctx, "run", out, "--steps", "3")
    assert len(losses(r.stdout)) == 3, r.stdout


def test_refusals(ctx):
    src, out = os.path.join(ctx.tmp, "mlp_sin.onnx"), os.path.join(ctx.tmp, "never.onnx")
    mlp(src, extra="Sin")
    r = ampc(ctx, "grad", src, "-o", out, rc=3)
    assert "Sin node '/act/Sin'" in r.stderr, r.stderr
    assert not os.path.exists(out)
    ampc(ctx, "grad", src, "-o", out, "--freeze", "fc1.*")  # Sin is off every parameter's path now
    assert os.path.exists(out)


class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx()
    ctx.ampc, ctx.notes, ctx.tmp = args.ampc, [], tempfile.mkdtemp(prefix="ampc_grad_")
    tests = [(f.__name__[5:], f) for f in (test_checked_and_bound, test_onnxruntime_gradients, test_trains_fp32_and_amp,
                                           test_mse_and_freeze, test_refusals, test_cross_entropy_class_axis,
                                           test_shared_running_stats)]
    try:
        return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
