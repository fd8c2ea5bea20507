#!/usr/bin/env python3
"""onnxruntime-training's artifact sets (models/ort_mlp, models/ort_bert: written by
onnxruntime.training.artifacts.generate_artifacts from a torch MLP and a 2-layer BERT):

Without onnxruntime-training (onnx and the ampc binary only):
- the training models convert with exit 0 as training graphs: the loss found from its
  seed, every parameter gradient unscaled (4 and 41: the BERT embeddings' gradients come
  out of GatherGrad), every InPlaceAccumulatorV2 adds Where(amp_found_inf, 0, unscaled
  gradient), the loss-scale state on plain inputs with `--loss-scale-state inputs`; the
  result passes onnx.checker where the original does (not the BERT: onnxruntime writes
  LayerNormalization into ai.onnx opset 14);
- the optimizer models verify and convert unchanged (AdamW's updated_flag declared bool);
  the eval models convert.
With onnxruntime-training (scripts/setup.sh's .venv-ort, or AMPC_ORT_PYTHON), through
tools/ort_train.py:
- 50 steps of AdamW on the FP32 and the converted graph: losses within 2% at step 50, no
  step skipped; every parameter's gradient after one step within 1% of FP32's (relative to
  the larger of its own norm and 1e-4 of the whole gradient's: the attention key biases'
  gradients are zero in exact arithmetic, softmax being shift-invariant, so only noise);
- an overflow (scale inf): amp_found_inf set, the accumulated gradients exactly as before
  the step, the new scale backed off, and the next finite step trains on.
`ampc run MODEL --optimizer optimizer_model.onnx --checkpoint checkpoint` (the artifacts
imported as one training model, passes/ort_import.c), on batch 0:
- FP32: every one of 50 losses within 1e-4 (relative) of onnxruntime's, with AdamW and
  (the MLP) with SGD (needs onnxruntime);
- from checkpoint_step1 (onnxruntime's state after one step: moments and step count) the
  next 3 losses are onnxruntime's steps 2-4 of an uninterrupted run (needs it);
- AMP (converted with --optimizer, or AMP_AUTO=1 at run): the same losses both ways, the
  loss at step 50 within 2% of FP32's; with an initial scale of 1e9 the first steps are
  skipped (the loss stays exactly the same: nothing moved, not even AdamW's step count)
  until the scale has backed off, then training goes on as from the start;
- --save-state after 10 steps and --load-state give steps 11-20 digit for digit;
- clear errors: --optimizer without --checkpoint, another model's checkpoint, a model
  that is not onnxruntime's; `ampc run` of the training model alone says that nothing
  updates its parameters and what to give.
Prints "N passed, M failed" last; exit 77 (skip) when onnx or numpy is missing.

usage: test_ort_training.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import json
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402
from ampc_testlib import Skip  # noqa: E402
SETS = {"ort_mlp": 4, "ort_bert": 41}  # artifact set -> parameters (all trainable)
LR = {"ort_mlp": 0.01, "ort_bert": 0.001}  # AdamW's learning rate (0.001: the artifacts' own)
STEPS = 50


def ort_python():
    """The python with onnxruntime-training, or Skip saying why there is none."""
    py = os.environ.get("AMPC_ORT_PYTHON") or os.path.join(ROOT, ".venv-ort", "bin", "python")
    if not os.path.exists(py):
        raise Skip(f"no onnxruntime-training python at {py} (scripts/setup.sh makes it; AMPC_ORT_PYTHON names another)")
    r = subprocess.run([py, "-c", "from onnxruntime.capi._pybind_state import Module"], capture_output=True, text=True)
    if r.returncode:
        raise Skip(f"{py} has no onnxruntime training API: {r.stderr.strip().splitlines()[-1:]}")
    return py


class Ctx:
    def __init__(self, args):
        self.ampc = args.ampc
        self.verbose = args.verbose
        self.tmp = tl.tempdir("ampc_ort_")
        self.converted = {}

    def convert(self, name, *extra):
        """Converts models/<name>/training_model.onnx (once per option set); returns
        (path, ampc's summary line)."""
        key = (name,) + extra
        if key not in self.converted:
            out = os.path.join(self.tmp, f"{name}_{len(self.converted)}.onnx")
            src = os.path.join(ROOT, "models", name, "training_model.onnx")
            r = subprocess.run([self.ampc, src, "-o", out, *extra], capture_output=True, text=True)
            assert r.returncode == 0, f"ampc {src} {' '.join(extra)}: exit {r.returncode}: {r.stderr}"
            self.converted[key] = (out, r.stderr)
        return self.converted[key]


def producers(graph):
    return {o: n for n in graph.node for o in n.output}


def check_conversion(ctx, name, state_inputs):
    extra = ("--loss-scale-state", "inputs") if state_inputs else ()
    path, summary = ctx.convert(name, *extra)
    n = SETS[name]
    assert "training graph" in summary, f"not converted as a training graph: {summary}"
    assert f"{n} gradients unscaled" in summary, summary
    assert f"{n} updates gated on amp_found_inf" in summary, summary
    # Without the state on inputs the scale's update lives in a training_info that
    # onnxruntime's Module never runs: the summary says so (and only then).
    warned = "onnxruntime-training's Module) skip: there the scale restarts" in summary
    assert warned != state_inputs, f"state on inputs {state_inputs}, warning given {warned}: {summary}"
    m = onnx.load(path)
    g = m.graph
    prod = producers(g)
    inputs = [i.name for i in g.input]
    params = [p for p in inputs if p + "_grad.accumulation.buffer" in inputs]
    assert len(params) == n, f"{len(params)} parameters with an accumulation buffer, want {n}"
    accs = [nd for nd in g.node if nd.op_type == "InPlaceAccumulatorV2"]
    assert len(accs) == n
    for acc in accs:
        p = acc.input[0][: -len("_grad.accumulation.buffer")]
        gate = prod.get(acc.input[1])
        assert gate is not None and gate.op_type == "Where" and gate.input[0] == "amp_found_inf", \
            f"accumulator {acc.name} adds {acc.input[1]}, not gated on amp_found_inf"
        grad = gate.input[2]
        assert grad == p + "_grad", f"{acc.name}: gates {grad}, want {p}_grad"
        unscale = prod[grad]
        assert unscale.op_type == "Mul" and "amp_loss_scale/inv_scale" in unscale.input, \
            f"{grad} is made by {unscale.op_type} {list(unscale.input)}, not the unscaling"
    outs = [o.name for o in g.output]
    for o in ("amp_found_inf", "amp_loss_scale_new", "amp_growth_tracker_new"):
        assert o in outs, f"no output {o}"
    inits = {t.name for t in g.initializer}
    for s in ("amp_loss_scale", "amp_growth_tracker"):
        assert s in inputs, f"no input {s}"
        assert (s in inits) != state_inputs, f"{s}: initializer {s in inits} with --loss-scale-state " \
            f"{'inputs' if state_inputs else 'initializers'}"
    # onnxruntime writes LayerNormalization into ai.onnx below opset 17 (its own
    # registration): where the checker refuses the original, it refuses the result too.
    try:
        onnx.checker.check_model(os.path.join(ROOT, "models", name, "training_model.onnx"))
    except onnx.checker.ValidationError:
        return
    onnx.checker.check_model(m)


def test_training_models_convert(ctx):
    for name in SETS:
        check_conversion(ctx, name, state_inputs=False)
        check_conversion(ctx, name, state_inputs=True)


def test_optimizer_and_eval_models(ctx):
    for name in SETS:
        opt = os.path.join(ROOT, "models", name, "optimizer_model.onnx")
        r = subprocess.run([ctx.ampc, "verify", opt], capture_output=True, text=True)
        assert r.returncode == 0, f"ampc verify {opt}: {r.stdout}{r.stderr}"
        out = os.path.join(ctx.tmp, name + "_opt.onnx")
        r = subprocess.run([ctx.ampc, opt, "-o", out], capture_output=True, text=True)
        assert r.returncode == 0, f"ampc {opt}: {r.stderr}"
        a, b = onnx.load(opt).graph, onnx.load(out).graph
        assert [n.op_type for n in b.node] == ["AdamWOptimizer"] and \
            [o.type.tensor_type.elem_type for o in b.output] == [o.type.tensor_type.elem_type for o in a.output], \
            "the optimizer model changed"
        ev = os.path.join(ROOT, "models", name, "eval_model.onnx")
        r = subprocess.run([ctx.ampc, ev, "-o", os.path.join(ctx.tmp, name + "_eval.onnx")],
                           capture_output=True, text=True)
        assert r.returncode == 0 and "training graph" not in r.stderr, f"ampc {ev}: {r.stderr}"


def ort_train(ctx, py, name, model, tag):
    js, grads = os.path.join(ctx.tmp, f"{name}_{tag}.json"), os.path.join(ctx.tmp, f"{name}_{tag}.npz")
    cmd = [py, os.path.join(ROOT, "tools", "ort_train.py"), os.path.join(ROOT, "models", name),
           "--steps", str(STEPS), "--lr", str(LR[name]), "--json", js, "--grads", grads]
    if model:
        cmd += ["--training-model", model]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-2000:]}"
    with open(js) as f:
        res = json.load(f)
    res["grads"] = dict(np.load(grads))
    return res


def test_train_fp32_vs_amp(ctx):
    py = ort_python()
    for name in SETS:
        amp_model, _ = ctx.convert(name, "--loss-scale-state", "inputs")
        fp = ort_train(ctx, py, name, None, "fp32")
        amp = ort_train(ctx, py, name, amp_model, "amp")
        assert not any(amp["skipped"]), f"{name}: steps skipped: {amp['skipped']}"
        l32, l16 = fp["losses"][-1], amp["losses"][-1]
        assert fp["losses"][-1] < 0.5 * fp["losses"][0], f"{name}: FP32 does not train: {fp['losses'][::10]}"
        assert abs(l16 - l32) <= 0.02 * l32, f"{name}: loss at step {STEPS}: AMP {l16}, FP32 {l32}"
        g32, g16 = fp["grads"], amp["grads"]
        assert sorted(g32) == sorted(g16) and len(g32) == SETS[name]
        total = np.sqrt(sum(float(np.sum(np.square(v, dtype=np.float64))) for v in g32.values()))
        for k in g32:
            ref = max(float(np.linalg.norm(g32[k])), 1e-4 * total)
            err = float(np.linalg.norm(g16[k].astype(np.float64) - g32[k]))
            assert err <= 0.01 * ref, f"{name}: gradient of {k}: error {err:.3g}, FP32 norm {np.linalg.norm(g32[k]):.3g}"
        ctx.notes.append(f"{name}: loss at step {STEPS}: FP32 {l32:.6f}, AMP {l16:.6f} "
                         f"(from {fp['losses'][0]:.4f})")


OVERFLOW = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from ort_train import Trainer
t = Trainer(sys.argv[2], sys.argv[3])
t.forward_backward(0)                            # a finite step, gradients kept (no reset)
before = t.grads()
out = t.forward_backward(1, scale=np.float32("inf"))  # every scaled gradient inf or NaN
after = t.grads()
same = all(np.array_equal(before[k], after[k]) for k in before)
finite = all(np.isfinite(v).all() for v in after.values())
t.module.lazy_reset_grad()
t.scale = out["amp_loss_scale_new"]
loss, skipped = t.step(2)
print(json.dumps({"found": bool(np.asarray(out["amp_found_inf"]).reshape(-1)[0]), "same": same,
                  "finite": finite, "next_skipped": skipped, "next_loss": loss}))
"""


def test_overflow_skips_cleanly(ctx):
    py = ort_python()
    name = "ort_bert"
    amp_model, _ = ctx.convert(name, "--loss-scale-state", "inputs")
    r = subprocess.run([py, "-c", OVERFLOW, os.path.join(ROOT, "tools"), os.path.join(ROOT, "models", name), amp_model],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["found"], "amp_found_inf not set with an infinite scale"
    assert res["same"], "the accumulated gradients changed on a step with inf gradients"
    assert res["finite"], "an inf reached the gradient buffers"
    # The scale backed off from inf stays inf: the next step overflows again and is
    # skipped too, which is GradScaler's behaviour from an infinite scale.
    assert res["next_skipped"] and np.isfinite(res["next_loss"]), res


STEP = re.compile(r"^step (\d+): loss (\S+)(.*)$")


def ampc_run(ctx, name, *extra, model=None, env=None, steps=STEPS):
    """`ampc run` on batch 0; returns [(loss, skipped)] per step."""
    d = os.path.join(ROOT, "models", name)
    cmd = [ctx.ampc, "run", model or os.path.join(d, "training_model.onnx"), "--steps", str(steps),
           "--inputs", os.path.join(d, "test_data_set_0"), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr}"
    out = []
    for line in r.stdout.splitlines():
        mt = STEP.match(line)
        if mt:
            out.append((float(mt.group(2)), "skipped" in mt.group(3)))
    assert len(out) == steps, r.stdout
    return out


def ort_args(name, checkpoint="checkpoint"):
    d = os.path.join(ROOT, "models", name)
    return ["--optimizer", os.path.join(d, "optimizer_model.onnx"), "--checkpoint", os.path.join(d, checkpoint),
            "--lr", str(LR[name])]


def ort_losses(ctx, py, name, steps):
    """onnxruntime's losses on batch 0 alone, FP32."""
    js = os.path.join(ctx.tmp, f"{name}_b0.json")
    cmd = [py, os.path.join(ROOT, "tools", "ort_train.py"), os.path.join(ROOT, "models", name), "--steps", str(steps),
           "--lr", str(LR[name]), "--batches", "1", "--json", js]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    with open(js) as f:
        return json.load(f)["losses"]


def test_ampc_run_matches_onnxruntime(ctx):
    py = ort_python()
    for name in SETS:
        want = ort_losses(ctx, py, name, STEPS)
        got = [l for l, _ in ampc_run(ctx, name, *ort_args(name))]
        for i, (a, b) in enumerate(zip(got, want)):
            assert abs(a - b) <= 1e-4 * abs(b), f"{name} step {i + 1}: ampc run {a}, onnxruntime {b}"
        ctx.notes.append(f"{name}: ampc run FP32 loss at step {STEPS} {got[-1]:.6f}, onnxruntime {want[-1]:.6f}")


def test_ampc_run_sgd_matches_onnxruntime(ctx):
    py = ort_python()
    name, lr = "ort_mlp", "0.1"
    d = os.path.join(ROOT, "models", name)
    sgd = os.path.join(d, "optimizer_model_sgd.onnx")
    js = os.path.join(ctx.tmp, "sgd.json")
    r = subprocess.run([py, os.path.join(ROOT, "tools", "ort_train.py"), d, "--optimizer-model", sgd, "--steps",
                        str(STEPS), "--lr", lr, "--batches", "1", "--json", js], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    with open(js) as f:
        want = json.load(f)["losses"]
    got = [l for l, _ in ampc_run(ctx, name, "--optimizer", sgd, "--checkpoint", os.path.join(d, "checkpoint"),
                                  "--lr", lr)]
    for i, (a, b) in enumerate(zip(got, want)):
        assert abs(a - b) <= 1e-4 * abs(b), f"SGD step {i + 1}: ampc run {a}, onnxruntime {b}"
    assert got[-1] < 0.5 * got[0], f"SGD does not train: {got[0]} -> {got[-1]}"


def test_resume_from_onnxruntime_state(ctx):
    py = ort_python()
    name = "ort_mlp"  # checkpoint_step1: one step at lr 0.01 on batch 0
    want = ort_losses(ctx, py, name, 4)[1:]
    got = [l for l, _ in ampc_run(ctx, name, *ort_args(name, "checkpoint_step1"), steps=3)]
    for i, (a, b) in enumerate(zip(got, want)):
        assert abs(a - b) <= 1e-5 * abs(b), f"resumed step {i + 2}: ampc run {a}, onnxruntime uninterrupted {b}"


def test_ampc_run_amp(ctx):
    for name in SETS:
        fp = ampc_run(ctx, name, *ort_args(name))
        conv = os.path.join(ctx.tmp, f"{name}_full_amp.onnx")
        r = subprocess.run([ctx.ampc, os.path.join(ROOT, "models", name, "training_model.onnx"), *ort_args(name),
                            "-o", conv], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert f"{SETS[name]} parameters from the checkpoint" in r.stderr and "loss_scale: dynamic" in r.stderr, r.stderr
        amp = ampc_run(ctx, name, model=conv)
        auto = ampc_run(ctx, name, *ort_args(name), env={"AMP_AUTO": "1", "AMP_PRECISION": "fp16"})
        assert amp == auto, f"{name}: converted file and AMP_AUTO=1 differ: {amp[-1]} vs {auto[-1]}"
        assert not any(s for _, s in amp), f"{name}: skipped steps"
        l32, l16 = fp[-1][0], amp[-1][0]
        assert l32 < 0.2 * fp[0][0], f"{name}: does not train: {fp[0][0]} -> {l32}"
        assert abs(l16 - l32) <= 0.02 * l32, f"{name}: loss at step {STEPS}: AMP {l16}, FP32 {l32}"
        ctx.notes.append(f"{name}: ampc run AMP loss at step {STEPS} {l16:.6f}, FP32 {l32:.6f}")


def test_ampc_run_overflow_skips(ctx):
    name = "ort_mlp"
    conv = os.path.join(ctx.tmp, "ovf.onnx")
    r = subprocess.run([ctx.ampc, os.path.join(ROOT, "models", name, "training_model.onnx"), *ort_args(name),
                        "--loss-scale-init", "1e9", "-o", conv], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    steps = ampc_run(ctx, name, model=conv, steps=20)
    fp = ampc_run(ctx, name, *ort_args(name), steps=2)
    k = next(i for i, (_, s) in enumerate(steps) if not s)
    assert k >= 1, "no step skipped with a scale of 1e9"
    assert all(l == steps[0][0] for l, _ in steps[:k + 1]), f"the loss moved during skipped steps: {steps[:k + 1]}"
    nxt = steps[k + 1][0]
    assert abs(nxt - fp[1][0]) <= 1e-3 * fp[1][0], f"after {k} skipped steps: {nxt}, FP32's step 2 {fp[1][0]}"


def test_ampc_run_save_load_state(ctx):
    name = "ort_bert"
    st = os.path.join(ctx.tmp, "bert_state.onnx")
    full = ampc_run(ctx, name, *ort_args(name), steps=20)
    first = ampc_run(ctx, name, *ort_args(name), "--save-state", st, steps=10)
    second = ampc_run(ctx, name, *ort_args(name), "--load-state", st, steps=10)
    assert first + second == full, f"resumed: {second[:2]}, straight: {full[10:12]}"


def test_import_errors(ctx):
    mlp = os.path.join(ROOT, "models", "ort_mlp")
    bert = os.path.join(ROOT, "models", "ort_bert")
    cases = [
        ([os.path.join(mlp, "training_model.onnx"), "--optimizer", os.path.join(mlp, "optimizer_model.onnx")],
         2, "--optimizer needs --checkpoint"),
        ([os.path.join(mlp, "training_model.onnx"), "--checkpoint", os.path.join(mlp, "checkpoint")],
         2, "with --optimizer"),
        ([os.path.join(mlp, "training_model.onnx"), "--optimizer", os.path.join(mlp, "optimizer_model.onnx"),
          "--checkpoint", os.path.join(bert, "checkpoint")], 1, "no value for parameter '0.weight'"),
        ([os.path.join(ROOT, "models", "mlp_train", "model.onnx"), "--optimizer",
          os.path.join(mlp, "optimizer_model.onnx"), "--checkpoint", os.path.join(mlp, "checkpoint")],
         1, "no com.microsoft InPlaceAccumulatorV2"),
        ([os.path.join(mlp, "training_model.onnx"), "--optimizer", os.path.join(mlp, "training_model.onnx"),
          "--checkpoint", os.path.join(mlp, "checkpoint")], 3, "one com.microsoft AdamWOptimizer or SGDOptimizerV2"),
        ([os.path.join(mlp, "training_model.onnx"), "--optimizer", os.path.join(mlp, "optimizer_model.onnx"),
          "--checkpoint", os.path.join(mlp, "optimizer_model.onnx")], 1, "not an onnxruntime-training checkpoint"),
    ]
    r = subprocess.run([ctx.ampc, "run", os.path.join(mlp, "training_model.onnx"), "--inputs",
                        os.path.join(mlp, "test_data_set_0")], capture_output=True, text=True)
    assert r.returncode == 0 and "nothing updates its parameters" in r.stderr and "--optimizer" in r.stderr, \
        f"run without --optimizer: {r.stderr}"
    for args, code, msg in cases:
        for cmd in ([ctx.ampc, *args, "-o", os.path.join(ctx.tmp, "x.onnx")], [ctx.ampc, "run", *args]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            assert r.returncode == code and msg in r.stderr, \
                f"{' '.join(cmd[1:])}: exit {r.returncode} (want {code}), {r.stderr.strip()!r} (want {msg!r})"


def dropout_grad_model(path):
    """onnxruntime-training's backward of Dropout at opset 14, as its gradient builder writes
    it: x -> MatMul -> Dropout (mask) -> MatMul -> ReduceSum = loss; the backward through
    com.microsoft DropoutGrad."""
    rng = np.random.RandomState(0)
    inits = [numpy_helper.from_array(f32(rng.randn(16, 32) * 0.3), "W1"),
             numpy_helper.from_array(f32(rng.randn(32, 4) * 0.3), "W2"),
             numpy_helper.from_array(np.array(0.1, np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "train")]
    n = helper.make_node
    nodes = [n("MatMul", ["x", "W1"], ["h"], name="mm1"),
             n("Dropout", ["h", "ratio", "train"], ["d", "mask"], name="drop"),
             n("MatMul", ["d", "W2"], ["y"], name="mm2"),
             n("ReduceSum", ["y"], ["loss"], name="sum", keepdims=0),
             n("Constant", [], ["loss_grad"], name="seed", value=numpy_helper.from_array(np.array(1, np.float32))),
             n("Shape", ["y"], ["ys"], name="ys"), n("Expand", ["loss_grad", "ys"], ["y_grad"], name="expand"),
             n("Transpose", ["d"], ["dT"], name="t1", perm=[1, 0]),
             n("MatMul", ["dT", "y_grad"], ["W2_grad"], name="g2"),
             n("Transpose", ["W2"], ["W2T"], name="t2", perm=[1, 0]),
             n("MatMul", ["y_grad", "W2T"], ["d_grad"], name="gd"),
             n("DropoutGrad", ["d_grad", "mask", "ratio", "train"], ["h_grad"], name="dg", domain="com.microsoft"),
             n("Transpose", ["x"], ["xT"], name="t3", perm=[1, 0]),
             n("MatMul", ["xT", "h_grad"], ["W1_grad"], name="g1")]
    vi = helper.make_tensor_value_info
    g = helper.make_graph(nodes, "dropout_grad", [vi("x", TensorProto.FLOAT, [8, 16])],
                          [vi("loss", TensorProto.FLOAT, []), vi("W1_grad", TensorProto.FLOAT, [16, 32]),
                           vi("W2_grad", TensorProto.FLOAT, [32, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    onnx.save(m, path)


def f32(a):
    return np.asarray(a, dtype=np.float32)


def test_bf16_dropout_grad_opset(ctx):
    """bf16 must not give onnxruntime a model its opset rejects: its DropoutGrad runs a
    function body whose ai.onnx Where takes bfloat16 only from opset 16. At opset 14 the
    node stays float32; with --opset-upgrade 16 it goes to 16 bits. onnxruntime then
    types the graph (its CPU build may still lack a bfloat16 MatMul kernel: that is
    NOT_IMPLEMENTED, not an invalid graph)."""
    py = ort_python()
    src = os.path.join(ctx.tmp, "dropout_grad.onnx")
    dropout_grad_model(src)
    for extra, opset, want in (((), 14, TensorProto.FLOAT), (("--opset-upgrade", "16"), 16, TensorProto.BFLOAT16)):
        out = os.path.join(ctx.tmp, f"dropout_grad_bf16_{opset}.onnx")
        r = subprocess.run([ctx.ampc, src, "-o", out, "--precision", "bf16", *extra], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        m = onnx.load(out)
        assert [o.version for o in m.opset_import if o.domain == ""] == [opset]
        types = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.value_info) + list(m.graph.output)}
        dg = [nd for nd in m.graph.node if nd.op_type == "DropoutGrad"][0]
        assert types.get(dg.output[0]) == want, f"opset {opset}: DropoutGrad writes {types.get(dg.output[0])}"
        code = ("import onnxruntime as ort, sys\n"
                "try:\n    ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])\n"
                "except Exception as e:\n    print(type(e).__name__, e)\n")
        r = subprocess.run([py, "-c", code, out], capture_output=True, text=True)
        assert "INVALID_GRAPH" not in r.stdout and "Type Error" not in r.stdout, f"opset {opset}: {r.stdout}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx(args)
    ctx.notes = []
    tests = [
        ("training models convert", test_training_models_convert),
        ("optimizer and eval models", test_optimizer_and_eval_models),
        ("onnxruntime: FP32 vs AMP, 50 steps", test_train_fp32_vs_amp),
        ("onnxruntime: an overflow is skipped cleanly", test_overflow_skips_cleanly),
        ("ampc run --optimizer matches onnxruntime", test_ampc_run_matches_onnxruntime),
        ("ampc run --optimizer (SGD) matches onnxruntime", test_ampc_run_sgd_matches_onnxruntime),
        ("ampc run resumes onnxruntime's checkpoint", test_resume_from_onnxruntime_state),
        ("ampc run --optimizer in mixed precision", test_ampc_run_amp),
        ("ampc run --optimizer skips overflowing steps", test_ampc_run_overflow_skips),
        ("ampc run --optimizer save and load state", test_ampc_run_save_load_state),
        ("--optimizer errors", test_import_errors),
        ("bf16 keeps DropoutGrad float32 below opset 16 (onnxruntime's function body)",
         test_bf16_dropout_grad_opset),
    ]
    return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
