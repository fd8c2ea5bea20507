#!/usr/bin/env python3
"""Writes onnxruntime-training artifact sets, as users have them, for ampc's tests
(models/README.md, "onnxruntime-training artifacts"):

  models/ort_mlp/    a torch MLP classifier (16-32-4), exported at opset 17
  models/ort_bert/   a 2-layer BERT sequence classifier (transformers, random weights,
                     hidden 32, no dropout, static shapes), exported at opset 14 (at 17
                     onnxruntime's gradient builder fails on torch's LayerNormalization)

Each folder holds what onnxruntime.training.artifacts.generate_artifacts writes
(training_model.onnx, eval_model.onnx, optimizer_model.onnx with AdamW, checkpoint;
CrossEntropyLoss), data.npz: a few seeded batches (inputs and labels) the tests train on,
and test_data_set_0/: batch 0 as TensorProtos for `ampc run --inputs`; ort_mlp also
optimizer_model_sgd.onnx (the same set generated with SGD: one SGDOptimizerV2) and
checkpoint_step1, saved by onnxruntime after one step with the optimizer's state.

This script is the only thing that needs torch: the artifacts are committed. It needs a
venv with the pinned versions below (onnxruntime-training 1.19.2 wants onnx 1.16 and
numpy < 2; torch comes from PyPI, about 3 GB with its CUDA libraries):

  python3 -m venv .venv-ort-gen
  .venv-ort-gen/bin/pip install 'numpy<2' onnx==1.16.2 onnxruntime-training==1.19.2 \
      torch==2.4.1 transformers==4.44.2
  .venv-ort-gen/bin/python models/make_ort_artifacts.py

Seeded (torch.manual_seed, numpy RandomState), so the weights and data are the same on
every run; the exported graphs' node names come from torch's exporter.
"""
import argparse
import io
import os
import shutil
import sys
import tempfile

import numpy as np

PINNED = {"onnx": "1.16.2", "onnxruntime": "1.19.2", "torch": "2.4.1", "transformers": "4.44.2"}

MLP_IN, MLP_HID, MLP_CLASSES, MLP_BATCH = 16, 32, 4, 32
BERT_VOCAB, BERT_HIDDEN, BERT_LAYERS, BERT_HEADS, BERT_FF = 64, 32, 2, 2, 64
BERT_SEQ, BERT_BATCH, BERT_LABELS = 16, 8, 2
N_BATCHES = 4
BERT_OPSET = int(os.environ.get("BERT_OPSET", "14"))


def check_versions():
    import onnx
    import onnxruntime
    import torch
    import transformers
    have = {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
            "torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    bad = [f"{k} {have[k]} (want {v})" for k, v in PINNED.items() if have[k] != v]
    if bad:
        sys.exit("make_ort_artifacts: wrong versions: " + ", ".join(bad) + "; see this script's docstring")


def export(model, args, input_names, opset):
    """The torch model as an ONNX ModelProto, in training mode (as onnxruntime's docs
    export for generate_artifacts), parameters as initializers, no constant folding."""
    import onnx
    import torch
    f = io.BytesIO()
    torch.onnx.export(model, args, f, input_names=input_names, output_names=["logits"],
                      opset_version=opset, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING, export_params=True)
    return onnx.load_from_string(f.getvalue())


def artifacts(onnx_model, out_dir):
    from onnxruntime.training import artifacts as A
    params = [p.name for p in onnx_model.graph.initializer]
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    A.generate_artifacts(onnx_model, requires_grad=params, frozen_params=[],
                         loss=A.LossType.CrossEntropyLoss, optimizer=A.OptimType.AdamW,
                         artifact_directory=out_dir)
    return params


def write_batch0(out, arrays):
    """test_data_set_0/input_<k>.pb: batch 0 of each array, named after the input it feeds
    (what `ampc run --inputs DIR` reads)."""
    from onnx import numpy_helper
    d = os.path.join(out, "test_data_set_0")
    os.makedirs(d, exist_ok=True)
    for k, (name, a) in enumerate(arrays):
        t = numpy_helper.from_array(np.ascontiguousarray(a[0]), name)
        with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())


def make_mlp(root):
    import torch
    model = mlp_model()
    rng = np.random.RandomState(1)
    teacher = rng.randn(MLP_IN, MLP_CLASSES).astype(np.float32)
    xs = rng.randn(N_BATCHES, MLP_BATCH, MLP_IN).astype(np.float32)
    labels = np.argmax(xs @ teacher, axis=-1).astype(np.int64)
    m = export(model, (torch.from_numpy(xs[0]),), ["input"], 17)
    out = os.path.join(root, "ort_mlp")
    params = artifacts(m, out)
    np.savez(os.path.join(out, "data.npz"), input=xs, labels=labels)
    write_batch0(out, [("input", xs), ("labels", labels)])
    step1_checkpoint(out)
    return out, params


def step1_checkpoint(out):
    """checkpoint_step1: the checkpoint after one AdamW step (lr 0.01, batch 0), saved with
    the optimizer's state (step, learning rate, momentum0/momentum1 of every parameter)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
    from onnxruntime.capi import _pybind_state as C
    from ort_train import Trainer
    t = Trainer(out, lr=0.01)
    t.step(0)
    C.save_checkpoint(t.state, os.path.join(out, "checkpoint_step1"), True)


def mlp_model():
    import torch
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(MLP_IN, MLP_HID), torch.nn.ReLU(),
                               torch.nn.Linear(MLP_HID, MLP_CLASSES))


def make_mlp_sgd(root):
    """ort_mlp/optimizer_model_sgd.onnx: the MLP's set generated with SGD (one
    SGDOptimizerV2; the other files are the same as with AdamW). Made last: onnxruntime's
    generator numbers names across calls, so the other sets stay as they were."""
    import torch
    from onnxruntime.training import artifacts as A
    m = export(mlp_model(), (torch.zeros(MLP_BATCH, MLP_IN),), ["input"], 17)
    out = os.path.join(root, "ort_mlp")
    params = [p.name for p in m.graph.initializer]
    with tempfile.TemporaryDirectory() as tmp:
        A.generate_artifacts(m, requires_grad=params, frozen_params=[],
                             loss=A.LossType.CrossEntropyLoss, optimizer=A.OptimType.SGD,
                             artifact_directory=tmp)
        shutil.copy(os.path.join(tmp, "optimizer_model.onnx"), os.path.join(out, "optimizer_model_sgd.onnx"))
    return out, params


def make_bert(root):
    import torch
    import transformers
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=BERT_VOCAB, hidden_size=BERT_HIDDEN,
                                  num_hidden_layers=BERT_LAYERS, num_attention_heads=BERT_HEADS,
                                  intermediate_size=BERT_FF, max_position_embeddings=BERT_SEQ,
                                  type_vocab_size=2, num_labels=BERT_LABELS,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                  attn_implementation="eager")
    model = transformers.BertForSequenceClassification(cfg)

    class Logits(torch.nn.Module):  # the classifier's logits alone, as a tensor
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).logits

    rng = np.random.RandomState(2)
    ids = rng.randint(1, BERT_VOCAB, size=(N_BATCHES, BERT_BATCH, BERT_SEQ)).astype(np.int64)
    # Real padding: each sequence keeps a random length of at least half the window.
    lengths = rng.randint(BERT_SEQ // 2, BERT_SEQ + 1, size=(N_BATCHES, BERT_BATCH))
    mask = (np.arange(BERT_SEQ)[None, None, :] < lengths[..., None]).astype(np.int64)
    ids = ids * mask
    types = (np.arange(BERT_SEQ)[None, None, :] >= (lengths[..., None] // 2)).astype(np.int64) * mask
    # A learnable label: whether token 1's id is in the vocabulary's upper half.
    labels = (ids[:, :, 1] >= BERT_VOCAB // 2).astype(np.int64)
    args = tuple(torch.from_numpy(a[0]) for a in (ids, mask, types))
    m = export(Logits(model), args, ["input_ids", "attention_mask", "token_type_ids"], BERT_OPSET)
    out = os.path.join(root, "ort_bert")
    params = artifacts(m, out)
    np.savez(os.path.join(out, "data.npz"), input_ids=ids, attention_mask=mask,
             token_type_ids=types, labels=labels)
    write_batch0(out, [("input_ids", ids), ("attention_mask", mask), ("token_type_ids", types),
                       ("labels", labels)])
    return out, params


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.dirname(os.path.abspath(__file__)),
                    help="folder to write ort_mlp/ and ort_bert/ into (default: models/)")
    args = ap.parse_args()
    check_versions()
    for make in (make_mlp, make_bert, make_mlp_sgd):
        out, params = make(args.root)
        size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
        print(f"{out}: {len(params)} parameters, {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
