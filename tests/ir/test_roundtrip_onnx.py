#!/usr/bin/env python3
"""`ampc IN -o OUT --passes none` against the reference implementation: for every
model.onnx of libonnx-testdata (and a few models that use newer ONNX fields and external
data), onnx.load(IN) == onnx.load(OUT) as protobuf messages (unknown fields included), and
onnx.checker accepts OUT wherever it accepts IN. Prints "N passed, M failed"; exit 77 (skip)
when the onnx package is missing.

usage: test_roundtrip_onnx.py --ampc PATH --testdata DIR [--jobs 2] [--limit N]
"""
import argparse
import concurrent.futures
import glob
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper as nh
    from onnx import TensorProto, helper
except ImportError:
    print("onnx is not installed: skipping (pip install onnx)")
    sys.exit(77)

CATEGORIES = ("node", "simple", "pytorch-converted", "pytorch-operator", "real")


def first_difference(a, b, path="model"):
    """A readable description of the first field where messages a and b differ."""
    if type(a) is not type(b):
        return f"{path}: different message types"
    fa = {f.name: v for f, v in a.ListFields()}
    fb = {f.name: v for f, v in b.ListFields()}
    for name in sorted(set(fa) | set(fb)):
        if name not in fa or name not in fb:
            where = "the original" if name in fa else "the saved model"
            return f"{path}.{name}: present in {where} only"
        va, vb = fa[name], fb[name]
        if va == vb:
            continue
        field = a.DESCRIPTOR.fields_by_name[name]
        is_msg = field.message_type is not None
        repeated = getattr(field, "is_repeated", None)
        if repeated is None:
            repeated = field.label == field.LABEL_REPEATED
        if repeated:
            if len(va) != len(vb):
                return f"{path}.{name}: {len(va)} vs {len(vb)} entries"
            for i, (x, y) in enumerate(zip(va, vb)):
                if x != y:
                    if is_msg:
                        return first_difference(x, y, f"{path}.{name}[{i}]")
                    return f"{path}.{name}[{i}]: {x!r:.200} vs {y!r:.200}"
        if is_msg:
            return first_difference(va, vb, f"{path}.{name}")
        return f"{path}.{name}: {va!r:.200} vs {vb!r:.200}"
    ua = a.SerializeToString(deterministic=True)
    ub = b.SerializeToString(deterministic=True)
    if ua != ub:
        return f"{path}: known fields equal, unknown fields differ\n  original: {str(a)[:400]}\n  saved:    {str(b)[:400]}"
    return f"{path}: equal"


def same_model(orig, saved):
    """Proto equality, plus byte equality of the deterministic serialisation, which
    also covers unknown fields whatever this protobuf's __eq__ does with them."""
    return orig == saved and orig.SerializeToString(deterministic=True) == saved.SerializeToString(
        deterministic=True)


def checker_ok(model_or_path):
    try:
        onnx.checker.check_model(model_or_path, full_check=False)
        return None
    except Exception as e:  # onnx raises ValidationError and others
        return str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__


def run_ampc(ampc, src, dst, extra=()):
    cmd = [ampc, src, "-o", dst, "--passes", "none", *extra]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return f"timed out: {' '.join(cmd)}"
    if p.returncode != 0:
        return f"exit {p.returncode}: {p.stderr.strip()[:500]}"
    return None


def drop_default_location(m):
    """onnx.load marks tensors whose external data it read in with an explicit
    data_location=DEFAULT; a file that never had external data has none. Same meaning."""
    for t in m.graph.initializer:
        if t.HasField("data_location") and t.data_location == TensorProto.DEFAULT:
            t.ClearField("data_location")


def densified(orig, saved):
    """ampc makes a graph's sparse initializers dense at load (ONNX's meaning of them;
    issue 43): the saved model holds each as a dense initializer of its name and values.
    Checks that, then takes both forms out, so the rest compares as proto and bytes."""
    want = {}
    for sp in orig.graph.sparse_initializer:
        dense = np.zeros(list(sp.dims), dtype=nh.to_array(sp.values).dtype)
        idx = nh.to_array(sp.indices)
        flat = dense.reshape(-1)
        if idx.ndim == 1:
            flat[idx] = nh.to_array(sp.values)
        else:
            flat[np.ravel_multi_index(idx.T, dense.shape)] = nh.to_array(sp.values)
        want[sp.values.name] = dense
    if not want:
        return None
    got = {t.name: nh.to_array(t) for t in saved.graph.initializer if t.name in want}
    for name, dense in want.items():
        if name not in got or not np.array_equal(got[name], dense, equal_nan=True):
            return f"sparse initializer '{name}' is not saved as its dense form"
    del orig.graph.sparse_initializer[:]
    keep = [t for t in saved.graph.initializer if t.name not in want]
    del saved.graph.initializer[:]
    saved.graph.initializer.extend(keep)
    return None


def check_one(ampc, src, dst, extra=(), load_external=True, normalise=False):
    """Returns (ok, original_checker_failure, message)."""
    err = run_ampc(ampc, src, dst, extra)
    if err:
        return False, None, err
    try:
        orig = onnx.load(src, load_external_data=load_external)
        saved = onnx.load(dst, load_external_data=load_external)
    except Exception as e:
        return False, None, f"onnx.load failed: {e}"
    if normalise:
        drop_default_location(orig)
        drop_default_location(saved)
    err = densified(orig, saved)
    if err:
        return False, None, err
    if not same_model(orig, saved):
        return False, None, "saved model differs: " + first_difference(orig, saved)
    orig_err = checker_ok(src)
    saved_err = checker_ok(dst)
    if orig_err is None and saved_err is not None:
        return False, None, f"onnx.checker rejects the saved model: {saved_err}"
    return True, orig_err, ""


# ---- models that use what the conformance corpus does not ------------------------------


def newer_fields_model():
    """training_info, a local function, metadata, sparse initializer, value_info, and
    fields added after ONNX 1.12 (unknown to ampc's schema): node/graph metadata_props,
    function value_info and metadata."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, float("nan")])
    sp = helper.make_sparse_tensor(helper.make_tensor("SP", TensorProto.FLOAT, [2], [1.0, 2.0]),
                                   helper.make_tensor("SP_i", TensorProto.INT64, [2], [0, 3]), [4])
    mm = helper.make_node("MatMul", ["X", "W"], ["H"], name="mm", doc_string="node doc")
    call = helper.make_node("MyFunc", ["H"], ["Y"], name="call", domain="custom.domain")
    newer = []
    if hasattr(call, "metadata_props"):
        call.metadata_props.add(key="node_meta", value="1")
        newer.append("NodeProto.metadata_props")
    g = helper.make_graph(
        [mm, call], "newer", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 2])], initializer=[w],
        value_info=[helper.make_tensor_value_info("H", TensorProto.FLOAT, ["N", 2])],
        sparse_initializer=[sp], doc_string="graph doc")
    if hasattr(g, "metadata_props"):
        g.metadata_props.add(key="graph_meta", value="2")
        newer.append("GraphProto.metadata_props")
    fn = helper.make_function("custom.domain", "MyFunc", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                              [helper.make_opsetid("", 13)], doc_string="fn doc")
    if hasattr(fn, "value_info"):
        fn.value_info.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 2]))
        newer.append("FunctionProto.value_info")
    init = helper.make_graph([helper.make_node("Constant", [], ["W_init"], value=w)], "init", [],
                             [helper.make_tensor_value_info("W_init", TensorProto.FLOAT, [2, 2])])
    alg = helper.make_graph([helper.make_node("Neg", ["W"], ["W_new"])], "alg", [],
                            [helper.make_tensor_value_info("W_new", TensorProto.FLOAT, [2, 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("custom.domain", 1)],
                          functions=[fn], producer_name="ampc-tests", producer_version="1", model_version=7,
                          doc_string="model doc")
    m.training_info.append(helper.make_training_info(alg, [("W", "W_new")], init, [("W", "W_init")]))
    m.ir_version = 8
    helper.set_model_props(m, {"author": "ampc", "empty": ""})
    return m, newer


def big_initializer_model():
    """Y = X + W with W 64 KiB: big enough to go to external data."""
    import array
    vals = array.array("f", [i * 0.5 for i in range(16384)])
    w = helper.make_tensor("W", TensorProto.FLOAT, [16384], vals.tobytes(), raw=True)
    g = helper.make_graph([helper.make_node("Add", ["X", "W"], ["Y"])], "big",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [16384])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [16384])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def synthetic_cases(ampc, tmp):
    """Yields (name, ok, message)."""
    m, newer = newer_fields_model()
    src = os.path.join(tmp, "newer.onnx")
    onnx.save(m, src)
    ok, _, msg = check_one(ampc, src, os.path.join(tmp, "newer_out.onnx"))
    yield f"newer fields ({', '.join(newer) or 'none available in this onnx'})", ok, msg

    # external data in, single file out (auto), and external again (always)
    ext_dir = os.path.join(tmp, "ext")
    os.makedirs(ext_dir)
    src = os.path.join(ext_dir, "model.onnx")
    onnx.save_model(big_initializer_model(), src, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.weights", size_threshold=1024)
    out_auto = os.path.join(tmp, "ext_auto.onnx")
    ok, _, msg = check_one(ampc, src, out_auto, normalise=True)
    if ok and os.path.exists(out_auto + ".data"):
        ok, msg = False, "auto wrote external data for a 64 KiB model"
    yield "external data in, --external-data auto (one file) out", ok, msg
    out_dir = os.path.join(tmp, "ext_always")
    os.makedirs(out_dir)
    out_always = os.path.join(out_dir, "model.onnx")
    ok, _, msg = check_one(ampc, src, out_always, ("--external-data", "always"), normalise=True)
    if ok:
        saved = onnx.load(out_always, load_external_data=False)
        w = [t for t in saved.graph.initializer if t.name == "W"]
        if not w or w[0].data_location != TensorProto.EXTERNAL:
            ok, msg = False, "--external-data always: W is not external in the saved model"
    yield "external data in, --external-data always out", ok, msg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="only the first N models (debugging)")
    args = ap.parse_args()

    models = []
    for cat in CATEGORIES:
        models += glob.glob(os.path.join(args.testdata, cat, "*", "model.onnx"))
    models.sort()
    if args.limit:
        models = models[: args.limit]
    elif len(models) < 1000:
        print(f"only {len(models)} model.onnx files under {args.testdata}: is libonnx-testdata installed?")
        print(f"0 passed, {len(models) or 1} failed")
        return 1

    failures, orig_rejected = [], []
    passed = 0
    with tempfile.TemporaryDirectory(prefix="ampc_rt_") as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futs = {pool.submit(check_one, args.ampc, src, os.path.join(tmp, f"{i}.onnx")): src
                    for i, src in enumerate(models)}
            for fut in concurrent.futures.as_completed(futs):
                src = futs[fut]
                try:
                    ok, orig_err, msg = fut.result()
                except Exception as e:  # a bug in this script should still name the model
                    ok, orig_err, msg = False, None, f"test error: {e!r}"
                if orig_err:
                    orig_rejected.append((src, orig_err))
                if ok:
                    passed += 1
                else:
                    failures.append((src, msg))
        synth_pass, synth_fail = 0, []
        for name, ok, msg in synthetic_cases(args.ampc, tmp):
            if ok:
                synth_pass += 1
            else:
                synth_fail.append((name, msg))

    for src, msg in sorted(failures):
        print(f"FAIL {src}: {msg}")
    for name, msg in synth_fail:
        print(f"FAIL synthetic '{name}': {msg}")
    if orig_rejected:
        print(f"note: onnx {onnx.__version__} checker rejects {len(orig_rejected)} original models "
              "(the saved copy is not required to pass there):")
        for src, err in sorted(orig_rejected)[:20]:
            print(f"  {src}: {err}")
    print(f"testdata: {len(models)} models, onnx {onnx.__version__}; synthetic: {synth_pass} passed, "
          f"{len(synth_fail)} failed")
    print(f"{passed} passed, {len(failures) + len(synth_fail)} failed")
    return 1 if failures or synth_fail else 0


if __name__ == "__main__":
    sys.exit(main())
