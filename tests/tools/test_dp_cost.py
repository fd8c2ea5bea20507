#!/usr/bin/env python3
"""tools/dp_cost.py, the data-parallel cost model of docs/parallel.md, against hand-computed
cases:

- the ring factor 2(N-1)/N: 0 for one rank, 1 for two (S/B), 1.75 for eight;
- the all-reduce time: 1 GB over 100 GB/s is 10 ms on 2 ranks and 17.5 ms on 8, plus calls x
  latency; two levels (2 hosts x 8): 1.75 S/B_intra + 1 x (S/8)/B_inter;
- no overlap fwd + bwd + opt + comm, ideal overlap fwd + max(bwd, comm) + opt, the default
  split (backward = 2 x forward), strong scaling (fwd and bwd / N, optimizer not);
- the printed table of one configuration, and where comm meets compute;
- gradient counting from a file without the onnx package: `ampc grad` on
  models/gpt_decoder (28,032 parameters: 112,128 bytes in 2 calls of up to 32 gradients),
  the same after `--passes allreduce` (its AllReduceMean nodes), and after AMP conversion
  with loss scaling (the nodes reduce X_grad_scaled).
Prints "N passed, M failed" last (tests/ampc_testlib.py).

usage: test_dp_cost.py --ampc PATH [--testdata DIR] [--verbose]
"""
import contextlib
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import ampc_testlib as tl  # noqa: E402
import dp_cost as dc  # noqa: E402


def same(got, want):
    """want, exactly for ints and tuples, to 1e-9 relative for floats."""
    if isinstance(want, float):
        return abs(got - want) <= 1e-9 * max(1.0, abs(want))
    return got == want


def expect(cases):
    """cases: (what, got, want); one AssertionError naming every mismatch."""
    bad = [f"{what}: got {got!r}, want {want!r}" for what, got, want in cases if not same(got, want)]
    assert not bad, "; ".join(bad)


def t_ring(ctx):
    link = (100.0, 0.0)  # 100 GB/s, no latency
    expect([("ring factor N=1", dc.ring_factor(1), 0.0),
            ("ring factor N=2", dc.ring_factor(2), 1.0),
            ("ring factor N=8", dc.ring_factor(8), 1.75),
            ("1 GB, 2 ranks: S/B", dc.comm_ms(1e9, 1, 1, 2, link, link), 10.0),
            ("1 GB, 8 ranks: 1.75 S/B", dc.comm_ms(1e9, 1, 1, 8, link, link), 17.5),
            ("one rank: nothing", dc.comm_ms(1e9, 5, 1, 1, (100.0, 50.0), (100.0, 50.0)), 0.0),
            ("latency: 3 calls x 10 us", dc.comm_ms(1e9, 3, 1, 2, (100.0, 10.0), link), 10.03),
            # 2 hosts x 8: 1.75 x 8 GB / 400 GB/s = 35 ms, then 1 x 1 GB / 50 GB/s = 20 ms, + 2 x 30 us
            ("2 hosts x 8", dc.comm_ms(8e9, 2, 2, 8, (400.0, 10.0), (50.0, 30.0)), 55.06)])


def t_buckets(ctx):
    """The pass's bucket rule (passes/allreduce.c): the first closes at 1 MiB, the rest at 4 MiB,
    each at 32 gradients at most; a gradient that crosses the bound stays in its bucket."""
    MiB = 1 << 20
    expect([("first at 1 MiB, then 4", [len(b) for b in dc.buckets_of([MiB // 2, MiB // 2, 3 * MiB, MiB, 16])], [2, 2, 1]),
            ("one big gradient alone", [len(b) for b in dc.buckets_of([64 * MiB, 4, 4])], [1, 2]),
            ("32 gradients at most", [len(b) for b in dc.buckets_of([4] * 70)], [32, 32, 6]),
            ("none", dc.buckets_of([]), [])])


def t_step(ctx):
    links = {"x": (100.0, 0.0), "nvlink": (100.0, 0.0)}
    weak = dc.rows(1e9, 1, (10.0, 20.0, 0.0), [("x", 1, 2)], links, False)[0]
    strong = dc.rows(1e9, 1, (10.0, 20.0, 3.0), [("x", 1, 2)], links, True)[0]
    expect([("no overlap", dc.step(10, 20, 5, 15)[0], 50),
            ("overlap hides comm under the backward", dc.step(10, 20, 5, 15)[1], 35),
            ("overlap, comm longer than the backward", dc.step(10, 20, 5, 30)[1], 45),
            ("default split: backward 2 x forward", dc.split(30.0, None, 1 / 3, 0.0), (10.0, 20.0, 0.0)),
            ("measured forward, optimizer", dc.split(30.0, 4.0, 1 / 3, 6.0), (4.0, 20.0, 6.0)),
            ("weak: comm", weak["comm"], 10.0),
            ("weak: efficiency without overlap", weak["eff_plain"], 0.75),
            ("weak: efficiency with overlap", weak["eff_overlap"], 1.0),
            ("strong: compute halves, optimizer stays", strong["compute"], 18.0),
            ("strong: overlap", strong["overlap"], 5.0 + 10.0 + 3.0),
            # strong, 1 GB at 100 GB/s: comm(2) = 10 ms < compute 30/2 but >= backward 20/2;
            # comm(4) = 15 ms >= compute 30/4
            ("strong crossover", dc.crossover(1e9, 1, (10.0, 20.0, 0.0), "x", 0, links, True), [4, 2])])


def t_table(ctx):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        dc.main(["--bytes", "1e9", "--step-ms", "30", "--link", "x=100:0", "--config", "x:2"])
    text = out.getvalue()
    missing = [w for w in ("gradients: 1,000,000,000 bytes (float32) in 1 all-reduce call per step",
                           "step 30 ms on one device = forward 10 + backward 20 + optimizer 0 ms",
                           "x:2              2    10.000      40.000  75.0%    30.000 100.0%  0.333",
                           "comm (x) tends to 20.000 ms as N grows") if w not in text]
    assert not missing, f"lines missing: {missing}\n{text}"


def t_count(ctx):
    src = os.path.join(ROOT, "models", "gpt_decoder", "model.onnx")
    tmp = tl.tempdir("dp_cost")
    train, ar, amp, amp_ar = (os.path.join(tmp, f) for f in ("t.onnx", "ar.onnx", "amp.onnx", "amp_ar.onnx"))
    for cmd in (["grad", src, "-o", train, "--optimizer", "adam", "--lr", "0.001", "--freeze", "*mask*"],
                [train, "-o", ar, "--passes", "allreduce"],
                [train, "-o", amp],
                [amp, "-o", amp_ar, "--passes", "allreduce"]):
        r = tl.ampc(ctx.ampc, *cmd, verbose=ctx.verbose)
        assert r.returncode == 0, f"ampc {' '.join(cmd)}: exit {r.returncode}\n{r.stderr}"
    expect([(f"gpt_decoder gradients in {os.path.basename(f)}", dc.count_gradients(f), (112128, 2, 36))
            for f in (train, ar, amp, amp_ar)])


def main():
    ctx = tl.args(__doc__)
    ctx.ampc = os.path.abspath(ctx.ampc)
    sys.exit(tl.run([("ring all-reduce time", t_ring), ("buckets as the pass cuts them", t_buckets), ("step times, overlap, scaling", t_step),
                     ("the printed table", t_table), ("gradients counted from a file", t_count)],
                    ctx, verbose=ctx.verbose))


if __name__ == "__main__":
    main()
