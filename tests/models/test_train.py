#!/usr/bin/env python3
"""Training with the bundled models/mlp_train (Momentum through TrainingInfoProto):
- reference: 100 steps of main graph + algorithm under onnx's reference evaluator, with
  update_binding applied after each step: the loss goes down, `step` counts to 100, and
  a state saved at step 50 and restored gives bit-identical steps 51-100;
- the optimizer is what models/README.md says: the same 100 steps in NumPy, PyTorch
  SGD(lr, momentum=0.9, weight_decay=1e-4) fed with onnxruntime's gradients from
  mlp_grads, follow the reference trajectory;
- `ampc run` training (100 steps, loss down; checkpoint at 50, restore, bit-identical
  51-100): skipped with a note until `ampc run` has options to train and to save and
  restore state.
Prints "N passed, M failed" last; exit 77 (skip) when onnx, onnxruntime or numpy is
missing.

usage: test_train.py --ampc PATH --testdata DIR [--verbose]
"""
import argparse
import copy
import os
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


def test_ampc_train(ctx):
    """`ampc run` trains mlp_train: loss down over 100 steps; checkpoint at 50 restored
    gives bit-identical steps 51-100. Needs `ampc run` options to train N steps and to
    save/restore state, whose names are not defined yet."""
    p = subprocess.run([ctx.args.ampc, "--help"], capture_output=True, text=True)
    if "ampc run" not in p.stdout + p.stderr:
        raise tm.Skip("`ampc run` does not exist yet")
    p = subprocess.run([ctx.args.ampc, "run", "--help"], capture_output=True, text=True)
    text = p.stdout + p.stderr
    raise tm.Skip("`ampc run` training options are not wired into this test yet "
                  f"(ampc run --help: {' '.join(text.split())[:300]})")


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
