#!/usr/bin/env python3
"""Training models in ONNX's own layout (TrainingInfoProto: the main graph is the inference
graph; the loss, the backward and the optimizer live in training_info[0].algorithm) convert,
train and loss-scale as the same model with the loss and backward in the main graph does:

- an MLP 64 -> 128 -> 10 written by hand in that layout (SoftmaxCrossEntropyLoss in the
  algorithm, backward from a `loss_grad` seed, ONNX's Momentum or Adam op, velocities as
  algorithm initializers): `ampc verify` accepts it; FP32 `ampc run --steps 30` follows a
  float64 NumPy reference of the same step (Momentum);
- property: the spec layout and the flat layout of one model (tests/models/spec_layout.py
  moves one into the other) give the same losses and loss scales, digit for digit (%.9g:
  bit for bit in float32), for 6 steps in FP32, fp16 with dynamic loss scaling and bf16:
  the hand-written MLP with Momentum and with Adam, and `ampc grad`'s training graphs of
  the bundled mlp_cls, amp_recipe, resnet_cnn (a CNN) and gpt_decoder (a GPT-style block);
  the conversions have the same casts and 16-bit nodes (--report);
- the loss is found in either graph, or named (`--loss loss`); a name in neither graph is a
  usage error naming both; AMP_AUTO=1 `ampc run` trains the spec model as the converted one;
- the converted spec model keeps the inference graph free of the backward: its main graph's
  outputs are the inference outputs, and the gradient check, amp_found_inf and the scale's
  update are in the algorithm.

usage: test_spec_layout.py --ampc PATH [--testdata DIR] [--verbose]
Exit 77 (skip) when onnx or numpy is missing.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spec_layout import to_spec_layout  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IN, HID, OUT, BATCH = 64, 128, 10, 32
LR, ALPHA = 0.05, 0.9
TRAINING = "ai.onnx.preview.training"


def f32(a):
    return np.asarray(a, dtype=np.float32)


def const(name, value):
    return helper.make_node("Constant", [], [name], name=name, value=numpy_helper.from_array(value, name))


def mlp_params(rng):
    return {
        "W1": f32(rng.standard_normal((IN, HID)) * np.sqrt(2.0 / IN)),
        "b1": f32(rng.uniform(-0.1, 0.1, HID)),
        "W2": f32(rng.standard_normal((HID, OUT)) * np.sqrt(2.0 / HID)),
        "b2": f32(rng.uniform(-0.1, 0.1, OUT)),
    }


PARAMS = ["W1", "b1", "W2", "b2"]


def mlp_flat(params, optimizer):
    """The MLP's training model in the flat layout: forward, loss and backward in the main
    graph (outputs logits and loss), the optimizer in training_info."""
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "W1"], ["z1m"], name="fc1/MatMul"),
        n("Add", ["z1m", "b1"], ["z1"], name="fc1/Add"),
        n("Relu", ["z1"], ["h1"], name="relu1/Relu"),
        n("MatMul", ["h1", "W2"], ["z2m"], name="fc2/MatMul"),
        n("Add", ["z2m", "b2"], ["logits"], name="fc2/Add"),
        n("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"], name="loss/SCE", reduction="mean"),
        const("loss_grad", np.array(1.0, dtype=np.float32)),
        n("Softmax", ["logits"], ["g/probs"], name="g/Softmax", axis=1),
        const("g/depth", np.array(OUT, dtype=np.int64)),
        const("g/onehot_values", f32([0.0, 1.0])),
        n("OneHot", ["labels", "g/depth", "g/onehot_values"], ["g/onehot"], name="g/OneHot", axis=-1),
        n("Shape", ["logits"], ["g/shape"], name="g/Shape"),
        const("g/zero_i64", np.array(0, dtype=np.int64)),
        n("Gather", ["g/shape", "g/zero_i64"], ["g/batch"], name="g/Gather", axis=0),
        n("Cast", ["g/batch"], ["g/batch_f"], name="g/Cast", to=TensorProto.FLOAT),
        n("Div", ["loss_grad", "g/batch_f"], ["g/scale"], name="g/Div"),
        n("Sub", ["g/probs", "g/onehot"], ["g/diff"], name="g/Sub"),
        n("Mul", ["g/diff", "g/scale"], ["logits_grad"], name="g/Mul"),
        const("g/axes0", np.array([0], dtype=np.int64)),
        n("ReduceSum", ["logits_grad", "g/axes0"], ["b2_grad"], name="g/fc2/ReduceSum", keepdims=0),
        n("Transpose", ["h1"], ["g/h1_T"], name="g/fc2/T_h1", perm=[1, 0]),
        n("MatMul", ["g/h1_T", "logits_grad"], ["W2_grad"], name="g/fc2/MatMul_W2"),
        n("Transpose", ["W2"], ["g/W2_T"], name="g/fc2/T_W2", perm=[1, 0]),
        n("MatMul", ["logits_grad", "g/W2_T"], ["h1_grad"], name="g/fc2/MatMul_h1"),
        const("g/zero_f", np.array(0.0, dtype=np.float32)),
        n("Greater", ["z1", "g/zero_f"], ["g/z1_pos"], name="g/relu/Greater"),
        n("Where", ["g/z1_pos", "h1_grad", "g/zero_f"], ["z1_grad"], name="g/relu/Where"),
        n("ReduceSum", ["z1_grad", "g/axes0"], ["b1_grad"], name="g/fc1/ReduceSum", keepdims=0),
        n("Transpose", ["x"], ["g/x_T"], name="g/fc1/T_x", perm=[1, 0]),
        n("MatMul", ["g/x_T", "z1_grad"], ["W1_grad"], name="g/fc1/MatMul_W1"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", IN]),
              helper.make_tensor_value_info("labels", TensorProto.INT64, ["batch"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", OUT]),
               helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])]
    inits = [numpy_helper.from_array(params[p], p) for p in PARAMS]
    state = ["_v"] if optimizer == "momentum" else ["_m", "_h"]
    inits += [numpy_helper.from_array(np.zeros_like(params[p]), p + s) for s in state for p in PARAMS]
    inits += [numpy_helper.from_array(np.array(LR, dtype=np.float32), "lr"),
              numpy_helper.from_array(np.array(0, dtype=np.int64), "step")]
    graph = helper.make_graph(nodes, "mlp64", inputs, outputs, initializer=inits)
    new_x = [p + "_new" for p in PARAMS]
    new_s = [p + s + "_new" for s in state for p in PARAMS]
    ins = ["lr", "step"] + PARAMS + [p + "_grad" for p in PARAMS] + [p + s for s in state for p in PARAMS]
    if optimizer == "momentum":
        opt = helper.make_node("Momentum", ins, new_x + new_s, name="optim/Momentum", domain=TRAINING,
                               mode="standard", alpha=ALPHA, beta=1.0, norm_coefficient=0.0)
    else:
        opt = helper.make_node("Adam", ins, new_x + new_s, name="optim/Adam", domain=TRAINING,
                               alpha=0.9, beta=0.999, epsilon=1e-8, norm_coefficient=0.0)
    alg_nodes = [opt, const("optim/one", np.array(1, dtype=np.int64)),
                 helper.make_node("Add", ["step", "optim/one"], ["step_new"], name="optim/step")]
    shape = {p: list(params[p].shape) for p in PARAMS}
    alg_out = [helper.make_tensor_value_info(v, TensorProto.FLOAT, shape[p]) for v, p in zip(new_x, PARAMS)]
    alg_out += [helper.make_tensor_value_info(p + s + "_new", TensorProto.FLOAT, shape[p])
                for s in state for p in PARAMS]
    alg_out.append(helper.make_tensor_value_info("step_new", TensorProto.INT64, []))
    alg = helper.make_graph(alg_nodes, "mlp64_" + optimizer, [], alg_out)
    bindings = [(p, p + "_new") for p in PARAMS] + [(p + s, p + s + "_new") for s in state for p in PARAMS]
    bindings.append(("step", "step_new"))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TRAINING, 1)],
                              producer_name="ampc tests/models/test_spec_layout.py")
    model.ir_version = 8
    model.training_info.append(helper.make_training_info(alg, bindings, None, None))
    return model


def reference_momentum(params, x, labels, steps):
    """The MLP's training losses in float64 under ONNX's Momentum (standard, beta 1)."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    v = {k: np.zeros_like(p[k]) for k in PARAMS}
    x = x.astype(np.float64)
    losses = []
    for _ in range(steps):
        z1 = x @ p["W1"] + p["b1"]
        h1 = np.maximum(z1, 0)
        logits = h1 @ p["W2"] + p["b2"]
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        prob = e / e.sum(axis=1, keepdims=True)
        losses.append(float(-np.mean(np.log(prob[np.arange(len(labels)), labels]))))
        d = (prob - np.eye(OUT)[labels]) / len(labels)
        g = {"b2": d.sum(0), "W2": h1.T @ d}
        dz1 = (d @ p["W2"].T) * (z1 > 0)
        g["b1"], g["W1"] = dz1.sum(0), x.T @ dz1
        for k in PARAMS:
            v[k] = ALPHA * v[k] + g[k]
            p[k] = p[k] - LR * v[k]
    return losses


class T:
    def __init__(self, ampc, verbose):
        self.ampc, self.verbose = ampc, verbose
        self.passed = self.failed = 0
        self.tmp = tempfile.mkdtemp(prefix="ampc_spec_")

    def run(self, args, env=None, expect=0):
        e = dict(os.environ)
        e.update(env or {})
        p = subprocess.run([self.ampc] + args, capture_output=True, text=True, env=e)
        if self.verbose:
            print("$ ampc " + " ".join(args) + f"  -> {p.returncode}\n" + p.stderr[-2000:])
        if expect is not None and p.returncode != expect:
            raise AssertionError(f"ampc {' '.join(args)}: exit {p.returncode}, expected {expect}\n{p.stderr}")
        return p

    def check(self, name, fn):
        try:
            fn()
            self.passed += 1
            print(f"ok   {name}")
        except Exception:  # noqa: BLE001
            self.failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}")

    def path(self, name):
        return os.path.join(self.tmp, name)

    def steps(self, model, data, n, extra=(), env=None):
        """The losses and loss scales ampc run prints, as text (%.9g)."""
        p = self.run(["run", model, "--steps", str(n), "--inputs", data] + list(extra), env=env)
        lines = re.findall(r"^step \d+: loss (\S+)(?: \([^)]*\))?(?:, loss scale (\S+))?", p.stdout, re.M)
        assert len(lines) == n, p.stdout
        return lines

    def convert(self, src, dst, precision):
        if precision == "fp32":
            return src
        self.run([src, "-o", dst, "-q", "--precision", precision])
        return dst

    def report(self, model):
        p = self.run(["--report", model, "-o", os.devnull, "-q"])
        return p.stdout.splitlines()[:2]


def write_data(folder, feeds):
    os.makedirs(folder, exist_ok=True)
    for i, (name, a) in enumerate(feeds):
        with open(os.path.join(folder, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, name).SerializeToString())


def same_training(t, flat, spec, data, n=6, precisions=("fp32", "fp16", "bf16")):
    base = os.path.splitext(os.path.basename(spec))[0]
    for prec in precisions:
        a = t.convert(flat, t.path(f"{base}_flat_{prec}.onnx"), prec)
        b = t.convert(spec, t.path(f"{base}_spec_{prec}.onnx"), prec)
        la, lb = t.steps(a, data, n), t.steps(b, data, n)
        assert la == lb, f"{prec}: flat {la} != spec {lb}"
        if prec == "fp16":  # bf16 needs no loss scale: ampc scales fp16 only
            assert all(s for _, s in lb), f"{prec}: no loss scale printed: {lb}"
        if prec != "fp32":
            ra, rb = t.report(a), t.report(b)
            assert ra == rb, f"{prec}: flat converts to {ra}, spec to {rb}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    t = T(os.path.abspath(a.ampc), a.verbose)

    rng = np.random.RandomState(35)
    params = mlp_params(rng)
    x = f32(rng.standard_normal((BATCH, IN)))
    labels = np.argmax(x.astype(np.float64) @ rng.standard_normal((IN, OUT)), axis=1).astype(np.int64)
    data = t.path("mlp64_data")
    write_data(data, [("x", x), ("labels", labels)])
    models = {}
    for opt in ("momentum", "adam"):
        flat = mlp_flat(params, opt)
        spec = to_spec_layout(flat, ["logits"])
        for kind, m in (("flat", flat), ("spec", spec)):
            onnx.checker.check_model(m, full_check=True)
            models[opt, kind] = t.path(f"mlp64_{opt}_{kind}.onnx")
            onnx.save(m, models[opt, kind])

    def layout():
        m = onnx.load(models["momentum", "spec"])
        assert [o.name for o in m.graph.output] == ["logits"]
        alg = m.training_info[0].algorithm
        assert "loss" in [o.name for o in alg.output]
        assert {"W1_v", "b1_v", "W2_v", "b2_v"} <= {i.name for i in alg.initializer}
        assert any(n.op_type == "Momentum" for n in alg.node)
    t.check("the spec-layout MLP has the loss, backward and velocities in the algorithm", layout)

    def verify_and_reference():
        spec = models["momentum", "spec"]
        t.run(["verify", spec])
        got = [float(l) for l, _ in t.steps(spec, data, 30)]
        ref = reference_momentum(params, x, labels, 30)
        err = max(abs(g - r) / abs(r) for g, r in zip(got, ref))
        assert err < 2e-6, f"relative error {err:.3g} from float64: {got} vs {ref}"
        assert got[-1] < 0.5 * got[0], got
    t.check("spec-layout MLP (Momentum): verify, 30 FP32 steps within 2e-6 of float64", verify_and_reference)

    for opt in ("momentum", "adam"):
        t.check(f"spec layout = flat layout, bit for bit, MLP with {opt} (FP32, fp16 dynamic, bf16)",
                lambda opt=opt: same_training(t, models[opt, "flat"], models[opt, "spec"], data))

    def converted_layout():
        out = t.path("spec16.onnx")
        p = t.run([models["momentum", "spec"], "-o", out])
        assert "loss 'loss'" in p.stderr and "4 gradients unscaled" in p.stderr, p.stderr
        m = onnx.load(out)
        onnx.checker.check_model(m)
        assert [o.name for o in m.graph.output] == ["logits"], [o.name for o in m.graph.output]
        main_ops = {n.op_type for n in m.graph.node}
        assert not main_ops & {"SoftmaxCrossEntropyLoss", "IsNaN", "Momentum"}, main_ops
        alg = m.training_info[0].algorithm
        names = [o.name for o in alg.output]
        assert "amp_found_inf" in names and "loss" in names, names
        keys = {b.key for b in m.training_info[0].update_binding}
        assert {"amp_loss_scale", "amp_growth_tracker", "W1", "W1_v"} <= keys, keys
        # converting again changes nothing
        again = t.path("spec16_again.onnx")
        t.run([out, "-o", again, "-q"])
        assert t.report(out) == t.report(again)
    t.check("the converted spec model: inference main graph, the check and scale update in the algorithm",
            converted_layout)

    def loss_names():
        spec = models["momentum", "spec"]
        t.run([spec, "-o", t.path("named.onnx"), "--loss", "loss", "-q"])
        p = t.run([spec, "-o", t.path("bad.onnx"), "--loss", "nope"], expect=2)
        assert "--loss 'nope': neither the main graph nor a training algorithm" in p.stderr, p.stderr
        assert not os.path.exists(t.path("bad.onnx"))
        for extra in (["--precision", "bf16"], ["--loss-scale", "none"]):
            t.run([spec, "-o", t.path("x.onnx"), "-q"] + extra)
    t.check("the loss named or found in either graph; an unknown name is a usage error", loss_names)

    def amp_auto():
        spec = models["momentum", "spec"]
        conv = t.convert(spec, t.path("auto_conv.onnx"), "fp16")
        a = t.steps(spec, data, 5, env={"AMP_AUTO": "1", "AMP_PRECISION": "fp16"})
        b = t.steps(conv, data, 5)
        assert a == b, (a, b)
    t.check("AMP_AUTO=1 ampc run trains the spec model as its conversion does", amp_auto)

    # ampc grad's training graphs of the bundled models, moved into the spec layout.
    for name, keep in (("mlp_cls", None), ("amp_recipe", None), ("resnet_cnn", None), ("gpt_decoder", None)):
        def grad_model(name=name):
            folder = os.path.join(ROOT, "models", name)
            with open(os.path.join(folder, "train.json")) as f:
                cfg = json.load(f)
            flat = t.path(f"{name}_flat.onnx")
            t.run(["grad", os.path.join(folder, "model.onnx"), "-o", flat, "-q"] + cfg["grad"])
            fm = onnx.load(flat)
            inference = [o.name for o in onnx.load(os.path.join(folder, "model.onnx")).graph.output]
            spec = t.path(f"{name}_spec.onnx")
            sm = to_spec_layout(fm, inference)
            assert sm.graph.node and len(sm.graph.node) < len(fm.graph.node)
            onnx.save(sm, spec)
            same_training(t, flat, spec, os.path.join(folder, "train_data"), n=4)
        t.check(f"spec layout = flat layout, bit for bit: ampc grad of {name}", grad_model)

    print(f"{t.passed} passed, {t.failed} failed")
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
