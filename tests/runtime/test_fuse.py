#!/usr/bin/env python3
"""The executor's plan-level fusion (runtime/fuse.c) changes no bit of a training run.

The device simulator fuses as CUDA does (chains of elementwise nodes, the loss-scaling
check, the update gates) and runs the fused nodes' CPU reference kernels; the CPU backend,
run with --no-fuse (without it, it fuses `ampc grad`'s convolution weight gradients alone:
tests/runtime/test_fuse_cpu.py), runs every node as the model has it. So for every bundled training model (the
training_info ones, those `ampc grad` makes from models/*/train.json, and onnxruntime-
training's sets, imported with their optimizer and checkpoint), FP32 and
converted to float16 (dynamic loss scaling) and bfloat16, STEPS training steps on `sim`
must print the CPU's losses and loss scales digit for digit and save the CPU's state byte
for byte, and `sim` must say it fused nodes (the AMP graphs: the check, the gates and the
scale's update all fuse). A planted NaN in the data makes a step skip on both, bit for bit.

With --device cuda (a GPU; skips otherwise) the same steps on CUDA must agree with the
CPU's losses within --rtol (GEMMs round differently there), the fused kernels running.

Prints "N passed, M failed" last; exit 77 (skip) when numpy or onnx is missing.

usage: test_fuse.py --ampc PATH [--testdata DIR] [--device sim|cuda] [--steps N] [--verbose]
"""
import argparse
import json
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

MODELS = os.path.join(ROOT, "models")


class Ctx:
    def __init__(self, args):
        self.ampc = args.ampc
        self.device = args.device
        self.steps = args.steps
        self.rtol = args.rtol
        self.tmp = tl.tempdir("ampc-fuse-")
        self.notes = []
        self.made = {}


def sh(ctx, *argv, check=True):
    p = subprocess.run([ctx.ampc, *argv], capture_output=True, text=True)
    if check and p.returncode:
        raise AssertionError(f"ampc {' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
    return p


def ort_set(name):
    d = os.path.join(MODELS, name)
    return (os.path.join(d, "training_model.onnx"), ["--optimizer", os.path.join(d, "optimizer_model.onnx"),
                                                      "--checkpoint", os.path.join(d, "checkpoint")],
            os.path.join(d, "test_data_set_0"))


def training_model(ctx, name):
    """(model path, extra `ampc run` arguments, inputs folder) of bundled model `name` as a
    training graph: an onnxruntime-training set is imported by `ampc run` itself."""
    if name in ctx.made:
        return ctx.made[name]
    d = os.path.join(MODELS, name)
    spec = os.path.join(d, "train.json")
    if name.startswith("ort_"):
        got = ort_set(name)
    elif os.path.exists(spec):
        with open(spec) as f:
            args = json.load(f)["grad"]
        out = os.path.join(ctx.tmp, f"{name}_train.onnx")
        sh(ctx, "grad", os.path.join(d, "model.onnx"), "-o", out, *args)
        got = (out, [], os.path.join(d, "train_data"))
    else:
        got = (os.path.join(d, "model.onnx"), [], os.path.join(d, "test_data_set_0"))
    ctx.made[name] = got
    return got


def converted(ctx, name, precision):
    model, extra, data = training_model(ctx, name)
    if precision == "fp32":
        return model, extra, data
    out = os.path.join(ctx.tmp, f"{name}_{precision}.onnx")
    if not os.path.exists(out):
        sh(ctx, model, "-o", out, "--precision", precision, *extra)
    return out, [], data


STEP = re.compile(r"^step (\d+): loss (\S+) \([^)]*\)(.*)$")


def run_steps(ctx, model, data, backend, tag, steps=None, load=None, extra=()):
    steps = steps or ctx.steps
    state = os.path.join(ctx.tmp, f"{tag}_{backend}.state")
    more = (["--load-state", load] if load else []) + list(extra) + (["--no-fuse"] if backend == "cpu" else [])
    p = sh(ctx, "run", model, "--steps", str(steps), "--inputs", data, "--backend", backend, "--save-state", state,
           "--seed", "7", *more)
    printed = [m.groups() for m in map(STEP.match, p.stdout.splitlines()) if m]
    assert len(printed) == steps, f"{tag} on {backend}: {len(printed)} steps printed:\n{p.stdout}"
    fused = re.search(r"^fused: (\d+) nodes ran as (\d+) fused kernels? \((.*)\)$", p.stdout, re.M)
    with open(state, "rb") as f:
        return printed, f.read(), fused


def state_moves(ctx):
    """A state saved after 2 steps on the device, loaded on the CPU for 2 more, gives the
    CPU's 4 straight steps (the checkpoint is the same file on every backend)."""
    model, _, data = converted(ctx, "mlp_train", "fp16")
    straight, straight_state, _ = run_steps(ctx, model, data, "cpu", "straight", steps=4)
    run_steps(ctx, model, data, ctx.device, "half", steps=2)
    later, later_state, _ = run_steps(ctx, model, data, "cpu", "later", steps=2,
                                      load=os.path.join(ctx.tmp, f"half_{ctx.device}.state"))
    if ctx.device == "sim":
        assert [s[1:] for s in later] == [s[1:] for s in straight[2:]], f"{later} vs {straight[2:]}"
        assert later_state == straight_state, "the state after 2 + 2 steps differs from 4 straight ones"
    else:
        for a, b in zip(later, straight[2:]):
            assert abs(float(a[1]) - float(b[1])) <= ctx.rtol * max(abs(float(b[1])), 1e-3), f"{a} vs {b}"
    # ... and on the device itself, 2 + 2 steps continue exactly as 4 straight ones.
    dev4, dev4_state, _ = run_steps(ctx, model, data, ctx.device, "dev4", steps=4)
    again, again_state, _ = run_steps(ctx, model, data, ctx.device, "again", steps=2,
                                      load=os.path.join(ctx.tmp, f"half_{ctx.device}.state"))
    assert [s[1:] for s in again] == [s[1:] for s in dev4[2:]], f"{again} vs {dev4[2:]}"
    assert again_state == dev4_state, f"the state after 2 + 2 steps on {ctx.device} differs from 4 straight ones"


def same_run(ctx, name, precision, must_fuse):
    model, extra, data = converted(ctx, name, precision)
    tag = f"{name}_{precision}"
    cpu, cpu_state, cpu_fused = run_steps(ctx, model, data, "cpu", tag, extra=extra)
    dev, dev_state, dev_fused = run_steps(ctx, model, data, ctx.device, tag, extra=extra)
    assert not cpu_fused, "the CPU backend fuses nothing under --no-fuse"
    if must_fuse:
        assert dev_fused and int(dev_fused.group(2)) > 0, f"{tag}: {ctx.device} fused nothing"
        assert "UnscaleCheck" in dev_fused.group(3), f"{tag}: the gradient check was not fused: {dev_fused.group(3)}"
        if name == "mlp_train":
            assert "Momentum+gate" in dev_fused.group(3), f"{tag}: the gates stayed apart: {dev_fused.group(3)}"
    if ctx.device == "sim":
        for a, b in zip(cpu, dev):
            assert a == b, f"{tag}: step {a[0]}: cpu {a[1:]} vs sim {b[1:]}"
        assert cpu_state == dev_state, f"{tag}: the state after {ctx.steps} steps differs"
    else:
        for a, b in zip(cpu, dev):
            x, y = float(a[1]), float(b[1])
            assert abs(x - y) <= ctx.rtol * max(abs(x), 1e-3), f"{tag}: step {a[0]}: cpu {x} vs {ctx.device} {y}"
            assert a[2] == b[2], f"{tag}: step {a[0]}: loss scale / skip differ: {a[2]!r} vs {b[2]!r}"
    if dev_fused:
        ctx.notes.append(f"{tag}: {dev_fused.group(1)} nodes as {dev_fused.group(2)} fused kernels "
                         f"({dev_fused.group(3)})")


def planted_nan(ctx):
    """A NaN in the first input: every step's gradients are NaN, every update is skipped and
    the scale backs off on both backends, and the state stays the initial one bit for bit
    (on CUDA too: nothing was computed into it)."""
    model, _, data = converted(ctx, "mlp_train", "fp16")
    bad = os.path.join(ctx.tmp, "nan_data")
    os.makedirs(bad, exist_ok=True)
    for f in sorted(os.listdir(data)):
        t = onnx.TensorProto()
        with open(os.path.join(data, f), "rb") as fh:
            t.ParseFromString(fh.read())
        a = nh.to_array(t).copy()
        if f.startswith("input_0") and a.dtype.kind == "f":
            a.flat[0] = np.nan
        with open(os.path.join(bad, f), "wb") as fh:
            fh.write(nh.from_array(a, t.name).SerializeToString())
    cpu, cpu_state, _ = run_steps(ctx, model, bad, "cpu", "nan")
    dev, dev_state, _ = run_steps(ctx, model, bad, ctx.device, "nan")
    assert all("skipped" in s[2] for s in cpu), f"the NaN steps were not skipped: {cpu}"
    assert [s[2] for s in cpu] == [s[2] for s in dev], f"skips differ: {cpu} vs {dev}"
    # Every step skipped: the weights and optimizer state are the initial ones, bit for bit,
    # on either backend (GradScaler's rule), the scale backed off alike.
    assert cpu_state == dev_state, "the state after skipped steps differs"


def cases():
    out = []
    for name in ("mlp_train", "mlp_cls", "amp_recipe", "gpt_decoder", "resnet_cnn", "ort_mlp", "ort_bert"):
        for precision in ("fp32", "fp16", "bf16"):
            out.append((f"{name} {precision}: {'{device}'} = cpu",
                        lambda c, n=name, p=precision: same_run(c, n, p, must_fuse=p == "fp16")))
    out.append(("a NaN step is skipped alike", planted_nan))
    out.append(("a state saved on {device} continues on the CPU, and on {device} exactly", state_moves))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    ap.add_argument("--device", default="sim", choices=["sim", "cuda"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rtol", type=float, default=2e-2)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx(args)
    if args.device == "cuda":
        p = subprocess.run([args.ampc, "run", os.path.join(MODELS, "mlp_cls", "model.onnx"), "--backend", "cuda",
                            "--dim", "batch=1"], capture_output=True, text=True)
        if p.returncode:
            print(f"skip: no CUDA device ({p.stderr.strip()[-200:]})")
            return 77
    tests = [(t.replace("{device}", args.device), fn) for t, fn in cases()]
    return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
