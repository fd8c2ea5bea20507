#!/usr/bin/env python3
"""The bundled models (models/, written by models/make_models.py):
- each passes onnx.checker (full_check), loads in onnxruntime and reproduces its
  test_data_set_0 outputs; the committed files are what make_models.py writes;
- mlp_train's training_info is valid ONNX (onnx.checker ignores training_info, so the
  test checks the bindings and checks main graph + algorithm as one graph) and its
  training step, run by onnx's reference evaluator, makes the loss go down;
- mlp_grads' gradients match central finite differences of the loss, computed by
  onnxruntime on a float64 copy of the forward graph;
- `ampc MODEL -o OUT --passes none` round-trips each model (proto equality);
- differential test: `ampc run MODEL --inputs test_data_set_0 --outputs DIR` writes
  output_<i>.pb named after graph output i, and the values match onnxruntime's (CPU,
  float32: rtol 1e-4, atol 1e-5) on the bundled models and the conformance models listed
  in CONFORMANCE.
Prints "N passed, M failed" last; exit 77 (skip) when onnx, onnxruntime or numpy is
missing.

usage: test_models.py --ampc PATH --testdata DIR [--verbose]
"""
import argparse
import copy
import glob
import os
import subprocess
import sys
import traceback

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"{e.name} is not installed: skipping (pip install numpy onnx onnxruntime)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402
MODELS = os.path.join(ROOT, "models")
BUNDLED = ("mlp_grads", "mlp_train", "cnn_infer")
PARAMS = ("W1", "b1", "W2", "b2")

# Conformance models for the differential test against onnxruntime (paths under
# --testdata); ones that are missing from the installed data are skipped.
# All are ones onnxruntime 1.32 still runs (it dropped kernels for some old opsets:
# Gemm-6, AveragePool-1, BatchNormalization-6, PRelu-6, ...).
CONFORMANCE = (
    "pytorch-converted/test_Linear_no_bias",
    "pytorch-converted/test_Conv2d",
    "pytorch-converted/test_Conv2d_padding",
    "pytorch-converted/test_Conv2d_strided",
    "pytorch-converted/test_MaxPool2d",
    "pytorch-converted/test_Softmax",
    "pytorch-converted/test_ReLU",
    "pytorch-converted/test_Tanh",
    "pytorch-converted/test_Embedding",
    "pytorch-converted/test_PixelShuffle",
    "pytorch-operator/test_operator_reduced_sum",
    "pytorch-operator/test_operator_flatten",
    "pytorch-operator/test_operator_concat2",
    "simple/test_single_relu_model",
    "simple/test_expand_shape_model1",
    "simple/test_sign_model",
)

# Finite differences: float64 central differences; a gradient entry passes when
# |analytic - numeric| / max(|analytic|, |numeric|, FD_FLOOR * max|numeric of that param|)
# < FD_TOL. The floor keeps entries that are ~0 (a ReLU unit dead for the whole batch)
# from dividing by ~0; the analytic gradients come from the float32 model.
FD_EPS, FD_TOL, FD_FLOOR, FD_SAMPLES = 1e-5, 1e-2, 1e-3, 24


# ---- helpers -----------------------------------------------------------------------

def model_path(name):
    return os.path.join(MODELS, name, "model.onnx")


def load_case(folder):
    """{name: array} inputs and outputs of folder/test_data_set_0, in file order."""
    data = os.path.join(folder, "test_data_set_0")

    def read(prefix):
        out = []
        for i in range(len(glob.glob(os.path.join(data, prefix + "_*.pb")))):
            t = onnx.load_tensor(os.path.join(data, f"{prefix}_{i}.pb"))
            out.append((t.name, numpy_helper.to_array(t)))
        return out

    return read("input"), read("output")


def ort_session(model):
    so = ort.SessionOptions()
    so.log_severity_level = 3  # mlp_train's optimizer state is unused by its main graph
    src = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def run_ort(model, feeds):
    sess = ort_session(model)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def feeds_for(model_file, inputs):
    """Feeds keyed by graph input name: test data tensors may be unnamed (old
    conformance data), so fall back to position among the non-initializer inputs."""
    m = onnx.load(model_file, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    return {(n or names[i]): v for i, (n, v) in enumerate(inputs)}


def assert_close(name, got, want, rtol, atol):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"{name}: shape {got.shape}, expected {want.shape}")
    if got.dtype != want.dtype:
        raise AssertionError(f"{name}: dtype {got.dtype}, expected {want.dtype}")
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        err = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))
        raise AssertionError(f"{name}: max abs difference {err:.3g} (rtol {rtol}, atol {atol})")


def combined_training_graph(model, i=0):
    """ONNX defines a training step as the graph whose node/input/initializer/output/
    value_info lists are the main graph's followed by training_info[i].algorithm's; this
    builds that graph as an ordinary model (no training_info)."""
    c = copy.deepcopy(model)
    alg = c.training_info[i].algorithm
    g = c.graph
    g.node.extend(alg.node)
    g.input.extend(alg.input)
    g.initializer.extend(alg.initializer)
    g.sparse_initializer.extend(alg.sparse_initializer)
    g.output.extend(alg.output)
    g.value_info.extend(alg.value_info)
    del c.training_info[:]
    return c


def ancestors(graph, outputs):
    """The nodes of graph that outputs depend on, in graph order."""
    need, keep = set(outputs), []
    for node in reversed(graph.node):
        if any(o in need for o in node.output):
            keep.append(node)
            need.update(i for i in node.input if i)
    return keep[::-1]


def float64_forward(model, params):
    """A float64 copy of the part of model that computes `loss`, with the parameters
    turned into graph inputs (so one session serves every perturbation)."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    nodes = copy.deepcopy(ancestors(g, ["loss"]))
    for node in nodes:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
    inputs = []
    for vi in list(g.input) + [
            helper.make_tensor_value_info(p, inits[p].data_type, list(inits[p].dims)) for p in params]:
        vi = copy.deepcopy(vi)
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
        inputs.append(vi)
    out = helper.make_tensor_value_info("loss", TensorProto.DOUBLE, [])
    m = helper.make_model(helper.make_graph(nodes, "forward64", inputs, [out]),
                          opset_imports=list(model.opset_import))
    m.ir_version = model.ir_version
    onnx.checker.check_model(m, full_check=True)
    return m


def same_model(a, b):
    return a == b and a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True)


# ---- tests -------------------------------------------------------------------------

class Ctx:
    def __init__(self, args):
        self.args = args
        self.tmp = tl.tempdir("ampc_models_")
        self.notes = []
        self._run_help = None

    def ampc_run_help(self):
        """`ampc --help` text when it lists a `run` command, else None."""
        if self._run_help is None:
            p = subprocess.run([self.args.ampc, "--help"], capture_output=True, text=True)
            text = p.stdout + p.stderr
            self._run_help = text if "ampc run" in text else ""
            if self._run_help:
                p = subprocess.run([self.args.ampc, "run", "--help"], capture_output=True, text=True)
                self._run_help += p.stdout + p.stderr
        return self._run_help or None


def test_checker(ctx, name):
    onnx.checker.check_model(model_path(name), full_check=True)


def test_ort_matches_test_data(ctx, name):
    folder = os.path.join(MODELS, name)
    inputs, outputs = load_case(folder)
    got = run_ort(model_path(name), feeds_for(model_path(name), inputs))
    if [n for n, _ in outputs] != list(got):
        raise AssertionError(f"outputs {list(got)}, test data has {[n for n, _ in outputs]}")
    for n, want in outputs:
        assert_close(n, got[n], want, rtol=1e-5, atol=1e-6)


def test_files_up_to_date(ctx):
    """make_models.py writes the committed models byte for byte and the same inputs;
    expected outputs (computed by onnxruntime on this machine) agree within rounding."""
    out = os.path.join(ctx.tmp, "regenerated")
    p = subprocess.run([sys.executable, os.path.join(MODELS, "make_models.py"), "--out", out],
                       capture_output=True, text=True)
    if p.returncode:
        raise AssertionError(f"make_models.py failed:\n{p.stdout}{p.stderr}")
    for name in BUNDLED:
        with open(model_path(name), "rb") as f1, open(os.path.join(out, name, "model.onnx"), "rb") as f2:
            if f1.read() != f2.read():
                raise AssertionError(f"models/{name}/model.onnx differs from what make_models.py writes "
                                     "(run python3 models/make_models.py)")
        ins, outs = load_case(os.path.join(MODELS, name))
        ins2, outs2 = load_case(os.path.join(out, name))
        if len(ins) != len(ins2) or len(outs) != len(outs2):
            raise AssertionError(f"models/{name}/test_data_set_0 has other files than make_models.py writes")
        for (n, a), (n2, b) in zip(ins, ins2):
            if n != n2 or not np.array_equal(a, b):
                raise AssertionError(f"models/{name}: input {n} differs from make_models.py's")
        for (n, a), (n2, b) in zip(outs, outs2):
            if n != n2:
                raise AssertionError(f"models/{name}: output {n} is named {n2} by make_models.py")
            assert_close(f"{name}:{n}", b, a, rtol=1e-5, atol=1e-6)


def test_training_info(ctx):
    """mlp_train follows ONNX's TrainingInfoProto rules and docs/design.md's training-graph
    contract."""
    m = onnx.load(model_path("mlp_train"))
    if len(m.training_info) != 1:
        raise AssertionError(f"{len(m.training_info)} training_info entries, expected 1")
    ti = m.training_info[0]
    alg = ti.algorithm
    main_inits = {t.name for t in m.graph.initializer}
    alg_outputs = {o.name for o in alg.output} | {o.name for o in m.graph.output}
    keys = [b.key for b in ti.update_binding]
    if len(set(keys)) != len(keys):
        raise AssertionError("update_binding has a key twice")
    for b in ti.update_binding:
        if b.key not in main_inits | {t.name for t in alg.initializer}:
            raise AssertionError(f"update_binding key {b.key} is not an initializer")
        if b.key not in main_inits:
            raise AssertionError(f"update_binding key {b.key} is not a main-graph initializer "
                                 "(ampc's verifier requires that form)")
        if b.value not in alg_outputs:
            raise AssertionError(f"update_binding value {b.value} is not an output")
    expect = set(PARAMS) | {p + "_momentum" for p in PARAMS} | {"step"}
    if set(keys) != expect:
        raise AssertionError(f"update_binding keys {sorted(keys)}, expected {sorted(expect)}")
    # The main graph must run without training info: no main node reads an algorithm name.
    alg_names = {o for n in alg.node for o in n.output} | {i.name for i in alg.input}
    for n in m.graph.node:
        if alg_names & set(n.input):
            raise AssertionError(f"main-graph node {n.name} reads algorithm values")
    # Contract: parameter gradients are <param>_grad, the loss is the scalar float output 'loss'.
    main_values = {o for n in m.graph.node for o in n.output}
    for p in PARAMS:
        if p + "_grad" not in main_values:
            raise AssertionError(f"{p}_grad is not computed by the main graph")
    if [o.name for o in m.graph.output] != ["loss"]:
        raise AssertionError(f"main graph outputs {[o.name for o in m.graph.output]}, expected ['loss']")
    momentum = [n for n in alg.node if n.op_type == "Momentum"]
    if len(momentum) != 1 or momentum[0].domain != "ai.onnx.preview.training":
        raise AssertionError("the algorithm has no ai.onnx.preview.training Momentum node")
    # onnx.checker does not look into training_info; check the combined step graph instead.
    onnx.checker.check_model(combined_training_graph(m), full_check=True)
    # The main graph of mlp_train is mlp_grads' graph (same nodes, same parameters).
    g = onnx.load(model_path("mlp_grads"))
    if list(g.graph.node) != list(m.graph.node):
        raise AssertionError("mlp_train's main-graph nodes differ from mlp_grads'")
    gi = {t.name: t for t in g.graph.initializer}
    for t in m.graph.initializer:
        if t.name in gi and t != gi[t.name]:
            raise AssertionError(f"initializer {t.name} differs between mlp_train and mlp_grads")


def reference_training(model, x, labels, steps):
    """Runs `steps` training steps of model (main graph + algorithm, update bindings
    applied) with onnx's reference evaluator; returns the losses and the final state."""
    from onnx.reference import ReferenceEvaluator
    c = combined_training_graph(model)
    state = {t.name: numpy_helper.to_array(t) for t in c.graph.initializer}
    for t in c.graph.initializer:
        c.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    del c.graph.initializer[:]
    ev = ReferenceEvaluator(c)
    names = [o.name for o in c.graph.output]
    bindings = {b.key: b.value for b in model.training_info[0].update_binding}
    losses = []
    for _ in range(steps):
        r = dict(zip(names, ev.run(names, {"x": x, "labels": labels, **state})))
        losses.append(float(r["loss"]))
        for k, v in bindings.items():
            state[k] = r[v]
    return losses, state


def test_reference_training(ctx):
    """20 steps of mlp_train under onnx's reference evaluator: the loss goes down, the
    step count advances, and the first step's loss is the one in the test data."""
    m = onnx.load(model_path("mlp_train"))
    inputs, outputs = load_case(os.path.join(MODELS, "mlp_train"))
    feeds = dict(inputs)
    losses, state = reference_training(m, feeds["x"], feeds["labels"], 20)
    assert_close("loss[0]", np.float32(losses[0]), dict(outputs)["loss"], rtol=1e-5, atol=1e-6)
    if not losses[-1] < 0.5 * losses[0]:
        raise AssertionError(f"loss did not go down: {losses[0]:.4f} -> {losses[-1]:.4f}")
    if int(state["step"]) != 20:
        raise AssertionError(f"step is {state['step']} after 20 steps")
    ctx.notes.append(f"reference training (onnx.reference, 20 steps): loss {losses[0]:.4f} -> {losses[-1]:.4f}")


def test_finite_differences(ctx):
    """mlp_grads' gradients (float32, onnxruntime) against central differences of the
    loss in float64 (onnxruntime), on every bias entry and a sample of weight entries."""
    m = onnx.load(model_path("mlp_grads"))
    params = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
    inputs, _ = load_case(os.path.join(MODELS, "mlp_grads"))
    feeds = dict(inputs)
    grads = run_ort(m, feeds)
    sess = ort_session(float64_forward(m, PARAMS))
    base = {"x": feeds["x"].astype(np.float64), "labels": feeds["labels"]}

    def loss(ps):
        return float(sess.run(["loss"], {**base, **ps})[0])

    loss64 = loss(params)
    if abs(loss64 - float(grads["loss"])) > 1e-5 * max(1.0, abs(loss64)):
        raise AssertionError(f"float64 loss {loss64} vs float32 loss {float(grads['loss'])}")
    rng = np.random.default_rng(7)
    worst = []
    failures = []
    for p in PARAMS:
        g = grads[p + "_grad"].astype(np.float64)
        if g.shape != params[p].shape:
            raise AssertionError(f"{p}_grad has shape {g.shape}, {p} has {params[p].shape}")
        size = params[p].size
        idx = np.arange(size) if params[p].ndim == 1 or size <= FD_SAMPLES else rng.choice(size, FD_SAMPLES, replace=False)
        num = np.empty(len(idx))
        for k, flat in enumerate(idx):
            plus = {q: v.copy() for q, v in params.items()}
            minus = {q: v.copy() for q, v in params.items()}
            plus[p].flat[flat] += FD_EPS
            minus[p].flat[flat] -= FD_EPS
            num[k] = (loss(plus) - loss(minus)) / (2 * FD_EPS)
        ana = g.flat[idx]
        floor = FD_FLOOR * max(np.max(np.abs(num)), 1e-12)
        rel = np.abs(ana - num) / np.maximum(np.maximum(np.abs(ana), np.abs(num)), floor)
        worst.append(f"{p}_grad {rel.max():.2e} ({len(idx)} entries)")
        if rel.max() >= FD_TOL:
            k = int(np.argmax(rel))
            at = tuple(int(i) for i in np.unravel_index(idx[k], g.shape))
            failures.append(f"{p}_grad{list(at)}: analytic {ana[k]:.6g}, "
                            f"numeric {num[k]:.6g}, relative error {rel[k]:.3g}")
    ctx.notes.append("finite differences, max relative error: " + ", ".join(worst))
    if failures:
        raise AssertionError("; ".join(failures))


def test_roundtrip(ctx, name):
    out = os.path.join(ctx.tmp, f"{name}_roundtrip.onnx")
    p = subprocess.run([ctx.args.ampc, model_path(name), "-o", out, "--passes", "none", "-q"],
                       capture_output=True, text=True)
    if p.returncode:
        raise AssertionError(f"ampc exited {p.returncode}: {p.stderr.strip()}")
    if not same_model(onnx.load(model_path(name)), onnx.load(out)):
        raise AssertionError("the saved model differs from the original")


def test_ampc_verify(ctx, name):
    p = subprocess.run([ctx.args.ampc, "verify", model_path(name)], capture_output=True, text=True)
    if p.returncode:
        raise AssertionError(f"ampc verify exited {p.returncode}: {(p.stdout + p.stderr).strip()}")


class Skip(Exception):
    pass


def ampc_run_outputs(ctx, model_file, inputs_dir, tag):
    """Runs `ampc run MODEL --inputs DIR --outputs OUT` and returns {name: array} read
    from OUT, after checking the conformance layout: output_<i>.pb holds graph output i,
    named after it (a training model may add its algorithm's outputs after those)."""
    text = ctx.ampc_run_help()
    if text is None or "--outputs" not in text:
        raise AssertionError("`ampc --help` lists no `ampc run ... --outputs DIR`")
    out = os.path.join(ctx.tmp, "run_" + tag, "outputs")  # ampc creates the folders
    cmd = [ctx.args.ampc, "run", model_file, "--inputs", inputs_dir, "--outputs", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}: {(p.stdout + p.stderr).strip()[:2000]}")
    m = onnx.load(model_file, load_external_data=False)
    names = [o.name for o in m.graph.output]
    files = sorted(os.listdir(out))
    got = {}
    for i, name in enumerate(names):
        f = os.path.join(out, f"output_{i}.pb")
        if not os.path.exists(f):
            raise AssertionError(f"ampc run wrote no output_{i}.pb for output {name!r} (files: {files})")
        t = onnx.load_tensor(f)
        if t.name != name:
            raise AssertionError(f"output_{i}.pb is named {t.name!r}, graph output {i} is {name!r}")
        if not t.HasField("raw_data"):
            raise AssertionError(f"output_{i}.pb has no raw_data")
        got[name] = numpy_helper.to_array(t)
    stray = [f for f in files if not (f.startswith("output_") and f.endswith(".pb"))]
    if stray:
        raise AssertionError(f"ampc run left other files in {out}: {stray}")
    return got


# Differential test tolerance for float32 outputs (ampc's CPU kernels vs onnxruntime's).
RUN_RTOL, RUN_ATOL = 1e-4, 1e-5


def test_run_vs_ort(ctx, folder, tag, rtol=RUN_RTOL, atol=RUN_ATOL):
    """`ampc run` on folder/model.onnx with folder/test_data_set_0 against onnxruntime:
    every graph output, same shape and dtype, values within rtol/atol (exact for
    non-float outputs)."""
    model_file = os.path.join(folder, "model.onnx")
    inputs, _ = load_case(folder)
    want = run_ort(model_file, feeds_for(model_file, inputs))
    got = ampc_run_outputs(ctx, model_file, os.path.join(folder, "test_data_set_0"), tag)
    if sorted(want) != sorted(got):
        raise AssertionError(f"ampc wrote outputs {sorted(got)}, onnxruntime gives {sorted(want)}")
    for n, w in want.items():
        exact = not np.issubdtype(np.asarray(w).dtype, np.floating)
        assert_close(n, got[n], w, rtol=0 if exact else rtol, atol=0 if exact else atol)


# ---- driver ------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True, help="path of the ampc binary")
    ap.add_argument("--testdata", default="/usr/share/libonnx-testdata/data",
                    help="ONNX conformance data (Debian libonnx-testdata)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx(args)

    tests = []
    for name in BUNDLED:
        tests.append((f"checker {name}", test_checker, (name,)))
        tests.append((f"onnxruntime {name}", test_ort_matches_test_data, (name,)))
    tests.append(("files up to date", test_files_up_to_date, ()))
    tests.append(("training_info mlp_train", test_training_info, ()))
    tests.append(("reference training mlp_train", test_reference_training, ()))
    tests.append(("finite differences mlp_grads", test_finite_differences, ()))
    for name in BUNDLED:
        tests.append((f"ampc verify {name}", test_ampc_verify, (name,)))
        tests.append((f"ampc roundtrip {name}", test_roundtrip, (name,)))
    for name in BUNDLED:
        tests.append((f"ampc run {name}", test_run_vs_ort, (os.path.join(MODELS, name), name)))
    for rel in CONFORMANCE:
        folder = os.path.join(args.testdata, rel)
        if os.path.exists(os.path.join(folder, "model.onnx")):
            tests.append((f"ampc run {rel}", test_run_vs_ort, (folder, rel.replace("/", "_"))))
        else:
            ctx.notes.append(f"{rel}: not in {args.testdata}, not tested")

    passed = failed = skipped = 0
    skip_reasons = set()
    for title, fn, a in tests:
        try:
            fn(ctx, *a)
        except Skip as e:
            skipped += 1
            skip_reasons.add(str(e))
            if args.verbose:
                print(f"SKIP {title}: {e}")
            continue
        except Exception as e:  # a failed check or an error in the code under test
            failed += 1
            print(f"FAIL {title}: {e}")
            if args.verbose or not isinstance(e, AssertionError):
                traceback.print_exc()
            continue
        passed += 1
        if args.verbose:
            print(f"ok   {title}")
    for note in ctx.notes:
        print(f"note: {note}")
    for reason in sorted(skip_reasons):
        print(f"note: {skipped} checks skipped: {reason}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
