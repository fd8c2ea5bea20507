#!/usr/bin/env python3
"""What the verifier refuses where onnxruntime and onnx.checker do (issue 43, items 6, 7
and 8): models that `ampc verify`, convert and `run` accepted, some computing something
else than the model says. Checked:

- item 6, attributes against the op's version: ir/ops.def's ATTRS column against
  onnx.defs (for every ai.onnx and ai.onnx.preview.training op of the table, each
  attribute any version of the op has is listed, with its type and the opsets
  [since, until) that have it, and nothing else is: the verifier refuses what the column
  does not give the node's version, so a gap would refuse valid models); ReduceSum-13 and
  ReduceMean-18 with an `axes` attribute (it was ignored and the node reduced over every
  axis, exit 0; onnxruntime: "Unrecognized attribute"), Unsqueeze-13 with `axes`, Relu
  with an attribute no version has, GatherND-11 with `batch_dims` (came with 12), Cast-13
  whose `to` is a STRING are refused; ReduceSum-11 with `axes`, ReduceSum-13 with an axes
  input and Cast-1 with a STRING `to` still run, with the results numpy gives;
- item 7: an initializer that shadows a graph input with another shape (X: [2,3],
  initializer X of [4]; onnxruntime: "Shape of initializer X does not match");
- item 8: a node of a domain opset_import does not name (onnx.checker: "No opset import
  for domain"), and a float -> int64 update_binding (`run` refused it before step 1);
  each refused by verify, convert and run with exit 1, naming what is wrong.

usage: test_verify_hostile.py --ampc PATH [--testdata DIR] [--verbose]"""
import argparse
import os
import re
import sys

try:
    import numpy as np
    import onnx
    import onnx.defs
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ampc_testlib as tl  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TYPE_NAMES = {getattr(onnx.defs.OpSchema.AttrType, n): n for n in (
    "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS", "STRINGS", "SPARSE_TENSOR", "TENSORS",
    "GRAPHS", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS")}


def table_rows():
    """(domain, name, [(attr, type, since, until)]) for every row of ops.def."""
    text = re.sub(r"/\*.*?\*/", "", open(os.path.join(ROOT, "ir", "ops.def")).read(), flags=re.S)
    rows = []
    for m in re.finditer(r'^AMP_OP\(\w+, "([^"]*)", "(\w+)"', text, re.M):
        i = text.index("ATTRS(", m.end())
        j, depth = i + len("ATTRS("), 1
        while depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        body = text[i + 6:j - 1]
        attrs = [(a, t, 0, 0) for a, t in re.findall(r'\bA\("(\w+)", (\w+)\)', body)]
        attrs += [(a, t, int(lo), int(hi)) for a, t, lo, hi in
                  re.findall(r'\bAV\("(\w+)", (\w+), (\d+), (\d+)\)', body)]
        rows.append((m.group(1), m.group(2), attrs))
    return rows


def onnx_attrs(domain, name):
    """The rows the table should hold for the op: (attr, type, since, until), A-rows with
    since = until = 0, from every version of the op's schema."""
    schemas = onnx.defs.get_all_schemas_with_history()
    versions = sorted({s.since_version for s in schemas if s.name == name and s.domain == domain})
    spans = {}
    for k, v in enumerate(versions):
        nxt = versions[k + 1] if k + 1 < len(versions) else 0
        for a, at in onnx.defs.get_schema(name, v, domain).attributes.items():
            t = TYPE_NAMES[at.type]
            lst = spans.setdefault(a, [])
            if lst and lst[-1][1] == t and lst[-1][3] == v:
                lst[-1] = (a, t, lst[-1][2], nxt)
            else:
                lst.append((a, t, v, nxt))
    want = set()
    for lst in spans.values():
        for a, t, lo, hi in lst:
            want.add((a, t, 0, 0) if lo == versions[0] and hi == 0 else (a, t, lo, hi))
    return versions, want


def check_table():
    bad = []
    for dom, name, attrs in table_rows():
        if dom not in ("", "ai.onnx.preview.training"):
            continue
        versions, want = onnx_attrs(dom, name)
        if not versions:
            bad.append(f"{name}: no schema in onnx {onnx.__version__}")
            continue
        have = set(attrs)
        if have != want:
            bad.append(f"{dom or 'ai.onnx'} {name}: table lacks {sorted(want - have)}, has extra {sorted(have - want)}")
    assert not bad, "ops.def's ATTRS column and onnx.defs disagree:\n  " + "\n  ".join(bad)


def model(nodes, opset, inits=(), x_shape=(2, 3), y_type=TensorProto.FLOAT):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("Y", y_type, None)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def refused(label, m, msg):
    """A case: verify, convert and run refuse m with exit 1 and msg; convert writes nothing."""
    def check(ctx):
        path, out = os.path.join(ctx.tmp, "bad.onnx"), os.path.join(ctx.tmp, "out.onnx")
        onnx.save(m, path)
        for args in (["verify", path], [path, "-o", out], ["run", path]):
            r = tl.ampc(ctx.ampc, *args, verbose=ctx.verbose)
            assert r.returncode == 1, f"ampc {' '.join(args)}: exit {r.returncode}, want 1: {r.stderr.strip()}"
            assert msg in r.stderr, f"ampc {' '.join(args)}: '{msg}' not in: {r.stderr.strip()}"
        assert not os.path.exists(out), "convert wrote an output"
    return f"refused: {label}", check


def accepted(label, m, x, want):
    """A case: `ampc run` of m on X = x gives want."""
    def check(ctx):
        folder = os.path.join(ctx.tmp, label.split()[0])
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "model.onnx")
        onnx.save(m, path)
        with open(os.path.join(folder, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x, "X").SerializeToString())
        r = tl.ampc(ctx.ampc, "run", path, "--inputs", folder, "--outputs", folder, verbose=ctx.verbose)
        assert r.returncode == 0, f"exit {r.returncode}: {r.stderr.strip()}"
        t = onnx.TensorProto()
        with open(os.path.join(folder, "output_0.pb"), "rb") as f:
            t.ParseFromString(f.read())
        got = numpy_helper.to_array(t)
        assert got.shape == want.shape and np.allclose(got, want), f"got {got}, want {want}"
    return f"accepted: {label}", check


def training_model_of_int64_update():
    tr = model([helper.make_node("Mul", ["X", "W"], ["Y"])], 13, [numpy_helper.from_array(np.ones(3, np.float32), "W")])
    ti = tr.training_info.add()
    ti.algorithm.CopyFrom(helper.make_graph([helper.make_node("Cast", ["W"], ["W_new"], to=TensorProto.INT64)], "alg",
                                            [], [helper.make_tensor_value_info("W_new", TensorProto.INT64, [3])]))
    b = ti.update_binding.add()
    b.key, b.value = "W", "W_new"
    return tr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    ctx = argparse.Namespace(ampc=a.ampc, tmp=tl.tempdir("ampc_verify_hostile_"), verbose=a.verbose)
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    node = helper.make_node
    tests = [
        ("ops.def's ATTRS column agrees with onnx.defs for ai.onnx and training ops", lambda ctx: check_table()),
        # Item 6: attributes the op's version does not have.
        refused("ReduceSum-13 with an axes attribute", model([node("ReduceSum", ["X"], ["Y"], axes=[1])], 13),
                "ReduceSum-13 has no attribute 'axes'"),
        refused("ReduceMean-18 with an axes attribute", model([node("ReduceMean", ["X"], ["Y"], axes=[1])], 18),
                "ReduceMean-18 has no attribute 'axes'"),
        refused("Unsqueeze-13 with an axes attribute", model([node("Unsqueeze", ["X"], ["Y"], axes=[0])], 13),
                "Unsqueeze-13 has no attribute 'axes'"),
        refused("Relu with an attribute no version has", model([node("Relu", ["X"], ["Y"], alpha=0.5)], 14),
                "Relu has no attribute 'alpha'"),
        refused("GatherND-11 with batch_dims (it came with 12)",
                model([node("GatherND", ["X", "axes"], ["Y"], batch_dims=0)], 11, [axes]),
                "GatherND-11 has no attribute 'batch_dims' (it came with opset 12)"),
        refused("Cast-13 whose 'to' is a STRING",
                model([node("Cast", ["X"], ["Y"], to="FLOAT16")], 13, y_type=TensorProto.FLOAT16),
                "attribute 'to' has type STRING, but Cast expects INT"),
        # Item 7: an initializer shadowing a graph input with another shape.
        refused("an initializer shadowing input X [2,3] with shape [4]",
                model([node("Relu", ["X"], ["Y"])], 13, [numpy_helper.from_array(np.ones(4, np.float32), "X")]),
                "initializer 'X' holds data of shape [4] but the graph input 'X' is declared [2,3]"),
        # Item 8: a domain not imported; an update_binding of another dtype.
        refused("a com.microsoft node without an opset_import of com.microsoft",
                model([node("FusedMatMul", ["X", "W"], ["Y"], domain="com.microsoft")], 13,
                      [numpy_helper.from_array(np.ones((3, 2), np.float32), "W")]),
                "its domain 'com.microsoft' is not imported"),
        refused("a float initializer updated by an int64 update_binding", training_model_of_int64_update(),
                "update_binding 'W' -> 'W_new': 'W_new' is int64, but the initializer 'W' it updates is float"),
        # Their valid forms still run.
        accepted("ReduceSum-11 with an axes attribute",
                 model([node("ReduceSum", ["X"], ["Y"], axes=[1], keepdims=0)], 11), x, x.sum(axis=1)),
        accepted("ReduceSum-13 with an axes input",
                 model([node("ReduceSum", ["X", "axes"], ["Y"], keepdims=0)], 13, [axes]), x, x.sum(axis=1)),
        accepted("Cast-1 whose 'to' is a STRING",
                 model([node("Cast", ["X"], ["Y"], to="DOUBLE")], 1, y_type=TensorProto.DOUBLE), x,
                 x.astype(np.float64)),
    ]
    return tl.run(tests, ctx, verbose=a.verbose)


if __name__ == "__main__":
    sys.exit(main())
