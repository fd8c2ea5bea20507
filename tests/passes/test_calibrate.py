#!/usr/bin/env python3
"""Measured ranges (issue 25, first slice): `ampc calibrate`, `--calibration` and
`ampc compare`, on small models planted with what each must find:

- a residual stream that grows with depth (x_{k+1} = 4 x_k + x_k W_k over 8 blocks, then a
  head): its last activations pass float16's range. Converted without calibration the
  output is inf/NaN; with it, the nodes that read or write values past the threshold stay
  float32 (and --explain names the statistic), the early blocks stay 16-bit, and the
  output is finite and close to FP32's; AMP_CALIBRATION does the same for AMP_AUTO;
- a stream that shrinks with depth (x_{k+1} = (x_k W_k) / 16 over 8 blocks): its late
  activations lie below float16's smallest normal, where they round to subnormals and then
  to zero. Uncalibrated, the output is lost; calibrated, the nodes reading or writing
  values below --calib-min-activation stay float32 and the output is close to FP32's;
- a Sub that cancels two nearly equal MatMul outputs, among benign MatMuls: `ampc compare`
  ranks it first by local error (its readers inherit the error but add none), finds that
  error is its inputs' rounding and prints --keep-fp32 for it and the two MatMuls, which
  cut the output's error when applied; the same ranking for onnxconverter-common's
  conversion (when installed);
- a training graph (`ampc grad --loss mse`) whose output is scaled by 1e-8: calibrated at
  loss scale 1 its gradients round to zero in float16, reported with advice; at the
  default 65536 they do not.
Prints "N passed, M failed" last; exit 77 (skip) when onnx or numpy is missing.

usage: test_calibrate.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

D = 16


def save(nodes, inits, ins, outs, path):
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in ins],
                     [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in outs], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def residual(tmp):
    """The model, an input folder, and numpy's x_1..x_8 and output."""
    rng = np.random.default_rng(0)
    nodes, inits, ws = [], [nh.from_array(np.array(4, np.float32), "four")], []
    x = "x"
    for k in range(8):
        w = (rng.standard_normal((D, D)) * 0.05).astype(np.float32)
        ws.append(w)
        inits.append(nh.from_array(w, f"W{k}"))
        nodes += [h.make_node("MatMul", [x, f"W{k}"], [f"m{k}"], name=f"block{k}/matmul"),
                  h.make_node("Mul", [x, "four"], [f"s{k}"], name=f"block{k}/scale"),
                  h.make_node("Add", [f"s{k}", f"m{k}"], [f"x{k + 1}"], name=f"block{k}/add")]
        x = f"x{k + 1}"
    wout = (rng.standard_normal((D, 4)) * 0.05).astype(np.float32)
    inits.append(nh.from_array(wout, "Wout"))
    nodes.append(h.make_node("MatMul", [x, "Wout"], ["y"], name="head"))
    src = os.path.join(tmp, "resid.onnx")
    save(nodes, inits, [("x", [2, D])], [("y", [2, 4])], src)
    xv = rng.uniform(-2, 2, (2, D)).astype(np.float32)
    xv[0, 0] = 2.0
    d = os.path.join(tmp, "resid_in")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(nh.from_array(xv, "x").SerializeToString())
    xs = [xv.astype(np.float64)]
    for w in ws:
        xs.append(xs[-1] * 4 + xs[-1] @ w)
    return src, d, xs, xs[-1] @ wout


def ampc(ctx, *args, env=None, ok=True):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([ctx.ampc, *args], capture_output=True, text=True, env=e)
    if ok:
        assert r.returncode == 0, f"ampc {' '.join(args)}: exit {r.returncode}: {r.stderr}"
    return r


def run_output(ctx, model, inputs, env=None):
    o = os.path.join(ctx.tmp, "out_" + os.path.basename(model))
    ampc(ctx, "run", model, "--inputs", inputs, "--outputs", o, env=env)
    return nh.to_array(onnx.load_tensor(os.path.join(o, "output_0.pb"))).astype(np.float64)


def out_types(path):
    m = onnx.load(path)
    g = m.graph
    types = {v.name: v.type.tensor_type.elem_type for v in list(g.value_info) + list(g.output) + list(g.input)}
    return {n.name: types.get(n.output[0]) for n in g.node}


def stats_lines(path):
    vals, red = {}, {}
    with open(path) as f:
        assert f.readline().strip() == "ampc-calibration 1"
        for line in f:
            p = line.split(None, 6)
            if p[0] in ("value", "grad"):
                vals[p[6].rstrip("\n")] = (p[0], float(p[1]), float(p[2]), float(p[3]), int(p[4]), int(p[5]))
            elif p[0] == "reduce":
                red[line.split(None, 2)[2].rstrip("\n")] = int(p[1])
    return vals, red


def test_residual(ctx):
    src, inp, xs, want = residual(ctx.tmp)
    stats = os.path.join(ctx.tmp, "resid.stats")
    r = ampc(ctx, "calibrate", src, "--inputs", inp, "-o", stats)
    assert "beyond 4096" in r.stdout, r.stdout
    vals, red = stats_lines(stats)
    for k in range(1, 9):
        got = vals[f"x{k}"][1]
        assert abs(got - np.abs(xs[k]).max()) <= 1e-4 * got, f"x{k}: max |x| {got}, numpy {np.abs(xs[k]).max()}"
    assert vals["x8"][1] > 65504 and vals["x4"][1] < 4096, (vals["x8"], vals["x4"])
    assert all(red[f"block{k}/matmul"] == D for k in range(8)), red

    before = os.path.join(ctx.tmp, "resid_amp.onnx")
    after = os.path.join(ctx.tmp, "resid_calib.onnx")
    ampc(ctx, src, "-o", before, "-q")
    r = ampc(ctx, src, "-o", after, "--calibration", stats)
    assert "kept in float32 by measured ranges" in r.stderr, r.stderr
    tb, ta = out_types(before), out_types(after)
    late = ["block6/matmul", "block7/matmul", "block7/add", "head"]
    assert all(tb[n] == T.FLOAT16 for n in late), {n: tb[n] for n in late}
    assert all(ta[n] == T.FLOAT for n in late), {n: ta[n] for n in late}
    early = ["block0/matmul", "block1/matmul", "block2/matmul"]
    assert all(ta[n] == T.FLOAT16 for n in early), {n: ta[n] for n in early}
    yb, ya = run_output(ctx, before, inp), run_output(ctx, after, inp)
    assert not np.all(np.isfinite(yb)), f"the uncalibrated conversion should overflow: {yb}"
    assert np.all(np.isfinite(ya)), ya
    err = np.abs(ya - want).max() / np.abs(want).max()
    assert err < 1e-2, f"calibrated output off by {err:.3g}"
    r = ampc(ctx, src, "--calibration", stats, "--explain", "block7/matmul", "-o", os.devnull)
    assert "calibration: max |x| 3.35e+04 > 4096 (value 'x7')" in r.stdout, r.stdout
    # a threshold past every value keeps nothing; AMP_AUTO reads AMP_CALIBRATION
    high = os.path.join(ctx.tmp, "resid_high.onnx")
    ampc(ctx, src, "-o", high, "--calibration", stats, "--calib-max-activation", "1e6")
    assert out_types(high)["block7/matmul"] == T.FLOAT16
    bf16 = os.path.join(ctx.tmp, "resid_bf16.onnx")  # bfloat16 has float32's range
    ampc(ctx, src, "-o", bf16, "--calibration", stats, "--precision", "bf16")
    assert out_types(bf16)["block7/matmul"] == T.BFLOAT16
    y = run_output(ctx, src, inp, env={"AMP_AUTO": "1", "AMP_PRECISION": "fp16", "AMP_CALIBRATION": stats})
    assert np.all(np.isfinite(y)) and np.abs(y - want).max() / np.abs(want).max() < 1e-2, y
    y = run_output(ctx, src, inp, env={"AMP_AUTO": "1", "AMP_PRECISION": "fp16"})
    assert not np.all(np.isfinite(y)), y
    ctx.notes.append(f"residual stream: output error {err:.2g} calibrated, inf/NaN before")


def shrinking(tmp):
    """The model, an input folder, and numpy's x_1..x_8 and output."""
    rng = np.random.default_rng(3)
    nodes, inits, ws = [], [nh.from_array(np.array(1 / 16, np.float32), "sixteenth")], []
    x = "x"
    for k in range(8):
        w = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
        ws.append(w)
        inits.append(nh.from_array(w, f"W{k}"))
        nodes += [h.make_node("MatMul", [x, f"W{k}"], [f"m{k}"], name=f"block{k}/matmul"),
                  h.make_node("Mul", [f"m{k}", "sixteenth"], [f"x{k + 1}"], name=f"block{k}/shrink")]
        x = f"x{k + 1}"
    wout = (rng.standard_normal((D, 4)) / np.sqrt(D)).astype(np.float32)
    inits.append(nh.from_array(wout, "Wout"))
    nodes.append(h.make_node("MatMul", [x, "Wout"], ["y"], name="head"))
    src = os.path.join(tmp, "shrink.onnx")
    save(nodes, inits, [("x", [4, D])], [("y", [4, 4])], src)
    xv = rng.uniform(-1, 1, (4, D)).astype(np.float32)
    d = os.path.join(tmp, "shrink_in")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(nh.from_array(xv, "x").SerializeToString())
    xs = [xv.astype(np.float64)]
    for w in ws:
        xs.append(xs[-1] @ w / 16)
    return src, d, xs, xs[-1] @ wout


def test_shrinking(ctx):
    src, inp, xs, want = shrinking(ctx.tmp)
    stats = os.path.join(ctx.tmp, "shrink.stats")
    ampc(ctx, "calibrate", src, "--inputs", inp, "-o", stats)
    vals, _ = stats_lines(stats)
    tiny = [k for k in range(1, 9) if vals[f"x{k}"][1] < 2.0 ** -14]
    assert tiny and tiny == list(range(tiny[0], 9)) and tiny[0] >= 3, [vals[f"x{k}"][1] for k in range(1, 9)]
    assert vals["x8"][3] > 0.5, vals["x8"]  # most of x8 rounds to zero in float16

    before = os.path.join(ctx.tmp, "shrink_amp.onnx")
    after = os.path.join(ctx.tmp, "shrink_calib.onnx")
    ampc(ctx, src, "-o", before, "-q")
    r = ampc(ctx, src, "-o", after, "--calibration", stats)
    assert "all subnormal in float16" in r.stderr, r.stderr
    tb, ta = out_types(before), out_types(after)
    first = tiny[0] - 1  # the block that writes the first tiny value
    late = [f"block{first}/shrink", "block7/matmul", "head"]
    assert all(tb[n] == T.FLOAT16 for n in late), {n: tb[n] for n in late}
    assert all(ta[n] == T.FLOAT for n in late), {n: ta[n] for n in late}
    assert ta["block0/matmul"] == T.FLOAT16 and ta["block0/shrink"] == T.FLOAT16, ta
    yb, ya = run_output(ctx, before, inp), run_output(ctx, after, inp)
    scale = np.abs(want).max()
    eb, ea = np.abs(yb - want).max() / scale, np.abs(ya - want).max() / scale
    assert eb > 0.5, f"the uncalibrated conversion should lose the output: error {eb:.3g}"
    assert ea < 1e-2, f"calibrated output off by {ea:.3g}"
    r = ampc(ctx, src, "--calibration", stats, "--explain", "head", "-o", os.devnull)
    assert "all subnormal in float16 (value 'x8')" in r.stdout, r.stdout
    # the lower bound can be turned off; bfloat16 has float32's range
    off = os.path.join(ctx.tmp, "shrink_off.onnx")
    ampc(ctx, src, "-o", off, "--calibration", stats, "--calib-min-activation", "0")
    assert out_types(off)["head"] == T.FLOAT16
    # AMP_AUTO reads the bound beside AMP_CALIBRATION: the output is lost with it off
    y = run_output(ctx, src, inp, env={"AMP_AUTO": "1", "AMP_PRECISION": "fp16", "AMP_CALIBRATION": stats})
    assert np.abs(y - want).max() / scale < 1e-2, y
    y = run_output(ctx, src, inp, env={"AMP_AUTO": "1", "AMP_PRECISION": "fp16", "AMP_CALIBRATION": stats, "AMP_CALIB_MIN_ACTIVATION": "0"})
    assert np.abs(y - want).max() / scale > 0.5, y
    bf16 = os.path.join(ctx.tmp, "shrink_bf16.onnx")
    ampc(ctx, src, "-o", bf16, "--calibration", stats, "--precision", "bf16")
    assert out_types(bf16)["head"] == T.BFLOAT16
    ctx.notes.append(f"shrinking stream: output error {eb:.2g} uncalibrated, {ea:.2g} calibrated")


def cancel(tmp):
    rng = np.random.default_rng(1)
    wa = (rng.standard_normal((32, 32)) * 0.3).astype(np.float32)
    wb = wa + (rng.standard_normal((32, 32)) * 1e-3).astype(np.float32)
    nodes = [h.make_node("MatMul", ["x", "Wa"], ["a"], name="mm_a"),
             h.make_node("MatMul", ["x", "Wb"], ["b"], name="mm_b"),
             h.make_node("Sub", ["a", "b"], ["d"], name="planted_sub"),
             h.make_node("MatMul", ["d", "W3"], ["e"], name="mm_after"),
             h.make_node("Relu", ["e"], ["r"], name="relu"),
             h.make_node("MatMul", ["r", "W4"], ["y"], name="mm_out")]
    inits = [nh.from_array(wa, "Wa"), nh.from_array(wb, "Wb"),
             nh.from_array((rng.standard_normal((32, 32)) * 0.2).astype(np.float32), "W3"),
             nh.from_array((rng.standard_normal((32, 8)) * 0.2).astype(np.float32), "W4")]
    src = os.path.join(tmp, "cancel.onnx")
    save(nodes, inits, [("x", [8, 32])], [("y", [8, 8])], src)
    return src


def ranked(stdout):
    """The node names of compare's ranking, in order."""
    return [line.split(". ", 1)[1].split(" (")[0] for line in stdout.splitlines()
            if line[:4].strip().rstrip(".").isdigit() and ". " in line]


def test_compare(ctx):
    src = cancel(ctx.tmp)
    amp = os.path.join(ctx.tmp, "cancel_amp.onnx")
    ampc(ctx, src, "-o", amp, "-q")
    r = ampc(ctx, "compare", src, amp)
    names = ranked(r.stdout)
    assert names and names[0] == "planted_sub", r.stdout
    assert set(names) == {"mm_a", "mm_b", "planted_sub", "mm_after", "relu", "mm_out"}, names
    # the Sub's error is its inputs' rounding: the lines keep their makers too
    keep = [line.split("'")[1] for line in r.stdout.splitlines() if line.startswith("  --keep-fp32 '")]
    assert keep == ["planted_sub", "mm_a", "mm_b"], r.stdout
    assert r.stdout.startswith("output 'y': max abs "), r.stdout
    # what it advises helps: the output's error falls
    kept = os.path.join(ctx.tmp, "cancel_kept.onnx")
    ampc(ctx, src, "-o", kept, "-q", *[a for k in keep for a in ("--keep-fp32", k)])
    r2 = ampc(ctx, "compare", src, kept)
    rel = [float(line.split("max rel ")[1].split(",")[0]) for line in (r.stdout, r2.stdout)]
    assert rel[1] < rel[0] / 5, rel
    ctx.notes.append(f"compare: planted Sub first; output max rel {rel[0]:.3g} -> {rel[1]:.3g} with its --keep-fp32")
    try:
        from onnxconverter_common import float16
    except ImportError:
        raise tl.Skip("onnxconverter-common is not installed (its conversion)")
    occ = os.path.join(ctx.tmp, "cancel_occ.onnx")
    onnx.save(float16.convert_float_to_float16(onnx.load(src), keep_io_types=True), occ)
    r = ampc(ctx, "compare", src, occ, "--top", "3")
    names = ranked(r.stdout)
    assert len(names) == 3 and names[0] == "planted_sub", r.stdout


def test_compare_io16_and_bodies(ctx):
    """A model converted with --no-keep-io-types takes float16 inputs: compare rounds the
    float32 inputs for it. Nodes inside an If's branches are counted as not compared."""
    rng = np.random.default_rng(4)
    w = lambda n: nh.from_array((rng.standard_normal((16, 16)) * 0.25).astype(np.float32), n)  # noqa: E731
    branch = lambda name, wn: h.make_graph(  # noqa: E731
        [h.make_node("MatMul", ["a", wn], [f"{name}_y"], name=f"{name}/matmul")], name, [],
        [h.make_tensor_value_info(f"{name}_y", T.FLOAT, [4, 16])])
    nodes = [h.make_node("MatMul", ["x", "W0"], ["a"], name="first"),
             h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"], name="cond"),
             h.make_node("If", ["c"], ["b"], name="branch", then_branch=branch("then", "W1"),
                         else_branch=branch("else", "W2")),
             h.make_node("MatMul", ["b", "W3"], ["y"], name="last")]
    inits = [w("W0"), w("W1"), w("W2"), w("W3"), nh.from_array(np.array(0, np.float32), "zero")]
    src = os.path.join(ctx.tmp, "if.onnx")
    save(nodes, inits, [("x", [4, 16])], [("y", [4, 16])], src)
    amp = os.path.join(ctx.tmp, "if_io16.onnx")
    ampc(ctx, src, "-o", amp, "-q", "--no-keep-io-types")
    m = onnx.load(amp)
    assert m.graph.input[0].type.tensor_type.elem_type == T.FLOAT16, m.graph.input[0]
    r = ampc(ctx, "compare", src, amp)
    rel = float(r.stdout.split("max rel ")[1].split(",")[0])
    assert rel < 5e-3, r.stdout
    assert {"first", "last"} <= set(ranked(r.stdout)), r.stdout
    assert "(2 16-bit nodes inside If/Loop/Scan bodies are not compared" in r.stdout, r.stdout


def test_train_underflow(ctx):
    rng = np.random.default_rng(2)
    nodes = [h.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             h.make_node("Mul", ["h", "tiny"], ["y"], name="shrink")]
    inits = [nh.from_array((rng.standard_normal((16, 8)) * 0.3).astype(np.float32), "W"),
             nh.from_array(np.array(1e-8, np.float32), "tiny")]
    src, train = os.path.join(ctx.tmp, "small.onnx"), os.path.join(ctx.tmp, "small_train.onnx")
    save(nodes, inits, [("x", [4, 16])], [("y", [4, 8])], src)
    ampc(ctx, "grad", src, "-o", train, "--loss", "mse")
    low = os.path.join(ctx.tmp, "low.stats")
    r = ampc(ctx, "calibrate", train, "--loss-scale-init", "1", "--steps", "2", "-o", low)
    assert "gradient 'W_grad' underflows at loss scale 1" in r.stdout, r.stdout
    assert "advice: start the loss scale at" in r.stdout, r.stdout
    vals, _ = stats_lines(low)
    assert vals["W_grad"][0] == "grad" and vals["W_grad"][3] == 1.0, vals["W_grad"]
    assert vals["loss"][0] == "value", vals["loss"]
    r = ampc(ctx, train, "-o", os.devnull, "--calibration", low)
    assert "gradient 'W_grad' underflows" in r.stderr, r.stderr
    # the device path (the simulator: the CPU kernels behind memory the runtime cannot
    # read) records the same statistics, byte for byte
    sim = os.path.join(ctx.tmp, "low_sim.stats")
    ampc(ctx, "calibrate", train, "--loss-scale-init", "1", "--steps", "2", "-o", sim, "--backend", "sim")
    with open(low, "rb") as a, open(sim, "rb") as b:
        assert a.read() == b.read(), "calibrate --backend sim differs from the CPU"
    high = os.path.join(ctx.tmp, "high.stats")
    r = ampc(ctx, "calibrate", train, "--steps", "2", "-o", high)
    assert "no gradient underflows at loss scale 65536" in r.stdout, r.stdout
    assert stats_lines(high)[0]["W_grad"][3] == 0.0


def test_bad_input(ctx):
    src, inp, _, _ = residual(ctx.tmp)
    bad = os.path.join(ctx.tmp, "bad.stats")
    with open(bad, "w") as f:
        f.write("ampc-calibration 1\nvalue 1 2 0 0 4 x\n")
    r = ampc(ctx, src, "-o", os.devnull, "--calibration", bad, ok=False)
    assert r.returncode == 1 and "bad.stats:2:" in r.stderr, (r.returncode, r.stderr)
    r = ampc(ctx, "calibrate", src, ok=False)
    assert r.returncode == 2 and "-o STATS" in r.stderr, r.stderr
    r = ampc(ctx, "compare", src, ok=False)
    assert r.returncode == 2 and "missing AMP" in r.stderr, r.stderr
    r = ampc(ctx, "compare", src, src, "--steps", "2", ok=False)
    assert r.returncode == 2, r.stderr


class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx()
    ctx.ampc, ctx.tmp, ctx.notes = args.ampc, tl.tempdir("ampc_calib_"), []
    tests = [("residual stream", test_residual), ("shrinking stream", test_shrinking), ("compare", test_compare),
             ("compare: 16-bit inputs, If bodies", test_compare_io16_and_bodies),
             ("training underflow", test_train_underflow), ("bad input", test_bad_input)]
    return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
