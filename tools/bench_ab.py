#!/usr/bin/env python3
"""Two or more ways of running ampc, compared on one model, interleaved.

Each SPEC is NAME=AMPC[,VAR=VALUE...]: an ampc binary and environment variables to run it
with (AMP_THREADS=1, say). The specs take turns (A B C A B C ...), R rounds, so that a
shared machine's slow minutes fall on all of them alike; each run is
`AMPC MODEL -o OUT -q --time` into a new OUT (removed before it). For each spec it prints
the median and the minimum of the whole process's wall time and of every line --time
prints (each phase's wall and the main thread's CPU time), then each spec's medians as a
ratio of the first spec's.

On a shared machine the median says what a user waits for; the minimum is the steadier
estimate of what the code itself costs (a run no other work interfered with). A
benchmark, not a test: quote its numbers with the machine it ran on.

usage: bench_ab.py MODEL SPEC SPEC [SPEC ...] [--runs R]
  e.g. bench_ab.py /tmp/g10k.onnx one=build-release/ampc,AMP_THREADS=1 all=build-release/ampc
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

TIME_RE = re.compile(r"^ampc: time: (.+?)\s+([0-9.]+) ms\s+\(cpu\s+([0-9.]+) ms\)\s*$", re.M)


def parse_spec(text):
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        sys.exit(f"bench_ab.py: spec '{text}' is not NAME=AMPC[,VAR=VALUE...]")
    parts = rest.split(",")
    env = {}
    for kv in parts[1:]:
        var, sep, val = kv.partition("=")
        if not sep or not var:
            sys.exit(f"bench_ab.py: '{kv}' in spec '{text}' is not VAR=VALUE")
        env[var] = val
    if not os.access(parts[0], os.X_OK):
        sys.exit(f"bench_ab.py: {parts[0]} (spec '{name}') is not an executable")
    return name, parts[0], env


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("specs", nargs="+", metavar="SPEC")
    ap.add_argument("--runs", type=int, default=21, help="rounds (default 21)")
    a = ap.parse_args()
    if len(a.specs) < 2:
        sys.exit("bench_ab.py: give two specs or more")
    if a.runs < 1:
        sys.exit("bench_ab.py: --runs must be at least 1")
    specs = [parse_spec(s) for s in a.specs]
    names = [s[0] for s in specs]
    if len(set(names)) != len(names):
        sys.exit("bench_ab.py: two specs have the same name")

    # samples[name][line] = [(wall, cpu), ...]; line "process" is the whole process's wall.
    samples = {n: {} for n in names}
    order = {}  # the --time lines in the order ampc prints them
    with tempfile.TemporaryDirectory(prefix="ampc_ab_") as tmp:
        out = os.path.join(tmp, "out.onnx")
        for _ in range(a.runs):
            for name, ampc, env in specs:
                if os.path.exists(out):
                    os.remove(out)
                t0 = time.perf_counter()
                p = subprocess.run([ampc, a.model, "-o", out, "-q", "--time"],
                                   env={**os.environ, **env}, stderr=subprocess.PIPE, text=True)
                wall = (time.perf_counter() - t0) * 1e3
                if p.returncode != 0:
                    sys.exit(f"bench_ab.py: {name}: ampc exited {p.returncode}:\n{p.stderr}")
                samples[name].setdefault("process", []).append((wall, None))
                for m in TIME_RE.finditer(p.stderr):
                    order.setdefault(m.group(1), len(order))
                    samples[name].setdefault(m.group(1), []).append((float(m.group(2)), float(m.group(3))))

    lines = ["process"] + sorted(order, key=order.get)
    print(f"# {a.model}, {a.runs} rounds, {os.cpu_count()} CPUs; ms: median (min) wall / CPU of the main thread")
    width = max(len(l) for l in lines)
    print(f"{'':{width}}  " + "  ".join(f"{n:>26}" for n in names))
    for line in lines:
        cells = []
        for n in names:
            xs = samples[n].get(line, [])
            if not xs:
                cells.append(f"{'-':>26}")
                continue
            w = [x[0] for x in xs]
            cell = f"{statistics.median(w):.2f} ({min(w):.2f})"
            if xs[0][1] is not None:
                cell += f" / {statistics.median([x[1] for x in xs]):.2f}"
            cells.append(f"{cell:>26}")
        print(f"{line:{width}}  " + "  ".join(cells))
    base = names[0]
    for line in ("process", "total"):
        if line not in samples[base]:
            continue
        b = statistics.median(x[0] for x in samples[base][line])
        ratios = ", ".join(f"{n} {statistics.median(x[0] for x in samples[n][line]) / b:.3f}"
                           for n in names[1:] if line in samples[n])
        print(f"# {line} wall, median / {base}'s: {ratios}")


if __name__ == "__main__":
    main()
