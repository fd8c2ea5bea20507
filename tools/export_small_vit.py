#!/usr/bin/env python3
"""The small ViT of docs/calibration.md's comparison table: torchvision's VisionTransformer
at 64x64 (patch 16, 4 layers, 4 heads, width 128, MLP 256, 10 classes), seed 0, the head's
weights drawn from N(0, 0.05) (torchvision zeroes them, which would make every output 0),
exported at opset 17 with one 1x3x64x64 N(0,1) input in the conformance layout.

usage: /work/venv-ort/bin/python tools/export_small_vit.py OUT_DIR
       (writes OUT_DIR/model.onnx and OUT_DIR/test_data_set_0/input_0.pb)
"""
import os
import sys

import torch
import torchvision
from onnx import numpy_helper as nh


def main(out):
    torch.manual_seed(0)
    m = torchvision.models.vision_transformer.VisionTransformer(
        image_size=64, patch_size=16, num_layers=4, num_heads=4, hidden_dim=128, mlp_dim=256, num_classes=10).eval()
    torch.nn.init.normal_(m.heads.head.weight, std=0.05)
    x = torch.randn(1, 3, 64, 64)
    os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
    torch.onnx.export(m, x, os.path.join(out, "model.onnx"), input_names=["x"], output_names=["logits"],
                      opset_version=17, do_constant_folding=True)
    with open(os.path.join(out, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(nh.from_array(x.numpy(), "x").SerializeToString())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
