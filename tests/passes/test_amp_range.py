#!/usr/bin/env python3
"""Values beyond the 16-bit range stay float32 (passes/amp_range.c), on the case that
made the rule: Hugging Face's additive attention mask, (1 - mask) * finfo(float32).min,
added to the attention scores. Painted 16-bit, the constant became -inf and a fully
masked row gave NaN after Softmax.

- a 12-node attention graph with one fully masked sequence, converted to float16 and to
  bfloat16: finite outputs on ampc's own executor (`ampc run`) and, for float16, in
  onnxruntime (its CPU provider has no bfloat16 MatMul), close to the FP32 model's; the mask's Mul and the Add are float32 in the output, the
  projections still 16-bit; `--explain` names the constant; the success line counts the
  nodes kept; a constant within range (-1e4) changes nothing;
- the same through Constant / ConstantOfShape nodes instead of an initializer;
- models/ort_bert's eval model (transformers 4.44 BERT, eager attention; its parameters
  from the checkpoint), one sequence fully masked: the converted model's loss is finite
  and within 2% of FP32's in onnxruntime and on `ampc run`.
Prints "N passed, M failed" last; exit 77 (skip) when onnx, onnxruntime or numpy is
missing.

usage: test_amp_range.py --ampc PATH [--testdata DIR] [--verbose]
"""
import argparse
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402
FMIN = np.finfo(np.float32).min


def attention(mask_const="initializer", value=FMIN):
    """x[2,4,8], mask int64[2,4] -> y[2,4,8]: softmax(x Wq x^T + (1 - mask) * value) x Wv."""
    rng = np.random.RandomState(0)
    inits = [nh.from_array(rng.randn(8, 8).astype(np.float32) * 0.3, "Wq"),
             nh.from_array(rng.randn(8, 8).astype(np.float32) * 0.3, "Wv"),
             nh.from_array(np.array(1.0, np.float32), "one"),
             nh.from_array(np.array([1], np.int64), "ax")]
    nodes = []
    if mask_const == "initializer":
        inits.append(nh.from_array(np.array(value, np.float32), "fmin"))
    elif mask_const == "Constant":
        nodes.append(h.make_node("Constant", [], ["fmin"], name="fmin_node", value_float=float(value)))
    else:  # ConstantOfShape
        inits.append(nh.from_array(np.array([1], np.int64), "shape1"))
        nodes.append(h.make_node("ConstantOfShape", ["shape1"], ["fmin"], name="fmin_node",
                                 value=nh.from_array(np.array([value], np.float32))))
    nodes += [
        h.make_node("MatMul", ["x", "Wq"], ["q"], name="proj_q"),
        h.make_node("Transpose", ["x"], ["xt"], name="xt", perm=[0, 2, 1]),
        h.make_node("MatMul", ["q", "xt"], ["scores"], name="scores"),
        h.make_node("Cast", ["mask"], ["maskf"], name="maskf", to=1),
        h.make_node("Sub", ["one", "maskf"], ["inv"], name="inv"),
        h.make_node("Mul", ["inv", "fmin"], ["bias"], name="mask_bias"),
        h.make_node("Unsqueeze", ["bias", "ax"], ["bias3"], name="bias3"),
        h.make_node("Add", ["scores", "bias3"], ["masked"], name="add_mask"),
        h.make_node("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
        h.make_node("MatMul", ["x", "Wv"], ["v"], name="proj_v"),
        h.make_node("MatMul", ["p", "v"], ["y"], name="context"),
    ]
    g = h.make_graph(nodes, "attn", [h.make_tensor_value_info("x", T.FLOAT, [2, 4, 8]),
                                     h.make_tensor_value_info("mask", T.INT64, [2, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 4, 8])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


class Ctx:
    def __init__(self, args):
        self.ampc = args.ampc
        self.tmp = tl.tempdir("ampc_range_")
        self.n = 0

    def path(self, name):
        self.n += 1
        return os.path.join(self.tmp, f"{self.n}_{name}")

    def convert(self, src, *extra):
        out = self.path("amp.onnx")
        r = subprocess.run([self.ampc, src, "-o", out, *extra], capture_output=True, text=True)
        assert r.returncode == 0, f"ampc {src} {extra}: {r.stderr}"
        return out, r.stderr

    def run(self, model, feeds):
        """The outputs of `ampc run MODEL` on feeds, read back from --outputs."""
        d = self.path("in")
        os.makedirs(d)
        for k, (name, a) in enumerate(feeds.items()):
            with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
                f.write(nh.from_array(a, name).SerializeToString())
        out = self.path("out")
        r = subprocess.run([self.ampc, "run", model, "--inputs", d, "--outputs", out], capture_output=True, text=True)
        assert r.returncode == 0, f"ampc run {model}: {r.stderr}"
        return nh.to_array(onnx.load_tensor(os.path.join(out, "output_0.pb"))).astype(np.float32)


def session(model):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def ort_run(model, feeds):
    return session(model).run(None, feeds)[0]


def feeds():
    x = np.random.RandomState(1).randn(2, 4, 8).astype(np.float32)
    mask = np.array([[1, 1, 1, 0], [0, 0, 0, 0]], np.int64)  # the second sequence fully masked
    return {"x": x, "mask": mask}


def dtypes(model):
    m = onnx.shape_inference.infer_shapes(onnx.load(model))
    g = m.graph
    t = {v.name: v.type.tensor_type.elem_type for v in list(g.value_info) + list(g.input) + list(g.output)}
    return {n.name: t.get(n.output[0]) for n in g.node if n.name}


def check_attention(ctx, mask_const, precision):
    src = ctx.path("attn.onnx")
    onnx.save(attention(mask_const), src)
    f = feeds()
    want = ort_run(src, f)
    assert np.isfinite(want).all()
    out, summary = ctx.convert(src, "--precision", precision)
    assert "kept in float32 for values beyond" in summary and "fmin" in summary, summary
    half = T.FLOAT16 if precision == "fp16" else T.BFLOAT16
    dt = dtypes(out)
    assert dt["mask_bias"] == T.FLOAT and dt["add_mask"] == T.FLOAT, f"mask arithmetic in 16 bits: {dt}"
    assert dt["proj_q"] == half and dt["proj_v"] == half, f"projections not 16-bit: {dt}"
    tol = 2e-2 if precision == "fp16" else 8e-2
    runs = [("ampc run", ctx.run(out, f))]
    if precision == "fp16":  # onnxruntime's CPU provider has no bfloat16 MatMul
        runs.append(("onnxruntime", ort_run(out, f)))
    for what, got in runs:
        assert np.isfinite(got).all(), f"{mask_const}/{precision}: {what}: {np.isnan(got).sum()} NaN"
        err = float(np.max(np.abs(got - want)))
        assert err <= tol, f"{mask_const}/{precision}: {what}: max error {err}"


def test_mask_initializer(ctx):
    for p in ("fp16", "bf16"):
        check_attention(ctx, "initializer", p)


def test_mask_constant_nodes(ctx):
    for kind in ("Constant", "ConstantOfShape"):
        check_attention(ctx, kind, "fp16")


def test_explain_names_the_constant(ctx):
    src = ctx.path("attn.onnx")
    onnx.save(attention(), src)
    r = subprocess.run([ctx.ampc, src, "--explain", "add_mask", "-o", ctx.path("x.onnx")], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert "beyond float16's range" in r.stdout and "initializer 'fmin'" in r.stdout, r.stdout


def test_in_range_constant_changes_nothing(ctx):
    src = ctx.path("attn.onnx")
    onnx.save(attention(value=-1e4), src)
    out, summary = ctx.convert(src)
    assert "beyond" not in summary, summary
    assert dtypes(out)["add_mask"] == T.FLOAT16, "an in-range mask should leave the Add 16-bit"


def test_bert_fully_masked(ctx):
    # The eval model takes its parameters as inputs: give them the checkpoint's values
    # (which ampc's import reads) as initializers.
    art = os.path.join(ROOT, "models", "ort_bert")
    full = ctx.path("full.onnx")
    r = subprocess.run([ctx.ampc, os.path.join(art, "training_model.onnx"), "--optimizer",
                        os.path.join(art, "optimizer_model.onnx"), "--checkpoint", os.path.join(art, "checkpoint"),
                        "--passes", "none", "-o", full], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    params = {t.name: t for t in onnx.load(full).graph.initializer}
    m = onnx.load(os.path.join(art, "eval_model.onnx"))
    keep = [i for i in m.graph.input if i.name not in params]
    m.graph.initializer.extend(params[i.name] for i in m.graph.input if i.name in params)
    del m.graph.input[:]
    m.graph.input.extend(keep)
    src = ctx.path("eval.onnx")
    onnx.save(m, src)
    d = np.load(os.path.join(art, "data.npz"))
    f = {k: d[k][0].copy() for k in ("input_ids", "attention_mask", "token_type_ids", "labels")}
    f["attention_mask"][0, :] = 0  # a fully masked sequence
    m = onnx.load(src)
    names = [i.name for i in m.graph.input if i.name in f]
    f = {k: f[k] for k in names}
    # The eval model's outputs: the loss only; the logits are what matters: add them.
    out_names = [o.name for o in m.graph.output]
    want = session(src).run(None, f)
    assert all(np.isfinite(w).all() for w in want), "FP32 is not finite"
    conv, summary = ctx.convert(src)
    assert "beyond float16's range" in summary, summary
    got = session(conv).run(None, f)
    for n, a, b in zip(out_names, got, want):
        assert np.isfinite(a).all(), f"onnxruntime: {n} not finite"
        assert abs(float(a) - float(b)) <= 0.02 * abs(float(b)) + 1e-3, f"{n}: {a} vs FP32 {b}"
    mine = ctx.run(conv, f)
    assert np.isfinite(mine).all() and abs(float(mine) - float(want[0])) <= 0.02 * abs(float(want[0])) + 1e-3, \
        f"ampc run: loss {mine} vs FP32 {want[0]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    ctx = Ctx(args)
    tests = [
        ("attention mask (initializer), fp16 and bf16", test_mask_initializer),
        ("attention mask (Constant, ConstantOfShape)", test_mask_constant_nodes),
        ("--explain names the constant", test_explain_names_the_constant),
        ("a constant within range changes nothing", test_in_range_constant_changes_nothing),
        ("BERT with a fully masked sequence", test_bert_fully_masked),
    ]
    return tl.run(tests, ctx, verbose=args.verbose)


if __name__ == "__main__":
    sys.exit(main())
