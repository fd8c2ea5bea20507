#!/usr/bin/env python3
"""Every node name ampc writes is unique within its graph (ONNX requires it; onnxruntime
refuses a file with two nodes of one name): two GELUs written out under one module scope
(as torch.onnx.export names them: /m/Div, /m/Erf, ... and /m/Div_1, ...) fuse into two
Gelu nodes whose names would both be /m/Gelu; the conversion names the second /m/Gelu_1.
`ampc verify` warns of a file whose node names repeat (exit 0: onnx.checker accepts it);
the conversion renames only the nodes it makes, so the model's own names (which
--keep-fp32 globs match) keep their meaning.
Checked for bf16 and fp16 with --opset-upgrade 20 (Gelu is opset 20): names unique in
the output, onnxruntime loads the fp16 one, and converting the result again changes no
name.

usage: test_node_names.py --ampc PATH [--testdata DIR] [--verbose]
Exit 77 (skip) when onnx, onnxruntime or numpy is missing."""
import argparse
import collections
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)


def two_gelus(path):
    rng = np.random.RandomState(36)
    n = helper.make_node
    c = numpy_helper.from_array
    inits = [c(rng.standard_normal((16, 16)).astype(np.float32) * 0.25, "W1"),
             c(rng.standard_normal((16, 16)).astype(np.float32) * 0.25, "W2"),
             c(np.array(1.4142135, np.float32), "sqrt2"), c(np.array(1.0, np.float32), "one"),
             c(np.array(0.5, np.float32), "half")]
    nodes = []
    x = "x"
    for k in range(2):
        s = "" if k == 0 else "_1"
        m = ("", "_1") if k == 0 else ("_2", "_3")
        nodes += [n("MatMul", [x, f"W{k + 1}"], [f"h{k}"], name=f"/m/MatMul{s}"),
                  n("Div", [f"h{k}", "sqrt2"], [f"d{k}"], name=f"/m/Div{s}"),
                  n("Erf", [f"d{k}"], [f"e{k}"], name=f"/m/Erf{s}"),
                  n("Add", [f"e{k}", "one"], [f"a{k}"], name=f"/m/Add{s}"),
                  n("Mul", [f"h{k}", f"a{k}"], [f"p{k}"], name=f"/m/Mul{m[0]}"),
                  n("Mul", [f"p{k}", "half"], [f"g{k}"], name=f"/m/Mul{m[1]}")]
        x = f"g{k}"
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "two_gelus", [vi("x", TensorProto.FLOAT, [4, 16])],
                          [vi(x, TensorProto.FLOAT, [4, 16])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def names(model):
    graphs = [model.graph] + [t.algorithm for t in model.training_info]
    return [[nd.name for nd in g.node] for g in graphs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ampc_names_")
    src = os.path.join(tmp, "two_gelus.onnx")
    two_gelus(src)
    passed = failed = 0
    try:
        # A file with two nodes of one name: ampc verify says onnxruntime refuses it.
        m = onnx.load(src)
        m.graph.node[1].name = m.graph.node[0].name
        dup = os.path.join(tmp, "dup.onnx")
        onnx.save(m, dup)
        r = subprocess.run([a.ampc, "verify", dup], capture_output=True, text=True)
        assert r.returncode == 0 and "warning: node name '/m/MatMul' is used by more than one node" in r.stdout, \
            r.stdout + r.stderr
        r = subprocess.run([a.ampc, "verify", src], capture_output=True, text=True)
        assert r.returncode == 0 and "warning: node name" not in r.stdout, r.stdout
        # The model's own names stay as they are (--keep-fp32 globs and --explain name them,
        # and converting again must mean the same), so the warning stays too.
        out = os.path.join(tmp, "dup_converted.onnx")
        r = subprocess.run([a.ampc, dup, "-o", out, "-q", "--keep-fp32", "/m/MatMul"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        seen = [n.name for n in onnx.load(out).graph.node]
        assert seen.count("/m/MatMul") == 2, seen
        t = {v.name: v.type.tensor_type.elem_type for v in onnx.load(out).graph.value_info}
        kept = [n for n in onnx.load(out).graph.node if n.name == "/m/MatMul"]
        assert all(t.get(n.output[0], TensorProto.FLOAT) == TensorProto.FLOAT for n in kept), "glob missed one"
        r = subprocess.run([a.ampc, "verify", out], capture_output=True, text=True)
        assert "warning: node name '/m/MatMul'" in r.stdout, r.stdout
        passed += 1
        print("ok   verify warns of the model's repeated node names; a conversion keeps them")
    except Exception as e:  # noqa: BLE001
        failed += 1
        print(f"FAIL verify and duplicate names: {e}")
    for prec, extra in (("bf16", ["--opset-upgrade", "20"]), ("fp16", ["--opset-upgrade", "20"])):
        try:
            out, again = os.path.join(tmp, f"{prec}.onnx"), os.path.join(tmp, f"{prec}_again.onnx")
            for s, d in ((src, out), (out, again)):
                r = subprocess.run([a.ampc, s, "-o", d, "--precision", prec] + extra, capture_output=True, text=True)
                assert r.returncode == 0, r.stderr
                if a.verbose:
                    print(r.stderr.strip())
            m = onnx.load(out)
            gelus = sorted(nd.name for nd in m.graph.node if nd.op_type == "Gelu")
            assert gelus == ["/m/Gelu", "/m/Gelu_1"], gelus
            for g in names(m):
                dup = [k for k, v in collections.Counter(g).items() if v > 1 and k]
                assert not dup, f"{prec}: node names used twice: {dup}"
            assert names(onnx.load(again)) == names(m), f"{prec}: converting again renamed nodes"
            if prec == "fp16":
                sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
                x = np.random.RandomState(0).standard_normal((4, 16)).astype(np.float32)
                ref = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
                got = sess.run(None, {"x": x})[0]
                assert np.max(np.abs(got - ref)) < 1e-2, np.max(np.abs(got - ref))
            passed += 1
            print(f"ok   {prec}: fused GELUs named apart, onnxruntime loads it, idempotent")
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL {prec}: {e}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
