#!/usr/bin/env python3
"""Coverage of the AMP pass on transformer exports (issue 24, point 3), without losing
accuracy: models/hf_bert and models/hf_gpt2 (PyTorch exports of transformers' BERT and
GPT-2, models/make_hf_exports.py) converted to float16 with `--level norms-16`, the level
of fewest casts (the default keeps the norms float32 for accuracy: test_llm_corpus.py):

- every LayerNormalization computes in 16 bits (its statistics stay float32 by the spec);
- the embedding tables (read by Gather; GPT-2's also by its tied head) are stored in 16
  bits, and the weights take at most 0.55 of FP32's bytes;
- casts added at most 5 (BERT) and 5 (GPT-2): they were 15 and 20 with LayerNormalization
  deny, the tables left float32 and the cube of GELU's tanh form deny;
- that cube's Pow computes in 16 bits (the GELU is coloured as one node: passes/fuse_impl.h),
  and `--explain` says why (a Pow(x, 3) elsewhere stays float32);
- ampc's own executor (which rounds after every 16-bit node) gives logits within 2e-3 of
  FP32's (relative to the largest), as onnxruntime computed them in FP32.
Prints "N passed, M failed" last; exit 77 (skip) when onnx or numpy is missing.

usage: test_amp_coverage.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402
LEVEL = ["--level", "norms-16"]
CASES = {  # model -> (most casts, tables stored in 16 bits)
    "hf_bert": (5, ["m.bert.embeddings.word_embeddings.weight", "m.bert.embeddings.position_embeddings.weight"]),
    "hf_gpt2": (5, ["m.transformer.wte.weight", "m.transformer.wpe.weight"]),
}


def check(ampc, tmp, name):
    d = os.path.join(ROOT, "models", name)
    src = os.path.join(d, "model.onnx")
    out = os.path.join(tmp, name + ".onnx")
    r = subprocess.run([ampc, src, "-o", out] + LEVEL, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = onnx.shape_inference.infer_shapes(onnx.load(out))
    g = m.graph
    types = {v.name: v.type.tensor_type.elem_type for v in list(g.value_info) + list(g.output) + list(g.input)}
    for n in g.node:
        if n.op_type == "LayerNormalization":
            assert types.get(n.output[0]) == T.FLOAT16, f"{name}: LayerNormalization '{n.name}' not 16-bit"
    for n in g.node:
        if n.op_type == "Pow" and "/mlp/act/" in n.name:
            assert types.get(n.output[0]) == T.FLOAT16, f"{name}: GELU's Pow '{n.name}' not 16-bit"
            r = subprocess.run([ampc, src, "--explain", n.name, "-o", os.devnull] + LEVEL, capture_output=True,
                               text=True)
            assert "as part of a decomposed Gelu (tanh)" in r.stdout, r.stdout
    most, tables = CASES[name]
    casts = sum(n.op_type == "Cast" for n in g.node) - sum(n.op_type == "Cast" for n in onnx.load(src).graph.node)
    assert casts <= most, f"{name}: {casts} casts added (at most {most})"
    inits = {t.name: t for t in g.initializer}
    for t in tables:
        assert t in inits, f"{name}: no initializer {t}"
        assert inits[t].data_type == T.FLOAT16, f"{name}: table {t} is {inits[t].data_type}, not float16"
    def weight_bytes(model):
        return sum(len(t.raw_data) + 4 * len(t.float_data) for t in model.graph.initializer)
    ratio = weight_bytes(onnx.load(out)) / weight_bytes(onnx.load(src))
    assert ratio <= 0.55, f"{name}: the weights take {ratio:.2f} of FP32's bytes"
    o = os.path.join(tmp, name + "_out")
    r = subprocess.run([ampc, "run", out, "--inputs", os.path.join(d, "test_data_set_0"), "--outputs", o],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = nh.to_array(onnx.load_tensor(os.path.join(o, "output_0.pb"))).astype(np.float64)
    want = nh.to_array(onnx.load_tensor(os.path.join(d, "test_data_set_0", "output_0.pb"))).astype(np.float64)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    assert err <= 2e-3, f"{name}: logits off by {err:.3g} (relative to the largest)"
    return f"{name}: {casts} casts added, weights {ratio:.2f} of FP32's bytes, logits error {err:.2g}"


def cube_alone(ampc, tmp):
    """Pow(x, 3) outside GELU's tanh form stays deny (float32)."""
    from onnx import helper as h
    w = nh.from_array(np.ones((4, 4), np.float32), "W")
    three = nh.from_array(np.array(3.0, np.float32), "three")
    nodes = [h.make_node("MatMul", ["x", "W"], ["a"], name="mm1"), h.make_node("Pow", ["a", "three"], ["c"], name="cube"),
             h.make_node("Add", ["c", "a"], ["s"], name="add"), h.make_node("MatMul", ["s", "W"], ["y"], name="mm2")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 4])], [w, three])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    src, out = os.path.join(tmp, "cube.onnx"), os.path.join(tmp, "cube_amp.onnx")
    onnx.save(m, src)
    r = subprocess.run([ampc, src, "-o", out], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    mo = onnx.shape_inference.infer_shapes(onnx.load(out))
    types = {v.name: v.type.tensor_type.elem_type for v in list(mo.graph.value_info) + list(mo.graph.output)}
    cube = [n for n in mo.graph.node if n.name == "cube"][0]
    assert types.get(cube.output[0]) == T.FLOAT, "a cube outside GELU's tanh form went 16-bit"
    return "Pow(x, 3) outside GELU stays float32"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    tmp = tl.tempdir("ampc_coverage_")
    notes = []

    def case(name):
        def fn(_ctx):
            notes.append(cube_alone(args.ampc, tmp) if name == "cube_alone" else check(args.ampc, tmp, name))
        return name, fn
    return tl.run([case(n) for n in list(CASES) + ["cube_alone"]], None, verbose=args.verbose, notes=notes)


if __name__ == "__main__":
    sys.exit(main())
