#!/usr/bin/env python3
"""PyTorch exports that `ampc grad` must turn into training graphs (issue 23): eval-mode
exports as users bring them, opset 17 unless named, batch 1, output "out".

    /work/venv-ort/bin/python models/make_grad_exports.py OUT_DIR [NAME ...]

Small ones (committed as tests/passes/fixtures/grad_*.onnx, each < 300 KB, read by
tests/passes/test_grad_exports.py):
  grad_cnn          a ResNet/MobileNet-shaped CNN, 3x32x32 in: Conv + BatchNorm (folded by
                    the exporter) + Relu, MaxPool, a torchvision BasicBlock with a strided
                    downsample, a depthwise Conv with HardSwish, a squeeze-excite gate
                    (GlobalAveragePool, HardSigmoid, Mul), GlobalAveragePool, Flatten, Gemm
  grad_encoder17    torch.nn.TransformerEncoder, 2 layers, d=64, 4 heads, feed-forward 64,
                    batch-first [1, 10, 64] in, mean over the sequence, Linear to 10 classes;
                    LayerNormalization as one op (opset 17)
  grad_encoder14    the same at opset 14: LayerNorm decomposed (ReduceMean, Sub, Pow, Sqrt, Div)
Full size (not committed; the checks of the issue's done-when):
  resnet18          torchvision ResNet-18, random weights, 3x224x224 in
"""
import os
import sys


def export(model, args, path, opset=17):
    import torch
    torch.onnx.export(model.eval(), args, path, input_names=["input"], output_names=["out"], opset_version=opset,
                      do_constant_folding=True)
    print(f"{path}: {os.path.getsize(path) / 1e3:.0f} KB")


def cnn():
    import torch
    from torch import nn
    from torchvision.models.resnet import BasicBlock

    class Cnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            down = nn.Sequential(nn.Conv2d(8, 16, 1, 2, bias=False), nn.BatchNorm2d(16))
            self.block = BasicBlock(8, 16, stride=2, downsample=down)
            self.dw = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 2, dilation=2, groups=16), nn.Hardswish())
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(16, 4, 1), nn.ReLU(), nn.Conv2d(4, 16, 1),
                                    nn.Hardsigmoid())
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

        def forward(self, x):
            x = self.dw(self.block(self.stem(x)))
            return self.head(x * self.se(x))

    m = Cnn()
    # Running statistics other than 0/1, so the folded BatchNorm is not the identity.
    with torch.no_grad():
        for b in m.modules():
            if isinstance(b, nn.BatchNorm2d):
                b.running_mean.uniform_(-0.5, 0.5)
                b.running_var.uniform_(0.5, 2.0)
    return m, (torch.randn(1, 3, 32, 32),)


def encoder():
    import torch
    from torch import nn

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=64, dropout=0.1, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            return self.fc(self.enc(x).mean(dim=1))

    return Enc(), (torch.randn(1, 10, 64),)


def main():
    import torch
    out = sys.argv[1]
    names = sys.argv[2:] or ["grad_cnn", "grad_encoder17", "grad_encoder14", "resnet18"]
    os.makedirs(out, exist_ok=True)
    for name in names:
        torch.manual_seed(0)
        path = os.path.join(out, name + ".onnx")
        if name == "grad_cnn":
            export(*cnn(), path)
        elif name.startswith("grad_encoder"):
            export(*encoder(), path, opset=int(name[-2:]))
        elif name == "resnet18":
            import torchvision
            export(torchvision.models.resnet18(weights=None), (torch.randn(1, 3, 224, 224),), path)
        else:
            sys.exit(f"unknown model {name}")


if __name__ == "__main__":
    main()
