#!/usr/bin/env python3
"""How ampc's conversion time grows with the graph: for each size N (default 1k, 10k,
100k, 1M nodes) a synthetic graph from tools/gen_graph.py, converted R times by
`ampc IN -o OUT -q --time` as a whole process (start-up included); prints the median wall
time and CPU time (user + system) per run and per node, and the spread of each per node
across the sizes (max / min). On a shared machine the CPU time is the steadier figure: the
wall time also counts the time the process waited for a CPU. Beside them, "in process":
the total that --time reports (load to save, the process's start and exit left out; wall,
and the main thread's CPU), per node, with its own spread: the conversion's own scaling,
without the millisecond or so of exec and exit that weighs on the smallest graph.

Each run writes a new OUT (removed before it): what a conversion into a fresh file costs.
--replace keeps OUT, so every run but the first replaces it (and ampc syncs it to disk
first). A benchmark, not a test: quote its numbers with the machine it ran on.

--train times training graphs (tools/gen_train_graph.py: forward, loss, backward, the
loss-scaling pass's work included) instead of gen_graph.py's inference chains.

usage: bench_scaling.py [--ampc PATH] [--sizes N,N,...] [--runs R] [--dir DIR] [--replace] [--train]
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOTAL_RE = re.compile(r"^ampc: time: total\s+([0-9.]+) ms\s+\(cpu\s+([0-9.]+) ms\)", re.M)

try:
    import onnx
except ImportError:
    sys.exit("bench_scaling.py needs the onnx package (pip install onnx)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ampc", default=os.path.join(ROOT, "build", "ampc"))
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--runs", type=int, default=0, help="runs per size (default: 21 at 1k down to 3 at 1M)")
    ap.add_argument("--dir", default=None, help="where graphs and outputs go (default: a temporary folder)")
    ap.add_argument("--replace", action="store_true", help="let each run replace the last one's output")
    ap.add_argument("--train", action="store_true", help="training graphs (tools/gen_train_graph.py)")
    a = ap.parse_args()
    d = a.dir or tempfile.mkdtemp(prefix="bench_scaling_")
    os.makedirs(d, exist_ok=True)
    per_node, cpu_per_node, in_per_node, in_cpu_per_node = [], [], [], []
    print(f"# {a.ampc}, {os.cpu_count()} CPUs, {'training' if a.train else 'inference'} graphs, output "
          f"{'replaced' if a.replace else 'new'} each run, in {d}")
    for n in (int(x) for x in a.sizes.split(",")):
        kind = "t" if a.train else "g"
        src = os.path.join(d, f"{kind}{n}.onnx")
        out = os.path.join(d, f"{kind}{n}_amp.onnx")
        gen = "gen_train_graph.py" if a.train else "gen_graph.py"
        if not os.path.exists(src):
            subprocess.run([sys.executable, os.path.join(ROOT, "tools", gen), str(n), src],
                           check=True, capture_output=True)
        nodes = len(onnx.load(src, load_external_data=False).graph.node)
        runs = a.runs or max(3, min(21, 21_000 // max(n // 100, 1)))
        ts, cpus, ins, in_cpus = [], [], [], []
        for _ in range(runs):
            if not a.replace and os.path.exists(out):
                os.remove(out)
            os.sync()
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            p = subprocess.run([a.ampc, src, "-o", out, "-q", "--time"], check=True,
                               stderr=subprocess.PIPE, text=True)
            ts.append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
            m = TOTAL_RE.search(p.stderr)
            if not m:
                sys.exit(f"bench_scaling.py: {a.ampc} printed no 'ampc: time: total' line")
            ins.append(float(m.group(1)) / 1e3)
            in_cpus.append(float(m.group(2)) / 1e3)
        med, cpu = statistics.median(ts), statistics.median(cpus)
        imed, icpu = statistics.median(ins), statistics.median(in_cpus)
        per_node.append(med / nodes)
        cpu_per_node.append(cpu / nodes)
        in_per_node.append(imed / nodes)
        in_cpu_per_node.append(icpu / nodes)
        print(f"{nodes:>9} nodes: {med * 1e3:9.2f} ms median of {runs} (min {min(ts) * 1e3:.2f}), "
              f"{med / nodes * 1e6:.2f} us/node; CPU {cpu * 1e3:.2f} ms, {cpu / nodes * 1e6:.2f} us/node | "
              f"in process {imed * 1e3:.2f} ms, {imed / nodes * 1e6:.2f} us/node; "
              f"CPU {icpu / nodes * 1e6:.2f} us/node", flush=True)

    def spread(xs):
        return max(xs) / min(xs)
    print(f"# time per node, max / min over the sizes: wall {spread(per_node):.2f}x, "
          f"CPU {spread(cpu_per_node):.2f}x | in process: wall {spread(in_per_node):.2f}x, "
          f"CPU {spread(in_cpu_per_node):.2f}x")


if __name__ == "__main__":
    main()
