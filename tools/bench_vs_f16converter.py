#!/usr/bin/env python3
"""Side by side: ampc's AMP conversion vs onnxconverter-common's convert_float_to_float16.

For each model, in one run:
- t_occ: onnx.load + onnxconverter_common.float16.convert_float_to_float16(model,
  keep_io_types=True) + onnx.save, timed inside a child Python process (so the Python
  start-up and imports are not counted), median of --runs (3);
- t_ampc: `ampc MODEL -o OUT --time` (default pipeline infer,amp,loss_scale,cast_cleanup):
  the total ampc reports for load + passes + verify + save (the same work occ's number
  covers; the process start-up is left out as Python's is), median of --ampc-runs (11:
  ampc's runs are cheap, and more of them keep one stalled run on a shared host from
  moving the median);
- occ wall / ampc wall: the wall time of each whole process, start-up and imports
  included: what one waits for running each from a shell;
- the two tools' runs are interleaved (occ's spread evenly among ampc's), so that a slow
  minute of a shared machine falls on both alike;
- ratio = t_occ / t_ampc (how many times faster ampc is, conversion alone); ratio of
  minimums = the fastest occ run over the fastest ampc run (the steadier estimate of
  what each costs where other work interferes); ratio wall = occ wall / ampc wall; a
  last line sums each column over the models;
- casts: Cast nodes in each output, main graph and subgraphs;
- rel err: both outputs and the fp32 model run in onnxruntime (CPUExecutionProvider) on
  MODEL_DIR/test_data_set_0/input_K.pb if present, else deterministic random inputs from
  the declared shapes (symbolic/unknown dims = 1); per output max|y - y_fp32| /
  max|y_fp32|, the largest over outputs. "fails to run: ..." when onnxruntime rejects it.

A benchmark, not a test: quote its numbers with the machine it ran on.

usage: bench_vs_f16converter.py MODEL.onnx [MODEL.onnx ...] [--ampc PATH]
                                [--synthetic N [--synthetic N ...]] [--runs R]
                                [--ampc-runs R] [--occ-timeout S] [--no-ort]
                                [--ort-max-nodes N]
--synthetic N writes an N-node MatMul/Add/Relu/Softmax/Mul/ReduceSum chain with
tools/gen_graph.py into a temporary folder and includes it. --no-ort skips the accuracy
check (onnxruntime runs of the three models); it is also skipped on models of more than
--ort-max-nodes nodes (20000), which onnxruntime takes minutes to open.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    import onnxconverter_common  # noqa: F401
except ImportError as e:
    sys.exit(f"bench_vs_f16converter.py needs numpy, onnx, onnxruntime and "
             f"onnxconverter-common: {e}")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

OCC_CHILD = r"""
import sys, time, onnx
from onnxconverter_common import float16
src, dst = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
m = onnx.load(src)
m = float16.convert_float_to_float16(m, keep_io_types=True)
onnx.save(m, dst)
print(time.perf_counter() - t0)
"""


def walk_nodes(graph):
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from walk_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from walk_nodes(g)


def count(path):
    m = onnx.load(path, load_external_data=False)
    nodes = list(walk_nodes(m.graph))
    return len(nodes), sum(1 for n in nodes if n.op_type == "Cast")


def fresh(dst):
    """Each run writes a new file (ampc syncs one that replaces a file; onnx.save never
    syncs) and starts with nothing dirty on disk: on ext4 (data=ordered) a sync also
    writes back whatever the run before left dirty."""
    if os.path.exists(dst):
        os.remove(dst)
    os.sync()


def run_occ(src, dst, timeout):
    """One run: (in-process time, wall time of the Python process), or raises RunError."""
    fresh(dst)
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", OCC_CHILD, src, dst],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RunError(f"over {timeout}s")
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RunError((p.stderr.strip().splitlines() or ["?"])[-1][:120])
    return float(p.stdout.strip().splitlines()[-1]), wall


TOTAL_RE = re.compile(r"^ampc: time: total\s+([0-9.]+) ms", re.M)


def run_ampc(ampc, src, dst):
    """One run: (in-process total, wall time of the subprocess), or raises RunError."""
    fresh(dst)
    t0 = time.perf_counter()
    p = subprocess.run([ampc, src, "-o", dst, "--time"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RunError((p.stderr.strip().splitlines() or ["?"])[-1][:120])
    m = TOTAL_RE.search(p.stderr)
    if not m:
        raise RunError("ampc printed no 'ampc: time: total' line")
    return float(m.group(1)) / 1e3, wall


class RunError(Exception):
    pass


def time_both(args, src, occ_out, ampc_out):
    """Both tools on one model, their runs interleaved: occ's run j goes before ampc's run
    j * ampc_runs // runs (with 3 and 11: before ampc's 1st, 4th and 8th), so that a slow
    minute of a shared machine falls on both alike. Returns, for occ and for ampc,
    (runs, error): runs a list of (in-process, wall) pairs; error None, or why the tool
    failed (its runs then count for nothing: it made no output)."""
    before = [0] * args.ampc_runs
    for j in range(args.runs):
        before[j * args.ampc_runs // args.runs] += 1
    occ, ampc = [[], None], [[], None]
    for i in range(args.ampc_runs):
        for _ in range(before[i]):
            if occ[1] is None:
                try:
                    occ[0].append(run_occ(src, occ_out, args.occ_timeout))
                except RunError as e:
                    occ = [[], str(e)]
        if ampc[1] is None:
            try:
                ampc[0].append(run_ampc(args.ampc, src, ampc_out))
            except RunError as e:
                ampc = [[], str(e)]
    return occ, ampc


def summary(runs):
    """(median in-process, minimum in-process, median wall) of a tool's runs, or Nones."""
    if not runs:
        return None, None, None
    return (statistics.median(r[0] for r in runs), min(r[0] for r in runs),
            statistics.median(r[1] for r in runs))


NP_OF_ORT = {
    "tensor(float)": np.float32, "tensor(double)": np.float64,
    "tensor(float16)": np.float16, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8,
}


def ort_session(path):
    """A CPU session with onnxruntime's default graph optimizations: without them its CPU
    provider runs a float16 node behind casts that round trip to float32 and cancel out,
    and a converted model then agrees with the fp32 one exactly, hiding fp16's rounding."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def make_inputs(sess, model_path):
    ins = sess.get_inputs()
    tds = os.path.join(os.path.dirname(model_path), "test_data_set_0")
    feeds = {}
    if os.path.isdir(tds):
        for k, i in enumerate(ins):
            f = os.path.join(tds, f"input_{k}.pb")
            t = onnx.TensorProto()
            with open(f, "rb") as fh:
                t.ParseFromString(fh.read())
            feeds[i.name] = numpy_helper.to_array(t)
        return feeds, "test_data_set_0"
    rng = np.random.RandomState(0)
    for i in ins:
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        dt = NP_OF_ORT.get(i.type, np.float32)
        if np.issubdtype(dt, np.floating):
            feeds[i.name] = rng.standard_normal(shape).astype(dt)
        elif dt == np.bool_:
            feeds[i.name] = rng.rand(*shape) > 0.5
        else:
            feeds[i.name] = rng.randint(0, 2, size=shape).astype(dt)
    return feeds, "random"


def ort_reason(ex):
    """The useful tail of an onnxruntime error: after the last 'FAIL : ' / 'failed:'."""
    msg = " ".join(str(ex).split())
    for key in ("FAIL : ", "failed:"):
        if key in msg:
            msg = msg.rsplit(key, 1)[1]
    return msg.strip()[:160]


def run_ort(path, feeds):
    return ort_session(path).run(None, feeds)


def rel_err(ys, refs):
    worst = 0.0
    for y, r in zip(ys, refs):
        y = np.asarray(y, dtype=np.float64)
        r = np.asarray(r, dtype=np.float64)
        if y.shape != r.shape:
            return f"shape {y.shape} != {r.shape}"
        if r.size == 0:
            continue
        d = np.nanmax(np.abs(y - r)) if np.isfinite(y).all() else np.inf
        scale = np.max(np.abs(r))
        worst = max(worst, d / scale if scale > 0 else d)
    return f"{worst:.2e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*")
    ap.add_argument("--ampc", default=os.path.join(ROOT, "build", "ampc"))
    ap.add_argument("--synthetic", type=int, action="append", default=[])
    ap.add_argument("--runs", type=int, default=3, help="onnxconverter-common runs per model")
    ap.add_argument("--ampc-runs", type=int, default=11, help="ampc runs per model")
    ap.add_argument("--occ-timeout", type=float, default=300.0,
                    help="seconds per onnxconverter-common run before giving up")
    ap.add_argument("--no-ort", action="store_true", help="skip the accuracy check")
    ap.add_argument("--ort-max-nodes", type=int, default=20000,
                    help="skip the accuracy check on models with more nodes (onnxruntime "
                         "takes minutes to open a 100k-node graph); default 20000")
    args = ap.parse_args()
    if args.runs < 1 or args.ampc_runs < 1:
        sys.exit("bench_vs_f16converter.py: --runs and --ampc-runs must be at least 1")
    ort.set_default_logger_severity(3)

    tmp = tempfile.mkdtemp(prefix="bench_f16_")
    models = [(m, m) for m in args.models]
    for n in args.synthetic:
        d = os.path.join(tmp, f"synthetic_{n}")
        os.makedirs(d)
        p = os.path.join(d, "model.onnx")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_graph.py"),
                        str(n), p], check=True, capture_output=True)
        models.append((f"synthetic {n}", p))

    hdr = ["model", "nodes", "t_occ ms", "t_ampc ms", "ratio", "ratio of minimums",
           "occ wall ms", "ampc wall ms", "ratio wall", "casts occ", "casts ampc",
           "rel err occ", "rel err ampc"]
    # over the models both ran: t_occ, t_ampc, occ wall, ampc wall (medians), and the
    # minimums of t_occ and t_ampc
    sums = [0.0] * 6
    print(f"# onnxconverter-common {onnxconverter_common.__version__}, onnx "
          f"{onnx.__version__}, onnxruntime {ort.__version__}, {os.cpu_count()} CPUs, "
          f"median of {args.runs} runs (occ) and {args.ampc_runs} (ampc), interleaved",
          flush=True)
    print(" | ".join(hdr), flush=True)
    for k, (label, src) in enumerate(models):
        occ_out = os.path.join(tmp, f"m{k}_occ.onnx")
        ampc_out = os.path.join(tmp, f"m{k}_ampc.onnx")
        nodes, _ = count(src)
        (occ_runs, e_occ), (ampc_runs, e_ampc) = time_both(args, src, occ_out, ampc_out)
        t_occ, m_occ, o_wall = summary(occ_runs)
        t_ampc, m_ampc, t_wall = summary(ampc_runs)
        both = t_occ and t_ampc
        ratio = f"{t_occ / t_ampc:.1f}x" if both else "-"
        ratio_min = f"{m_occ / m_ampc:.1f}x" if both else "-"
        ratio_wall = f"{o_wall / t_wall:.1f}x" if both else "-"
        if both:
            for i, v in enumerate((t_occ, t_ampc, o_wall, t_wall, m_occ, m_ampc)):
                sums[i] += v
        c_occ = count(occ_out)[1] if t_occ else "-"
        c_ampc = count(ampc_out)[1] if t_ampc else "-"
        r_occ = r_ampc = "-"
        if not args.no_ort and nodes > args.ort_max_nodes:
            r_occ = r_ampc = f"not run: {nodes} nodes > --ort-max-nodes {args.ort_max_nodes}"
        elif not args.no_ort:
            try:
                sess = ort_session(src)
                feeds, _ = make_inputs(sess, src)
                ref = sess.run(None, feeds)
            except Exception as ex:  # noqa: BLE001
                r_occ = r_ampc = f"fp32 fails to run: {ort_reason(ex)}"
                ref = None
            if ref is not None:
                res = []
                for ok, out in ((t_occ, occ_out), (t_ampc, ampc_out)):
                    if not ok:
                        res.append("-")
                        continue
                    try:
                        res.append(rel_err(run_ort(out, feeds), ref))
                    except Exception as ex:  # noqa: BLE001
                        res.append(f"fails to run: {ort_reason(ex)}")
                r_occ, r_ampc = res
        row = [label, str(nodes),
               f"{t_occ * 1e3:.1f}" if t_occ else f"failed: {e_occ}",
               f"{t_ampc * 1e3:.2f}" if t_ampc else f"failed: {e_ampc}",
               ratio, ratio_min, f"{o_wall * 1e3:.1f}" if o_wall else "-",
               f"{t_wall * 1e3:.1f}" if t_wall else "-", ratio_wall,
               str(c_occ), str(c_ampc), r_occ, r_ampc]
        print(" | ".join(row), flush=True)
    if sums[1]:
        print(f"# all models together: t_occ {sums[0] * 1e3:.1f} ms / t_ampc {sums[1] * 1e3:.2f} ms = "
              f"{sums[0] / sums[1]:.1f}x; minimums {sums[4] / sums[5]:.1f}x; wall "
              f"{sums[2] * 1e3:.1f} ms / {sums[3] * 1e3:.1f} ms = {sums[2] / sums[3]:.1f}x")
    print(f"# outputs kept in {tmp}")


if __name__ == "__main__":
    main()
