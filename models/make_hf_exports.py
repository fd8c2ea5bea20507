#!/usr/bin/env python3
"""Writes small Hugging Face transformers exported by PyTorch's ONNX exporter, as users
have them (models/README.md, "Transformer exports"):

  models/hf_bert/   BertForSequenceClassification: 2 layers, hidden 64, 4 heads, vocabulary
                    128, 16 positions; inputs input_ids, attention_mask (int64 [2, 16],
                    one sequence padded), output logits [2, 2]
  models/hf_gpt2/   GPT2LMHeadModel: 2 layers, n_embd 64, 4 heads, vocabulary 128, 32
                    positions; input input_ids (int64 [2, 16]), output logits [2, 16, 128]
  models/hf_bert14/ the BERT above, hidden 32, 2 heads, intermediate 64, at opset 14: the
                    exporter writes LayerNorm decomposed (ReduceMean, Sub, Pow, ..., Add)

Random weights (torch.manual_seed), eager attention, no dropout, opset 17 (one
LayerNormalization op; hf_bert14: 14), constant folding off. Each folder has the conformance layout:
model.onnx and test_data_set_0/ (inputs, and the outputs onnxruntime computes in FP32).

Needs torch and transformers (models/make_ort_artifacts.py's venv has them):
  .venv-ort-gen/bin/python models/make_hf_exports.py
The results are committed; nothing else needs torch.
"""
import argparse
import io
import os
import shutil

import numpy as np

OPSET = 17


def export(model, args, input_names, out_dir, opset=OPSET):
    import onnx
    import onnxruntime as ort
    import torch
    from onnx import numpy_helper
    f = io.BytesIO()
    torch.onnx.export(model, tuple(torch.from_numpy(a) for a in args), f, input_names=input_names,
                      output_names=["logits"], opset_version=opset, do_constant_folding=False)
    m = onnx.load_from_string(f.getvalue())
    m.producer_name = "pytorch " + torch.__version__.split("+")[0] + " via ampc models/make_hf_exports.py"
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    data = os.path.join(out_dir, "test_data_set_0")
    os.makedirs(data)
    onnx.save(m, os.path.join(out_dir, "model.onnx"))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(os.path.join(out_dir, "model.onnx"), so, providers=["CPUExecutionProvider"])
    feeds = dict(zip(input_names, args))
    outs = s.run(None, feeds)
    for k, (n, a) in enumerate(feeds.items()):
        with open(os.path.join(data, f"input_{k}.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(a, n).SerializeToString())
    for k, (o, a) in enumerate(zip(s.get_outputs(), outs)):
        with open(os.path.join(data, f"output_{k}.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(a, o.name).SerializeToString())
    size = os.path.getsize(os.path.join(out_dir, "model.onnx"))
    print(f"{out_dir}: {len(m.graph.node)} nodes, {size / 1024:.0f} KiB")


def bert(root, name="hf_bert", hidden=64, heads=4, opset=OPSET):
    import torch
    import transformers
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=128, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=heads,
                                  intermediate_size=2 * hidden, max_position_embeddings=16, num_labels=2,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                  attn_implementation="eager")
    model = transformers.BertForSequenceClassification(cfg).eval()

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).logits

    rng = np.random.RandomState(3)
    ids = rng.randint(1, 128, size=(2, 16)).astype(np.int64)
    mask = np.ones((2, 16), np.int64)
    mask[1, 10:] = 0
    export(Logits(model), (ids, mask), ["input_ids", "attention_mask"], os.path.join(root, name), opset)


def gpt2(root):
    import torch
    import transformers
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=32,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                  attn_implementation="eager")
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.config.use_cache = False

    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            return self.m(input_ids=input_ids, use_cache=False).logits

    ids = np.random.RandomState(4).randint(0, 128, size=(2, 16)).astype(np.int64)
    export(Logits(model), (ids,), ["input_ids"], os.path.join(root, "hf_gpt2"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    bert(args.root)
    gpt2(args.root)
    bert(args.root, "hf_bert14", hidden=32, heads=2, opset=14)


if __name__ == "__main__":
    main()
