#!/usr/bin/env python3
"""Accuracy and casts of mixed-precision conversions over the transformer corpus (issue 36):
for each model folder (model.onnx, test_data_set_0/), converts it with ampc (the default and
any --variant), and with NVIDIA ModelOpt AutoCast when --modelopt names a python that has
it, to float16 and bfloat16; then reports per conversion:
  casts       Cast nodes in the converted model (ampc --report's count, ModelOpt's too)
  16-bit      float nodes computing in 16 bits / float nodes (--report)
  FLOPs       the 16-bit share of MatMul/Gemm/Conv FLOPs (--report)
  error       the outputs' largest max relative error against FP32 on the model's inputs,
              both run on ampc's CPU executor, which rounds to 16 bits after every 16-bit
              op (`ampc compare FP32 OUT --inputs DIR`): "emulated" rounding.
Rows: "ampc" (the default), each --variant, with --autocast "autocast" (PyTorch autocast's
CUDA recipe written as ampc lists: MatMul/Gemm/Conv in 16 bits, its float32 list denied,
the other ops coloured by ampc's default lists, which follow their neighbours), and with --modelopt "ModelOpt" (its defaults: graph
inputs and outputs become 16-bit, no boundary casts) and "ModelOpt io" (--keep_io_types:
fp32 inputs and outputs, the contract ampc keeps by default).
Prints a Markdown table. A benchmark, not a test: tests/models/test_llm_corpus.py holds the
committed bounds.

usage: tools/accuracy_corpus.py --ampc build/ampc [--modelopt /path/to/python]
           [--variant NAME=ARGS ...] [--precision fp16,bf16] MODEL_DIR ...
e.g.   tools/accuracy_corpus.py --ampc build/ampc --modelopt .venv-mo/bin/python \\
           --variant "deny LN=--deny LayerNormalization" models/hf_*
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile


# PyTorch autocast's float32 list (torch/csrc/autograd/autocast_mode: the ops that "autocast to
# float32"), in ONNX op types; matmuls are ampc's default allow list already.
AUTOCAST_FP32 = ("Softmax,LogSoftmax,LayerNormalization,GroupNormalization,Pow,Exp,Log,Reciprocal,"
                 "ReduceSum,ReduceProd,ReduceL2,CumSum,Softplus,Tan,Sinh,Cosh,Asin,Acos")


def report(ampc, path):
    r = subprocess.run([ampc, "--report", path, "-o", os.devnull, "--passes", "none"], capture_output=True, text=True)
    out = r.stdout
    conv = re.search(r"converted (\d+) of (\d+) float nodes using (\d+) casts", out)
    flops = re.search(r"FLOPs: ([0-9.]+)%", out)
    if not conv:
        return None
    return {"n16": int(conv.group(1)), "nf": int(conv.group(2)), "casts": int(conv.group(3)),
            "flops": float(flops.group(1)) if flops else None}


def error(ampc, src, dst, inputs):
    r = subprocess.run([ampc, "compare", src, dst, "--inputs", inputs], capture_output=True, text=True)
    rel = [float(x) for x in re.findall(r"max rel ([0-9.e+-]+|inf|nan)", r.stdout)]
    return max(rel) if rel else None


def convert(a, tool, args, prec, src, dst):
    if tool.startswith("ModelOpt"):
        low = {"fp16": "fp16", "bf16": "bf16"}[prec]
        cmd = [a.modelopt, "-m", "modelopt.onnx.autocast", "--onnx_path", src, "--output_path", dst,
               "--low_precision_type", low] + (["--keep_io_types"] if tool == "ModelOpt io" else [])
    else:
        cmd = [a.ampc, src, "-o", dst, "-q", "--precision", prec] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode == 0 and os.path.exists(dst), (r.stderr.strip().splitlines() or ["?"])[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--modelopt", help="a python with nvidia-modelopt[onnx]")
    ap.add_argument("--variant", action="append", default=[], help="NAME=ARGS: ampc with these options too")
    ap.add_argument("--precision", default="fp16,bf16")
    ap.add_argument("--autocast", action="store_true", help="add PyTorch autocast's recipe as a row")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    tools = [("ampc", [])] + [(v.split("=", 1)[0], shlex.split(v.split("=", 1)[1])) for v in a.variant]
    if a.autocast:
        tools.append(("autocast", ["--deny", AUTOCAST_FP32]))
    if a.modelopt:
        tools += [("ModelOpt", None), ("ModelOpt io", None)]
    tmp = tempfile.mkdtemp(prefix="ampc_acc_")
    print("| model | tool | precision | casts | 16-bit nodes | 16-bit FLOPs | max rel error |")
    print("|---|---|---|---|---|---|---|")
    for d in a.models:
        name = os.path.basename(os.path.normpath(d))
        src, inputs = os.path.join(d, "model.onnx"), os.path.join(d, "test_data_set_0")
        for prec in a.precision.split(","):
            for tool, args in tools:
                dst = os.path.join(tmp, f"{name}_{tool.replace(' ', '_')}_{prec}.onnx")
                ok, why = convert(a, tool, args, prec, src, dst)
                if not ok:
                    print(f"| {name} | {tool} | {prec} | failed: {why} | | | |")
                    continue
                rep = report(a.ampc, dst)
                err = error(a.ampc, src, dst, inputs)
                fl = f"{rep['flops']:.1f}%" if rep and rep["flops"] is not None else "?"
                print(f"| {name} | {tool} | {prec} | {rep['casts'] if rep else '?'} | "
                      f"{rep['n16'] if rep else '?'} / {rep['nf'] if rep else '?'} | {fl} | "
                      f"{err:.3g} |" if err is not None else f"| {name} | {tool} | {prec} | ? | ? | ? | ? |")
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
