#!/usr/bin/env python3
"""Trains an onnxruntime-training artifact set in onnxruntime (Module, CheckpointState,
Optimizer), as converted by ampc or as onnxruntime wrote it, with GradScaler's loop:

    for each batch:
        outputs = module.train_step(inputs..., amp_loss_scale, amp_growth_tracker)
        read amp_found_inf, amp_loss_scale_new, amp_growth_tracker_new
        if amp_found_inf: skip the optimizer step (the gradients were not finite)
        else:             optimizer.step()
        module.lazy_reset_grad()
        feed the new scale and tracker to the next step

The AMP part applies when the training model has an `amp_found_inf` output; convert with
`ampc training_model.onnx --loss-scale-state inputs -o amp_training_model.onnx`, since
onnxruntime's Module treats initializers as constants and could not carry the scale from
one step to the next (docs/training.md, "Training graphs from onnxruntime-training").

    python3 tools/ort_train.py ARTIFACTS_DIR [--training-model FILE] [--steps N]
        [--lr LR] [--batches N] [--optimizer-model FILE] [--json OUT.json] [--grads OUT.npz]

ARTIFACTS_DIR holds checkpoint, optimizer_model.onnx and data.npz (the batches: one
array per user input of the model, named like it, plus `labels`; first axis = batch
index, used round-robin; --batches N: the first N only). --training-model defaults to ARTIFACTS_DIR/training_model.onnx.
Prints one line per step; --json writes {"losses": [...], "skipped": [...],
"scales": [...]}; --grads writes each parameter's gradient after the first step.

Needs onnxruntime-training (1.19.2 with onnx 1.16.x and numpy < 2; scripts/setup.sh
makes that venv) and nothing else: it drives onnxruntime's training bindings directly,
so torch, which `import onnxruntime.training` pulls in, is not needed.

onnxruntime's CPU provider has no float16 Gemm/MatMul kernels: it computes them in
float32 and drops the casts around them, so on the CPU this checks the loss scaling
(every gradient unscaled, the found-inf gate, the scale's update), not float16 rounding.
"""
import argparse
import json
import os
import sys

import numpy as np

SCALE, TRACKER, FOUND = "amp_loss_scale", "amp_growth_tracker", "amp_found_inf"


def bindings():
    """onnxruntime's training bindings, or exit with what to install."""
    try:
        import onnxruntime
        from onnxruntime.capi import _pybind_state as C
    except ImportError as e:
        sys.exit(f"ort_train: onnxruntime is not importable ({e}); install onnxruntime-training==1.19.2")
    if not hasattr(C, "Module"):
        sys.exit(f"ort_train: this onnxruntime ({onnxruntime.__version__}) has no training API; "
                 "install onnxruntime-training==1.19.2 (in its own venv: it replaces onnxruntime)")
    return onnxruntime, C


class Trainer:
    """One artifact set in onnxruntime: module, optimizer, the batches, the AMP state."""

    def __init__(self, artifacts, training_model=None, lr=None, init_scale=65536.0, batches=None,
                 optimizer_model=None):
        ort, C = bindings()
        self.C = C
        self.dir = artifacts
        self.state = C.load_checkpoint(os.path.join(artifacts, "checkpoint"))
        dev = C.OrtDevice(C.OrtDevice.cpu(), C.OrtDevice.default_memory(), 0)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1  # repeatable sums
        model = training_model or os.path.join(artifacts, "training_model.onnx")
        self.module = C.Module(model, self.state, None, dev, opts)
        self.optimizer = C.Optimizer(optimizer_model or os.path.join(artifacts, "optimizer_model.onnx"), self.state,
                                     dev, opts)
        if lr is not None:
            self.optimizer.set_learning_rate(lr)
        self.inputs = list(self.module.input_names(True))
        self.outputs = list(self.module.output_names(True))
        self.amp = FOUND in self.outputs
        if self.amp and SCALE not in self.inputs:
            sys.exit(f"ort_train: {model} has amp_found_inf but no '{SCALE}' input: convert with "
                     "--loss-scale-state inputs (onnxruntime keeps initializers constant)")
        data = np.load(os.path.join(artifacts, "data.npz"))
        self.batches = {k: data[k] for k in data.files}
        want = [n for n in self.inputs if n not in (SCALE, TRACKER)]
        missing = [n for n in want if n not in self.batches]
        if missing:
            sys.exit(f"ort_train: data.npz has no {missing} (model inputs {self.inputs})")
        self.n_batches = len(self.batches[want[0]])
        if batches:
            self.n_batches = min(self.n_batches, batches)
        self.scale = np.array(init_scale, np.float32)
        self.tracker = np.array(0, np.int64)

    def feeds(self, b, scale=None):
        out = []
        for n in self.inputs:
            if n == SCALE:
                out.append(np.array(self.scale if scale is None else scale, np.float32))
            elif n == TRACKER:
                out.append(self.tracker)
            else:
                out.append(self.batches[n][b % self.n_batches])
        return out

    def forward_backward(self, b, scale=None):
        """One train step (loss, gradients into the buffers); returns the outputs by name."""
        fetches = self.C.OrtValueVector()
        self.module.train_step(self.feeds(b, scale), fetches)
        return {n: v.numpy() for n, v in zip(self.outputs, fetches)}

    def grads(self):
        """Each parameter's accumulated gradient, by name."""
        out = {}
        for n in self.state.parameter_names():
            p = self.state.get_parameter(n)
            if p.requires_grad:
                out[n] = np.array(p.grad.numpy(), copy=True)
        return out

    def step(self, i):
        """Training step i: returns (loss, skipped)."""
        out = self.forward_backward(i)
        loss = float(out[self.outputs[0]])
        skipped = False
        if self.amp:
            skipped = bool(np.asarray(out[FOUND]).reshape(-1)[0])
            if "amp_loss_scale_new" in out:
                self.scale = out["amp_loss_scale_new"]
            if "amp_growth_tracker_new" in out:
                self.tracker = out["amp_growth_tracker_new"]
        if not skipped:
            self.optimizer.optimizer_step()
        self.module.lazy_reset_grad()
        return loss, skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifacts")
    ap.add_argument("--training-model")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--batches", type=int, help="train on the first N batches of data.npz only")
    ap.add_argument("--optimizer-model", help="default: ARTIFACTS_DIR/optimizer_model.onnx")
    ap.add_argument("--json")
    ap.add_argument("--grads")
    args = ap.parse_args()
    if args.steps < 1:
        sys.exit("ort_train: --steps must be at least 1")
    t = Trainer(args.artifacts, args.training_model, args.lr, batches=args.batches,
                optimizer_model=args.optimizer_model)
    losses, skipped, scales = [], [], []
    for i in range(args.steps):
        if i == 0 and args.grads:
            t.forward_backward(0)
            np.savez(args.grads, **t.grads())
            t.module.lazy_reset_grad()
        loss, skip = t.step(i)
        losses.append(loss)
        skipped.append(skip)
        scales.append(float(t.scale))
        print(f"step {i + 1}: loss {loss:.6f}" + (f", scale {float(t.scale):g}" if t.amp else "")
              + (" (skipped: gradients not finite)" if skip else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"losses": losses, "skipped": skipped, "scales": scales}, f)


if __name__ == "__main__":
    main()
