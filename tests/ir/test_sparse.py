#!/usr/bin/env python3
"""Sparse tensors (issue 43, item 10). A valid model with a sparse_initializer was refused
("W is undefined"), and one whose sparse initializer's data lay at `../secret.bin` was
never checked and was copied into OUT as it was. Now sparse initializers and Constant's
sparse_value are made dense at load (ONNX's meaning of them), their data loaded under the
rules of dense external data; a sparse tensor ampc keeps as it is (an unknown op's
attribute) or a model-local function whose body holds external data is unsupported
(exit 3), named. Checked, each against onnxruntime where it runs the model:

- a sparse initializer (linear indices; coordinates; values in an external file inside the
  folder) runs as onnxruntime runs it, and converts to a model with a dense initializer
  and no sparse one that runs the same;
- Constant's sparse_value: the same;
- `../secret.bin` as the location of a sparse initializer's values, or of a Constant's
  sparse_value: exit 1 from verify, convert and run, OUT not written;
- an index out of range, indices not ascending, values of two dims: exit 1;
- dims whose dense form passes 2 GiB, a sparse attribute of an unknown op with external
  data, a function body with external data: exit 3, named.

usage: test_sparse.py --ampc PATH [--testdata DIR] [--verbose]"""
import argparse
import os
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ampc_testlib as tl  # noqa: E402

X = np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1.0


def sparse(name, values, indices, dims, ext=None):
    vals = numpy_helper.from_array(np.asarray(values, np.float32), name)
    if ext:  # values in file ext at offset 0
        loc, folder = ext
        with open(os.path.join(folder, os.path.basename(loc)) if not loc.startswith("..") else
                  os.path.join(folder, loc), "wb") as f:
            f.write(vals.raw_data)
        vals.ClearField("raw_data")
        vals.data_location = TensorProto.EXTERNAL
        for k, v in (("location", loc), ("offset", "0"), ("length", str(4 * len(values)))):
            e = vals.external_data.add()
            e.key, e.value = k, v
    return helper.make_sparse_tensor(vals, numpy_helper.from_array(np.asarray(indices, np.int64), ""), dims)


def model(nodes, sparse_inits=(), opset=13, functions=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])])
    g.sparse_initializer.extend(sparse_inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], functions=list(functions))
    m.ir_version = 8
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    tmp = tl.tempdir("ampc_sparse_")
    ort.set_default_logger_severity(4)
    tests = []

    def case(label, fn):
        tests.append((label, lambda ctx: fn()))

    def ampc(*args):
        return tl.ampc(a.ampc, *args, verbose=a.verbose)

    def run_y(path):
        folder = os.path.dirname(path)
        with open(os.path.join(folder, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(X, "X").SerializeToString())
        out = os.path.join(folder, "out")
        r = ampc("run", path, "--inputs", folder, "--outputs", out)
        assert r.returncode == 0, f"ampc run {path}: exit {r.returncode}: {r.stderr.strip()}"
        t = onnx.TensorProto()
        with open(os.path.join(out, "output_0.pb"), "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)

    def runs_as_ort(label, build):
        def check():
            folder = os.path.join(tmp, label.replace(" ", "_"))
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, "model.onnx")
            onnx.save(build(folder), path)
            want = ort.InferenceSession(path).run(None, {"X": X})[0]
            got = run_y(path)
            assert np.array_equal(got, want), f"ampc {got} != onnxruntime {want}"
            conv = os.path.join(folder, "conv", "model.onnx")
            os.makedirs(os.path.dirname(conv), exist_ok=True)
            r = ampc(path, "-o", conv, "--passes", "none", "-q")
            assert r.returncode == 0, f"convert: exit {r.returncode}: {r.stderr.strip()}"
            cm = onnx.load(conv)
            assert not cm.graph.sparse_initializer, "the output still has a sparse initializer"
            assert not any(at.type == onnx.AttributeProto.SPARSE_TENSOR for n in cm.graph.node for at in n.attribute), \
                "the output still has a sparse attribute"
            got = run_y(conv)
            assert np.array_equal(got, want), f"converted: ampc {got} != onnxruntime {want}"
        case(f"runs as onnxruntime runs it, and converts dense: {label}", check)

    add = [helper.make_node("Add", ["X", "W"], ["Y"])]
    runs_as_ort("sparse initializer, linear indices",
                lambda d: model(add, [sparse("W", [1.5, -2.5], [1, 4], [2, 3])]))
    runs_as_ort("sparse initializer, coordinates",
                lambda d: model(add, [sparse("W", [1.5, -2.5, 4], [[0, 0], [1, 1], [1, 2]], [2, 3])]))
    runs_as_ort("sparse initializer, no values", lambda d: model(add, [sparse("W", [], [], [2, 3])]))
    runs_as_ort("sparse initializer, values in a file of the folder",
                lambda d: model(add, [sparse("W", [1.5, -2.5], [0, 5], [2, 3], ("w.bin", d))]))
    runs_as_ort("Constant's sparse_value",
                lambda d: model([helper.make_node("Constant", [], ["W"],
                                                  sparse_value=sparse("W", [3.0], [2], [2, 3]))] + add))

    def refused(label, build, code, msg):
        def check():
            folder = os.path.join(tmp, label.replace(" ", "_").replace("'", ""), "sub")
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, "model.onnx")
            onnx.save(build(folder), path)
            out = os.path.join(folder, "out.onnx")
            for args in (["verify", path], [path, "-o", out], ["run", path]):
                r = ampc(*args)
                assert r.returncode == code, f"ampc {' '.join(args)}: exit {r.returncode}, want {code}: " \
                                             f"{r.stderr.strip()}"
                assert msg in r.stderr, f"ampc {' '.join(args)}: '{msg}' not in: {r.stderr.strip()}"
            assert not os.path.exists(out), "convert wrote OUT"
        case(f"refused (exit {code}): {label}", check)

    refused("a sparse initializer whose values lie at ../secret.bin",
            lambda d: model(add, [sparse("W", [1.5, -2.5], [1, 4], [2, 3], ("../secret.bin", d))]), 1,
            "external data location '../secret.bin' leaves the model's folder")
    refused("an unused sparse initializer whose values lie at ../secret.bin",
            lambda d: model([helper.make_node("Relu", ["X"], ["Y"])],
                            [sparse("S", [1.5], [1], [2, 3], ("../secret.bin", d))]), 1,
            "external data location '../secret.bin' leaves the model's folder")
    refused("a Constant's sparse_value whose values lie at ../secret.bin",
            lambda d: model([helper.make_node("Constant", [], ["W"],
                                              sparse_value=sparse("W", [3.0], [2], [2, 3], ("../secret.bin", d)))]
                            + add), 1, "external data location '../secret.bin' leaves the model's folder")
    refused("an index out of range", lambda d: model(add, [sparse("W", [1.5], [6], [2, 3])]), 1,
            "index 0 names no element of its 6")
    refused("indices not ascending", lambda d: model(add, [sparse("W", [1.5, 2.5], [4, 1], [2, 3])]), 1,
            "index 1 is not after the one before it")
    refused("indices naming one element twice", lambda d: model(add, [sparse("W", [1.5, 2.5], [1, 1], [2, 3])]), 1,
            "index 1 is not after the one before it")
    refused("dims over 2 GiB dense",
            lambda d: model([helper.make_node("Relu", ["X"], ["Y"])], [sparse("S", [1.5], [1], [1 << 20, 1 << 20])]),
            3, "sparse tensor 'S' would take over 2147483648 bytes dense")

    def unknown_op(d):
        m = model([helper.make_node("Relu", ["X"], ["Y"]),
                   helper.make_node("Tag", ["Y"], ["T"], domain="com.example",
                                    data=sparse("S", [1.5], [1], [2, 3], ("s.bin", d)))])
        m.opset_import.append(helper.make_opsetid("com.example", 1))
        return m
    refused("an unknown op's sparse attribute with external data", unknown_op, 3,
            "a sparse tensor whose values lie in an external file")

    def function_body(d):
        w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
        with open(os.path.join(d, "f.bin"), "wb") as f:
            f.write(w.raw_data)
        w.ClearField("raw_data")
        w.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "f.bin"), ("offset", "0"), ("length", "24")):
            e = w.external_data.add()
            e.key, e.value = k, v
        fn = helper.make_function("local", "AddOnes", ["x"], ["y"],
                                  [helper.make_node("Constant", [], ["w"], value=w),
                                   helper.make_node("Add", ["x", "w"], ["y"])],
                                  [helper.make_opsetid("", 13)])
        m = model([helper.make_node("AddOnes", ["X"], ["Y"], domain="local")], functions=[fn])
        m.opset_import.append(helper.make_opsetid("local", 1))
        return m
    refused("a model-local function whose body holds external data", function_body, 3,
            "function 'AddOnes': a tensor of its body keeps its data in an external file")

    return tl.run(tests, None, verbose=a.verbose)


if __name__ == "__main__":
    sys.exit(main())
