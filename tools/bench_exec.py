#!/usr/bin/env python3
"""The executor's speed, two or more ampc binaries compared, interleaved.

Each SPEC is NAME=AMPC[,VAR=VALUE...] (an ampc binary and environment variables, as in
bench_ab.py). For each workload the specs take turns (A B A B ...), R rounds, each round
one `ampc bench` process of --iters timed runs; the script prints, per workload and spec,
the median over rounds of bench's median time per run, and each spec's ratio to the
first:
- mlp_train: models/mlp_train, a training step (--train): forward, backward, Momentum;
- resnet: tools/bench_vs_ort.py's ResNet-style stack of basic blocks (1x64x56x56, four
  blocks: convolutions and BatchNorm, the CPU's compute-bound case), inference;
- cheap: a chain of N cheap nodes (Add, Relu, Mul, Neg in turn) on a [1,8] tensor, whose
  time is all per-node dispatch: time per run / N is the executor's overhead per node.
Runs with --backend cpu unless a spec sets AMP_BACKEND... (the spec's environment wins
only where bench is given no --backend: pass --backend '' to leave it out).

A benchmark, not a test: quote its ratios, from one run, with the machine it ran on.

usage: bench_exec.py SPEC SPEC [...] [--rounds R] [--cheap-nodes N] [--only W,...]
  e.g. bench_exec.py old=/work/base/build/ampc new=build/ampc
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

MEDIAN_RE = re.compile(r"median ([0-9.]+) ms")


def parse_spec(text):
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        sys.exit(f"bench_exec.py: spec '{text}' is not NAME=AMPC[,VAR=VALUE...]")
    parts = rest.split(",")
    env = dict(os.environ)
    for kv in parts[1:]:
        var, sep, val = kv.partition("=")
        if not sep:
            sys.exit(f"bench_exec.py: '{kv}' in spec '{text}' is not VAR=VALUE")
        env[var] = val
    return name, parts[0], env


def make_cheap(path, n):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    ops = ["Add", "Relu", "Mul", "Neg"]
    nodes, x = [], "x"
    one = numpy_helper.from_array(np.full([1, 8], 1.0001, np.float32), "c")
    for i in range(n):
        op = ops[i % len(ops)]
        ins = [x, "c"] if op in ("Add", "Mul") else [x]
        nodes.append(helper.make_node(op, ins, [f"v{i}"], name=f"n{i}"))
        x = f"v{i}"
    g = helper.make_graph(nodes, "cheap", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 8])], [one])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def bench_once(ampc, env, model, extra, iters, backend):
    cmd = [ampc, "bench", model, "--iters", str(iters), "--warmup", "5"] + extra
    if backend:
        cmd += ["--backend", backend]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    m = MEDIAN_RE.search(r.stdout)
    if r.returncode or not m:
        sys.exit(f"bench_exec.py: {' '.join(cmd)} failed: {r.stdout}{r.stderr}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--cheap-nodes", type=int, default=2000)
    ap.add_argument("--only", default="mlp_train,resnet,cheap")
    ap.add_argument("--backend", default="cpu")
    a = ap.parse_args()
    specs = [parse_spec(s) for s in a.specs]
    if len(specs) < 2 or a.rounds < 1:
        sys.exit("bench_exec.py: give two specs or more, and --rounds of 1 or more")
    with tempfile.TemporaryDirectory() as tmp:
        work = []
        only = a.only.split(",")
        if "mlp_train" in only:
            d = os.path.join(ROOT, "models", "mlp_train")
            work.append(("mlp_train", os.path.join(d, "model.onnx"),
                         ["--train", "--inputs", os.path.join(d, "test_data_set_0")], 200, 1))
        if "resnet" in only:
            import bench_vs_ort
            d = os.path.join(tmp, "resnet")
            os.makedirs(d)
            bench_vs_ort.make_resnet(d)
            work.append(("resnet", os.path.join(d, "model.onnx"),
                         ["--inputs", os.path.join(d, "test_data_set_0")], 5, 1))
        if "cheap" in only:
            p = os.path.join(tmp, "cheap.onnx")
            make_cheap(p, a.cheap_nodes)
            work.append((f"cheap{a.cheap_nodes}", p, [], 50, a.cheap_nodes))
        print(f"{'workload':<12} " + " ".join(f"{n:>14}" for n, _, _ in specs) + "   ratios to " + specs[0][0])
        for name, model, extra, iters, n_nodes in work:
            times = {s[0]: [] for s in specs}
            for _ in range(a.rounds):
                for sname, ampc, env in specs:
                    times[sname].append(bench_once(ampc, env, model, extra, iters, a.backend))
            med = {k: statistics.median(v) for k, v in times.items()}
            base = med[specs[0][0]]
            cols = " ".join(f"{med[s[0]]:>11.4f} ms" for s in specs)
            ratios = " ".join(f"{med[s[0]] / base:.3f}" for s in specs[1:])
            print(f"{name:<12} {cols}   {ratios}")
            if n_nodes > 1:
                per = " ".join(f"{med[s[0]] * 1000 / n_nodes:.3f}" for s in specs)
                print(f"{'':<12} per node (us): {per}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
