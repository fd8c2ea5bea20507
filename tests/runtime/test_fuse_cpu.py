#!/usr/bin/env python3
"""The CPU's own fusion (weight gradients, arithmetic chains) gives the unfused graph's results.

Weight gradients (runtime/fuse_wgrad.c): `ampc grad` writes a Conv's weight gradient as
Transpose -> Conv -> [Slice] -> Transpose (-> the Identity naming the gradient); the CPU
backend runs each such group as one com.microsoft ConvGrad without W, on oneDNN's
backward weights where it takes the geometry and on im2col where not. For small conv models over the geometries that reach
both (stride 1 and 2, the cut of an overshooting window, 1x1, 1-D SAME_UPPER, dilation 2,
3-D, a conv reading the graph input, bias), 3 SGD steps on the CPU, fused and with
--no-fuse, must print the same losses within float32 reassociation and save the same
gradients (every output of the last step) within 1e-5 of each output's largest magnitude
(bfloat16, converted with --precision bf16: within 2 bfloat16 ulps, 2^-6 relative, of
the largest magnitude; there the fused dW is float32 where AMP's Cast widened it). The fused run must say it ran one ConvGrad per ungrouped Conv and
none for a grouped one (its regrouping Reshapes are not the pattern).

Arithmetic chains (runtime/fuse_chain.c, kernels/cpu/fused.c's vector rows): an MLP's
SGD, momentum and Adam updates, FP32 and bf16, 3 steps fused and with --no-fuse: the
same losses digit for digit and the same checkpoint byte for byte, the fused run listing
FusedElementwise nodes (an SGD update's Mul and Sub; each written in place).

usage: test_fuse_cpu.py --ampc PATH [--testdata DIR] [--verbose]
"""
import os
import re
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ampc_testlib as tl  # noqa: E402

STEPS = 3


class Ctx:
    def __init__(self, args):
        self.ampc = args.ampc
        self.verbose = args.verbose
        self.tmp = tl.tempdir("ampc-fuse-cpu-")
        self.notes = []


def conv(name, x, cin, cout, k, nd=2, **attrs):
    """A Conv node reading x with a fresh weight initializer [cout, cin/group, k...]."""
    rng = np.random.default_rng(len(name) * 7 + cout)
    group = attrs.get("group", 1)
    w = nh.from_array((rng.standard_normal((cout, cin // group) + (k,) * nd) * 0.3).astype(np.float32), f"{name}_w")
    ins = [x, w.name]
    inits = [w]
    if attrs.pop("bias", False):
        b = nh.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), f"{name}_b")
        ins.append(b.name)
        inits.append(b)
    return h.make_node("Conv", ins, [f"{name}_y"], name=name, **attrs), inits


def model(ctx, tag, shape, layers, nd=2):
    """x (shape) through the Conv layers [(cout, k, attrs)], ReLU between, the last one's
    spatial mean: an MSE regression against a target [N, C], as a file; returns its path
    and its inputs folder."""
    nodes, inits, x, cin = [], [], "x", shape[1]
    for i, (cout, k, attrs) in enumerate(layers):
        n, w = conv(f"c{i}", x, cin, cout, k, nd, **dict(attrs))
        nodes.append(n)
        inits += w
        x, cin = n.output[0], cout
        if i + 1 < len(layers):
            nodes.append(h.make_node("Relu", [x], [f"r{i}"]))
            x = f"r{i}"
    nodes.append(h.make_node("ReduceMean", [x], ["y"], axes=list(range(2, 2 + nd)), keepdims=0))
    yshape = [shape[0], cin]
    g = h.make_graph(nodes, tag, [h.make_tensor_value_info("x", T.FLOAT, shape),
                                  h.make_tensor_value_info("t", T.FLOAT, yshape)],
                     [h.make_tensor_value_info("y", T.FLOAT, yshape)], inits)
    path = os.path.join(ctx.tmp, f"{tag}.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    data = os.path.join(ctx.tmp, f"{tag}_in")
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(3)
    for i, (name, a) in enumerate((("x", rng.standard_normal(shape).astype(np.float32)),
                                   ("t", np.full(yshape, 0.5, np.float32)))):
        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
            f.write(nh.from_array(a, name).SerializeToString())
    return path, data


def sh(ctx, *argv):
    r = tl.ampc(ctx.ampc, *argv, verbose=ctx.verbose)
    assert r.returncode == 0, f"ampc {' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()[-600:]}"
    return r.stdout


def steps(ctx, train, data, tag, fuse, state=None):
    out = os.path.join(ctx.tmp, f"{tag}_{'fused' if fuse else 'apart'}")
    printed = sh(ctx, "run", train, "--steps", str(STEPS), "--inputs", data, "--backend", "cpu", "--seed", "7",
                 "--outputs", out, *([] if fuse else ["--no-fuse"]), *(["--save-state", state] if state else []))
    losses = [float(m.group(1)) for m in re.finditer(r"^step \d+: loss (\S+)", printed, re.M)]
    assert len(losses) == STEPS, f"{tag}: {printed}"
    fused = re.search(r"^fused: \d+ nodes ran as \d+ fused kernels? \((.*)\)$", printed, re.M)
    outs = {}
    for f in sorted(os.listdir(out)):
        t = onnx.TensorProto()
        with open(os.path.join(out, f), "rb") as fh:
            t.ParseFromString(fh.read())
        outs[f] = nh.to_array(t).astype(np.float64)
    return losses, outs, fused.group(1) if fused else ""


def case(tag, shape, layers, nd=2, precision="fp32"):
    def run(ctx):
        path, data = model(ctx, tag, shape, layers, nd)
        train = os.path.join(ctx.tmp, f"{tag}_train.onnx")
        sh(ctx, "grad", path, "-o", train, "--loss", "mse", "--labels", "t", "--optimizer", "sgd", "--lr", "0.05")
        if precision != "fp32":
            conv16 = os.path.join(ctx.tmp, f"{tag}_{precision}.onnx")
            sh(ctx, train, "-o", conv16, "--precision", precision)
            train = conv16
        fl, fo, fused = steps(ctx, train, data, tag, True)
        al, ao, apart = steps(ctx, train, data, tag, False)
        want = sum(1 for _, _, a in layers if dict(a).get("group", 1) == 1)
        assert apart == "", f"{tag}: --no-fuse fused {apart}"
        assert ("ConvGrad" not in fused) if not want else f"ConvGrad x{want}" in fused, \
            f"{tag}: fused {fused!r}, want {want} ConvGrad"
        rtol = 1e-5 if precision == "fp32" else 2.0 ** -6
        for i, (a, b) in enumerate(zip(fl, al)):
            assert abs(a - b) <= rtol * max(abs(b), 1e-6) + 1e-7, f"{tag}: step {i + 1}: loss {a} fused vs {b}"
        assert fo.keys() == ao.keys(), f"{tag}: outputs {sorted(fo)} vs {sorted(ao)}"
        for k in fo:
            top = max(np.abs(ao[k]).max(initial=0.0), 1e-6)
            err = np.abs(fo[k] - ao[k]).max(initial=0.0)
            assert err <= rtol * top, f"{tag}: {k}: max |fused - apart| {err:.3g} over {rtol:.3g} * {top:.3g}"
        ctx.notes.append(f"{tag}: {fused or 'nothing fused'}")
    return (tag, run)


def mlp(ctx, tag):
    """x [8, 16] -> MatMul 32 -> Relu -> MatMul 4 (with biases) as a file, and its inputs."""
    rng = np.random.default_rng(5)
    inits = [nh.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w1", (16, 32)), ("b1", (32,)), ("w2", (32, 4)), ("b2", (4,)))]
    nodes = [h.make_node("MatMul", ["x", "w1"], ["m1"]), h.make_node("Add", ["m1", "b1"], ["a1"]),
             h.make_node("Relu", ["a1"], ["r1"]), h.make_node("MatMul", ["r1", "w2"], ["m2"]),
             h.make_node("Add", ["m2", "b2"], ["y"])]
    g = h.make_graph(nodes, tag, [h.make_tensor_value_info("x", T.FLOAT, [8, 16]),
                                  h.make_tensor_value_info("t", T.FLOAT, [8, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [8, 4])], inits)
    path = os.path.join(ctx.tmp, f"{tag}.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    data = os.path.join(ctx.tmp, f"{tag}_in")
    os.makedirs(data, exist_ok=True)
    for i, (name, a) in enumerate((("x", rng.standard_normal((8, 16)).astype(np.float32)),
                                   ("t", rng.standard_normal((8, 4)).astype(np.float32)))):
        with open(os.path.join(data, f"input_{i}.pb"), "wb") as f:
            f.write(nh.from_array(a, name).SerializeToString())
    return path, data


def have_avx512():
    """The CPU fuses its chains only with AVX-512 F/BW/VL (runtime/fuse.c)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return all(re.search(rf"\b{x}\b", flags) for x in ("avx512f", "avx512bw", "avx512vl"))


def chain_case(optimizer, precision):
    tag = f"mlp_{optimizer}_{precision}"

    def run(ctx):
        path, data = mlp(ctx, tag)
        train = os.path.join(ctx.tmp, f"{tag}_train.onnx")
        sh(ctx, "grad", path, "-o", train, "--loss", "mse", "--labels", "t", "--optimizer", optimizer, "--lr", "0.05")
        if precision != "fp32":
            conv16 = os.path.join(ctx.tmp, f"{tag}_{precision}.onnx")
            sh(ctx, train, "-o", conv16, "--precision", precision)
            train = conv16
        states = [os.path.join(ctx.tmp, f"{tag}_{k}.state") for k in ("fused", "apart")]
        fl, fo, fused = steps(ctx, train, data, tag, True, states[0])
        al, ao, apart = steps(ctx, train, data, tag, False, states[1])
        assert apart == "", f"{tag}: --no-fuse fused {apart}"
        if optimizer == "sgd" and have_avx512():
            # SubScaled takes an SGD update where it can, the float32 chains the rest
            assert "SubScaled" in fused or "FusedElementwise" in fused, f"{tag}: the updates were not fused: {fused!r}"
        assert fl == al, f"{tag}: losses fused {fl} vs apart {al}"
        for k in fo:
            assert np.array_equal(fo[k], ao[k], equal_nan=True), f"{tag}: output {k} differs"
        with open(states[0], "rb") as a, open(states[1], "rb") as b:
            assert a.read() == b.read(), f"{tag}: the checkpoints differ"
        ctx.notes.append(f"{tag}: {fused or 'nothing fused'}")
    return (tag, run)


def cases():
    p1 = (("pads", [1, 1, 1, 1]),)
    s2 = (("pads", [1, 1, 1, 1]), ("strides", [2, 2]))
    out = [
        case("stride1_and_cut", [2, 3, 8, 8], [(4, 3, p1), (6, 3, s2), (5, 1, (("strides", [2, 2]),))]),
        case("bias_7x7_stride2", [2, 3, 16, 16], [(8, 7, (("pads", [3, 3, 3, 3]), ("strides", [2, 2]), ("bias", True))),
                                                  (8, 3, p1)]),
        case("dilated", [2, 3, 9, 9], [(4, 3, (("dilations", [2, 2]), ("pads", [2, 2, 2, 2]))), (4, 3, p1)]),
        case("conv_1d_same_upper", [2, 3, 9], [(4, 3, (("auto_pad", "SAME_UPPER"), ("strides", [2]))), (4, 3, ())], 1),
        case("conv_3d", [1, 2, 5, 5, 5], [(3, 3, (("pads", [1] * 6),)), (2, 3, (("strides", [2, 2, 2]),))], 3),
        case("grouped_not_fused", [2, 4, 6, 6], [(4, 3, (("group", 2), ("pads", [1, 1, 1, 1])))]),
        case("small_window_last_stage", [2, 8, 2, 2], [(16, 3, p1), (16, 3, p1)]),
        case("bf16", [2, 3, 8, 8], [(8, 3, p1), (8, 3, s2)], precision="bf16"),
    ]
    out += [chain_case(o, p) for o in ("sgd", "momentum", "adam") for p in ("fp32", "bf16")]
    return out


def main():
    args = tl.args(__doc__)
    ctx = Ctx(args)
    return tl.run(cases(), ctx, verbose=args.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
