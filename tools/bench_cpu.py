#!/usr/bin/env python3
"""The CPU benchmark of issue 38 (a benchmark, not a test): in one run, interleaved
rounds, on the same inputs, ampc FP32 and bf16 AMP against onnxruntime CPU FP32, PyTorch
eager FP32 and torch.autocast("cpu", torch.bfloat16):

- inference: torchvision ResNet-50 (1x3x224x224) and a BERT-base encoder (12 layers,
  d 768, 12 heads; 1x128 tokens), exported to ONNX (opset 17);
- training steps: a 3-layer MLP (Linear 1024 x 3, ReLU between, batch 256, MSE, SGD) and
  ResNet-18 (2x3x64x64, 10 classes, cross-entropy, SGD, BatchNorm on batch statistics),
  ampc's by `ampc grad` of the exported model (onnxruntime has no column there);

at 1 thread and at every thread count given (`--threads 1,2`: ampc's --threads, ORT's
intra-op threads, torch.set_num_threads). Before any timing, outputs are compared:
inference outputs of ampc FP32, onnxruntime and PyTorch against each other (largest
|difference| over the largest |reference|, at most --tol), and the first training
step's loss of ampc against PyTorch's (relative, at most --tol). ampc's FP32 and AMP
columns are `ampc bench --compare` (AMP_PRECISION=bf16), which interleaves the two itself.

Prints a Markdown table (median ms of each round's median, then the median over rounds)
with the machine, its CPU flags, the date and the versions.

Needs torch, torchvision, transformers, onnx, onnxruntime: run it with a Python that has
them (e.g. /work/.venv-torch/bin/python tools/bench_cpu.py ...).

usage: bench_cpu.py --ampc build/ampc [--threads 1,2] [--rounds R] [--iters N]
                    [--models resnet50,bert,mlp,resnet18] [--tol 2e-3] [--keep DIR]
"""
import argparse
import datetime
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import bench_vs_torch as bt  # noqa: E402  (export, write_inputs, loss_of, the ResNet-18 recipe, LR)
from bench_vs_ort import cpu_name  # noqa: E402


# ---- the models ---------------------------------------------------------------------------

class Bert(torch.nn.Module):
    """transformers' BertModel (base: 12 layers, d 768, 12 heads), last hidden state."""

    def __init__(self):
        super().__init__()
        from transformers import BertConfig, BertModel
        cfg = BertConfig(hidden_dropout_prob=0, attention_probs_dropout_prob=0)
        self.m = BertModel(cfg, add_pooling_layer=False)

    def forward(self, ids):
        return self.m(input_ids=ids).last_hidden_state


def infer_model(name):
    """(net, inputs as a tuple, input names)."""
    torch.manual_seed(0)
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50().eval(), (torch.randn(1, 3, 224, 224),), ["x"]
    net = Bert().eval()
    return net, (torch.randint(0, 30522, (1, 128)),), ["ids"]


def mlp():
    torch.manual_seed(0)
    w = 1024
    net = torch.nn.Sequential(torch.nn.Linear(w, w), torch.nn.ReLU(), torch.nn.Linear(w, w), torch.nn.ReLU(),
                              torch.nn.Linear(w, w))
    return net, torch.randn(256, w), torch.randn(256, w)


# ---- helpers ------------------------------------------------------------------------------

def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout


def ampc_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMP_")}
    for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS"):
        env.pop(v, None)  # --threads sets them all
    env.update(extra)
    return env


def ampc_compare(ampc, model, inputs, iters, threads, train):
    """(FP32, AMP) medians in ms of `ampc bench --compare` (bf16 AMP), interleaved by ampc."""
    cmd = [ampc, "bench", model, "--compare", "--iters", str(iters), "--warmup", "1", "--inputs", inputs,
           "--backend", "cpu", "--threads", str(threads)] + (["--train"] if train else [])
    out = run(cmd, ampc_env(AMP_PRECISION="bf16"))
    med = {m.group(1): float(m.group(2)) for m in re.finditer(r"^(FP32|AMP)\s+([\d.]+)", out, re.M)}
    if "FP32" not in med or "AMP" not in med:
        sys.exit(f"no FP32/AMP medians in the output of {' '.join(cmd)}:\n{out}")
    return med["FP32"], med["AMP"]


def timed(fn, iters):
    fn()  # warm-up
    ms = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def rel_diff(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


# ---- one model at a time ------------------------------------------------------------------

def infer_case(name, args, tmp):
    net, xs, names = infer_model(name)
    path = os.path.join(tmp, f"{name}.onnx")
    torch.onnx.export(net, xs, path, input_names=names, output_names=["y"], opset_version=17,
                      do_constant_folding=True)
    inputs = os.path.join(tmp, f"{name}_in")
    os.makedirs(inputs, exist_ok=True)
    feeds = {}
    for k, (n, x) in enumerate(zip(names, xs)):
        feeds[n] = x.numpy()
        onnx.save_tensor(nh.from_array(feeds[n], n), os.path.join(inputs, f"input_{k}.pb"))
    # outputs first: ampc FP32, onnxruntime and PyTorch on the same inputs
    out = os.path.join(tmp, f"{name}_out")
    run([args.ampc, "run", path, "--inputs", inputs, "--outputs", out, "--backend", "cpu"], ampc_env())
    got = nh.to_array(onnx.load_tensor(os.path.join(out, "output_0.pb")))
    want = ort_session(path, 1).run(None, feeds)[0]
    with torch.no_grad():
        ref = net(*xs).numpy()
    d_ort, d_torch = rel_diff(got, want), rel_diff(ref, want)
    check = f"ampc vs ORT {d_ort:.1e}, torch vs ORT {d_torch:.1e}"
    if max(d_ort, d_torch) > args.tol:
        sys.exit(f"{name}: outputs differ past {args.tol}: {check}")
    rows = []
    for t in args.threads:
        torch.set_num_threads(t)
        sess = ort_session(path, t)
        r = {k: [] for k in COLS}
        for _ in range(args.rounds):
            f, a = ampc_compare(args.ampc, path, inputs, args.iters, t, False)
            r["ampc FP32"].append(f)
            r["ampc bf16"].append(a)
            r["ORT FP32"].append(timed(lambda: sess.run(None, feeds), args.iters))
            with torch.no_grad():
                r["torch FP32"].append(timed(lambda: net(*xs), args.iters))
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    r["torch bf16"].append(timed(lambda: net(*xs), args.iters))
        rows.append((f"{name} inference", t, r, check))
    return rows


def torch_step(net, x, y, loss_fn, amp):
    opt = torch.optim.SGD(net.parameters(), lr=bt.LR)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(net, x, y)
        loss.backward()
        opt.step()
    return step


def mse(net, x, y):
    return torch.nn.functional.mse_loss(net(x), y)


def train_case(name, args, tmp):
    if name == "mlp":
        net, x, y = mlp()
        loss_fn, loss = mse, "mse"
    else:
        torch.manual_seed(0)
        net, x, y, _ = bt.resnet50(True)  # its small recipe: ResNet-18, 10 classes, 64x64
        x, y = x[:2], y[:2]
        loss_fn, loss = bt.loss_of, "cross-entropy"
    src, train, inputs = (os.path.join(tmp, f"{name}{s}") for s in (".onnx", "_train.onnx", "_in"))
    bt.export(net, x, src)
    extra = ["--train-mode"] if name != "mlp" else []
    run([args.ampc, "grad", src, "-o", train, "--loss", loss, "--optimizer", "sgd", "--lr", str(bt.LR), "-q"] + extra)
    if name == "mlp":  # float targets: write_inputs writes class labels
        m = onnx.load(train, load_external_data=False)
        inits = {i.name for i in m.graph.initializer}
        ins = [i.name for i in m.graph.input if i.name not in inits]
        os.makedirs(inputs, exist_ok=True)
        for k, (n, a) in enumerate(zip(ins[:2], (x.numpy(), y.numpy()))):
            onnx.save_tensor(nh.from_array(a, n), os.path.join(inputs, f"input_{k}.pb"))
    else:
        bt.write_inputs(inputs, train, x, y)
    net.train()
    want = float(loss_fn(net, x, y))
    out = run([args.ampc, "run", train, "--steps", "1", "--inputs", inputs, "--backend", "cpu"], ampc_env())
    got = float(re.search(r"step 1: loss ([\d.eE+-]+)", out).group(1))
    d = abs(got - want) / max(abs(want), 1e-30)
    check = f"first loss ampc {got:.6g}, torch {want:.6g} (rel {d:.1e})"
    if d > args.tol:
        sys.exit(f"{name}: {check}: past {args.tol}")
    rows = []
    for t in args.threads:
        torch.set_num_threads(t)
        r = {k: [] for k in COLS}
        for _ in range(args.rounds):
            f, a = ampc_compare(args.ampc, train, inputs, args.iters, t, True)
            r["ampc FP32"].append(f)
            r["ampc bf16"].append(a)
            r["torch FP32"].append(timed(torch_step(net, x, y, loss_fn, False), args.iters))
            r["torch bf16"].append(timed(torch_step(net, x, y, loss_fn, True), args.iters))
        rows.append((f"{name} training step", t, r, check))
    return rows


COLS = ["ampc FP32", "ampc bf16", "ORT FP32", "torch FP32", "torch bf16"]


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    want = ["avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                            "amx_bf16", "amx_fp16", "amx_int8"]
                    return ", ".join(w for w in want if w in have) or "none of avx2 ... amx"
    except OSError:
        pass
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--threads", default="1", help="comma-separated thread counts (default 1)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--models", default="resnet50,bert,mlp,resnet18")
    ap.add_argument("--tol", type=float, default=2e-3)
    ap.add_argument("--keep", help="keep the models and inputs in this folder")
    args = ap.parse_args()
    args.threads = [int(t) for t in args.threads.split(",")]
    args.ampc = os.path.abspath(args.ampc)
    tmp = args.keep or tempfile.mkdtemp(prefix="bench_cpu_")
    os.makedirs(tmp, exist_ok=True)
    rows = []
    try:
        for name in args.models.split(","):
            if name in ("resnet50", "bert"):
                rows += infer_case(name, args, tmp)
            elif name in ("mlp", "resnet18"):
                rows += train_case(name, args, tmp)
            else:
                sys.exit(f"--models: unknown '{name}' (resnet50, bert, mlp, resnet18)")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    ver = run([args.ampc, "--version"]).strip()
    print(f"\n{datetime.date.today().isoformat()}, {cpu_name()}, {os.cpu_count()} CPUs "
          f"({len(os.sched_getaffinity(0))} usable); CPU flags: {cpu_flags()}")
    print(f"{ver}; onnxruntime {ort.__version__}; torch {torch.__version__}; Python {platform.python_version()}")
    print(f"median ms over {args.rounds} interleaved rounds of {args.iters} timed runs each (1 warm-up); "
          f"ampc bf16: AMP_PRECISION=bf16 `ampc bench --compare`\n")
    print("| case | threads | " + " | ".join(COLS) + " | ampc bf16 speed-up over its FP32 | time: ampc FP32 / ORT "
          "| ampc FP32 / torch FP32 | ampc bf16 / torch bf16 | outputs checked |")
    print("|---|---:|" + "---:|" * (len(COLS) + 4) + "---|")
    for case, t, r, check in rows:
        med = {k: statistics.median(v) if v else None for k, v in r.items()}
        cells = [f"{med[k]:.1f}" if med[k] else "—" for k in COLS]

        def ratio(a, b, inv=False):
            if not med[a] or not med[b]:
                return "—"
            return f"{(med[b] / med[a]) if inv else (med[a] / med[b]):.2f}x"
        print(f"| {case} | {t} | " + " | ".join(cells) +
              f" | {ratio('ampc bf16', 'ampc FP32', True)} | {ratio('ampc FP32', 'ORT FP32')} "
              f"| {ratio('ampc FP32', 'torch FP32')} | {ratio('ampc bf16', 'torch bf16')} | {check} |")


if __name__ == "__main__":
    main()
