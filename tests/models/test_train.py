#!/usr/bin/env python3
"""Training with the bundled models/mlp_train (Momentum through TrainingInfoProto):
- reference: 100 steps of main graph + algorithm under onnx's reference evaluator, with
  update_binding applied after each step: the loss goes down, `step` counts to 100, and
  a state saved at step 50 and restored gives bit-identical steps 51-100;
- the optimizer is what models/README.md says: the same 100 steps in NumPy, PyTorch
  SGD(lr, momentum=0.9, weight_decay=1e-4) fed with onnxruntime's gradients from
  mlp_grads, follow the reference trajectory;
- `ampc run models/mlp_train/model.onnx --steps 100 --inputs .../test_data_set_0`: the
  loss goes down (last < 0.5 x first) and follows the reference trajectory (within 1e-4
  relative); 50 steps with --save-state, then 50 with --load-state print the same losses
  for steps 51-100 as the straight run, digit for digit (%.9g: every float32 printed
  distinctly), and the state saved after 100 straight steps equals the state saved after
  50 + 50 (checkpoint initializers byte for byte, and their metadata); the last step's
  --outputs hold the printed final loss.
Prints "N passed, M failed" last; exit 77 (skip) when onnx, onnxruntime or numpy is
missing.

usage: test_train.py --ampc PATH --testdata DIR [--verbose]
"""
import argparse
import copy
import os
import re
import subprocess
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_models as tm  # noqa: E402  (exits 77 itself when a package is missing)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

STEPS, CHECKPOINT_AT = 100, 50


class Stepper:
    """One training step of a model with training_info under onnx.reference: the state
    (every initializer, mutable or not) is fed as inputs, and update_binding is applied
    to the returned values."""

    def __init__(self, model):
        from onnx.reference import ReferenceEvaluator
        c = tm.combined_training_graph(model)
        self.state0 = {t.name: numpy_helper.to_array(t) for t in c.graph.initializer}
        for t in c.graph.initializer:
            c.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        del c.graph.initializer[:]
        self.ev = ReferenceEvaluator(c)
        self.names = [o.name for o in c.graph.output]
        self.bindings = {b.key: b.value for b in model.training_info[0].update_binding}

    def step(self, state, feeds):
        r = dict(zip(self.names, self.ev.run(self.names, {**feeds, **state})))
        new = dict(state)
        for k, v in self.bindings.items():
            new[k] = np.array(r[v], copy=True)
        return float(r["loss"]), new


def train(stepper, state, feeds, n):
    losses = []
    for _ in range(n):
        loss, state = stepper.step(state, feeds)
        losses.append(loss)
    return losses, state


def checkpoint_bytes(state):
    """A byte-exact snapshot of the state, as a checkpoint file would hold it."""
    return {k: numpy_helper.from_array(np.asarray(v), k).SerializeToString() for k, v in state.items()}


def restore(snapshot):
    out = {}
    for k, b in snapshot.items():
        t = onnx.TensorProto()
        t.ParseFromString(b)
        out[k] = numpy_helper.to_array(t)
    return out


def mlp_feeds():
    inputs, _ = tm.load_case(os.path.join(tm.MODELS, "mlp_train"))
    return dict(inputs)


def test_reference_100_steps(ctx):
    m = onnx.load(tm.model_path("mlp_train"))
    st = Stepper(m)
    feeds = mlp_feeds()
    losses, state = train(st, st.state0, feeds, STEPS)
    ctx.ref_losses = losses
    if not losses[-1] < 0.1 * losses[0]:
        raise AssertionError(f"loss did not go down: {losses[0]:.4f} -> {losses[-1]:.4f}")
    # Not necessarily monotone step to step; over each block of 10 steps it must fall.
    blocks = [np.mean(losses[i:i + 10]) for i in range(0, STEPS, 10)]
    if any(b2 >= b1 for b1, b2 in zip(blocks, blocks[1:])):
        raise AssertionError(f"mean loss per 10 steps does not fall: {[round(b, 5) for b in blocks]}")
    if int(state["step"]) != STEPS:
        raise AssertionError(f"step is {state['step']} after {STEPS} steps")
    for k in ("lr",):
        if not np.array_equal(state[k], st.state0[k]):
            raise AssertionError(f"{k} changed during training")
    ctx.notes.append(f"reference: loss {losses[0]:.4f} -> {losses[49]:.5f} (step 50) -> {losses[-1]:.6f} "
                     f"(step {STEPS})")


def test_reference_checkpoint(ctx):
    """Save at step 50, restore into a fresh evaluator, steps 51-100 are bit-identical."""
    m = onnx.load(tm.model_path("mlp_train"))
    feeds = mlp_feeds()
    st = Stepper(m)
    first, state50 = train(st, st.state0, feeds, CHECKPOINT_AT)
    snap = checkpoint_bytes(state50)
    rest_a, final_a = train(st, state50, feeds, STEPS - CHECKPOINT_AT)
    st2 = Stepper(m)
    rest_b, final_b = train(st2, restore(snap), feeds, STEPS - CHECKPOINT_AT)
    if [np.float32(x).tobytes() for x in rest_a] != [np.float32(x).tobytes() for x in rest_b]:
        raise AssertionError("losses of steps 51-100 differ after restoring the checkpoint")
    for k in final_a:
        if np.asarray(final_a[k]).tobytes() != np.asarray(final_b[k]).tobytes():
            raise AssertionError(f"{k} differs after steps 51-100 from the restored checkpoint")


def test_numpy_sgd_matches(ctx):
    """The documented optimizer: PyTorch SGD(lr=0.1, momentum=0.9, dampening=0,
    weight_decay=1e-4), in NumPy float32, with gradients from onnxruntime (mlp_grads at
    the current weights), follows the reference trajectory for 100 steps."""
    import onnxruntime as ort  # noqa: F401  (tm imported it)
    grads_model = onnx.load(tm.model_path("mlp_grads"))
    train_model = onnx.load(tm.model_path("mlp_train"))
    mom = [n for n in train_model.training_info[0].algorithm.node if n.op_type == "Momentum"][0]
    attrs = {a.name: helper.get_attribute_value(a) for a in mom.attribute}
    if attrs.get("mode", b"standard") not in (b"standard", "standard"):
        raise AssertionError(f"Momentum mode {attrs.get('mode')}, the NumPy model is 'standard'")
    alpha, beta, norm = attrs["alpha"], attrs["beta"], attrs["norm_coefficient"]
    init = {t.name: numpy_helper.to_array(t) for t in train_model.graph.initializer}
    lr = np.float32(init["lr"])

    # A session whose parameters are inputs, so each step feeds the current weights.
    g = copy.deepcopy(grads_model)
    for t in g.graph.initializer:
        g.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    del g.graph.initializer[:]
    sess = tm.ort_session(g)
    names = [o.name for o in sess.get_outputs()]
    feeds = mlp_feeds()
    params = {p: init[p].copy() for p in tm.PARAMS}
    vel = {p: np.zeros_like(params[p]) for p in tm.PARAMS}
    losses = []
    for step in range(STEPS):
        r = dict(zip(names, sess.run(names, {**feeds, **params})))
        losses.append(float(r["loss"]))
        b = np.float32(beta if step > 0 else 1.0)
        for p in tm.PARAMS:
            gr = np.float32(norm) * params[p] + r[p + "_grad"]
            vel[p] = np.float32(alpha) * vel[p] + b * gr
            params[p] = params[p] - lr * vel[p]
    ref = getattr(ctx, "ref_losses", None)
    if ref is None:
        st = Stepper(train_model)
        ref, _ = train(st, st.state0, feeds, STEPS)
    # Two float32 implementations (different summation orders) drift apart slowly;
    # the loss must agree to 1e-3 relative (plus 1e-5 absolute once it is tiny).
    err = max(abs(a - b) / (abs(b) + 1e-2) for a, b in zip(losses, ref))
    ctx.notes.append(f"NumPy SGD vs reference: max loss difference {err:.2e} (relative, floor 1e-2)")
    if err > 1e-3:
        k = int(np.argmax([abs(a - b) / (abs(b) + 1e-2) for a, b in zip(losses, ref)]))
        raise AssertionError(f"step {k + 1}: NumPy SGD loss {losses[k]:.6g}, reference {ref[k]:.6g}")


# `ampc run` against onnx.reference: both float32, different summation orders.
AMPC_VS_REF_RTOL = 1e-4


def ampc_train(ctx, tag, steps, *extra):
    """Runs `ampc run mlp_train --steps N --inputs test_data_set_0 EXTRA...` in ctx.tmp;
    returns {step: (loss as printed, float)} from its "step K: loss V (T ms)" lines."""
    model = tm.model_path("mlp_train")
    data = os.path.join(tm.MODELS, "mlp_train", "test_data_set_0")
    cmd = [os.path.abspath(ctx.args.ampc), "run", model, "--steps", str(steps), "--inputs", data, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ctx.tmp)
    if p.returncode:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}: {(p.stdout + p.stderr).strip()[:2000]}")
    if p.stderr.strip():
        raise AssertionError(f"{tag}: unexpected messages: {p.stderr.strip()[:500]}")
    losses = {}
    for line in p.stdout.splitlines():
        mk = re.match(r"step (\d+): loss (\S+) \(", line)
        if mk:
            losses[int(mk.group(1))] = (mk.group(2), float(mk.group(2)))
    if len(losses) != steps:
        raise AssertionError(f"{tag}: {len(losses)} loss lines for {steps} steps:\n{p.stdout[:2000]}")
    return losses


def checkpoint_state(path):
    """A checkpoint's state: {name: (dtype, dims, element bytes)} and its metadata."""
    m = onnx.load(path)
    state = {t.name: (t.data_type, tuple(t.dims), numpy_helper.to_array(t).tobytes()) for t in m.graph.initializer}
    return state, {p.key: p.value for p in m.metadata_props}


def test_ampc_train(ctx):
    """`ampc run` trains mlp_train for 100 steps: the loss falls, along the reference
    trajectory; a checkpoint at step 50, restored, gives bit-identical steps 51-100 and
    bit-identical final state."""
    p = subprocess.run([ctx.args.ampc, "--help"], capture_output=True, text=True)
    text = p.stdout + p.stderr
    missing = [o for o in ("ampc run", "--steps", "--inputs", "--save-state", "--load-state", "--outputs")
               if o not in text]
    if missing:
        raise AssertionError(f"`ampc --help` does not list {missing}")
    straight = ampc_train(ctx, "100 steps", STEPS, "--save-state", "ck100.onnx", "--outputs", "out100")
    losses = [straight[k][1] for k in range(1, STEPS + 1)]
    if not losses[-1] < 0.5 * losses[0]:
        raise AssertionError(f"ampc: loss did not go down: {losses[0]:.6g} -> {losses[-1]:.6g}")

    # The same trajectory as onnx's reference evaluator.
    ref = getattr(ctx, "ref_losses", None)
    if ref is None:
        st = Stepper(onnx.load(tm.model_path("mlp_train")))
        ref, _ = train(st, st.state0, mlp_feeds(), STEPS)
    rel = [abs(a - b) / abs(b) for a, b in zip(losses, ref)]
    k = int(np.argmax(rel))
    ctx.notes.append(f"ampc run: loss {losses[0]:.4f} -> {losses[-1]:.6f} in {STEPS} steps; "
                     f"max relative difference from the reference {rel[k]:.2e} (step {k + 1})")
    if rel[k] > AMPC_VS_REF_RTOL:
        raise AssertionError(f"step {k + 1}: ampc loss {losses[k]:.9g}, reference {ref[k]:.9g} "
                             f"(relative difference {rel[k]:.2e} > {AMPC_VS_REF_RTOL})")

    # --outputs: output_0.pb is the last step's loss, the value printed for step 100.
    t = onnx.load_tensor(os.path.join(ctx.tmp, "out100", "output_0.pb"))
    if t.name != "loss" or np.float32(numpy_helper.to_array(t)) != np.float32(straight[STEPS][0]):
        raise AssertionError(f"out100/output_0.pb: {t.name} = {numpy_helper.to_array(t)}, "
                             f"step {STEPS} printed loss {straight[STEPS][0]}")

    # Checkpoint at 50, restore, 50 more: the same printed losses, the same final state.
    first = ampc_train(ctx, "50 steps", CHECKPOINT_AT, "--save-state", "ck50.onnx")
    rest = ampc_train(ctx, "50 steps from ck50", STEPS - CHECKPOINT_AT, "--load-state", "ck50.onnx",
                      "--save-state", "ck5050.onnx")
    for k in range(1, CHECKPOINT_AT + 1):
        if first[k][0] != straight[k][0]:
            raise AssertionError(f"step {k}: {first[k][0]} in the 50-step run, {straight[k][0]} straight")
    if sorted(rest) != list(range(CHECKPOINT_AT + 1, STEPS + 1)):
        raise AssertionError(f"the restored run numbers its steps {min(rest)}..{max(rest)}, "
                             f"expected {CHECKPOINT_AT + 1}..{STEPS}")
    for k in rest:
        if rest[k][0] != straight[k][0]:
            raise AssertionError(f"step {k}: loss {rest[k][0]} after restoring step {CHECKPOINT_AT}, "
                                 f"{straight[k][0]} straight through")
    a, meta_a = checkpoint_state(os.path.join(ctx.tmp, "ck100.onnx"))
    b, meta_b = checkpoint_state(os.path.join(ctx.tmp, "ck5050.onnx"))
    # The state is what training_info binds (include/ampc/ampc.h): weights, momentum, step; not lr.
    bound = {b.key for b in onnx.load(tm.model_path("mlp_train")).training_info[0].update_binding}
    if set(a) != bound:
        raise AssertionError(f"the checkpoint holds {sorted(a)}, update_binding binds {sorted(bound)}")
    if set(a) != set(b):
        raise AssertionError(f"checkpoints hold {sorted(a)} and {sorted(b)}")
    for name in sorted(a):
        if a[name] != b[name]:
            raise AssertionError(f"state {name} after {STEPS} steps differs from 50 + 50 steps")
    if meta_a != meta_b:
        raise AssertionError(f"checkpoint metadata {meta_a} after {STEPS} steps, {meta_b} after 50 + 50")
    step = np.frombuffer(a["step"][2], dtype=np.int64)
    if step.size != 1 or int(step[0]) != STEPS:
        raise AssertionError(f"the checkpoint's step is {step} after {STEPS} steps")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True, help="path of the ampc binary")
    ap.add_argument("--testdata", default="/usr/share/libonnx-testdata/data",
                    help="ONNX conformance data (unused; accepted like every python test)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = tm.Ctx(args)
    tests = [
        ("reference training, 100 steps", test_reference_100_steps),
        ("reference checkpoint at 50", test_reference_checkpoint),
        ("NumPy SGD matches the Momentum node", test_numpy_sgd_matches),
        ("ampc run training", test_ampc_train),
    ]
    passed = failed = 0
    skips = []
    for title, fn in tests:
        try:
            fn(ctx)
        except tm.Skip as e:
            skips.append(f"{title}: {e}")
            continue
        except Exception as e:
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
    for s in skips:
        print(f"note: skipped {s}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
