#!/usr/bin/env python3
"""`ampc grad` on the bundled PyTorch exports (models/make_grad_models.py: amp_recipe,
mlp_cls, resnet_cnn, gpt_decoder), against PyTorch autograd, without torch:

- gradients: the training graph `ampc grad` makes (train.json's arguments), with every
  parameter gradient as an output and no optimizer, run once by `ampc run --outputs` on
  the CPU executor over train_data/: the loss and every gradient match torch's
  (grads.npz) within a relative error of 1e-4 (max |diff| / max |torch's|, per tensor;
  a gradient that is zero in exact arithmetic, as attention's key bias has, is measured
  against 1e-3 of the model's largest gradient instead);
  every parameter torch has a gradient for gets one, and no other;
- training: 200 steps (train.json's optimizer; `ampc run --inputs` feeds the same batch
  each step) in FP32, fp16 (dynamic loss scaling) and bf16 on the CPU executor: the loss
  falls to under half of its first value, and each AMP run ends within 2% of FP32's;
- a model whose train.json says it waits for gradient rules (resnet_cnn: Conv,
  BatchNormalization...) must be refused with exit 3 naming an op without a rule; once the
  rules land, it is checked like the others.
Prints per model the worst gradient error and the losses; "N passed, M failed" last;
exit 77 (skip) when onnx or numpy is missing.

usage: test_grad_models.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

MODELS = ["amp_recipe", "mlp_cls", "resnet_cnn", "gpt_decoder"]
GRAD_TOL = 1e-4  # relative, per tensor: float32 executor against torch's float64
GAP_TOL = 0.02   # AMP's last loss against FP32's, relative


def ampc(ctx, *args):
    return subprocess.run([ctx.ampc, *args], capture_output=True, text=True)


def folder(name):
    return os.path.join(ROOT, "models", name)


def make_train(ctx, name):
    """`ampc grad` with train.json's arguments: the training model's path, or None when the
    model waits for rules (checked: exit 3 naming the op)."""
    with open(os.path.join(folder(name), "train.json")) as f:
        cfg = json.load(f)
    out = os.path.join(ctx.tmp, name + "_train.onnx")
    if os.path.exists(out):
        return out, cfg
    r = ampc(ctx, "grad", os.path.join(folder(name), "model.onnx"), "-o", out, *cfg["grad"])
    if r.returncode == 3 and cfg.get("waits_for"):
        assert "has no gradient rule yet" in r.stderr, r.stderr
        if not any(n.startswith(name + ": waits") for n in ctx.notes):
            ctx.notes.append(f"{name}: waits for {cfg['waits_for']} ({r.stderr.strip().split('grad: ', 1)[-1][:70]}...)")
        return None, cfg
    assert r.returncode == 0, f"{name}: ampc grad exit {r.returncode}: {r.stderr}"
    return out, cfg


def read_outputs(d):
    got = {}
    for f in os.listdir(d):
        t = onnx.TensorProto()
        with open(os.path.join(d, f), "rb") as fh:
            t.ParseFromString(fh.read())
        got[t.name] = nh.to_array(t)
    return got


def test_gradients(ctx):
    for name in MODELS:
        train, _ = make_train(ctx, name)
        if not train:
            continue
        want = dict(np.load(os.path.join(folder(name), "grads.npz")))
        m = onnx.load(train)
        del m.training_info[:]
        made = {o for n in m.graph.node for o in n.output}
        params = sorted(k for k in want if k != "loss")
        grads = sorted(o[:-5] for o in made if o.endswith("_grad") and o[:-5] in {i.name for i in m.graph.initializer})
        assert grads == params, f"{name}: gradients of {grads}, torch has {params}"
        for p in params:
            m.graph.output.append(h.make_empty_tensor_value_info(p + "_grad"))
        gm, out = os.path.join(ctx.tmp, name + "_grads.onnx"), os.path.join(ctx.tmp, name + "_out")
        onnx.save(m, gm)
        r = ampc(ctx, "run", gm, "--inputs", os.path.join(folder(name), "train_data"), "--outputs", out,
                 "--backend", "cpu")
        assert r.returncode == 0, f"{name}: ampc run: {r.stderr}"
        got = read_outputs(out)
        worst, where = 0.0, ""
        floor = 1e-3 * max(float(np.max(np.abs(want[p]))) for p in params)
        for k in ["loss"] + params:
            g = got["loss" if k == "loss" else k + "_grad"].astype(np.float64)
            w = want[k].astype(np.float64)
            assert g.shape == w.shape, f"{name} {k}: shape {g.shape}, torch's {w.shape}"
            rel = float(np.max(np.abs(g - w))) / max(float(np.max(np.abs(w))), floor if k != "loss" else 1e-30)
            assert rel < GRAD_TOL, f"{name}: {k} differs from torch's by {rel:.3g} (relative)"
            if rel > worst:
                worst, where = rel, k
        ctx.notes.append(f"{name}: loss and {len(params)} gradients vs torch's: max rel error {worst:.2e} ({where})")


def losses(text):
    return [float(v) for v in re.findall(r"step \d+: loss ([-0-9.e+na]+)", text)]


def test_training(ctx):
    for name in MODELS:
        train, cfg = make_train(ctx, name)
        if not train:
            continue
        steps = str(cfg["steps"])
        data = os.path.join(folder(name), "train_data")
        curves = {}
        for prec in ("fp32", "fp16", "bf16"):
            model = train
            if prec != "fp32":
                model = os.path.join(ctx.tmp, f"{name}_{prec}.onnx")
                r = ampc(ctx, train, "-o", model, "--precision", prec)
                assert r.returncode == 0, f"{name}: ampc --precision {prec}: {r.stderr}"
            r = ampc(ctx, "run", model, "--steps", steps, "--inputs", data, "--backend", "cpu")
            assert r.returncode == 0, f"{name} {prec}: ampc run: {r.stderr}"
            ls = losses(r.stdout)
            assert len(ls) == cfg["steps"], f"{name} {prec}: {len(ls)} losses"
            assert np.isfinite(ls[-1]) and ls[-1] < 0.5 * ls[0], f"{name} {prec}: loss {ls[0]} -> {ls[-1]}"
            curves[prec] = ls
        base = curves["fp32"][-1]
        gaps = {p: abs(curves[p][-1] - base) / base for p in ("fp16", "bf16")}
        ctx.notes.append(f"{name}: loss over {steps} steps: " + ", ".join(
            f"{p} {c[0]:.4f} -> {c[-1]:.4f}" for p, c in curves.items()) + "; gap to FP32: " +
            ", ".join(f"{p} {g:.2%}" for p, g in gaps.items()))
        for p, g in gaps.items():
            assert g <= GAP_TOL, f"{name}: {p} ends at {curves[p][-1]}, FP32 at {base}: {g:.2%} apart"


class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx()
    ctx.ampc, ctx.notes, ctx.tmp = args.ampc, [], tempfile.mkdtemp(prefix="ampc_grad_models_")
    tests = [(f.__name__[5:], f) for f in (test_gradients, test_training)]
    try:
        return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
