#!/usr/bin/env python3
"""Exports full-size models as users bring them, for measurements the tests cannot carry
(too big to commit): torchvision ResNet-50, MobileNetV3-Large and ViT-B/16; transformers
BERT-base and a 4-layer GPT-2 (random weights, eager attention); opset 17, PyTorch's
exporter, batch 1.

    .venv-ort-gen/bin/python tools/export_real_models.py OUT_DIR [NAME ...]

Needs torch, torchvision and transformers (the venv of models/make_ort_artifacts.py plus
torchvision==0.19.1). Writes OUT_DIR/<name>.onnx; docs/speed.md and the notes of
issue 24 quote conversions of these files.
"""
import os
import sys


def export(model, args, names, path):
    import torch
    torch.onnx.export(model.eval(), args, path, input_names=names, output_names=["out"], opset_version=17,
                      do_constant_folding=True)
    print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB")


def vision(name, out):
    import torch
    import torchvision
    torch.manual_seed(0)
    ctor = {"resnet50": torchvision.models.resnet50, "mobilenet_v3": torchvision.models.mobilenet_v3_large,
            "vit_b_16": torchvision.models.vit_b_16}[name]
    export(ctor(weights=None), (torch.randn(1, 3, 224, 224),), ["input"], os.path.join(out, name + ".onnx"))


def bert_base(out):
    import torch
    import transformers
    torch.manual_seed(0)
    m = transformers.BertModel(transformers.BertConfig(attn_implementation="eager"))

    class F(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    ids = torch.randint(0, 30000, (1, 128))
    export(F(), (ids, torch.ones(1, 128, dtype=torch.int64)), ["input_ids", "attention_mask"],
           os.path.join(out, "bert_base.onnx"))


def gpt2(out):
    import torch
    import transformers
    torch.manual_seed(0)
    m = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=4, attn_implementation="eager"))

    class F(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(input_ids=ids, use_cache=False).logits

    export(F(), (torch.randint(0, 50000, (1, 64)),), ["input_ids"], os.path.join(out, "gpt2_4l.onnx"))


MAKERS = {"resnet50": lambda o: vision("resnet50", o), "mobilenet_v3": lambda o: vision("mobilenet_v3", o),
          "vit_b_16": lambda o: vision("vit_b_16", o), "bert_base": bert_base, "gpt2_4l": gpt2}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in sys.argv[2:] or list(MAKERS):
        if name not in MAKERS:
            sys.exit(f"export_real_models: unknown model {name} (have {', '.join(MAKERS)})")
        MAKERS[name](out)


if __name__ == "__main__":
    main()
