#!/usr/bin/env python3
"""The loss-scaling pass end to end, against onnx and onnxruntime:
- the converted bundled training models pass onnx.checker (full check);
- onnxruntime runs one step of the loss-scaled graph with outputs equal to `ampc run`'s
  within tolerance: mlp_grads as a whole step (main graph plus the algorithm that binds
  the scale: the loss, the unscaled gradients, amp_found_inf, the new scale and
  tracker), mlp_train's main graph (onnxruntime has no ai.onnx.preview.training ops);
- training: models/mlp_train trained N steps in fp16 with dynamic loss scaling ends
  within 2% of the FP32 run's loss (same data, same seed), also with a growth interval
  short enough for the scale to move;
- overflow: a scale too large for fp16 skips steps (the loss stays bit-identical) and
  halves until it fits; a checkpoint restores the scale and tracker with the rest;
- underflow: a graph built so its fp16 weight gradient is below float16's smallest
  subnormal gets all-zero gradients without loss scaling and the FP32 gradients (to
  fp16 precision) with it.
Prints "N passed, M failed" last; exit 77 (skip) when onnx, onnxruntime or numpy is
missing.

usage: test_loss_scale.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import traceback

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402
MODELS = os.path.join(ROOT, "models")
TRAIN_STEPS = 50


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}: {(p.stdout + p.stderr).strip()[:1500]}")
    return p


def read_pbs(folder, kind):
    """{name: array} of <kind>_<k>.pb in folder, k = 0, 1, ... (kind: input or output)."""
    out = {}
    k = 0
    while os.path.exists(os.path.join(folder, f"{kind}_{k}.pb")):
        t = onnx.load_tensor(os.path.join(folder, f"{kind}_{k}.pb"))
        out[t.name] = numpy_helper.to_array(t)
        k += 1
    return out


def one_step_graph(model, main_only):
    """A training step as one ordinary graph (ONNX: the main graph's lists followed by
    the algorithm's), for onnxruntime, which does not read training_info (outer-scope
    reads of the algorithm become ordinary reads); or the main graph alone where the
    algorithm uses ops onnxruntime lacks (ai.onnx.preview.training)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for ti in [] if main_only else m.training_info:
        alg = ti.algorithm
        m.graph.node.extend(alg.node)
        m.graph.input.extend(alg.input)
        m.graph.initializer.extend(alg.initializer)
        m.graph.output.extend(alg.output)
    del m.training_info[:]
    return m


def ort_run(model, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def losses(text):
    return [float(x) for x in re.findall(r"^step \d+: loss (\S+)", text, re.M)]


class Ctx:
    def __init__(self, args):
        self.ampc = args.ampc
        self.tmp = tl.tempdir("ampc_loss_scale_")
        self.notes = []

    def path(self, name):
        return os.path.join(self.tmp, name)

    def convert(self, src, name, *extra):
        out = self.path(name)
        run([self.ampc, src, "-o", out, "-q", *extra])
        return out


# ---- tests -----------------------------------------------------------------------------

def test_checker(ctx, name):
    conv = ctx.convert(os.path.join(MODELS, name, "model.onnx"), f"{name}_checker.onnx")
    m = onnx.load(conv)
    onnx.checker.check_model(m, full_check=True)
    outs = [o.name for o in m.graph.output]
    for want in ("amp_found_inf", "amp_loss_scale_new"):
        if want not in outs:
            raise AssertionError(f"{want} is not a graph output: {outs}")


def test_ort_one_step(ctx, name, main_only, rtol=2e-2, atol=1e-4):
    """ampc's first training step against onnxruntime on the same converted graph."""
    src = os.path.join(MODELS, name, "model.onnx")
    data = os.path.join(MODELS, name, "test_data_set_0")
    conv = ctx.convert(src, f"{name}_ort.onnx")
    out = ctx.path(f"{name}_ort_out")
    run([ctx.ampc, "run", conv, "--inputs", data, "--outputs", out])
    got = read_pbs(out, "output")
    want = ort_run(one_step_graph(onnx.load(conv), main_only), read_pbs(data, "input"))
    missing = sorted(set(want) - set(got))
    if missing:
        raise AssertionError(f"ampc wrote no {missing}")
    worst = 0.0
    for k, w in want.items():
        g = got[k]
        if g.dtype != w.dtype or g.shape != w.shape:
            raise AssertionError(f"{k}: {g.dtype}{g.shape} vs onnxruntime {w.dtype}{w.shape}")
        if not np.issubdtype(w.dtype, np.floating):
            if not np.array_equal(g, w):
                raise AssertionError(f"{k}: {g} vs onnxruntime {w}")
            continue
        if not np.allclose(g, w, rtol=rtol, atol=atol):
            err = np.max(np.abs(g.astype(np.float64) - w))
            raise AssertionError(f"{k}: max abs difference {err:.3g} (rtol {rtol}, atol {atol})")
        scale = max(np.max(np.abs(w)), 1e-30)
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w)) / scale))
    if bool(got["amp_found_inf"]):
        raise AssertionError("the first step of a healthy model found inf/NaN gradients")
    ctx.notes.append(f"{name}: one step, {len(want)} outputs ({', '.join(sorted(want))}) match onnxruntime"
                     f"{' (main graph)' if main_only else ''}; worst relative error {worst:.2e}")


def test_training_within_2_percent(ctx, extra, tag):
    src = os.path.join(MODELS, "mlp_train", "model.onnx")
    data = os.path.join(MODELS, "mlp_train", "test_data_set_0")
    fp32 = losses(run([ctx.ampc, "run", src, "--steps", str(TRAIN_STEPS), "--inputs", data, "--seed", "1"]).stdout)
    conv = ctx.convert(src, f"train_{tag}.onnx", *extra)
    p = run([ctx.ampc, "run", conv, "--steps", str(TRAIN_STEPS), "--inputs", data, "--seed", "1"])
    amp = losses(p.stdout)
    if len(fp32) != TRAIN_STEPS or len(amp) != TRAIN_STEPS:
        raise AssertionError(f"expected {TRAIN_STEPS} losses, got {len(fp32)} and {len(amp)}")
    rel = abs(amp[-1] - fp32[-1]) / fp32[-1]
    ctx.notes.append(f"mlp_train {tag}: loss after {TRAIN_STEPS} steps fp32 {fp32[-1]:.6g}, fp16+loss scaling "
                     f"{amp[-1]:.6g} ({100 * rel:.2f}% apart; step 1 {fp32[0]:.6g} / {amp[0]:.6g})")
    if not amp[-1] < 0.5 * amp[0]:
        raise AssertionError(f"fp16 training did not learn: {amp[0]} -> {amp[-1]}")
    if rel > 0.02:
        raise AssertionError(f"final loss {amp[-1]} vs fp32 {fp32[-1]}: {100 * rel:.2f}% apart (limit 2%)")


STEP_RE = re.compile(r"^step (\d+): loss (\S+) \([^)]*\), loss scale (\S+)( \(inf/NaN gradients: update skipped\))?$",
                     re.M)


def test_backoff_and_checkpoint(ctx):
    """mlp_train with an initial scale of 2^24: the scaled seed gradient overflows fp16, so
    the first steps are skipped (the loss stays bit-identical: no weight moved) and the
    scale halves each time until it fits; then training proceeds. A checkpoint taken in
    the middle and restored gives the same steps, scale included."""
    src = os.path.join(MODELS, "mlp_train", "model.onnx")
    data = os.path.join(MODELS, "mlp_train", "test_data_set_0")
    conv = ctx.convert(src, "backoff.onnx", "--loss-scale-init", "16777216", "--growth-interval", "3")
    straight = run([ctx.ampc, "run", conv, "--steps", "16", "--inputs", data]).stdout
    steps = STEP_RE.findall(straight)
    if len(steps) != 16:
        raise AssertionError(f"expected 16 step lines with a loss scale:\n{straight}")
    skipped = []  # the leading run of skipped steps (the scale may regrow and overflow later)
    for n, _, _, sk in steps:
        if not sk:
            break
        skipped.append(int(n))
    if not skipped:
        raise AssertionError(f"expected the first steps to be skipped:\n{straight}")
    first_loss = steps[0][1]
    for n, loss, scale, sk in steps[:len(skipped)]:
        if loss != first_loss:
            raise AssertionError(f"step {n} was skipped but the loss moved: {loss} vs {first_loss}")
        if float(scale) != 16777216 / 2 ** int(n):
            raise AssertionError(f"step {n}: scale {scale}, expected {16777216 / 2 ** int(n)}")
    if not float(steps[-1][1]) < 0.5 * float(first_loss):
        raise AssertionError(f"training did not proceed after the backoff:\n{straight}")
    ck = ctx.path("backoff_ck.onnx")
    a = run([ctx.ampc, "run", conv, "--steps", "5", "--inputs", data, "--save-state", ck]).stdout
    b = run([ctx.ampc, "run", conv, "--steps", "11", "--inputs", data, "--load-state", ck]).stdout
    resumed = STEP_RE.findall(a) + STEP_RE.findall(b)
    if [x[:3] for x in resumed] != [x[:3] for x in steps]:
        raise AssertionError(f"5 + 11 steps through a checkpoint differ from 16 straight:\n{a}{b}\nvs\n{straight}")
    later = [int(n) for n, _, _, sk in steps[len(skipped):] if sk]
    ctx.notes.append(f"backoff: initial scale 2^24, steps {skipped[0]}-{skipped[-1]} skipped (loss unchanged), scale "
                     f"then {steps[len(skipped)][2]}; with growth every 3 clean steps, later skips at steps {later}; "
                     f"loss {first_loss} -> {steps[-1][1]} after 16 steps; a checkpoint at step 5 resumes "
                     f"identically")


# The underflow case: x[8, 4] of about 1e-4, W[4, 2]; y = x @ W; loss = c * sum(y) with
# c = 1e-5. Backward: dy = c * loss_grad (fp32: it reads the seed), W_grad = x^T @ dy.
# In fp16 each product x * dy is about 1e-9 and their sums about 8e-9, below float16's
# smallest subnormal (6e-8): the fp16 MatMul gives 0. Scaled by 2^16 they are about 5e-4.
def underflow_model(path):
    rng = np.random.RandomState(0)
    x = (rng.uniform(0.5, 1.5, (8, 4)) * 1e-4).astype(np.float32)
    w = rng.standard_normal((4, 2)).astype(np.float32)
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "W"], ["y"], name="fwd/MatMul"),
        n("ReduceSum", ["y"], ["ysum"], name="loss/ReduceSum", keepdims=0),
        n("Mul", ["ysum", "c"], ["loss"], name="loss/Mul"),
        n("Constant", [], ["loss_grad"], name="loss_grad",
          value=numpy_helper.from_array(np.array(1.0, np.float32))),
        n("Mul", ["loss_grad", "c"], ["dy_scalar"], name="grad/loss/Mul"),
        n("Shape", ["y"], ["y_shape"], name="grad/Shape"),
        n("Expand", ["dy_scalar", "y_shape"], ["y_grad"], name="grad/Expand"),
        n("Transpose", ["x"], ["x_T"], name="grad/Transpose", perm=[1, 0]),
        n("MatMul", ["x_T", "y_grad"], ["W_grad"], name="grad/MatMul"),
    ]
    g = helper.make_graph(
        nodes, "underflow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("W_grad", TensorProto.FLOAT, [4, 2])],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array(1e-5, np.float32), "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="test_loss_scale.py")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    os.makedirs(os.path.join(os.path.dirname(path), "data"), exist_ok=True)
    onnx.save_tensor(numpy_helper.from_array(x, "x"), os.path.join(os.path.dirname(path), "data", "input_0.pb"))
    return x, w


def test_underflow(ctx):
    folder = ctx.path("underflow")
    os.makedirs(folder)
    src = os.path.join(folder, "model.onnx")
    x, _ = underflow_model(src)
    data = os.path.join(folder, "data")
    want = (x.astype(np.float64).T @ np.full((8, 2), 1e-5)).astype(np.float64)

    def grad_of(tag, *extra):
        conv = ctx.convert(src, f"underflow_{tag}.onnx", *extra)
        out = ctx.path(f"underflow_{tag}_out")
        run([ctx.ampc, "run", conv, "--inputs", data, "--outputs", out])
        return read_pbs(out, "output")["W_grad"].astype(np.float64)

    fp32 = grad_of("fp32", "--passes", "infer")
    plain = grad_of("none", "--loss-scale", "none")
    scaled = grad_of("dynamic")
    if not np.allclose(fp32, want, rtol=1e-5, atol=0):
        raise AssertionError(f"the fp32 model's gradient {fp32.ravel()} is not x^T dy {want.ravel()}")
    if np.any(plain != 0):
        raise AssertionError(f"without loss scaling the fp16 gradient should flush to 0, got {plain.ravel()}")
    rel = float(np.max(np.abs(scaled - fp32)) / np.max(np.abs(fp32)))
    if rel > 2e-3:
        raise AssertionError(f"with loss scaling the gradient {scaled.ravel()} is {rel:.2e} from fp32 {fp32.ravel()}")
    ctx.notes.append(f"underflow: |W_grad| ~ {np.max(np.abs(fp32)):.2e}; fp16 without loss scaling: all 0; "
                     f"with dynamic loss scaling: worst relative error {rel:.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", default="/usr/share/libonnx-testdata/data", help="unused")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx(args)
    tests = [
        ("checker mlp_grads", test_checker, ("mlp_grads",)),
        ("checker mlp_train", test_checker, ("mlp_train",)),
        ("onnxruntime one step mlp_grads", test_ort_one_step, ("mlp_grads", False)),
        ("onnxruntime one step mlp_train", test_ort_one_step, ("mlp_train", True)),
        ("training within 2% (default scaling)", test_training_within_2_percent, ((), "dynamic")),
        ("training within 2% (growth interval 5)", test_training_within_2_percent,
         (("--growth-interval", "5"), "growth5")),
        ("training within 2% (static scale 1024)", test_training_within_2_percent,
         (("--loss-scale", "1024"), "static1024")),
        ("backoff and checkpoint", test_backoff_and_checkpoint, ()),
        ("underflow", test_underflow, ()),
    ]
    passed = failed = 0
    try:
        for title, fn, a in tests:
            try:
                fn(ctx, *a)
            except Exception as e:
                failed += 1
                print(f"FAIL {title}: {e}")
                if args.verbose or not isinstance(e, AssertionError):
                    traceback.print_exc()
                continue
            passed += 1
            if args.verbose:
                print(f"ok   {title}")
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    for note in ctx.notes:
        print(f"note: {note}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
