#!/usr/bin/env python3
"""Writes the bundled models for `ampc grad` (models/README.md, "Models for ampc grad"):
small PyTorch networks exported by torch.onnx.export (opset 17, random weights,
torch.manual_seed), each with a learnable synthetic task (a fixed random teacher network
of the same kind gives the targets or labels) and PyTorch autograd's gradients to check
`ampc grad` against:

  models/amp_recipe/   PyTorch's AMP-recipe network (3 x Linear + ReLU between, MSE),
                       width 256, batch 64 (--full: width 4096, batch 512, to --out only)
  models/mlp_cls/      an MLP classifier 32-64-64-10 (ReLU), cross-entropy, batch 128
  models/resnet_cnn/   a ResNet-style CNN (conv-BN-ReLU stem, one residual block,
                       global average pool, Linear), cross-entropy, batch 8 of 3x16x16;
                       exported in eval mode (BatchNormalization with running stats)
  models/gpt_decoder/  a GPT-2-style decoder: token + position embeddings, 2 pre-LayerNorm
                       blocks (causal attention with separate q/k/v Linear layers and the
                       mask added as a constant, GELU MLP), tied head; logits [B*T, V]
                       against the next tokens, cross-entropy; vocabulary 64, 16 positions,
                       width 32, 2 heads, batch 8

Each folder holds:
  model.onnx                  the forward export
  test_data_set_0/            input_0.pb and output_0.pb (onnxruntime, float32)
  train_data/                 input_0.pb (the same x) and input_1.pb (labels or target)
  grads.npz                   torch's loss ("loss") and the gradient of every parameter on
                              train_data (computed in float64, stored as float32), keyed
                              by the ONNX initializer's name
  train.json                  how to make and train the training graph: `ampc grad`'s
                              arguments, the steps, and the rules a model waits for
The training graphs are made by `ampc grad` (tests/models/test_grad_models.py runs it):
this script prints what `ampc grad` says of each when given --ampc.

Needs torch (the venv of models/make_ort_artifacts.py):
  /work/venv-ort/bin/python models/make_grad_models.py [--ampc build/ampc]
The results are committed; nothing else needs torch.
"""
import argparse
import io
import json
import os
import shutil
import subprocess

import numpy as np

OPSET = 17


def save_pb(path, array, name):
    from onnx import numpy_helper
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def export(model, x, out_dir, target, target_name, loss_fn, train):
    """model.onnx, test_data_set_0, train_data, grads.npz and train.json in out_dir."""
    import onnx
    import onnxruntime as ort
    import torch
    from onnx import numpy_helper
    x_name = "input_ids" if x.dtype == np.int64 else "x"
    f = io.BytesIO()
    torch.onnx.export(model, (torch.from_numpy(x),), f, input_names=[x_name], output_names=["logits"],
                      opset_version=OPSET, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)  # EVAL would fold BatchNorm into Conv
    m = onnx.load_from_string(f.getvalue())
    m.producer_name = "pytorch " + torch.__version__.split("+")[0] + " via ampc models/make_grad_models.py"
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    for d in ("test_data_set_0", "train_data"):
        os.makedirs(os.path.join(out_dir, d))
    path = os.path.join(out_dir, "model.onnx")
    onnx.save(m, path)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    y = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {x_name: x})[0]
    save_pb(os.path.join(out_dir, "test_data_set_0", "input_0.pb"), x, x_name)
    save_pb(os.path.join(out_dir, "test_data_set_0", "output_0.pb"), y, "logits")
    save_pb(os.path.join(out_dir, "train_data", "input_0.pb"), x, x_name)
    save_pb(os.path.join(out_dir, "train_data", "input_1.pb"), target, target_name)

    # torch's loss and gradients, float64, keyed by initializer name: the exporter keeps
    # the parameter's name, else the initializer holds the same values.
    model = model.double()
    model.zero_grad()
    xt = torch.from_numpy(x) if x.dtype == np.int64 else torch.from_numpy(x).double()
    tt = torch.from_numpy(target) if target.dtype == np.int64 else torch.from_numpy(target).double()
    loss = loss_fn(model(xt), tt)
    loss.backward()
    params = dict(model.named_parameters())
    grads = {"loss": np.array(loss.item())}
    for init in m.graph.initializer:
        v = numpy_helper.to_array(init)
        p = params.get(init.name)
        if p is None:
            p = next((q for q in params.values() if tuple(q.shape) == v.shape and
                      np.array_equal(q.detach().float().numpy(), v)), None)
        if p is not None and p.grad is not None:
            grads[init.name] = p.grad.numpy().astype(np.float32)  # computed in float64
    np.savez_compressed(os.path.join(out_dir, "grads.npz"), **grads)
    with open(os.path.join(out_dir, "train.json"), "w") as fh:
        json.dump(train, fh, indent=1, sort_keys=True)
        fh.write("\n")
    size = sum(os.path.getsize(os.path.join(r, n)) for r, _, ns in os.walk(out_dir) for n in ns)
    print(f"{out_dir}: {len(m.graph.node)} nodes, {len(grads) - 1} parameter gradients, loss {loss.item():.4f}, "
          f"{size / 1024:.0f} KiB in all")


def distinct_norms(model):
    """Norm layers' weights and biases made unlike one another: the exporter merges
    initializers with equal values (ones, zeros) into one, which would sum their gradients."""
    import torch
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.LayerNorm, torch.nn.BatchNorm2d)):
                m.weight.add_(torch.randn_like(m.weight) * 0.1)
                m.bias.add_(torch.randn_like(m.bias) * 0.1)
    return model


def amp_recipe(root, width=256, batch=64, name="amp_recipe"):
    """torch's AMP recipe (recipes/recipes/amp_recipe): make_model(in, out, num_layers=3)."""
    import torch

    def make(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                                   torch.nn.ReLU(), torch.nn.Linear(width, width)).eval()
    student, teacher = make(0), make(1)
    x = np.random.RandomState(5).randn(batch, width).astype(np.float32)
    with torch.no_grad():
        target = teacher(torch.from_numpy(x)).numpy()
    export(student, x, os.path.join(root, name), target, "target", torch.nn.functional.mse_loss,
           {"grad": ["--loss", "mse", "--optimizer", "adam", "--lr", "0.0001"], "steps": 200})


def mlp_cls(root):
    import torch

    def make(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                   torch.nn.ReLU(), torch.nn.Linear(64, 10)).eval()
    student, teacher = make(0), make(1)
    x = np.random.RandomState(6).randn(128, 32).astype(np.float32)
    with torch.no_grad():
        labels = teacher(torch.from_numpy(x)).argmax(1).numpy().astype(np.int64)
    export(student, x, os.path.join(root, "mlp_cls"), labels, "labels", torch.nn.functional.cross_entropy,
           {"grad": ["--optimizer", "adam", "--lr", "0.001"], "steps": 200})


def resnet_cnn(root):
    import torch
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
            self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(x + self.bn2(self.conv2(y)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
            self.block = Block(16)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = self.block(torch.relu(self.bn(self.conv(x))))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    def make(seed):
        torch.manual_seed(seed)
        net = Net()
        for m in net.modules():  # running stats that are not the identity
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
        return distinct_norms(net).eval()
    student, teacher = make(0), make(1)
    x = np.random.RandomState(7).randn(8, 3, 16, 16).astype(np.float32)
    with torch.no_grad():
        labels = teacher(torch.from_numpy(x)).argmax(1).numpy().astype(np.int64)
    export(student, x, os.path.join(root, "resnet_cnn"), labels, "labels", torch.nn.functional.cross_entropy,
           {"grad": ["--optimizer", "adam", "--lr", "0.003", "--freeze", "*running_*"], "steps": 200})


def gpt_decoder(root):
    import torch
    nn = torch.nn
    V, T, C, H, L, B = 64, 16, 32, 2, 2, 8

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.q, self.k, self.v, self.proj = (nn.Linear(C, C) for _ in range(4))
            self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
            # The causal mask as a constant added to the scores (no Where, no Slice).
            self.register_buffer("mask", torch.triu(torch.full((T, T), -1e4), 1))

        def heads(self, x):  # (B, T, C) -> (B, H, T, C/H)
            return x.reshape(B, T, H, C // H).transpose(1, 2)

        def forward(self, x):
            h = self.ln1(x)
            q, k, v = self.heads(self.q(h)), self.heads(self.k(h)), self.heads(self.v(h))
            att = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / (C // H) ** 0.5) + self.mask, dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            nn.init.normal_(self.wte.weight, std=0.02)  # GPT-2's init: logits near 0, loss near log V
            self.wpe = nn.Parameter(torch.randn(T, C) * 0.02)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)

        def forward(self, ids):
            x = self.wte(ids) + self.wpe
            for b in self.blocks:
                x = b(x)
            return (self.ln_f(x) @ self.wte.weight.t()).reshape(B * T, V)  # tied head

    def make(seed):
        torch.manual_seed(seed)
        return distinct_norms(GPT()).eval()
    student, teacher = make(0), make(1)
    ids = np.random.RandomState(8).randint(0, V, size=(B, T)).astype(np.int64)
    with torch.no_grad():  # the teacher's next token at every position
        labels = teacher(torch.from_numpy(ids)).argmax(1).numpy().astype(np.int64)
    export(student, ids, os.path.join(root, "gpt_decoder"), labels, "labels", torch.nn.functional.cross_entropy,
           {"grad": ["--optimizer", "adam", "--lr", "0.001", "--freeze", "*mask*"], "steps": 200})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="where the folders go")
    ap.add_argument("--full", action="store_true", help="also the full-size AMP recipe (width 4096, batch 512: "
                    "400 MB with its data; not committed) as amp_recipe_full")
    ap.add_argument("--ampc", help="an ampc binary: print what `ampc grad` says of each model")
    args = ap.parse_args()
    names = ["amp_recipe", "mlp_cls", "resnet_cnn", "gpt_decoder"]
    amp_recipe(args.out)
    mlp_cls(args.out)
    resnet_cnn(args.out)
    gpt_decoder(args.out)
    if args.full:
        amp_recipe(args.out, 4096, 512, "amp_recipe_full")
        names.append("amp_recipe_full")
    for n in names if args.ampc else []:
        with open(os.path.join(args.out, n, "train.json")) as fh:
            grad = json.load(fh)["grad"]
        out = os.path.join(args.out, n, "train.onnx")
        r = subprocess.run([args.ampc, "grad", os.path.join(args.out, n, "model.onnx"), "-o", out, *grad],
                           capture_output=True, text=True)
        print(f"{n}: {(r.stdout + r.stderr).strip()}")
        if os.path.exists(out):
            os.remove(out)


if __name__ == "__main__":
    main()
