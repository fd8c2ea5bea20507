#!/usr/bin/env python3
"""Every node of the bundled training graphs has a CUDA kernel (issue 20: a whole training
step on the GPU, no node on the CPU fallback with copies around it), but the known gaps.

For every bundled training graph as users make it (the training_info one,
models/mlp_train; those `ampc grad` makes from models/*/train.json; onnxruntime-training's
sets imported with their optimizer and checkpoint), FP32 and converted to float16 (dynamic
loss scaling) and bfloat16, `ampc verify` prints which op types the CUDA backend has no
kernel for (its supports check, which needs no GPU). That list must equal KNOWN below for
the case (empty for most): a kernel added makes its op leave the list, and the test says so
until KNOWN shrinks too.

With --device cuda (a GPU; skips otherwise) each graph also trains 2 steps on CUDA, and
`ampc run` must report no node on the fallback and no small input read back by a kernel
(a wait on the stream inside the step); --device sim runs the same steps on the
simulator (no GPU: it checks the graphs, their data and the harness).

Prints "N passed, M failed" last; exit 77 (skip) in a build without CUDA.

usage: test_cuda_coverage.py --ampc PATH [--testdata DIR] [--device sim|cuda] [--verbose]
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

MODELS = os.path.join(ROOT, "models")
NAMES = ("mlp_train", "mlp_cls", "amp_recipe", "gpt_decoder", "resnet_cnn", "ort_mlp", "ort_mlp_sgd", "ort_bert")
# onnxruntime-training's sets: (folder, optimizer model)
ORT = {"ort_mlp": ("ort_mlp", "optimizer_model.onnx"), "ort_mlp_sgd": ("ort_mlp", "optimizer_model_sgd.onnx"),
       "ort_bert": ("ort_bert", "optimizer_model.onnx")}
PRECISIONS = ("fp32", "fp16", "bf16")

# Why an op still runs on the CPU fallback on CUDA: {op: reason}; every op KNOWN names has
# one. Empty since the variadic ops took any number of inputs (s17-cov): before, the
# loss-scaling check's Sum over more than 8 gradients' checks fell back (gpt_decoder,
# resnet_cnn and ort_bert in fp16: Sum x1 each).
REASONS = {}

# (model, precision) -> the op types that run on the CPU fallback there, {op: nodes}, e.g.
# {("gpt_decoder", "fp16"): {"Sum": 1}}. A case not named here must have none.
KNOWN = {}


class Ctx:
    def __init__(self, args):
        self.ampc = args.ampc
        self.device = args.device
        self.tmp = tl.tempdir("ampc-cuda-cover-")
        self.made = {}
        self.notes = []


def sh(ctx, *argv):
    p = subprocess.run([ctx.ampc, *argv], capture_output=True, text=True)
    if p.returncode:
        raise AssertionError(f"ampc {' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()[-600:]}")
    return p


def ort_args(name):
    """`ampc` arguments importing onnxruntime-training's set `name` as one training model."""
    folder, optimizer = ORT[name]
    d = os.path.join(MODELS, folder)
    return [os.path.join(d, "training_model.onnx"), "--optimizer", os.path.join(d, optimizer),
            "--checkpoint", os.path.join(d, "checkpoint")]


def training_model(ctx, name):
    """Bundled model `name` as an FP32 ONNX training graph, made as a user makes it."""
    if name in ctx.made:
        return ctx.made[name]
    d = os.path.join(MODELS, name)
    out = os.path.join(ctx.tmp, f"{name}_train.onnx")
    if name in ORT:  # FP32: imported, no pass run on it (what `ampc run --optimizer` runs)
        sh(ctx, *ort_args(name), "--passes", "none", "-o", out)
    elif os.path.exists(os.path.join(d, "train.json")):
        with open(os.path.join(d, "train.json")) as f:
            args = json.load(f)["grad"]
        sh(ctx, "grad", os.path.join(d, "model.onnx"), "-o", out, *args)
    else:
        out = os.path.join(d, "model.onnx")
    ctx.made[name] = out
    return out


def converted(ctx, name, precision):
    if precision == "fp32":
        return training_model(ctx, name)
    out = os.path.join(ctx.tmp, f"{name}_{precision}.onnx")
    if name in ORT:  # imported and converted in one command
        sh(ctx, *ort_args(name), "-o", out, "--precision", precision)
    else:
        sh(ctx, training_model(ctx, name), "-o", out, "--precision", precision)
    return out


LINE = re.compile(r"^cuda: (\d+) of (\d+) nodes have kernels(?:; the CPU fallback would run: (.*))?$", re.M)


def fallback(ctx, model):
    """(kernels, nodes, {op: count}) from `ampc verify MODEL`'s CUDA line."""
    p = sh(ctx, "verify", model)
    m = LINE.search(p.stdout)
    assert m, f"no CUDA coverage line in: {p.stdout}"
    ops = {}
    for item in (m.group(3) or "").split(", "):
        if item:
            op, count = item.rsplit(" x", 1)
            ops[op] = int(count)
    assert int(m.group(2)) - int(m.group(1)) == sum(ops.values()), p.stdout
    return int(m.group(1)), int(m.group(2)), ops


def data_of(name):
    """The folder of inputs a training step of bundled model `name` reads."""
    d = os.path.join(MODELS, ORT[name][0] if name in ORT else name)
    train = os.path.join(d, "train_data")
    return train if os.path.isdir(train) and name not in ORT else os.path.join(d, "test_data_set_0")


def steps_on_device(ctx, name, precision, model):
    """2 training steps on ctx.device: nothing on the fallback, nothing read back mid-step."""
    p = sh(ctx, "run", model, "--steps", "2", "--inputs", data_of(name), "--backend", ctx.device, "--seed", "7")
    fell = re.search(r"^fallback: .*$", p.stdout, re.M)
    assert not fell, f"{name} {precision} on {ctx.device}: {fell.group(0)}"
    reads = re.search(r"(\d+) small inputs read back by kernels", p.stdout)
    if ctx.device == "cuda":
        assert reads and reads.group(1) == "0", f"{name} {precision}: kernels read back inputs: {p.stdout[-400:]}"


def coverage(ctx, name, precision):
    model = converted(ctx, name, precision)
    taken, nodes, ops = fallback(ctx, model)
    want = KNOWN.get((name, precision), {})
    assert ops == want, (f"{name} {precision}: the CUDA backend lacks {ops or 'nothing'}, "
                         f"KNOWN says {want or 'nothing'} (a kernel added: shrink KNOWN)")
    ctx.notes.append(f"{name} {precision}: {taken} of {nodes} nodes have CUDA kernels")
    if ctx.device and not want:
        steps_on_device(ctx, name, precision, model)


def reasons_given(ctx):
    """Every known gap says why; no reason is left for an op no case lists."""
    listed = {op for ops in KNOWN.values() for op in ops}
    assert listed == set(REASONS), f"KNOWN lists {sorted(listed)}, REASONS explains {sorted(REASONS)}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    ap.add_argument("--device", choices=["sim", "cuda"])
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx(args)
    p = subprocess.run([args.ampc, "verify", os.path.join(MODELS, "mlp_train", "model.onnx")],
                       capture_output=True, text=True)
    if "cuda: (CUDA not built)" in p.stdout:
        print("skip: this ampc was built without CUDA")
        return 77
    if args.device == "cuda":
        p = subprocess.run([args.ampc, "run", os.path.join(MODELS, "mlp_cls", "model.onnx"), "--backend", "cuda",
                            "--dim", "batch=1"], capture_output=True, text=True)
        if p.returncode:
            print(f"skip: no CUDA device ({p.stderr.strip()[-200:]})")
            return 77
    tests = [("every known gap has its reason", reasons_given)]
    for name in NAMES:
        for precision in PRECISIONS:
            tests.append((f"{name} {precision}", lambda c, n=name, pr=precision: coverage(c, n, pr)))
    return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
