#!/usr/bin/env python3
"""`ampc grad --optimizer sgd|momentum|adam` (issue 23): the optimizers follow torch.optim.

- after `ampc run --steps 3` (the same batch each step), every parameter and every state
  tensor (momentum buffers, Adam's exp_avg/exp_avg_sq, the step count) saved by
  --save-state equals a numpy (float64) reimplementation of torch.optim.SGD (weight
  decay, momentum) and torch.optim.Adam/AdamW (bias correction) to 1e-5;
- `ampc TRAIN -o AMP` (fp16, dynamic loss scaling) takes the Adam graph: every gradient
  unscaled, every update (parameters, moments, step) gated; its 3 steps stay near FP32's,
  its moments stay float32, and a step whose gradients are not finite leaves the
  parameters and all the optimizer's state as they were (the step count too);
- option misuse (--momentum with adam, --beta1 1) is a usage error (exit 2).
Prints "N passed, M failed" last; exit 77 (skip) when onnx or numpy is missing.

usage: test_grad_optim.py --ampc PATH [--testdata DIR] [--verbose]
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
    from onnx import helper as h
    from onnx import numpy_helper as nh
    from onnx import TensorProto as T
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

PARAMS = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]


def mlp(path):
    """x [N, 8] -> MatMul+Add -> Relu -> Gemm(transB) -> logits [N, 3]."""
    rs = np.random.RandomState(1)
    inits = [nh.from_array((rs.randn(8, 16) * 0.4).astype(np.float32), "fc1.weight"),
             nh.from_array((rs.randn(16) * 0.1).astype(np.float32), "fc1.bias"),
             nh.from_array((rs.randn(3, 16) * 0.4).astype(np.float32), "fc2.weight"),
             nh.from_array((rs.randn(3) * 0.1).astype(np.float32), "fc2.bias")]
    nodes = [h.make_node("MatMul", ["x", "fc1.weight"], ["h0"]), h.make_node("Add", ["h0", "fc1.bias"], ["h1"]),
             h.make_node("Relu", ["h1"], ["h2"]),
             h.make_node("Gemm", ["h2", "fc2.weight", "fc2.bias"], ["logits"], transB=1)]
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, ["N", 8])],
                     [h.make_tensor_value_info("logits", T.FLOAT, ["N", 3])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return {t.name: nh.to_array(t).astype(np.float64) for t in inits}


def write_data(d, x, labels):
    os.makedirs(d, exist_ok=True)
    for i, (name, v) in enumerate([("x", x), ("labels", labels)]):
        with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
            f.write(nh.from_array(v, name).SerializeToString())


def data(n=32):
    rs = np.random.RandomState(2)
    x = rs.randn(n, 8).astype(np.float32)
    return x, np.argmax(x @ rs.randn(8, 3), axis=1).astype(np.int64)


def grads(w, x, labels):
    """The MLP's cross-entropy gradients, float64."""
    x = x.astype(np.float64)
    h1 = x @ w["fc1.weight"] + w["fc1.bias"]
    h2 = np.maximum(h1, 0)
    z = h2 @ w["fc2.weight"].T + w["fc2.bias"]
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n = len(labels)
    dz = p.copy()
    dz[np.arange(n), labels] -= 1
    dz /= n
    dh1 = (dz @ w["fc2.weight"]) * (h1 > 0)
    return {"fc2.weight": dz.T @ h2, "fc2.bias": dz.sum(0), "fc1.weight": x.T @ dh1, "fc1.bias": dh1.sum(0)}


def torch_steps(kind, w, x, labels, steps, lr, wd=0.0, mu=0.9, b1=0.9, b2=0.999, eps=1e-8):
    """torch.optim.SGD (momentum, dampening 0) and Adam/AdamW's single-tensor code, in numpy:
    the parameters and the state after `steps` steps on the same batch."""
    w = dict(w)
    st = {"step": 0}
    for p in PARAMS:
        st[p + ".momentum_buffer"] = st[p + ".exp_avg"] = st[p + ".exp_avg_sq"] = np.zeros_like(w[p])
    for _ in range(steps):
        g = grads(w, x, labels)
        st["step"] += 1
        t = st["step"]
        for p in PARAMS:
            if kind == "adam":
                if wd:
                    w[p] = w[p] * (1 - lr * wd)  # AdamW
                m = st[p + ".exp_avg"] = b1 * st[p + ".exp_avg"] + (1 - b1) * g[p]
                v = st[p + ".exp_avg_sq"] = b2 * st[p + ".exp_avg_sq"] + (1 - b2) * g[p] * g[p]
                denom = np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps
                w[p] = w[p] - lr / (1 - b1 ** t) * m / denom
            else:
                d = g[p] + wd * w[p]
                if kind == "momentum":
                    d = st[p + ".momentum_buffer"] = mu * st[p + ".momentum_buffer"] + d
                w[p] = w[p] - lr * d
    return w, st


def ampc(ctx, *args, rc=0):
    r = subprocess.run([ctx.ampc, *args], capture_output=True, text=True)
    assert r.returncode == rc, f"ampc {' '.join(args)}: exit {r.returncode}, expected {rc}: {r.stderr}"
    return r


def saved(path):
    return {t.name: nh.to_array(t) for t in onnx.load(path).graph.initializer}


CASES = [("sgd", ["--lr", "0.1", "--weight-decay", "0.05"], dict(lr=0.1, wd=0.05)),
         ("momentum", ["--lr", "0.1"], dict(lr=0.1)),
         ("momentum", ["--lr", "0.05", "--momentum", "0.5", "--weight-decay", "0.01"], dict(lr=0.05, mu=0.5, wd=0.01)),
         ("adam", ["--lr", "0.01"], dict(lr=0.01)),
         ("adam", ["--lr", "0.02", "--beta1", "0.8", "--beta2", "0.99", "--eps", "1e-6", "--weight-decay", "0.1"],
          dict(lr=0.02, b1=0.8, b2=0.99, eps=1e-6, wd=0.1))]


def test_matches_torch(ctx):
    src = os.path.join(ctx.tmp, "mlp.onnx")
    w = mlp(src)
    x, labels = data()
    d = os.path.join(ctx.tmp, "data")
    write_data(d, x, labels)
    for i, (kind, args, hp) in enumerate(CASES):
        out, state = os.path.join(ctx.tmp, f"t{i}.onnx"), os.path.join(ctx.tmp, f"s{i}.onnx")
        r = ampc(ctx, "grad", src, "-o", out, "--optimizer", kind, *args)
        n_state = {"sgd": 0, "momentum": 4, "adam": 9}[kind]
        assert ("optimizer state" in r.stdout) == (n_state > 0) and (not n_state or f"{n_state} optimizer" in r.stdout), r.stdout
        m = onnx.load(out)
        onnx.checker.check_model(m, full_check=True)
        keys = sorted(b.key for b in m.training_info[0].update_binding)
        ampc(ctx, "run", out, "--steps", "3", "--inputs", d, "--backend", "cpu", "--save-state", state)
        got = saved(state)
        want_w, want_st = torch_steps(kind, w, x, labels, 3, **hp)
        want = dict(want_w)
        for k in keys:
            if k not in want:
                want[k] = want_st[k]
        assert keys == sorted(want), f"{kind}: bound {keys}"
        worst = 0.0
        for k in keys:
            err = float(np.max(np.abs(got[k].astype(np.float64) - want[k])))
            assert err < 1e-5, f"{kind} {args}: {k} differs from torch's by {err}"
            worst = max(worst, err)
        if kind == "adam":
            assert got["step"].dtype == np.int64 and int(got["step"]) == 3, got["step"]
        ctx.notes.append(f"{kind} {' '.join(args)}: {len(keys)} bound tensors after 3 steps, max |diff| vs "
                         f"torch's arithmetic {worst:.2e}")


def test_amp_adam(ctx):
    src, out, amp = (os.path.join(ctx.tmp, f) for f in ("mlp_a.onnx", "adam.onnx", "adam_amp.onnx"))
    mlp(src)
    ampc(ctx, "grad", src, "-o", out, "--optimizer", "adam", "--lr", "0.01")
    r = ampc(ctx, out, "-o", amp)
    said = r.stdout + r.stderr
    assert "4 gradients unscaled" in said and "13 updates gated" in said, said
    x, labels = data()
    d = os.path.join(ctx.tmp, "data_a")
    write_data(d, x, labels)
    s32, s16 = os.path.join(ctx.tmp, "s32.onnx"), os.path.join(ctx.tmp, "s16.onnx")
    ampc(ctx, "run", out, "--steps", "3", "--inputs", d, "--backend", "cpu", "--save-state", s32)
    ampc(ctx, "run", amp, "--steps", "3", "--inputs", d, "--backend", "cpu", "--save-state", s16)
    a, b = saved(s32), saved(s16)
    for k in PARAMS:
        for suffix in ("", ".exp_avg", ".exp_avg_sq"):
            assert b[k + suffix].dtype == np.float32, f"{k + suffix} is {b[k + suffix].dtype} in the AMP state"
        err = np.max(np.abs(a[k] - b[k]))
        assert err < 5e-3, f"{k}: AMP's Adam after 3 steps differs from FP32's by {err}"
    assert int(b["step"]) == 3
    # Gradients that are not finite: the step is skipped whole.
    bad = os.path.join(ctx.tmp, "data_inf")
    xb = x.copy()
    xb[0, 0] = np.inf
    write_data(bad, xb, labels)
    s_inf = os.path.join(ctx.tmp, "s_inf.onnx")
    r = ampc(ctx, "run", amp, "--steps", "1", "--inputs", bad, "--backend", "cpu", "--save-state", s_inf,
             "--load-state", s16)
    assert "update skipped" in r.stdout, r.stdout
    c = saved(s_inf)
    for k in PARAMS:
        for suffix in ("", ".exp_avg", ".exp_avg_sq"):
            assert np.array_equal(c[k + suffix], b[k + suffix]), f"{k + suffix} changed on a skipped step"
    assert int(c["step"]) == 3, f"step {c['step']} after a skipped step"
    assert float(c["amp_loss_scale"]) == 0.5 * float(b["amp_loss_scale"])
    ctx.notes.append("fp16 Adam: 13 updates gated; a non-finite step changes no parameter, moment or step")


def test_usage(ctx):
    src, out = os.path.join(ctx.tmp, "mlp_u.onnx"), os.path.join(ctx.tmp, "never.onnx")
    mlp(src)
    for args, said in ((["--optimizer", "adam", "--momentum", "0.9"], "--momentum is for"),
                       (["--optimizer", "momentum", "--beta1", "0.9"], "are for --optimizer adam"),
                       (["--optimizer", "adam", "--beta1", "1"], "--beta1 '1'"),
                       (["--optimizer", "rmsprop"], "expected sgd, momentum or adam"),
                       (["--weight-decay", "-1"], "--weight-decay '-1'")):
        r = ampc(ctx, "grad", src, "-o", out, *args, rc=2)
        assert said in r.stderr, r.stderr
    assert not os.path.exists(out)


class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx()
    ctx.ampc, ctx.notes, ctx.tmp = args.ampc, [], tempfile.mkdtemp(prefix="ampc_grad_optim_")
    tests = [(f.__name__[5:], f) for f in (test_matches_torch, test_amp_adam, test_usage)]
    try:
        return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
