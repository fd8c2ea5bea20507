#!/usr/bin/env python3
"""Differential test of the com.microsoft kernels of the attention family (FusedGemm,
Attention, MultiHeadAttention) against onnxruntime's CPU implementation: each case is a
one-node model built with onnx.helper, run in onnxruntime and with `ampc run MODEL
--inputs DIR --outputs DIR`, outputs compared with atol/rtol. Without `--outputs` in
ampc's help the comparison falls back to the values `ampc run` prints (the first 8 of
each output) and says so. The references are computed in a helper process, so that a case
onnxruntime crashes on is reported UNCHECKED instead of ending the test. Exit 77 (skipped)
without numpy, onnx or onnxruntime; 1 if a case fails or none could be checked.

usage: test_ms_ops.py --ampc PATH [--testdata DIR]   (--testdata is accepted, unused)"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"skip: {e}")
    sys.exit(77)

RNG = np.random.default_rng(1234)


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def model(op, inputs, outputs, attrs, feeds):
    """A one-node com.microsoft model; inputs named in `feeds` ("" = left out)."""
    node = helper.make_node(op, inputs, outputs, domain="com.microsoft", **attrs)
    vis = []
    for name in inputs:
        if not name:
            continue
        x = feeds[name]
        dt = helper.np_dtype_to_tensor_dtype(x.dtype)
        vis.append(helper.make_tensor_value_info(name, dt, list(x.shape)))
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o]
    g = helper.make_graph([node], "g", vis, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def run_ort(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in s.get_inputs()]
    return s.run(None, {n: feeds[n] for n in names})


# The references are computed in a helper process (this script with --reference DIR): some
# onnxruntime releases crash on a case (1.30's CPU Attention died of SIGSEGV with no bias
# input and with qkv_hidden_sizes; 1.32 runs both), and a crash there must not end the
# test. The helper walks DIR/c0, c1, ... in order, reads model.onnx and feeds.npz, and
# writes want.npz; when it dies, the case it was on is reported unchecked and a new helper
# goes on from the next one.
def reference_main(root, start):
    i = start
    while os.path.isdir(os.path.join(root, f"c{i}")):
        d = os.path.join(root, f"c{i}")
        with np.load(os.path.join(d, "feeds.npz")) as f:
            feeds = {k: f[k] for k in f.files}
        outs = run_ort(onnx.load(os.path.join(d, "model.onnx")), feeds)
        np.savez(os.path.join(d, "want.npz"), *outs)
        i += 1


def compute_references(root, n):
    """Runs the helper until every case has a reference or was skipped; returns
    {case index: why it has no reference}."""
    missing, start = {}, 0
    while start < n:
        p = subprocess.run([sys.executable, __file__, "--reference", root, "--start", str(start)],
                           capture_output=True, text=True)
        done = start
        while done < n and os.path.exists(os.path.join(root, f"c{done}", "want.npz")):
            done += 1
        if done >= n:
            break
        if p.returncode >= 0:  # a Python error, not a crash: the case itself is wrong
            raise RuntimeError(f"onnxruntime failed on case {done}:\n{p.stderr}")
        missing[done] = f"onnxruntime {ort.__version__} died of signal {-p.returncode}"
        start = done + 1
    return missing


class Ampc:
    def __init__(self, path):
        self.path = path
        h = subprocess.run([path, "--help"], capture_output=True, text=True).stdout
        self.has_run = re.search(r"\bampc run\b", h) is not None
        self.has_outputs = "--outputs" in h

    def run(self, m, feeds, workdir):
        """Returns (list of arrays or None, list of (shape, first values) or None, error)."""
        mp = os.path.join(workdir, "model.onnx")
        onnx.save(m, mp)
        ind = os.path.join(workdir, "in")
        os.makedirs(ind, exist_ok=True)
        k = 0
        for vi in m.graph.input:
            t = numpy_helper.from_array(feeds[vi.name], vi.name)
            with open(os.path.join(ind, f"input_{k}.pb"), "wb") as f:
                f.write(t.SerializeToString())
            k += 1
        cmd = [self.path, "run", mp, "--inputs", ind, "--backend", "cpu"]
        outd = os.path.join(workdir, "out")
        if self.has_outputs:
            os.makedirs(outd, exist_ok=True)
            cmd += ["--outputs", outd]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return None, None, f"ampc exit {p.returncode}: {p.stderr.strip()[-400:]}"
        if self.has_outputs:
            return read_outputs(m, outd), None, None
        return None, parse_printed(p.stdout), None


def read_outputs(m, outd):
    """Output tensors matched by name, else by order (output_K.pb)."""
    names = [o.name for o in m.graph.output]
    by_name, by_file = {}, {}
    for fn in sorted(os.listdir(outd)):
        if not fn.endswith(".pb"):
            continue
        t = onnx.TensorProto()
        with open(os.path.join(outd, fn), "rb") as f:
            t.ParseFromString(f.read())
        a = numpy_helper.to_array(t)
        if t.name:
            by_name[t.name] = a
        mk = re.match(r"output_(\d+)\.pb$", fn)
        if mk:
            by_file[int(mk.group(1))] = a
    return [by_name.get(n, by_file.get(i)) for i, n in enumerate(names)]


def parse_printed(stdout):
    """`output 'NAME' float[d0,d1]: v v v ... (N values)` lines -> {name: (shape, values)}."""
    got = {}
    for line in stdout.splitlines():
        mk = re.match(r"output '([^']*)' \w+\[([0-9,]*)\]:(.*)\((\d+) values?\)", line)
        if not mk:
            continue
        shape = tuple(int(d) for d in mk.group(2).split(",") if d)
        vals = [float(v) for v in mk.group(3).replace("...", " ").split()]
        got[mk.group(1)] = (shape, np.array(vals, dtype=np.float64))
    return got


def close(got, want, atol, rtol):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    bad = np.abs(got - want) > atol + rtol * np.abs(want)
    if bad.any():
        i = np.unravel_index(np.argmax(bad), bad.shape)
        return f"element {i} is {got[i]:.7g}, expected {want[i]:.7g} (max err {np.abs(got - want).max():.3g})"
    return None


# ---- the cases ----------------------------------------------------------------------


def fused_gemm_cases():
    acts = [
        ("Relu", {}), ("Tanh", {}), ("Sigmoid", {}), ("Softplus", {}), ("Softsign", {}),
        ("LeakyRelu", {"activation_alpha": 0.2}), ("HardSigmoid", {"activation_alpha": 0.3, "activation_beta": 0.4}),
        ("Elu", {"activation_alpha": 0.7}), ("Selu", {"activation_alpha": 1.6732632, "activation_gamma": 1.0507010}),
        ("ThresholdedRelu", {"activation_alpha": 0.5}),
        ("ScaledTanh", {"activation_alpha": 0.8, "activation_beta": 1.5}),
        ("ParametricSoftplus", {"activation_alpha": 0.6, "activation_beta": 1.7}),
    ]
    for i, (act, extra) in enumerate(acts):
        ta, tb = i % 2, (i // 2) % 2
        M, K, N = 5, 7, 6
        f = {"A": rand(*((K, M) if ta else (M, K)), scale=1.5), "B": rand(*((N, K) if tb else (K, N))),
             "C": rand(*((N,) if i % 3 == 0 else (M, N) if i % 3 == 1 else (1, N)))}
        attrs = dict(activation=act, transA=ta, transB=tb, alpha=0.9, beta=0.6, **extra)
        yield f"FusedGemm_{act}", model("FusedGemm", ["A", "B", "C"], ["Y"], attrs, f), f
    f = {"A": rand(4, 3), "B": rand(3, 5)}
    yield "FusedGemm_Relu_noC", model("FusedGemm", ["A", "B"], ["Y"], dict(activation="Relu"), f), f


def attention_cases():
    B, S, N, H = 2, 5, 3, 4
    D = N * H
    x = rand(B, S, D)
    w = rand(D, 3 * D, scale=0.5)
    b = rand(3 * D, scale=0.5)
    base = {"x": x, "w": w, "b": b}

    def case(name, inputs, outputs, attrs, extra=None):
        f = dict(base, **(extra or {}))
        return f"Attention_{name}", model("Attention", inputs, outputs, dict(num_heads=N, **attrs), f), f

    yield case("basic", ["x", "w", "b"], ["y"], {})
    yield case("no_bias", ["x", "w"], ["y"], {})
    yield case("scale", ["x", "w", "b"], ["y"], {"scale": 0.3})
    yield case("unidirectional", ["x", "w", "b"], ["y"], {"unidirectional": 1})
    yield case("mask_lengths", ["x", "w", "b", "m"], ["y"], {}, {"m": np.array([3, 5], np.int32)})
    yield case("mask_end_start", ["x", "w", "b", "m"], ["y"], {}, {"m": np.array([4, 5, 1, 2], np.int32)})
    m2 = (RNG.random((B, S)) > 0.3).astype(np.int32)
    m2[:, 0] = 1
    yield case("mask_raw2d", ["x", "w", "b", "m"], ["y"], {}, {"m": m2})
    yield case("mask_raw2d_filter", ["x", "w", "b", "m"], ["y"], {"mask_filter_value": -30.0}, {"m": m2})
    m3 = (RNG.random((B, S, S)) > 0.3).astype(np.int32)
    m3[..., 0] = 1
    yield case("mask_raw3d_unidirectional", ["x", "w", "b", "m"], ["y"], {"unidirectional": 1}, {"m": m3})
    yield case("attention_bias", ["x", "w", "b", "", "", "ab"], ["y"], {}, {"ab": rand(1, N, S, S)})
    P = 3
    past = rand(2, B, N, P, H)
    yield case("past_present", ["x", "w", "b", "", "past"], ["y", "present"], {}, {"past": past})
    yield case("past_present_unidirectional", ["x", "w", "b", "", "past"], ["y", "present"], {"unidirectional": 1},
               {"past": past})
    wq = rand(D, 2 * D + N * 2, scale=0.5)
    f = {"x": x, "wq": wq}
    yield ("Attention_qkv_hidden_sizes",
           model("Attention", ["x", "wq"], ["y"], dict(num_heads=N, qkv_hidden_sizes=[D, D, N * 2]), f), f)


def mha_cases():
    B, S, L, N, H = 2, 4, 6, 2, 3
    D = N * H
    q, k, v = rand(B, S, D), rand(B, L, D), rand(B, L, D)
    base = {"q": q, "k": k, "v": v}

    def case(name, inputs, outputs, attrs, extra=None, **over):
        f = dict(base, **(extra or {}))
        f.update(over)
        return f"MHA_{name}", model("MultiHeadAttention", inputs, outputs, dict(num_heads=N, **attrs), f), f

    yield case("basic", ["q", "k", "v"], ["y"], {})
    yield case("bias", ["q", "k", "v", "b"], ["y"], {}, {"b": rand(3 * D)})
    yield case("value_width", ["q", "k", "v"], ["y"], {}, v=rand(B, L, N * 5))
    yield case("scale", ["q", "k", "v"], ["y"], {"scale": 0.25})
    yield case("unidirectional_self", ["q", "k", "v"], ["y"], {"unidirectional": 1}, k=rand(B, S, D), v=rand(B, S, D))
    yield case("mask_lengths", ["q", "k", "v", "", "m"], ["y"], {}, {"m": np.array([2, 6], np.int32)})
    m2 = (RNG.random((B, L)) > 0.3).astype(np.int32)
    m2[:, 1] = 1
    yield case("mask_raw2d", ["q", "k", "v", "", "m"], ["y"], {}, {"m": m2})
    m3 = (RNG.random((B, S, L)) > 0.3).astype(np.int32)
    m3[..., 2] = 1
    yield case("mask_raw3d", ["q", "k", "v", "", "m"], ["y"], {}, {"m": m3})
    yield case("attention_bias", ["q", "k", "v", "", "", "ab"], ["y"], {}, {"ab": rand(B, 1, S, L)})
    P = 2
    yield case("past_present", ["q", "k", "v", "b", "", "", "pk", "pv"], ["y", "prk", "prv"], {},
               {"b": rand(3 * D), "pk": rand(B, N, P, H), "pv": rand(B, N, P, H)})
    yield case("past_present_unidirectional", ["q", "k", "v", "", "", "", "pk", "pv"], ["y", "prk", "prv"],
               {"unidirectional": 1}, {"pk": rand(B, N, P, H), "pv": rand(B, N, P, H)},
               k=rand(B, S, D), v=rand(B, S, D))
    yield case("bnsh_kv_bias", ["q", "k4", "v4", "b"], ["y"], {},
               {"k4": rand(B, N, L, H), "v4": rand(B, N, L, H), "b": rand(3 * D)})
    yield case("qk_output", ["q", "k", "v"], ["y", "prk", "prv", "qk"], {"scale": 0.4})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc")
    ap.add_argument("--testdata", default=None)
    ap.add_argument("--reference", help=argparse.SUPPRESS)  # the helper mode (compute_references)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reference:
        reference_main(args.reference, args.start)
        return
    if not args.ampc:
        ap.error("--ampc is required")
    ampc = Ampc(args.ampc)
    if not ampc.has_run:
        print("skip: this ampc has no 'run' command, nothing to compare")
        sys.exit(77)
    if not ampc.has_outputs:
        print("note: 'ampc run' has no --outputs yet: comparing only the (up to 8) values it prints per output")
    passed = failed = unchecked = 0
    cases = list(fused_gemm_cases()) + list(attention_cases()) + list(mha_cases())
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, m, feeds) in enumerate(cases):
            d = os.path.join(tmp, f"c{i}")
            os.makedirs(d)
            onnx.save(m, os.path.join(d, "model.onnx"))
            np.savez(os.path.join(d, "feeds.npz"), **feeds)
        missing = compute_references(tmp, len(cases))
        for i, (name, m, feeds) in enumerate(cases):
            if i in missing:
                unchecked += 1
                print(f"UNCHECKED {name}: no reference ({missing[i]})")
                continue
            with np.load(os.path.join(tmp, f"c{i}", "want.npz")) as f:
                want = [f[f"arr_{k}"] for k in range(len(f.files))]
            wd = os.path.join(tmp, f"c{i}", "run")
            os.makedirs(wd)
            full, printed, err = ampc.run(m, feeds, wd)
            names = [o.name for o in m.graph.output]
            if err is None and full is not None:
                for n, g, w in zip(names, full, want):
                    if g is None:
                        err = f"output '{n}' missing"
                    else:
                        err = close(g, w, 1e-4, 1e-3)
                        err = err and f"output '{n}': {err}"
                    if err:
                        break
            elif err is None:
                for n, w in zip(names, want):
                    if n not in printed:
                        err = f"output '{n}' not printed"
                    else:
                        shape, vals = printed[n]
                        if shape != w.shape:
                            err = f"output '{n}': shape {shape}, expected {w.shape}"
                        else:
                            err = close(vals, w.reshape(-1)[: len(vals)], 1e-4, 1e-3)
                            err = err and f"output '{n}' (printed values): {err}"
                    if err:
                        break
            if err:
                failed += 1
                print(f"FAIL {name}: {err}")
            else:
                passed += 1
                print(f"pass {name}")
    print(f"{passed} passed, {failed} failed, {unchecked} unchecked (onnxruntime crashed)")
    sys.exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()
