#!/usr/bin/env python3
"""The types of intermediates in ampc's output, and one count for one conversion:
- `ampc MODEL -o OUT` writes a value_info entry for every value a node produces whose type
  ampc knows (main graph, If bodies, training_info algorithm graphs), none for graph
  inputs, outputs and initializers; entries the input had stay, first and with the value's
  type now (float16 once converted); onnx's strict shape inference agrees with them;
  `--no-value-info` writes only the input's own entries;
- `ampc OUT --passes none --report` prints what `--report` printed during the conversion
  (the counts need the types of intermediates);
- the success line's "X of Y float nodes in 16 bits, N casts" is the report's "converted X
  of Y float nodes using N casts", Constant nodes included.
Prints "N passed, M failed"; exit 77 (skip) when the onnx package is missing.

usage: test_value_info.py --ampc PATH [--testdata DIR]
"""
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
except ImportError as e:
    print(f"{e.name} is not installed: skipping (pip install numpy onnx)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
F = TensorProto.FLOAT


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def const(name, arr):
    return helper.make_node("Constant", [], [name], name=name,
                            value=numpy_helper.from_array(np.asarray(arr, np.float32), name + "_t"))


def sample_model():
    """x -> MatMul(W from a Constant) -> Add(bias Constant) -> Relu -> If (then: MatMul,
    Relu; else: Exp) -> y; value_info of its own for 'h' (the MatMul's output, which stays
    float32 behind a Cast) and for 't1' in the then branch (float32 [2, 4], float16 once
    converted)."""
    rng = np.random.RandomState(3)
    n = helper.make_node
    then_g = helper.make_graph([n("MatMul", ["r", "W2"], ["t1"], name="then/mm"), n("Relu", ["t1"], ["t_out"], name="then/relu")],
                               "then", [], [helper.make_tensor_value_info("t_out", F, [2, 4])],
                               value_info=[helper.make_tensor_value_info("t1", F, [2, 4])])
    else_g = helper.make_graph([n("Exp", ["r"], ["e_out"], name="else/exp")], "else", [],
                               [helper.make_tensor_value_info("e_out", F, [2, 4])])
    nodes = [const("W", rng.randn(4, 4) * 0.5), const("b", rng.randn(4) * 0.1),
             n("MatMul", ["x", "W"], ["h"], name="mm"), n("Add", ["h", "b"], ["hb"], name="bias"),
             n("Relu", ["hb"], ["r"], name="relu"), n("ReduceSum", ["r"], ["s"], name="sum", keepdims=0),
             n("Greater", ["s", "zero"], ["c"], name="cond"),
             n("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, "sample", [helper.make_tensor_value_info("x", F, [2, 4])],
                          [helper.make_tensor_value_info("y", F, [2, 4])],
                          [numpy_helper.from_array((rng.randn(4, 4) * 0.5).astype(np.float32), "W2"),
                           numpy_helper.from_array(np.array(0, np.float32), "zero")],
                          value_info=[helper.make_tensor_value_info("h", F, [2, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def graphs(m):
    """(label, graph) for the main graph, every attribute body and training graph."""
    out = []

    def walk(label, g):
        out.append((label, g))
        for nd in g.node:
            for a in nd.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(f"{label}/{nd.name}.{a.name}", a.g)
    walk("main", m.graph)
    for i, t in enumerate(m.training_info):
        if t.HasField("algorithm"):
            walk(f"training[{i}].algorithm", t.algorithm)
    return out


def check_value_info(conv, orig_vi_names):
    """Failures: intermediates without an entry, entries for inputs/outputs/initializers,
    duplicates; the input's entries first."""
    bad = []
    for label, g in graphs(conv):
        io = {v.name for v in list(g.input) + list(g.output)} | {t.name for t in g.initializer}
        names = [v.name for v in g.value_info]
        if len(names) != len(set(names)):
            bad.append(f"{label}: duplicate value_info entries")
        if io & set(names):
            bad.append(f"{label}: value_info for graph inputs/outputs/initializers: {sorted(io & set(names))}")
        produced = [o for nd in g.node for o in nd.output if o and o not in io]
        missing = [o for o in produced if o not in set(names)]
        if missing:
            bad.append(f"{label}: no value_info for {missing[:5]}")
        if label == "main" and names[:len(orig_vi_names)] != orig_vi_names:
            bad.append(f"main: the input's entries are not first: {names[:5]}")
    return bad


def report_lines(text):
    """The report without its 'note:' line (sequence-typed values cannot be written back)."""
    return [x for x in text.splitlines() if not x.startswith("note:")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", default="")
    args = ap.parse_args()
    passed = failed = 0

    def check(name, failures):
        nonlocal passed, failed
        if failures:
            failed += 1
            print(f"FAIL {name}: " + " | ".join(failures))
        else:
            passed += 1

    with tempfile.TemporaryDirectory(prefix="ampc_value_info_") as tmp:
        src = os.path.join(tmp, "sample.onnx")
        onnx.save(sample_model(), src)
        cases = [("sample", src), ("mlp_train", os.path.join(ROOT, "models", "mlp_train", "model.onnx")),
                 ("mlp_grads", os.path.join(ROOT, "models", "mlp_grads", "model.onnx")),
                 ("cnn_infer", os.path.join(ROOT, "models", "cnn_infer", "model.onnx"))]
        for name, model in cases:
            fails = []
            out = os.path.join(tmp, name + "_amp.onnx")
            p = run([args.ampc, model, "-o", out, "--report"])
            if p.returncode:
                check(name, [f"convert exited {p.returncode}: {p.stderr.strip()[:300]}"])
                continue
            orig, conv = onnx.load(model), onnx.load(out)
            fails += check_value_info(conv, [v.name for v in orig.graph.value_info])
            try:
                onnx.checker.check_model(conv, full_check=True)
                onnx.shape_inference.infer_shapes(conv, strict_mode=True)
            except Exception as e:
                fails.append(f"onnx: {str(e).strip().splitlines()[0][:300]}")
            # The report of the file alone is the report of the conversion.
            q = run([args.ampc, out, "--passes", "none", "--report"])
            if q.returncode or report_lines(q.stdout) != report_lines(p.stdout):
                fails.append(f"--passes none --report differs:\n{q.stdout[:400]}\nvs during the conversion:\n{p.stdout[:400]}")
            # One count: the success line and the report's first line.
            s = re.search(r"(\d+) of (\d+) float nodes in 16 bits, (\d+) casts", p.stderr)
            r = re.match(r"converted (\d+) of (\d+) float nodes using (\d+) casts", p.stdout)
            if not s or not r or s.groups() != r.groups():
                fails.append(f"success line {s and s.group(0)!r} vs report {r and r.group(0)!r}")
            # --no-value-info: the input's own entries only.
            bare = os.path.join(tmp, name + "_bare.onnx")
            b = run([args.ampc, model, "-o", bare, "--no-value-info", "-q"])
            if b.returncode:
                fails.append(f"--no-value-info exited {b.returncode}: {b.stderr.strip()[:200]}")
            else:
                for (label, g0), (_, g1) in zip(graphs(orig), graphs(onnx.load(bare))):
                    if [v.name for v in g1.value_info] != [v.name for v in g0.value_info]:
                        fails.append(f"--no-value-info: {label} has value_info {[v.name for v in g1.value_info][:5]}")
            check(name, fails)

        # The sample's details: the input's entries kept first, 't1' now float16; the
        # MatMul's new output typed; the Constants counted on both lines (checked above).
        conv = onnx.load(os.path.join(tmp, "sample_amp.onnx"))
        vi = {v.name: v.type.tensor_type for v in conv.graph.value_info}
        fails = []
        if conv.graph.value_info[0].name != "h" or vi["h"].elem_type != TensorProto.FLOAT:
            fails.append(f"'h' first and float32: {conv.graph.value_info[0]}")
        mm_out = next(nd.output[0] for nd in conv.graph.node if nd.name == "mm")
        if vi[mm_out].elem_type != TensorProto.FLOAT16 or [d.dim_value for d in vi[mm_out].shape.dim] != [2, 4]:
            fails.append(f"{mm_out!r}: {vi[mm_out]}")
        then_g = next(a.g for nd in conv.graph.node if nd.op_type == "If" for a in nd.attribute if a.name == "then_branch")
        if then_g.value_info[0].name != "t1" or then_g.value_info[0].type.tensor_type.elem_type != TensorProto.FLOAT16:
            fails.append(f"then branch value_info: {then_g.value_info}")
        if vi.get("W", None) is None or vi["W"].elem_type != TensorProto.FLOAT16:
            fails.append("the Constant 'W' (stored in 16 bits) has no float16 value_info")
        check("sample details", fails)

        # A training model: the algorithm graph's intermediates are typed too.
        conv = onnx.load(os.path.join(tmp, "mlp_train_amp.onnx"))
        alg = conv.training_info[0].algorithm
        check("mlp_train algorithm", [] if len(alg.value_info) > 0 else ["no value_info in the algorithm graph"])
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
