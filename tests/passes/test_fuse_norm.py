#!/usr/bin/env python3
"""Decomposed LayerNorm and GELU (issue 24), on PyTorch exports: models/hf_bert14 (BERT at
opset 14: LayerNorm written as ReduceMean, Sub, Pow, ..., erf GELU), models/hf_gpt2 (tanh
GELU with Pow(x, 3)) and models/ort_bert (onnxruntime-training's BERT, opset 14).

- fusion alone (`--passes infer,opset_upgrade,fuse_norm`, opset raised to 20): every
  group becomes one LayerNormalization or Gelu node, no ReduceMean/Erf/Pow is left, the
  model passes onnx.checker and onnxruntime's outputs equal the unfused model's (FP32);
- at the model's own opset 14 (no LayerNormalization) the default float16 conversion
  colours each LayerNorm as one node: gamma's Mul and beta's Add in 16 bits, the
  statistics (ReduceMean, Pow, Sqrt) in float32, `--explain` says so; more nodes in 16
  bits and fewer casts than with the groups left to the op lists (83 of 172, 18 casts),
  and the logits within 2e-3 of FP32's (relative to the largest) in onnxruntime and in
  ampc's executor;
- raised to opset 17 (`--opset-upgrade 17`), BERT's LayerNorms are fused and 16-bit, and
  `--explain` of a node that was fused names the node it went into.
Prints "N passed, M failed" last; exit 77 (skip) when onnx, numpy or onnxruntime is missing.

usage: test_fuse_norm.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as T
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402


def ampc(exe, *args):
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def data(name):
    d = os.path.join(ROOT, "models", name, "test_data_set_0")
    ins = [onnx.load_tensor(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.startswith("input_")]
    want = nh.to_array(onnx.load_tensor(os.path.join(d, "output_0.pb"))).astype(np.float64)
    return d, {t.name: nh.to_array(t) for t in ins}, want


def ort_out(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0].astype(np.float64)


def rel(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def ops(model):
    out = {}
    for n in model.graph.node:
        out[n.op_type] = out.get(n.op_type, 0) + 1
    return out


def fusion_alone(exe, tmp, name, model, want_ops, gone):
    src = os.path.join(ROOT, "models", name, model)
    out = os.path.join(tmp, name + "_fused.onnx")
    r = ampc(exe, src, "--passes", "infer,opset_upgrade,fuse_norm", "--opset-upgrade", "20", "-o", out)
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    count = ops(m)
    for op, k in want_ops.items():
        assert count.get(op, 0) == k, f"{name}: {count.get(op, 0)} {op} nodes, want {k}"
    for op in gone:
        assert op not in count, f"{name}: {count[op]} {op} nodes left"
    left = [n.name for n in m.graph.node if "/LayerNorm/" in n.name and n.op_type != "LayerNormalization"]
    assert not left and all(len(n.input) == 3 for n in m.graph.node if n.op_type == "LayerNormalization"), left
    if name == "hf_gpt2":
        assert all(n.attribute[0].s == b"tanh" for n in m.graph.node if n.op_type == "Gelu")
    assert "fuse_norm:" in r.stderr, r.stderr
    if name == "ort_bert":  # weights are graph inputs: structure only
        return f"{name}: {want_ops}"
    _, feeds, want = data(name)
    err = rel(ort_out(out, feeds), ort_out(src, feeds))
    assert err <= 1e-5, f"{name}: fused model's outputs off by {err:.3g}"
    return f"{name}: {want_ops}, FP32 outputs of the fused model within {err:.1g}"


def coloured(exe, tmp):
    name = "hf_bert14"
    src = os.path.join(ROOT, "models", name, "model.onnx")
    out = os.path.join(tmp, name + "_fp16.onnx")
    r = ampc(exe, src, "-o", out, "--level", "norms-16")  # the default keeps norms float32
    got = re.search(r"(\d+) of (\d+) float nodes in 16 bits, (\d+) casts", r.stderr)
    assert got, r.stderr
    n16, casts = int(got.group(1)), int(got.group(3))
    assert n16 >= 115 and casts <= 15, f"{n16} nodes in 16 bits, {casts} casts (were 83 and 18)"
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    types = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.value_info) + list(m.graph.output)}
    groups = 0
    for n in m.graph.node:
        if "/LayerNorm/" not in n.name or n.op_type == "Cast":
            continue
        last = n.name.rsplit("/", 1)[1]
        want = T.FLOAT16 if last in ("Mul", "Add_1") else T.FLOAT
        assert types.get(n.output[0]) == want, f"{n.name}: {types.get(n.output[0])}, want {want}"
        groups += last == "Add_1"
    assert groups == 5, f"{groups} LayerNorm groups"
    erf = [n for n in m.graph.node if n.op_type == "Erf"]
    assert erf and all(types.get(n.output[0]) == T.FLOAT16 for n in erf)
    r = ampc(exe, src, "--level", "norms-16", "--explain", "/m/bert/embeddings/LayerNorm/Pow", "-o", os.devnull)
    assert "as part of a decomposed LayerNormalization" in r.stdout and "stash_type" in r.stdout, r.stdout
    d, feeds, want = data(name)
    e_ort = rel(ort_out(out, feeds), want)
    o = os.path.join(tmp, "run_out")
    ampc(exe, "run", out, "--inputs", d, "--outputs", o)
    e_run = rel(nh.to_array(onnx.load_tensor(os.path.join(o, "output_0.pb"))).astype(np.float64), want)
    assert e_ort <= 2e-3 and e_run <= 2e-3, f"logits off by {e_ort:.3g} (onnxruntime), {e_run:.3g} (ampc run)"
    return f"{name} float16 at opset 14: {n16} nodes in 16 bits, {casts} casts, logits error {e_ort:.2g} " \
           f"(onnxruntime) {e_run:.2g} (ampc run)"


def fused_17(exe, tmp):
    src = os.path.join(ROOT, "models", "hf_bert14", "model.onnx")
    out = os.path.join(tmp, "hf_bert14_17.onnx")
    for level, dt in (("default", T.FLOAT), ("norms-16", T.FLOAT16)):
        ampc(exe, src, "--opset-upgrade", "17", "--level", level, "-o", out)
        m = onnx.load(out)
        types = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.value_info) + list(m.graph.output)}
        ln = [n for n in m.graph.node if n.op_type == "LayerNormalization"]
        assert len(ln) == 5 and all(types.get(n.output[0]) == dt for n in ln), (level, [n.name for n in ln])
    _, feeds, want = data("hf_bert14")
    err = rel(ort_out(out, feeds), want)
    assert err <= 2e-3, f"logits off by {err:.3g}"
    r = ampc(exe, src, "--opset-upgrade", "17", "--explain", "/m/bert/embeddings/LayerNorm/Pow", "-o", os.devnull)
    assert "was fused into '/m/bert/embeddings/LayerNorm/LayerNormalization'" in r.stdout, r.stdout
    assert "fused by ampc fuse_norm from 9 nodes (" in r.stdout, r.stdout
    return f"hf_bert14 at opset 17, norms-16: 5 LayerNormalization in float16, logits error {err:.2g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    tmp = tl.tempdir("ampc_fuse_norm_")
    notes = []
    cases = [
        ("fusion_hf_bert14", lambda: fusion_alone(args.ampc, tmp, "hf_bert14", "model.onnx",
                                                  {"LayerNormalization": 5, "Gelu": 2}, ["ReduceMean", "Erf", "Sqrt"])),
        ("fusion_hf_gpt2", lambda: fusion_alone(args.ampc, tmp, "hf_gpt2", "model.onnx", {"Gelu": 2}, ["Tanh"])),
        ("fusion_ort_bert", lambda: fusion_alone(args.ampc, tmp, "ort_bert", "eval_model.onnx",
                                                 {"LayerNormalization": 5, "Gelu": 2}, ["ReduceMean", "Erf"])),
        ("coloured_at_opset_14", lambda: coloured(args.ampc, tmp)),
        ("fused_at_opset_17", lambda: fused_17(args.ampc, tmp)),
    ]
    return tl.run([(t, lambda _c, f=f: notes.append(f())) for t, f in cases], None, verbose=args.verbose,
                  notes=notes)


if __name__ == "__main__":
    sys.exit(main())
