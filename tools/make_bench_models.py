#!/usr/bin/env python3
"""Writes the models the CUDA backend is measured on (issue "CUDA executor, part 1"), into
OUTDIR: too large to commit, so they are made where they are measured (the GPU machine has
torch, torchvision and transformers):

  resnet50.onnx   torchvision ResNet-50, random weights, input [64, 3, 224, 224]
  bert.onnx       a BERT-base-sized encoder (transformers BertModel, random weights:
                  12 layers, hidden 768, 12 heads), input_ids / attention_mask [32, 128]
  gemm4096.onnx   one float16 MatMul, [4096, 4096] x [4096, 4096]

usage: make_bench_models.py OUTDIR [--only NAME,...]
Then, for each: ampc convert M.onnx -o M_amp.onnx; ampc bench M.onnx --backend cuda ...
(scripts/bench_cuda.sh does all of it).
"""
import argparse
import os
import sys


def gemm(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    n = 4096
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((n, n)) / 64).astype(np.float16), "W")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["A", "W"], ["Y"])], "gemm4096",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT16, [n, n])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT16, [n, n])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def resnet50(path):
    import torch
    import torchvision

    torch.manual_seed(0)
    m = torchvision.models.resnet50(weights=None).eval()
    x = torch.randn(64, 3, 224, 224)
    torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["logits"], opset_version=17,
                      dynamo=False)


def bert(path):
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig()  # bert-base: 12 layers, hidden 768, 12 heads, intermediate 3072
    bert_model = BertModel(cfg).eval()

    class Encoder(torch.nn.Module):  # keyword arguments: BertModel's positional order changes
        def __init__(self):
            super().__init__()
            self.bert = bert_model

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
            return out.last_hidden_state, out.pooler_output

    ids = torch.randint(0, cfg.vocab_size, (32, 128))
    mask = torch.ones(32, 128, dtype=torch.int64)
    torch.onnx.export(Encoder(), (ids, mask), path, input_names=["input_ids", "attention_mask"],
                      output_names=["last_hidden_state", "pooler_output"], opset_version=17, dynamo=False)


MODELS = {"gemm4096": gemm, "resnet50": resnet50, "bert": bert}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--only", default=",".join(MODELS))
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    for name in a.only.split(","):
        path = os.path.join(a.outdir, name + ".onnx")
        try:
            MODELS[name](path)
            print(f"{path}: {os.path.getsize(path) >> 20} MiB")
        except Exception as e:  # report and go on: one model's failure must not hide the others
            print(f"{name}: not made: {type(e).__name__}: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
