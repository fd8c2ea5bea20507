#!/usr/bin/env python3
"""`ampc bench MODEL --compare [--train] [--plot FILE]` (issue 21): the FP32 and AMP_AUTO
sessions of one model timed interleaved. Timings are never asserted; what is:

- the table has both rows with positive numbers, the speed-up line, and the work per run:
  for a planted MatMul [M,K]x[K,N] then a Gemm, exactly 2*M*N*K + 2*M*N2*N FLOPs, the same
  on both sides, and the same on the device simulator;
- peak memory of the AMP side is below FP32's (its intermediates are 16-bit);
- --train times training steps (a bundled training model);
- --plot writes a PNG that decodes (IHDR 800x400 RGB, IDAT inflates to 400 filtered rows)
  and holds both series' colours; --plot without --compare is a usage error (exit 2).
Prints "N passed, M failed" last; exit 77 when onnx or numpy is missing.

usage: test_bench_compare.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import zlib

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

M, K, N, N2 = 64, 96, 48, 32


def planted(tmp):
    rng = np.random.default_rng(0)
    g = h.make_graph(
        [h.make_node("MatMul", ["x", "W"], ["h"], name="mm"), h.make_node("Relu", ["h"], ["r"], name="relu"),
         h.make_node("Gemm", ["r", "W2"], ["y"], name="gemm")],
        "g", [h.make_tensor_value_info("x", T.FLOAT, [M, K])], [h.make_tensor_value_info("y", T.FLOAT, [M, N2])],
        [nh.from_array(rng.standard_normal((K, N)).astype(np.float32), "W"),
         nh.from_array(rng.standard_normal((N, N2)).astype(np.float32), "W2")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(tmp, "mm.onnx")
    onnx.save(m, path)
    return path


def bench(ctx, *args, ok=True):
    # fp16 named: AMP_AUTO's default, precision auto, keeps a CPU without bf16 dot products
    # in float32, where --compare has nothing to compare (it says so and exits 2).
    env = dict(os.environ, AMP_PRECISION=os.environ.get("AMP_PRECISION", "fp16"))
    r = subprocess.run([ctx.ampc, "bench", *args], capture_output=True, text=True, env=env)
    if ok:
        assert r.returncode == 0, f"ampc bench {' '.join(args)}: exit {r.returncode}: {r.stderr}"
    return r


def rows(out):
    """{'FP32': [median, min, per_s, samples_s], 'AMP': ...} and peak memory in bytes."""
    got, mem = {}, {}
    for line in out.splitlines():
        m = re.match(r"^(FP32|AMP)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) (KiB|MiB)\s+(\S+)$", line)
        if m:
            got[m.group(1)] = [float(m.group(i)) for i in range(2, 6)]
            mem[m.group(1)] = float(m.group(6)) * (1024 if m.group(7) == "KiB" else 1 << 20)
    return got, mem


def test_table_and_flops(ctx):
    src = planted(ctx.tmp)
    want = 2 * M * N * K + 2 * M * N2 * N
    for backend in ("cpu", "sim"):
        r = bench(ctx, src, "--compare", "--iters", "3", "--warmup", "1", "--backend", backend)
        got, mem = rows(r.stdout)
        assert set(got) == {"FP32", "AMP"} and all(v > 0 for k in got for v in got[k]), r.stdout
        assert "AMP speed-up over FP32: " in r.stdout, r.stdout
        assert f"backend {backend}" in r.stdout.splitlines()[0], r.stdout
        for side in ("FP32", "AMP"):
            m = re.search(rf"^{side}: ([\d.e+]+) MFLOP per run", r.stdout, re.M)
            assert m and abs(float(m.group(1)) * 1e6 - want) <= 1e-5 * want, (side, want, r.stdout)
        assert mem["AMP"] < mem["FP32"], mem
    ctx.notes.append(f"planted MatMul + Gemm: {want / 1e6:.4g} MFLOP counted on both sides, cpu and sim")


def test_train(ctx):
    model = os.path.join(ROOT, "models", "mlp_cls", "model.onnx")
    train = os.path.join(ctx.tmp, "mlp_train.onnx")
    r = subprocess.run([ctx.ampc, "grad", model, "-o", train, "--optimizer", "sgd", "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = bench(ctx, train, "--compare", "--train", "--iters", "2", "--warmup", "1")
    got, _ = rows(r.stdout)
    assert set(got) == {"FP32", "AMP"} and "training steps of each" in r.stdout, r.stdout
    assert re.search(r"^FP32: [\d.e+]+ MFLOP per step", r.stdout, re.M), r.stdout


def png_pixels(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    w, hgt, depth, colour = ihdr[:4]
    assert (w, hgt, depth, colour) == (800, 400, 8, 2), ihdr
    raw = zlib.decompress(idat)
    assert len(raw) == hgt * (1 + 3 * w)
    rows_ = [raw[y * (1 + 3 * w):(y + 1) * (1 + 3 * w)] for y in range(hgt)]
    assert all(r[0] == 0 for r in rows_)
    return {tuple(r[1 + 3 * x:4 + 3 * x]) for r in rows_ for x in range(w)}


def test_plot(ctx):
    src = planted(ctx.tmp)
    png = os.path.join(ctx.tmp, "times.png")
    r = bench(ctx, src, "--compare", "--iters", "4", "--warmup", "1", "--plot", png)
    assert f"plot: {png}" in r.stdout, r.stdout
    colours = png_pixels(png)
    assert (31, 119, 180) in colours and (255, 127, 14) in colours, "both series drawn"
    r = bench(ctx, src, "--plot", png, ok=False)
    assert r.returncode == 2 and "--compare" in r.stderr, (r.returncode, r.stderr)
    r = bench(ctx, src, "--compare", "--iters", "2", "--plot", os.path.join(ctx.tmp, "no", "such", "dir.png"), ok=False)
    assert r.returncode == 4 and "--plot" in r.stderr, (r.returncode, r.stderr)


class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx()
    ctx.ampc, ctx.tmp, ctx.notes = args.ampc, tl.tempdir("ampc_bench_cmp_"), []
    tests = [("table and FLOPs", test_table_and_flops), ("training steps", test_train), ("plot", test_plot)]
    return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
