#!/usr/bin/env python3
"""The comparison table of docs/calibration.md (issue 25): for each model, converts to
float16 with ampc (with and without `ampc calibrate` + `--calibration`), onnxconverter-common's
`auto_mixed_precision.auto_convert_mixed_precision` and `float16.convert_float_to_float16`
(both keep_io_types=True), and ModelOpt AutoCast when `--modelopt PYTHON` names a python
that has it; then measures on ampc's CPU executor (`ampc compare FP32 AMP --inputs DIR`)
the outputs' largest max rel error and smallest cosine (training graphs: the largest
relative difference of the loss over 20 steps of `ampc run --steps 20`), and counts in
the converted model's main graph the float nodes computing in float32 (Casts aside;
output types from ONNX shape inference) and the Casts. Time is the conversion's wall time (with calibration: calibrate
+ convert). Prints a Markdown table.

usage: tools/compare_converters.py --ampc build/ampc [--modelopt /tmp/mo/bin/python]
           NAME=MODEL.onnx:INPUT_DIR ...
(the commands that made the table, and what each failure means, are in docs/calibration.md)
"""
import argparse
import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper as nh

STEPS = 20  # training graphs: steps compared
OCC_TIMEOUT = 120  # seconds
FLOAT, HALF = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16


def feed_of(model, d):
    """The model's inputs from DIR/input_K.pb, by name, else by order."""
    names = [i.name for i in model.graph.input if i.name not in {x.name for x in model.graph.initializer}]
    feed = {}
    for k in range(len(names)):
        t = onnx.TensorProto()
        with open(os.path.join(d, f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        feed[t.name if t.name in names else names[k]] = nh.to_array(t)
    return feed


def counts(path):
    """(float nodes computing in float32, float nodes, Casts) of a converted model."""
    m = onnx.load(path)
    try:
        m = onnx.shape_inference.infer_shapes(m)
    except Exception:
        pass
    ty = {v.name: v.type.tensor_type.elem_type for v in [*m.graph.value_info, *m.graph.output, *m.graph.input]}
    ty.update({t.name: t.data_type for t in m.graph.initializer})
    f32 = fl = casts = 0
    for n in m.graph.node:
        if n.op_type == "Cast":
            casts += 1
            continue
        ts = [ty.get(o) for o in n.output]
        if FLOAT in ts or HALF in ts:
            fl += 1
            f32 += FLOAT in ts
    return f32, fl, casts


def losses(ampc, path, inputs, steps):
    r = subprocess.run([ampc, "run", path, "--steps", str(steps), "--inputs", inputs], capture_output=True, text=True)
    return [float(x) for x in re.findall(r"step \d+: loss ([0-9.e+-]+|inf|nan)", r.stdout)], r.stderr


def compare(ampc, src, dst, inputs):
    if onnx.load(src, load_external_data=False).training_info:  # training: the loss over STEPS steps
        a, _ = losses(ampc, src, inputs, STEPS)
        b, err = losses(ampc, dst, inputs, STEPS)
        if len(a) != STEPS or len(b) != STEPS:
            return None, None, (err.strip().splitlines() or ["?"])[-1]
        return max(abs(x - y) / abs(x) for x, y in zip(a, b)), None, None
    r = subprocess.run([ampc, "compare", src, dst, "--inputs", inputs], capture_output=True, text=True)
    rel = [float(x) for x in re.findall(r"max rel ([0-9.e+-]+|inf|nan)", r.stdout)]
    cos = [float(x) for x in re.findall(r"cosine ([0-9.e+-]+|inf|nan|-nan)", r.stdout.replace("-nan", "nan"))]
    if not rel:
        return None, None, (r.stderr.strip().splitlines() or ["?"])[-1]
    return max(rel), min(cos) if cos else None, None


def convert(tool, src, dst, inputs, a, tmp):
    if tool == "ampc":
        subprocess.run([a.ampc, src, "-o", dst], check=True, capture_output=True, text=True)
    elif tool == "ampc + calibration":
        stats = os.path.join(tmp, "stats.txt")
        subprocess.run([a.ampc, "calibrate", src, "--inputs", inputs, "-o", stats], check=True, capture_output=True)
        subprocess.run([a.ampc, src, "-o", dst, "--calibration", stats], check=True, capture_output=True)
    elif tool == "occ auto_mixed_precision":
        from onnxconverter_common import auto_mixed_precision
        m = onnx.load(src)
        out = auto_mixed_precision.auto_convert_mixed_precision(m, feed_of(m, inputs), rtol=0.01, atol=0.001,
                                                               keep_io_types=True)
        onnx.save(out, dst)
    elif tool == "occ float16":
        from onnxconverter_common import float16
        out = float16.convert_float_to_float16(onnx.load(src), keep_io_types=True)
        try:
            onnx.shape_inference.infer_shapes(out, strict_mode=True)
            onnx.save(out, dst)
        except Exception:  # a Cast declared float16 that converts to float: block Cast (docs/calibration.md)
            code = ("import sys, onnx; from onnxconverter_common import float16 as f; onnx.save(f.convert_float_to_float16("
                    "onnx.load(sys.argv[1]), keep_io_types=True, op_block_list=f.DEFAULT_OP_BLOCK_LIST + ['Cast']), "
                    "sys.argv[2])")
            try:  # it never ends on the ViT export
                subprocess.run([sys.executable, "-W", "ignore", "-c", code, src, dst], check=True, timeout=OCC_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"with Cast blocked: no result in {OCC_TIMEOUT} s; without: a Cast typed float16 "
                                   "converts to float (strict type inference fails)") from None
    elif tool == "ModelOpt AutoCast":
        m = onnx.load(src)
        data = os.path.join(tmp, "data.npz")  # the same inputs as the others
        np.savez(data, **feed_of(m, inputs))
        subprocess.run([a.modelopt, "-m", "modelopt.onnx.autocast", "--onnx_path", src, "--output_path", dst,
                        "--calibration_data", data, "--keep_io_types"], check=True, capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--modelopt", help="a python with nvidia-modelopt[onnx]")
    ap.add_argument("--tmp")
    ap.add_argument("models", nargs="+", help="NAME=MODEL.onnx:INPUT_DIR")
    a = ap.parse_args()
    tools = ["ampc", "ampc + calibration", "occ auto_mixed_precision", "occ float16"]
    if a.modelopt:
        tools.append("ModelOpt AutoCast")
    print("| model | converter | output max rel | cosine | fp32 nodes / float nodes | Casts | time |")
    print("|---|---|---|---|---|---|---|")
    for spec in a.models:
        name, rest = spec.split("=", 1)
        src, inputs = rest.rsplit(":", 1)
        for tool in tools:
            tmp = tempfile.mkdtemp(dir=a.tmp)
            dst = os.path.join(tmp, "out.onnx")
            try:
                t0 = time.time()
                with contextlib.redirect_stdout(io.StringIO()):  # occ's progress lines
                    convert(tool, src, dst, inputs, a, tmp)
                dt = time.time() - t0
                rel, cos, err = compare(a.ampc, src, dst, inputs)
                f32, fl, casts = counts(dst)
                cell = (f"compare fails: {err[:80]} | -" if err is not None else
                        f"{rel:.2g} | {cos:.6f}" if cos is not None else f"{rel:.2g} (loss, {STEPS} steps) | -")
                print(f"| {name} | {tool} | {cell} | {f32} / {fl} | {casts} | {dt:.2f} s |", flush=True)
            except Exception as e:  # a converter that fails on this model
                msg = getattr(e, "stderr", None) or str(e)
                msg = (msg.strip().splitlines() or ["?"])[-1][:100].replace("|", "/")
                print(f"| {name} | {tool} | fails: {msg} | - | - | - | - |", flush=True)
            finally:
                shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
