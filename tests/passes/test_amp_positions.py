#!/usr/bin/env python3
"""Rotary embeddings' angles stay float32: a product (MatMul) of inv_freq and positions
(an angle rounded to 16 bits is off by its position times 2^-11, or 2^-8 in bfloat16),
keeps float32 in a conversion, however the export wrote the positions:

- `Range` -> `Cast(to float)` -> `Unsqueeze` (a dynamic sequence length, as LLaMA's
  rotary embedding exports with a symbolic length);
- a float32 constant 0, 1, ..., 4095 (the exporter folded a static arange);
and the Cos and Sin of the angles then match FP32 (max abs error below 1e-3 on ampc's
executor; the previous ampc, whose MatMul went to float16, missed by 1.79 at position
4095). Positions 0..15 keep it float32 too; a 3-element constant 0, 1, 2 is not taken for
positions (an arange needs 4), and its MatMul goes 16-bit. `--explain` names the
rule and the conversion's summary counts it.

usage: test_amp_positions.py --ampc PATH [--testdata DIR] [--verbose]
Exit 77 (skip) when onnx or numpy is missing."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

DIM = 32  # rotary dimension: inv_freq has DIM / 2 entries


def rotary(path, seq, dynamic):
    """positions [seq] -> angles = positions[:, None] @ inv_freq[None, :] -> cos, sin."""
    n = helper.make_node
    inv = (1.0 / (10000 ** (np.arange(0, DIM, 2, dtype=np.float64) / DIM))).astype(np.float32)
    inits = [numpy_helper.from_array(inv.reshape(1, -1), "inv_freq"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    nodes = []
    if dynamic:
        inits += [numpy_helper.from_array(np.array(0, np.int64), "zero"),
                  numpy_helper.from_array(np.array(1, np.int64), "one")]
        nodes += [n("Shape", ["ids"], ["shape"], name="shape"),
                  n("Gather", ["shape", "one"], ["len"], name="len", axis=0),
                  n("Range", ["zero", "len", "one"], ["pos_i"], name="range"),
                  n("Cast", ["pos_i"], ["pos"], name="cast", to=TensorProto.FLOAT)]
        inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "seq"])]
    else:
        inits.append(numpy_helper.from_array(np.arange(seq, dtype=np.float32), "pos"))
        inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, seq])]
        nodes.append(n("Identity", ["ids"], ["ids_used"], name="use_ids"))
    nodes += [n("Unsqueeze", ["pos", "axis1"], ["pos_col"], name="unsqueeze"),
              n("MatMul", ["pos_col", "inv_freq"], ["angles"], name="rotary/MatMul"),
              n("Cos", ["angles"], ["cos"], name="cos"), n("Sin", ["angles"], ["sin"], name="sin")]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["seq" if dynamic else seq, DIM // 2]) for o in ("cos", "sin")]
    if not dynamic:
        outs.append(helper.make_tensor_value_info("ids_used", TensorProto.INT64, [1, seq]))
    g = helper.make_graph(nodes, "rotary", inputs, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


def types(path):
    m = onnx.load(path)
    t = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.value_info) + list(m.graph.output)}
    return {nd.name: t.get(nd.output[0]) for nd in m.graph.node}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ampc_positions_")
    passed = failed = 0

    def run(*args):
        r = subprocess.run([a.ampc, *args], capture_output=True, text=True)
        if a.verbose:
            print("$ ampc " + " ".join(args) + "\n" + r.stdout + r.stderr)
        assert r.returncode == 0, r.stderr
        return r

    for name, seq, dynamic, dt_name, kept in (
            ("range_cast", 4096, True, "fp16", True), ("range_cast", 4096, True, "bf16", True),
            ("constant", 4096, False, "fp16", True), ("constant", 4096, False, "bf16", True),
            ("constant_short", 16, False, "fp16", True), ("constant_tiny", 3, False, "fp16", False)):
        label = f"{name} {dt_name}"
        try:
            src, out = os.path.join(tmp, f"{name}.onnx"), os.path.join(tmp, f"{name}_{dt_name}.onnx")
            rotary(src, seq, dynamic)
            r = run(src, "-o", out, "--precision", dt_name)
            t = types(out)
            want = TensorProto.FLOAT if kept else {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}[dt_name]
            assert t["rotary/MatMul"] == want, f"rotary MatMul writes {t['rotary/MatMul']}, want {want}"
            if kept:
                assert re.search(r"1 product of positions \(rotary angles\) kept in float32", r.stderr), \
                    r.stderr
                e = run(src, "-o", os.devnull, "--precision", dt_name, "--explain", "rotary/MatMul")
                assert "it multiplies positions" in e.stdout, e.stdout
                d = os.path.join(tmp, f"{name}_in")
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, "input_0.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(np.zeros((1, seq), np.int64), "ids").SerializeToString())
                c = run("compare", src, out, "--inputs", d)
                errs = [float(x) for x in re.findall(r"'(?:cos|sin)': max abs ([0-9.e+-]+)", c.stdout)]
                assert len(errs) == 2 and max(errs) < 1e-3, c.stdout
            passed += 1
            print(f"ok   {label}: rotary MatMul {'float32' if kept else '16-bit (not positions)'}")
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL {label}: {e}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
