#!/usr/bin/env python3
"""Training steps of the same network in PyTorch and in ampc, side by side (issue 21):
for each model (the recipe MLP: 3 x Linear 4096 + ReLU, batch 512; torchvision's ResNet-50,
batch 64; a GPT-2-style decoder, 4 layers, batch 8 x 128 tokens), builds it in PyTorch,
exports it to ONNX, makes its training graph with `ampc grad` (cross-entropy, SGD), and
times in rounds, interleaved: PyTorch eager FP32, PyTorch autocast + GradScaler (CUDA:
float16; CPU: bfloat16, no scaler), and ampc FP32 and AMP (`ampc bench --train --compare`,
which interleaves those two itself). Before timing, it checks that the first step's loss
agrees: ampc's (`ampc run --steps 1` on the same weights and data) against PyTorch's FP32.

It prints a table of median step times (the median over rounds of each round's median)
and each one's speed-up over PyTorch FP32. Needs torch, torchvision and transformers
(the venv /work/venv-ort has them); ampc on CUDA where --device cuda.

usage: bench_vs_torch.py --ampc build/ampc [--device cuda|cpu] [--models mlp,resnet50,gpt2]
                         [--steps N] [--rounds R] [--small] [--keep DIR]
  --small  shrinks every model (width, depth, batch) for a quick run on a CPU
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import torch
from onnx import numpy_helper as nh


def mlp(small):
    width, batch, classes = (256, 32, 10) if small else (4096, 512, 1000)
    net = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                              torch.nn.ReLU(), torch.nn.Linear(width, classes))
    return net, torch.randn(batch, width), torch.randint(0, classes, (batch,)), -1


def resnet50(small):
    import torchvision
    net = torchvision.models.resnet18(num_classes=10) if small else torchvision.models.resnet50()
    batch, size, classes = (4, 64, 10) if small else (64, 224, 1000)
    return net, torch.randn(batch, 3, size, size), torch.randint(0, classes, (batch,)), -1


class Gpt(torch.nn.Module):
    """GPT-2 (transformers) returning the logits alone, [B, T, V]."""

    def __init__(self, small):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=2 if small else 4, n_embd=64 if small else 768, n_head=4 if small else 12,
                         vocab_size=512 if small else 50257, n_positions=128, attn_pdrop=0, resid_pdrop=0,
                         embd_pdrop=0)
        self.m = GPT2LMHeadModel(cfg)
        self.vocab = cfg.vocab_size

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False).logits


def gpt2(small):
    net = Gpt(small)
    batch, seq = (2, 16) if small else (8, 128)
    ids = torch.randint(0, net.vocab, (batch, seq))
    return net, ids, torch.randint(0, net.vocab, (batch, seq)), -1


MODELS = {"mlp": mlp, "resnet50": resnet50, "gpt2": gpt2}
LR = 1e-3


def loss_of(net, x, y):
    out = net(x)
    return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def torch_steps(net, x, y, steps, device, amp):
    """Median time (ms) of `steps` SGD steps, eager; with amp: autocast (+ GradScaler on CUDA)."""
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    dtype = torch.float16 if device == "cuda" else torch.bfloat16
    scaler = torch.cuda.amp.GradScaler() if amp and device == "cuda" else None
    times = []
    for _ in range(steps):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=dtype, enabled=amp):
            loss = loss_of(net, x, y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def export(net, x, path):
    net.eval()  # the export keeps BatchNorm's running statistics as initializers
    torch.onnx.export(net, (x,), path, input_names=["x"], output_names=["logits"], opset_version=17,
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)
    net.train()


def write_inputs(d, model_path, x, y):
    """input_K.pb for the training graph's inputs: x, then the labels."""
    os.makedirs(d, exist_ok=True)
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    arrays = {names[0]: x.numpy(), names[1]: y.numpy().astype(np.int64)}
    for k, name in enumerate(names[:2]):
        with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
            f.write(nh.from_array(arrays[name], name).SerializeToString())


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def ampc_compare(ampc, train, inputs, steps, backend):
    out = run([ampc, "bench", train, "--train", "--compare", "--iters", str(steps), "--warmup", "2",
               "--inputs", inputs, "--backend", backend])
    med = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(FP32|AMP)\s+([\d.]+)", out, re.M)}
    return med["FP32"], med["AMP"]


def one_model(name, args, tmp):
    torch.manual_seed(0)
    net, x, y, _ = MODELS[name](args.small)
    src, train, inputs = (os.path.join(tmp, f"{name}{s}") for s in (".onnx", "_train.onnx", "_in"))
    export(net, x, src)
    # --train-mode: BatchNormalization on batch statistics (and Dropout on), as PyTorch trains
    run([args.ampc, "grad", src, "-o", train, "--loss", "cross-entropy", "--optimizer", "sgd", "--lr", str(LR),
         "--train-mode", "-q"])
    write_inputs(inputs, train, x, y)
    # the first step's loss: same weights, same data
    want = float(loss_of(net, x, y))
    got = float(re.search(r"step 1: loss ([\d.eE+-]+)", run([args.ampc, "run", train, "--steps", "1", "--inputs",
                                                             inputs, "--backend", "cpu"])).group(1))
    if abs(got - want) > 1e-3 * abs(want) + 1e-5:
        sys.exit(f"{name}: ampc's first loss {got} differs from PyTorch's {want}")
    dev = args.device
    net, x, y = net.to(dev), x.to(dev), y.to(dev)
    backend = "cuda" if dev == "cuda" else "cpu"
    rounds = {"torch FP32": [], "torch autocast": [], "ampc FP32": [], "ampc AMP": []}
    for _ in range(args.rounds):
        rounds["torch FP32"].append(torch_steps(net, x, y, args.steps, dev, False))
        rounds["torch autocast"].append(torch_steps(net, x, y, args.steps, dev, True))
        f, a = ampc_compare(args.ampc, train, inputs, args.steps, backend)
        rounds["ampc FP32"].append(f)
        rounds["ampc AMP"].append(a)
    med = {k: statistics.median(v) for k, v in rounds.items()}
    print(f"\n{name} ({'small' if args.small else 'full'}, {dev}): first loss PyTorch {want:.6g}, ampc {got:.6g}")
    print(f"  {'':16s} {'median ms/step':>15s} {'vs torch FP32':>14s}")
    for k, v in med.items():
        print(f"  {k:16s} {v:15.3f} {med['torch FP32'] / v:13.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
    ap.add_argument("--models", default="mlp,resnet50,gpt2")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--keep", help="keep the exports and training graphs in this folder")
    args = ap.parse_args()
    tmp = args.keep or tempfile.mkdtemp(prefix="bench_vs_torch_")
    os.makedirs(tmp, exist_ok=True)
    try:
        print(f"torch {torch.__version__}, device {args.device}"
              + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""))
        for name in args.models.split(","):
            one_model(name, args, tmp)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
