#!/usr/bin/env python3
"""`ampc export TRAIN -o INFER --load-state CKPT` (issue 35, the trained model back out):
for every training form ampc trains, a few `ampc run --steps N --save-state CKPT` steps,
then the export, which must be

- an inference model: onnx.checker accepts it with full_check, it has no training_info,
  and no name in it (nodes, inputs, outputs, initializers, value_info) is the loss, a
  gradient (`*_grad`), an accumulator or loss-scaling state (`amp_*`); onnxruntime runs it;
- the trained session's forward: its outputs equal those of `ampc run TRAIN --load-state
  CKPT --outputs DIR` (the main graph's outputs of a step from the checkpoint's weights)
  bit for bit in FP32 on ampc's CPU executor, and onnxruntime's within 1e-5;
- with --precision fp16 / bf16, converted: 16-bit weights, and its outputs within 1% / 3%
  of the largest FP32 logit.

The forms: `ampc grad` of mlp_cls and of resnet_cnn (its train.json), the same two in
ONNX's own layout (tests/models/spec_layout.py: the loss and backward in training_info),
onnxruntime-training's ort_mlp and ort_bert with --optimizer/--checkpoint (whose only output is the
loss: the export's output is the scores the loss reads, checked against the session's
loss by cross-entropy), and a loss-scaled fp16 training graph (`ampc TRAIN -o AMP`), whose
export keeps its converted forward with FP32 weights (16-bit ones with --precision fp16)
and no loss-scaling machinery. `ampc grad --train-mode`'s export is the original
inference model with the trained weights and running statistics. Also the refusals: a
checkpoint of another model, no inference output left, bad options.
Prints "N passed, M failed" last; exit 77 (skip) when onnx, onnxruntime or numpy is missing.

usage: test_export.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import glob
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
import ampc_testlib as tl  # noqa: E402
from spec_layout import to_spec_layout  # noqa: E402

MODELS = os.path.join(ROOT, "models")
ORT_MLP = os.path.join(MODELS, "ort_mlp")
ORT_ARGS = ["--optimizer", os.path.join(ORT_MLP, "optimizer_model.onnx"), "--checkpoint",
            os.path.join(ORT_MLP, "checkpoint")]


def env():
    """The environment without AMP_* settings (AMP_AUTO would rewrite the models)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("AMP_")}
    e["AMP_BACKEND"] = "cpu"
    return e


def ampc(ctx, *args, rc=0):
    r = subprocess.run([ctx.ampc, *args], capture_output=True, text=True, env=env(), timeout=600)
    assert r.returncode == rc, f"ampc {' '.join(args)}: exit {r.returncode}, expected {rc}: {r.stderr}"
    return r


def path(ctx, name):
    return os.path.join(ctx.tmp, name)


def read_outputs(d):
    """{name: array} of DIR/output_K.pb."""
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "output_*.pb"))):
        t = onnx.load_tensor(f)
        out[t.name] = nh.to_array(t)
    return out


def read_inputs(d):
    """[(name, array)] of DIR/input_K.pb, in order."""
    res, k = [], 0
    while os.path.exists(os.path.join(d, f"input_{k}.pb")):
        t = onnx.load_tensor(os.path.join(d, f"input_{k}.pb"))
        res.append((t.name, nh.to_array(t)))
        k += 1
    return res


def inputs_for(ctx, model, data, tag):
    """A folder holding the inputs of `data` that `model` takes (named as its inputs)."""
    names = [i.name for i in onnx.load(model).graph.input]
    d = path(ctx, "in_" + tag)
    os.makedirs(d, exist_ok=True)
    feeds = {}
    for k, (name, a) in enumerate([(n, a) for n, a in read_inputs(data) if n in names]):
        onnx.save_tensor(nh.from_array(a, name), os.path.join(d, f"input_{k}.pb"))
        feeds[name] = a
    assert sorted(feeds) == sorted(names), f"inputs {names}, data has {sorted(feeds)}"
    return d, feeds


BANNED = ("loss", "_grad", "amp_", "accumulation", "momentum", "exp_avg", "lazy_reset")


def check_inference(m, banned=BANNED):
    """An inference model: checker's full check, no training_info, no training names."""
    onnx.checker.check_model(m, full_check=True)
    assert len(m.training_info) == 0, "training_info left"
    g = m.graph
    names = [i.name for i in g.input] + [o.name for o in g.output] + [t.name for t in g.initializer] + \
        [v.name for v in g.value_info] + [x for n in g.node for x in list(n.input) + list(n.output)]
    bad = sorted({x for x in names for b in banned if b in x})
    assert not bad, f"training names left: {bad[:10]}"
    ops = {n.op_type for n in g.node}
    assert not any(o.endswith("Grad") or "Accumulator" in o or "Optimizer" in o for o in ops), ops


def session_outputs(ctx, train, data, ckpt, tag, extra=()):
    """The trained session's forward: the outputs of one step from the checkpoint."""
    d = path(ctx, "sess_" + tag)
    ampc(ctx, "run", train, *extra, "--load-state", ckpt, "--steps", "1", "--inputs", data, "--outputs", d)
    return read_outputs(d)


def export_outputs(ctx, infer, data, tag):
    """The exported model run by ampc's executor and by onnxruntime on the same inputs."""
    d, feeds = inputs_for(ctx, infer, data, tag)
    o = path(ctx, "exp_" + tag)
    ampc(ctx, "run", infer, "--inputs", d, "--outputs", o)
    mine = read_outputs(o)
    sess = ort.InferenceSession(infer, providers=["CPUExecutionProvider"])
    theirs = dict(zip([x.name for x in sess.get_outputs()], sess.run(None, feeds)))
    return mine, theirs


def train_and_export(ctx, train, data, tag, steps=3, extra=(), export_args=()):
    ckpt = path(ctx, f"ckpt_{tag}.onnx")
    ampc(ctx, "run", train, *extra, "--steps", str(steps), "--inputs", data, "--save-state", ckpt)
    infer = path(ctx, f"infer_{tag}.onnx")
    r = ampc(ctx, "export", train, *extra, "-o", infer, "--load-state", ckpt, *export_args)
    assert "wrote" in r.stderr, r.stderr
    return ckpt, infer


def check_equal(ctx, train, data, tag, steps=3, extra=(), outputs=("logits",)):
    """Train, export, and the export's outputs against the trained session's."""
    ckpt, infer = train_and_export(ctx, train, data, tag, steps, extra)
    m = onnx.load(infer)
    check_inference(m)
    assert [o.name for o in m.graph.output] == list(outputs), [o.name for o in m.graph.output]
    assert all(t.data_type == onnx.TensorProto.FLOAT for t in m.graph.initializer if t.data_type in (1, 10, 16))
    want = session_outputs(ctx, train, data, ckpt, tag, extra)
    mine, theirs = export_outputs(ctx, infer, data, tag)
    for name in outputs:
        assert name in want, f"the session has no output {name}: {sorted(want)}"
        assert np.array_equal(mine[name], want[name]), \
            f"{tag}: '{name}' differs from the session's by {np.abs(mine[name] - want[name]).max()}"
        err = np.abs(theirs[name] - want[name]).max()
        assert err <= 1e-5 * max(1.0, np.abs(want[name]).max()), f"{tag}: onnxruntime differs by {err}"
    # The weights are the checkpoint's, bit for bit.
    ck = {t.name: nh.to_array(t) for t in onnx.load(ckpt).graph.initializer}
    for t in m.graph.initializer:
        if t.name in ck:
            assert np.array_equal(nh.to_array(t), ck[t.name]), f"weight {t.name} is not the checkpoint's"
    return infer, ckpt, want


def grad(ctx, name, extra=()):
    out = path(ctx, f"train_{name}.onnx")
    if os.path.exists(out):
        return out
    cfg = os.path.join(MODELS, name, "train.json")
    args = json.load(open(cfg))["grad"] if os.path.exists(cfg) else []
    ampc(ctx, "grad", os.path.join(MODELS, name, "model.onnx"), "-o", out, *args, *extra)
    return out


def test_grad_mlp(ctx):
    check_equal(ctx, grad(ctx, "mlp_cls"), os.path.join(MODELS, "mlp_cls", "train_data"), "mlp")


def test_grad_cnn(ctx):
    check_equal(ctx, grad(ctx, "resnet_cnn"), os.path.join(MODELS, "resnet_cnn", "train_data"), "cnn", steps=2)


def spec(ctx, name):
    out = path(ctx, f"spec_{name}.onnx")
    onnx.save(to_spec_layout(onnx.load(grad(ctx, name)), ["logits"]), out)
    m = onnx.load(out)
    assert [o.name for o in m.graph.output] == ["logits"] and len(m.training_info) == 1
    return out


def test_spec_layout_mlp(ctx):
    check_equal(ctx, spec(ctx, "mlp_cls"), os.path.join(MODELS, "mlp_cls", "train_data"), "spec_mlp")


def test_spec_layout_cnn(ctx):
    check_equal(ctx, spec(ctx, "resnet_cnn"), os.path.join(MODELS, "resnet_cnn", "train_data"), "spec_cnn", steps=2)


def cross_entropy(logits, labels):
    z = logits.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(labels)), labels].mean()


def ort_artifacts(ctx, name):
    art = os.path.join(MODELS, name)
    train = os.path.join(art, "training_model.onnx")
    data = os.path.join(art, "test_data_set_0")
    extra = ["--optimizer", os.path.join(art, "optimizer_model.onnx"), "--checkpoint", os.path.join(art, "checkpoint")]
    ckpt, infer = train_and_export(ctx, train, data, name, extra=extra)
    m = onnx.load(infer)
    check_inference(m)
    # Its only output was the loss: the export's is what the loss op read, the logits.
    outs = [o.name for o in m.graph.output]
    assert len(outs) == 1, outs
    fed = dict(read_inputs(data))
    assert {i.name for i in m.graph.input} == set(fed) - {"labels"}, [i.name for i in m.graph.input]
    # The checkpoint's parameters, bit for bit, and every one of them there.
    ck = {t.name: nh.to_array(t) for t in onnx.load(ckpt).graph.initializer}
    ev = onnx.load(os.path.join(art, "eval_model.onnx"))
    params = [i.name for i in ev.graph.input if i.name not in fed]
    inits = {t.name: nh.to_array(t) for t in m.graph.initializer}
    assert params and all(p in inits for p in params), sorted(set(params) - set(inits))
    for p in params:
        assert np.array_equal(inits[p], ck[p]), p
    want = session_outputs(ctx, train, data, ckpt, name, extra)
    loss = [v for k, v in want.items() if "loss" in k]
    assert len(loss) == 1, sorted(want)
    mine, theirs = export_outputs(ctx, infer, data, name)
    got = cross_entropy(mine[outs[0]].reshape(len(fed["labels"]), -1), fed["labels"])
    assert abs(got - float(loss[0])) <= 1e-5 * max(1.0, abs(float(loss[0]))), f"loss {got} vs the session's {loss[0]}"
    err = np.abs(theirs[outs[0]] - mine[outs[0]]).max()
    assert err <= 1e-4 * max(1.0, np.abs(mine[outs[0]]).max()), f"onnxruntime differs by {err}"
    # onnxruntime's eval model with the export's weights gives the session's loss too.
    sess = ort.InferenceSession(ev.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: fed[i.name] if i.name in fed else inits[i.name] for i in ev.graph.input}
    (ev_loss,) = sess.run(None, feeds)
    assert abs(float(ev_loss) - float(loss[0])) <= 1e-5 * max(1.0, abs(float(loss[0]))), \
        f"eval model's loss {ev_loss} vs {loss[0]}"


def test_ort_mlp(ctx):
    ort_artifacts(ctx, "ort_mlp")


def test_ort_bert(ctx):
    """Its LayerNormalization, onnxruntime's below opset 17, makes the export opset 17."""
    ort_artifacts(ctx, "ort_bert")
    m = onnx.load(path(ctx, "infer_ort_bert.onnx"))
    assert [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] == [17]


def test_loss_scaled_fp16(ctx):
    """A converted training graph (fp16, dynamic loss scaling): the export is its forward
    as the session runs it (16-bit ops, FP32 weights), without the loss-scaling machinery."""
    amp = path(ctx, "amp_mlp.onnx")
    ampc(ctx, "-q", grad(ctx, "mlp_cls"), "-o", amp)
    src = onnx.load(amp)
    assert any(o.name == "amp_found_inf" for o in src.graph.output)
    data = os.path.join(MODELS, "mlp_cls", "train_data")
    ckpt, infer = train_and_export(ctx, amp, data, "amp")
    assert any(t.name == "amp_loss_scale" for t in onnx.load(ckpt).graph.initializer)
    m = onnx.load(infer)
    check_inference(m)
    assert all(t.data_type == onnx.TensorProto.FLOAT for t in m.graph.initializer), "FP32 weights"
    assert any(n.op_type == "Cast" for n in m.graph.node), "the converted forward"
    want = session_outputs(ctx, amp, data, ckpt, "amp")
    mine, theirs = export_outputs(ctx, infer, data, "amp")
    assert np.array_equal(mine["logits"], want["logits"])
    # onnxruntime computes its float16 Gemm in float32 on the CPU: close, not equal.
    err = np.abs(theirs["logits"] - want["logits"]).max()
    assert err <= 1e-2 * max(1.0, np.abs(want["logits"]).max()), f"onnxruntime differs by {err}"
    # --precision fp16 of it: the weights stored in 16 bits (the Casts' rounding, done
    # once), the same outputs.
    infer16 = path(ctx, "infer_amp16.onnx")
    ampc(ctx, "export", amp, "-o", infer16, "--load-state", ckpt, "--precision", "fp16")
    m = onnx.load(infer16)
    check_inference(m)
    assert all(t.data_type == onnx.TensorProto.FLOAT16 for t in m.graph.initializer), "16-bit weights"
    mine, _ = export_outputs(ctx, infer16, data, "amp16")
    assert np.array_equal(mine["logits"], want["logits"])
    # The ort artifacts converted, the loss-scale state on inputs.
    ort16 = path(ctx, "ort16.onnx")
    ampc(ctx, "-q", os.path.join(ORT_MLP, "training_model.onnx"), *ORT_ARGS, "--loss-scale-state", "inputs",
         "-o", ort16)
    ckpt, infer = train_and_export(ctx, ort16, os.path.join(ORT_MLP, "test_data_set_0"), "ort16")
    check_inference(onnx.load(infer))


def test_precision(ctx):
    """--precision fp16 / bf16: the export converted by the amp pass; auto is one of them."""
    train = grad(ctx, "resnet_cnn")
    data = os.path.join(MODELS, "resnet_cnn", "train_data")
    ckpt = path(ctx, "ckpt_prec.onnx")
    ampc(ctx, "run", train, "--steps", "2", "--inputs", data, "--save-state", ckpt)
    want = session_outputs(ctx, train, data, ckpt, "prec")["logits"]
    scale = np.abs(want).max()
    for prec, dt, tol in (("fp16", onnx.TensorProto.FLOAT16, 0.01), ("bf16", onnx.TensorProto.BFLOAT16, 0.03)):
        infer = path(ctx, f"infer_{prec}.onnx")
        r = ampc(ctx, "export", train, "-o", infer, "--load-state", ckpt, "--precision", prec)
        assert "converted to" in r.stderr, r.stderr
        m = onnx.load(infer)
        check_inference(m)
        assert any(t.data_type == dt for t in m.graph.initializer), f"{prec}: no 16-bit weight"
        assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT  # FP32 at the boundary
        d, _ = inputs_for(ctx, infer, data, prec)
        o = path(ctx, f"exp_{prec}")
        ampc(ctx, "run", infer, "--inputs", d, "--outputs", o)
        got = read_outputs(o)["logits"]
        err = np.abs(got - want).max()
        assert err <= tol * max(1.0, scale), f"{prec}: {err} from FP32 (largest |logit| {scale})"
        ctx.notes.append(f"--precision {prec}: max |difference| {err:.3g} from FP32 (largest |logit| {scale:.3g})")
    infer = path(ctx, "infer_auto.onnx")
    r = ampc(ctx, "export", train, "-o", infer, "--load-state", ckpt, "--precision", "auto")
    assert "converted to float16" in r.stderr or "converted to bfloat16" in r.stderr, r.stderr


def test_train_mode(ctx):
    """`ampc grad --train-mode` (BatchNormalization on batch statistics, its running ones
    bound as state): the export is the original inference model with the trained weights
    and running statistics, bit for bit on ampc's executor, BatchNormalization back in
    inference mode."""
    src = os.path.join(MODELS, "resnet_cnn", "model.onnx")
    train = path(ctx, "train_tm.onnx")
    ampc(ctx, "grad", src, "-o", train, "--train-mode", "--optimizer", "sgd", "--lr", "0.01")
    data = os.path.join(MODELS, "resnet_cnn", "train_data")
    ckpt, infer = train_and_export(ctx, train, data, "tm", steps=2)
    m = onnx.load(infer)
    check_inference(m)
    bns = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    assert bns and all(len(n.output) == 1 for n in bns)
    assert all(a.i == 0 for n in bns for a in n.attribute if a.name == "training_mode")
    ck = {t.name: nh.to_array(t) for t in onnx.load(ckpt).graph.initializer}
    ref = onnx.load(src)
    assert all(t.name in ck for t in ref.graph.initializer)
    for t in ref.graph.initializer:
        t.CopyFrom(nh.from_array(ck[t.name], t.name))
    trained_ref = path(ctx, "ref_tm.onnx")
    onnx.save(ref, trained_ref)
    want, _ = export_outputs(ctx, trained_ref, data, "tm_ref")
    mine, theirs = export_outputs(ctx, infer, data, "tm")
    assert np.array_equal(mine["logits"], want["logits"])
    err = np.abs(theirs["logits"] - want["logits"]).max()
    assert err <= 1e-5 * max(1.0, np.abs(want["logits"]).max()), f"onnxruntime differs by {err}"


def test_no_checkpoint_and_fp32_default(ctx):
    """Without --load-state: the model's own weights; an inference model exports as it is."""
    train = grad(ctx, "mlp_cls")
    infer = path(ctx, "infer_init.onnx")
    ampc(ctx, "export", train, "-o", infer, "-q")
    m, src = onnx.load(infer), onnx.load(train)
    check_inference(m)
    init = {t.name: nh.to_array(t) for t in src.graph.initializer}
    for t in m.graph.initializer:
        assert np.array_equal(nh.to_array(t), init[t.name]), t.name
    plain = path(ctx, "infer_plain.onnx")
    ampc(ctx, "export", os.path.join(MODELS, "mlp_cls", "model.onnx"), "-o", plain, "-q")
    check_inference(onnx.load(plain))
    assert len(onnx.load(plain).graph.node) == len(onnx.load(os.path.join(MODELS, "mlp_cls", "model.onnx")).graph.node)


def test_refusals(ctx):
    mlp, cnn = grad(ctx, "mlp_cls"), grad(ctx, "resnet_cnn")
    out = path(ctx, "never.onnx")
    ckpt = path(ctx, "ckpt_mlp_refuse.onnx")
    ampc(ctx, "run", mlp, "--steps", "1", "--inputs", os.path.join(MODELS, "mlp_cls", "train_data"),
         "--save-state", ckpt)
    r = ampc(ctx, "export", cnn, "-o", out, "--load-state", ckpt, rc=1)
    assert "is no state of this model" in r.stderr or "has no" in r.stderr, r.stderr
    assert not os.path.exists(out)
    # A training model whose only output is an mse loss: nothing to infer.
    mse = path(ctx, "mse.onnx")
    ampc(ctx, "grad", os.path.join(MODELS, "mlp_cls", "model.onnx"), "-o", mse, "--loss", "mse")
    m = onnx.load(mse)
    keep = [o for o in m.graph.output if o.name == "loss"]
    del m.graph.output[:]
    m.graph.output.extend(keep)
    onnx.save(m, mse)
    r = ampc(ctx, "export", mse, "-o", out, rc=1)
    assert "no inference output left" in r.stderr, r.stderr
    assert not os.path.exists(out)
    # onnxruntime-training's training model without its checkpoint: parameters with no value.
    r = ampc(ctx, "export", os.path.join(ORT_MLP, "training_model.onnx"), "-o", out, rc=1)
    assert "give --optimizer and --checkpoint" in r.stderr, r.stderr
    assert not os.path.exists(out)
    # Usage.
    r = ampc(ctx, "export", mlp, rc=2)
    assert "missing -o" in r.stderr, r.stderr
    r = ampc(ctx, "export", mlp, "-o", out, "--precision", "fp8", rc=2)
    assert "expected fp32, fp16, bf16 or auto" in r.stderr, r.stderr
    r = ampc(ctx, "export", mlp, "-o", out, "--steps", "3", rc=2)
    assert "not for 'ampc export TRAIN'" in r.stderr, r.stderr
    r = ampc(ctx, "export", mlp, "-o", out, "--loss", "nope", rc=2)
    assert "nope" in r.stderr, r.stderr
    r = ampc(ctx, "export", rc=2)
    assert "missing TRAIN" in r.stderr, r.stderr
    h = ampc(ctx, "--help").stdout
    assert "ampc export TRAIN -o INFER" in h, "--help lists export"


class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx()
    ctx.ampc, ctx.notes, ctx.tmp = os.path.abspath(args.ampc), [], tl.tempdir("ampc_export_")
    tests = [(f.__name__[5:], f) for f in (test_grad_mlp, test_grad_cnn, test_spec_layout_mlp, test_spec_layout_cnn,
                                           test_ort_mlp, test_ort_bert, test_loss_scaled_fp16, test_precision, test_train_mode,
                                           test_no_checkpoint_and_fp32_default, test_refusals)]
    return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
