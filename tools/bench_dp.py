#!/usr/bin/env python3
"""The data-parallel benchmark of issue 41 (a benchmark, not a test; docs/parallel.md,
"Measured"): samples per second of `mpirun -np 2 --bind-to core ampc bench --train` (each rank
1 thread, its own batch of 256) against one process (1 thread, batch 256), on the MLP training
step: Linear 1024 x 3 with ReLU between, MSE, SGD (`ampc grad --loss mse --optimizer sgd`; the
forward made here with onnx's helper, no torch). The two take turns, round by round, and for
every AMPC given (an old and a new build, say) in the same rounds.

Prints per round and AMPC: the median step of one rank, of two ranks, their samples/s ratio
(2 x one / two), and what the two-rank run says of its all-reduce; then the median ratio.

Needs Open MPI (mpirun) and libampc_mpi.so beside each ampc; numpy and onnx.

usage: bench_dp.py AMPC [AMPC...] [--rounds 6] [--iters 50]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def make_model(ampc, tmp, width=1024, batch=256):
    """The MLP's training graph and each rank's inputs (rank0 also the one process's)."""
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "x"
    for i in range(3):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits += [nh.from_array(w, f"W{i}"), nh.from_array(np.zeros(width, np.float32), f"b{i}")]
        y = "out" if i == 2 else f"h{i}"
        nodes.append(h.make_node("Gemm", [x, f"W{i}", f"b{i}"], [y if i == 2 else f"z{i}"]))
        if i < 2:
            nodes.append(h.make_node("Relu", [f"z{i}"], [y]))
        x = y
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, [batch, width])],
                     [h.make_tensor_value_info("out", T.FLOAT, [batch, width])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    fwd, train = os.path.join(tmp, "mlp.onnx"), os.path.join(tmp, "mlp_train.onnx")
    onnx.save(m, fwd)
    subprocess.run([ampc, "grad", fwd, "-o", train, "--loss", "mse", "--optimizer", "sgd", "-q"], check=True)
    names = [i.name for i in onnx.load(train).graph.input]
    for r in range(2):
        d = os.path.join(tmp, "in", f"rank{r}")
        os.makedirs(d)
        for k, n in enumerate(names):
            t = nh.from_array(rng.standard_normal((batch, width)).astype(np.float32), n)
            with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
                f.write(t.SerializeToString())
    return train, os.path.join(tmp, "in")


def median_ms(out):
    m = re.search(r"median ([\d.]+) ms", out)
    if not m:
        sys.exit(f"bench_dp: no median in:\n{out}")
    return float(m.group(1))


def run(ampc, train, inputs, iters):
    bench = ["bench", train, "--train", "--threads", "1", "--iters", str(iters), "--warmup", "3"]
    one = subprocess.run([ampc, *bench, "--inputs", os.path.join(inputs, "rank0")], capture_output=True,
                         text=True, env=ENV, check=True).stdout
    two = subprocess.run(["mpirun", "-np", "2", "--bind-to", "core", ampc, *bench, "--inputs-per-rank", inputs],
                         capture_output=True, text=True, env=ENV, check=True).stdout
    dp = re.search(r"^data parallel: .*$", two, re.M)
    return median_ms(one), median_ms(two), dp.group(0) if dp else "(no data-parallel line)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ampc", nargs="+")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--iters", type=int, default=50)
    a = ap.parse_args()
    ampcs = [os.path.abspath(x) for x in a.ampc]
    with tempfile.TemporaryDirectory(prefix="ampc_bench_dp_") as tmp:
        train, inputs = make_model(ampcs[0], tmp)
        ratios = {x: [] for x in ampcs}
        for r in range(a.rounds):
            for x in ampcs:
                one, two, dp = run(x, train, inputs, a.iters)
                ratios[x].append(2 * one / two)
                print(f"round {r + 1} {x}: 1 rank {one:.2f} ms, 2 ranks {two:.2f} ms, "
                      f"samples/s {2 * one / two:.3f}x | {dp}", flush=True)
        for x in ampcs:
            print(f"{x}: samples/s, 2 ranks over 1: median {statistics.median(ratios[x]):.3f}x "
                  f"(rounds: {' '.join(f'{v:.2f}' for v in ratios[x])})")


if __name__ == "__main__":
    main()
