"""Control flow in the CPU executor against onnx's reference evaluator: Scan with
non-zero scan axes and reverse directions (which the conformance data does not cover),
Loop with scan outputs, and If reading outer-scope values. Each case is a model built
here, run by `ampc run --inputs DIR --outputs DIR` and compared element by element.
Run by ctest: python3 test_control_flow.py --ampc PATH --testdata DIR (exit 77: skip)."""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
except ImportError as exc:  # the test command installs these; skip where it did not run
    print(f"skip: {exc}")
    sys.exit(77)

F = TensorProto.FLOAT


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def scan_model(in_axis, in_dir, out_axis, out_dir):
    # body: state s (3) and slice x (3) -> s' = s + x, y = s' * 2
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Mul", ["s2", "two"], ["y"])],
        "body",
        [vi("s", [3]), vi("x", [3])],
        [vi("s2", [3]), vi("y", [3])],
        [numpy_helper.from_array(np.array([2.0, 2.0, 2.0], np.float32), "two")],
    )
    seq_shape = [3, 4] if in_axis in (1, -1) else [4, 3]
    node = helper.make_node(
        "Scan", ["init", "seq"], ["final", "ys"], body=body, num_scan_inputs=1,
        scan_input_axes=[in_axis], scan_input_directions=[in_dir],
        scan_output_axes=[out_axis], scan_output_directions=[out_dir])
    g = helper.make_graph([node], "scan", [vi("init", [3]), vi("seq", seq_shape)], [vi("final", None), vi("ys", None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    rng = np.random.default_rng([in_axis + 1, in_dir, out_axis, out_dir])
    feeds = {"init": rng.standard_normal(3).astype(np.float32),
             "seq": rng.standard_normal(seq_shape).astype(np.float32)}
    return m, feeds


def scan_reference(in_axis, in_dir, out_axis, out_dir, feeds):
    """The scan body (s += x; y = 2 s) in NumPy, straight from the Scan spec: onnx's own
    evaluator supports only axis 0 and direction 0 for scan outputs."""
    seq = np.moveaxis(feeds["seq"], in_axis, 0)
    if in_dir:
        seq = seq[::-1]
    s = feeds["init"].copy()
    ys = []
    for x in seq:
        s = (s + x).astype(np.float32)
        ys.append((s * np.float32(2)).astype(np.float32))
    ys = np.stack(ys)
    if out_dir:
        ys = ys[::-1]
    return [s, np.moveaxis(ys, 0, out_axis)]


def loop_model():
    # for i in range(5): acc += i * x; scan output: acc each step
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["fi", "x"], ["ix"]),
         helper.make_node("Add", ["acc", "ix"], ["acc2"]),
         helper.make_node("Identity", ["cond"], ["cond2"]),
         helper.make_node("Identity", ["acc2"], ["out"])],
        "body",
        [vi("i", [], TensorProto.INT64), vi("cond", [], TensorProto.BOOL), vi("acc", [2])],
        [vi("cond2", [], TensorProto.BOOL), vi("acc2", [2]), vi("out", [2])],
    )
    node = helper.make_node("Loop", ["trips", "cond0", "acc0"], ["acc_final", "accs"], body=body)
    g = helper.make_graph([node], "loop", [vi("trips", [], TensorProto.INT64), vi("cond0", [], TensorProto.BOOL),
                                           vi("acc0", [2]), vi("x", [2])],
                          [vi("acc_final", None), vi("accs", None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    feeds = {"trips": np.array(5, np.int64), "cond0": np.array(True), "acc0": np.array([1.0, -1.0], np.float32),
             "x": np.array([0.5, 2.0], np.float32)}
    return m, feeds


def if_model(flag):
    then_g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["t"])], "then", [], [vi("t", [2])])
    else_g = helper.make_graph([helper.make_node("Sub", ["a", "b"], ["e"])], "else", [], [vi("e", [2])])
    node = helper.make_node("If", ["c"], ["r"], then_branch=then_g, else_branch=else_g)
    g = helper.make_graph([node], "if", [vi("c", [], TensorProto.BOOL), vi("a", [2]), vi("b", [2])], [vi("r", None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    feeds = {"c": np.array(flag), "a": np.array([1.0, 2.0], np.float32), "b": np.array([0.25, 4.0], np.float32)}
    return m, feeds


def run_case(ampc, name, model, feeds, tmp, want=None):
    d = os.path.join(tmp, name)
    os.makedirs(os.path.join(d, "in"))
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    for k, (key, arr) in enumerate(feeds.items()):
        with open(os.path.join(d, "in", f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr, key).SerializeToString())
    if want is None:
        want = ReferenceEvaluator(model).run(None, feeds)
    out = os.path.join(d, "out")
    r = subprocess.run([ampc, "run", path, "--inputs", os.path.join(d, "in"), "--outputs", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return f"ampc run exited {r.returncode}: {r.stderr.strip()}"
    for k, w in enumerate(want):
        with open(os.path.join(out, f"output_{k}.pb"), "rb") as f:
            t = onnx.TensorProto()
            t.ParseFromString(f.read())
        got = numpy_helper.to_array(t)
        if got.shape != np.asarray(w).shape:
            return f"output {k}: shape {got.shape}, expected {np.asarray(w).shape}"
        if not np.allclose(got, w, rtol=1e-6, atol=1e-6):
            return f"output {k}: {got.tolist()} expected {np.asarray(w).tolist()}"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    args = ap.parse_args()
    help_text = subprocess.run([args.ampc, "--help"], capture_output=True, text=True).stdout
    if "--outputs" not in help_text:
        print("skip: this ampc has no 'run --outputs'")
        sys.exit(77)
    cases = []
    for in_axis in (0, 1, -1):
        for in_dir in (0, 1):
            for out_axis in (0, 1):
                for out_dir in (0, 1):
                    model, feeds = scan_model(in_axis, in_dir, out_axis, out_dir)
                    want = scan_reference(in_axis, in_dir, out_axis, out_dir, feeds)
                    cases.append((f"scan_ia{in_axis}_id{in_dir}_oa{out_axis}_od{out_dir}", model, feeds, want))
    cases.append(("loop_scan_outputs", *loop_model(), None))
    cases.append(("if_then", *if_model(True), None))
    cases.append(("if_else", *if_model(False), None))
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="ampc_cf_") as tmp:
        for name, model, feeds, want in cases:
            err = run_case(args.ampc, name, model, feeds, tmp, want)
            if err:
                failed += 1
                print(f"FAIL {name}: {err}")
            else:
                passed += 1
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
