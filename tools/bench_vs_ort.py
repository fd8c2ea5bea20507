#!/usr/bin/env python3
"""Compares ampc's CPU fp32 inference time with onnxruntime's on one model, in one go.

Both run MODEL_DIR/model.onnx on the same inputs (MODEL_DIR/test_data_set_0, else
deterministic random data written to a temporary folder), first single-threaded, then
with each one's default threads, and the script prints the median time per run of each
and the ratio ampc / onnxruntime:
- ampc: `ampc bench MODEL --inputs DIR --iters N --warmup W --backend cpu` with
  AMP_AUTO=0 (fp32, no rewrite); ampc's only threads are OpenBLAS's, so single-threaded
  is OPENBLAS_NUM_THREADS=1 and default is OpenBLAS's default (one thread per CPU);
  the time is the session call, measured inside the process;
- onnxruntime: an InferenceSession on the CPUExecutionProvider with its default graph
  optimizations; single-threaded is intra_op_num_threads=1, inter_op_num_threads=1,
  default leaves both at 0 (onnxruntime picks one thread per physical core); the time is
  sess.run measured from Python, so it includes a few microseconds of call overhead.
Before timing, the outputs of `ampc run --outputs` are compared with onnxruntime's (the
largest absolute difference is printed), so the two are known to compute the same thing.

A benchmark, not a test: quote its ratios, from one run, with the machine it ran on.

usage: bench_vs_ort.py MODEL_DIR [--iters N] [--warmup W] [--ampc PATH]
       bench_vs_ort.py --make-resnet DIR [--blocks K] [--channels C] [--size S] [...]
       (writes a ResNet-style stack of basic blocks at 1xCxSxS, default 1x64x56x56,
       to DIR/model.onnx with random input data, then compares on it)
"""
import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    sys.exit(f"bench_vs_ort.py needs numpy, onnx and onnxruntime: {e}")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- a bigger model: ResNet basic blocks --------------------------------------------------

def make_resnet(folder, blocks=4, channels=64, size=56, classes=1000, seed=0):
    """x float[1,C,S,S] -> `blocks` basic blocks (Conv3x3-BN-Relu-Conv3x3-BN, + x, Relu)
    -> GlobalAveragePool -> Flatten -> Gemm -> logits float[1,classes]. He-initialised
    weights; BatchNormalization in inference mode with random statistics."""
    rng = np.random.RandomState(seed)
    inits, nodes = [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(a.astype(np.float32), name))
        return name

    def conv_bn(x, name, relu):
        fan_in = channels * 9
        w = const(f"{name}.W", rng.randn(channels, channels, 3, 3) * np.sqrt(2.0 / fan_in))
        nodes.append(helper.make_node("Conv", [x, w], [f"{name}.conv"], name=f"{name}.conv",
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        bn = [const(f"{name}.bn.{k}", v) for k, v in (
            ("scale", rng.uniform(0.5, 1.5, channels)), ("bias", rng.uniform(-0.1, 0.1, channels)),
            ("mean", rng.uniform(-0.1, 0.1, channels)), ("var", rng.uniform(0.5, 1.5, channels)))]
        out = f"{name}.bn"
        nodes.append(helper.make_node("BatchNormalization", [f"{name}.conv"] + bn, [out], name=out))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [f"{name}.relu"], name=f"{name}.relu"))
            out = f"{name}.relu"
        return out

    x = "x"
    for b in range(blocks):
        h = conv_bn(x, f"block{b}.a", True)
        h = conv_bn(h, f"block{b}.b", False)
        nodes.append(helper.make_node("Add", [h, x], [f"block{b}.sum"], name=f"block{b}.add"))
        nodes.append(helper.make_node("Relu", [f"block{b}.sum"], [f"block{b}.out"], name=f"block{b}.out"))
        x = f"block{b}.out"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flat"))
    fw = const("fc.W", rng.randn(classes, channels) * np.sqrt(1.0 / channels))
    fb = const("fc.B", rng.uniform(-0.1, 0.1, classes))
    nodes.append(helper.make_node("Gemm", ["flat", fw, fb], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(
        nodes, "resnet_blocks",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="ampc tools/bench_vs_ort.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    xin = rng.randn(1, channels, size, size).astype(np.float32)
    onnx.save_tensor(numpy_helper.from_array(xin, "x"), os.path.join(data, "input_0.pb"))
    return os.path.join(folder, "model.onnx")


# ---- inputs ------------------------------------------------------------------------------

def graph_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def load_or_make_inputs(model_dir, model, tmp):
    """({name: array}, folder of input_K.pb files ampc reads, description)."""
    names = [i.name for i in graph_inputs(model)]
    data = os.path.join(model_dir, "test_data_set_0")
    if os.path.exists(os.path.join(data, "input_0.pb")):
        feeds, k = {}, 0
        while os.path.exists(os.path.join(data, f"input_{k}.pb")):
            t = onnx.load_tensor(os.path.join(data, f"input_{k}.pb"))
            feeds[t.name or names[k]] = numpy_helper.to_array(t)
            k += 1
        return feeds, data, "test_data_set_0"
    rng = np.random.RandomState(1)
    folder = os.path.join(tmp, "inputs")
    os.makedirs(folder)
    feeds = {}
    for k, vi in enumerate(graph_inputs(model)):
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dtype, np.floating):
            a = rng.uniform(-1, 1, shape).astype(dtype)
        else:
            a = np.zeros(shape, dtype=dtype)  # valid as an index anywhere
        feeds[vi.name] = a
        onnx.save_tensor(numpy_helper.from_array(a, vi.name), os.path.join(folder, f"input_{k}.pb"))
    return feeds, folder, "random (symbolic dims 1, integer inputs 0)"


# ---- the two runtimes ---------------------------------------------------------------------

def ampc_env(single):
    env = dict(os.environ, AMP_AUTO="0")
    for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS"):
        env.pop(v, None)
    if single:
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return env


def time_ampc(ampc, model_file, inputs, iters, warmup, single):
    cmd = [ampc, "bench", model_file, "--inputs", inputs, "--iters", str(iters), "--warmup", str(warmup),
           "--backend", "cpu"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ampc_env(single))
    if p.returncode:
        sys.exit(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    m = re.search(r"median ([0-9.]+) ms", p.stdout)
    if not m:
        sys.exit(f"no median in the output of {' '.join(cmd)}:\n{p.stdout}")
    return float(m.group(1))


def ort_session(model_file, single):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if single:
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
    return ort.InferenceSession(model_file, so, providers=["CPUExecutionProvider"])


def time_ort(model_file, feeds, iters, warmup, single):
    sess = ort_session(model_file, single)
    names = [i.name for i in sess.get_inputs()]
    f = {n: feeds[n] for n in names}
    for _ in range(warmup):
        sess.run(None, f)
    ms = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(None, f)
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def compare_outputs(ampc, model_file, inputs, feeds, tmp):
    """Largest |ampc - onnxruntime| over every float output."""
    out = os.path.join(tmp, "outputs")
    cmd = [ampc, "run", model_file, "--inputs", inputs, "--outputs", out, "--backend", "cpu"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=ampc_env(True))
    if p.returncode:
        sys.exit(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    sess = ort_session(model_file, True)
    want = sess.run(None, {i.name: feeds[i.name] for i in sess.get_inputs()})
    worst = 0.0
    for k, w in enumerate(want):
        got = numpy_helper.to_array(onnx.load_tensor(os.path.join(out, f"output_{k}.pb")))
        if got.shape != w.shape:
            sys.exit(f"output {k}: ampc shape {got.shape}, onnxruntime {w.shape}")
        if np.issubdtype(w.dtype, np.floating) and w.size:
            worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - w.astype(np.float64)))))
    return worst


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir", nargs="?", help="folder with model.onnx (and test_data_set_0)")
    ap.add_argument("--iters", type=int, default=50, help="timed runs of each (default 50)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    default_ampc = os.path.join(ROOT, "build", "ampc")
    ap.add_argument("--ampc", default=default_ampc if os.path.exists(default_ampc) else shutil.which("ampc"),
                    help="the ampc binary (default: build/ampc)")
    ap.add_argument("--make-resnet", metavar="DIR", help="write a ResNet-style model to DIR and compare on it")
    ap.add_argument("--blocks", type=int, default=4, help="--make-resnet: basic blocks (default 4)")
    ap.add_argument("--channels", type=int, default=64, help="--make-resnet: channels (default 64)")
    ap.add_argument("--size", type=int, default=56, help="--make-resnet: height and width (default 56)")
    args = ap.parse_args()
    if bool(args.model_dir) == bool(args.make_resnet):
        ap.error("give MODEL_DIR or --make-resnet DIR")
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be at least 1, --warmup at least 0")
    if not args.ampc or not os.path.exists(args.ampc):
        ap.error("no ampc binary: build it or give --ampc PATH")
    ampc = os.path.abspath(args.ampc)
    model_dir = args.model_dir
    if args.make_resnet:
        model_dir = args.make_resnet
        os.makedirs(model_dir, exist_ok=True)
        make_resnet(model_dir, args.blocks, args.channels, args.size)
    model_file = os.path.join(model_dir, "model.onnx")
    model = onnx.load(model_file)

    with tempfile.TemporaryDirectory(prefix="bench_vs_ort_") as tmp:
        feeds, inputs, what = load_or_make_inputs(model_dir, model, tmp)
        diff = compare_outputs(ampc, model_file, inputs, feeds, tmp)
        print(f"model {model_file}: {len(model.graph.node)} nodes, inputs {what}")
        print(f"machine: {os.cpu_count()} CPUs ({cpu_name()}), {platform.system()}; "
              f"onnxruntime {ort.__version__}; medians of {args.iters} runs after {args.warmup} warm-up")
        print(f"outputs agree: max |ampc - onnxruntime| = {diff:.3g}")
        print(f"{'threads':<52} {'ampc ms':>10} {'onnxruntime ms':>15} {'ampc/ort':>9}")
        for single in (True, False):
            a = time_ampc(ampc, model_file, inputs, args.iters, args.warmup, single)
            o = time_ort(model_file, feeds, args.iters, args.warmup, single)
            label = ("single (OPENBLAS_NUM_THREADS=1; ORT intra/inter 1)" if single else
                     f"default (OpenBLAS {os.cpu_count()}; ORT its default)")
            print(f"{label:<52} {a:>10.4f} {o:>15.4f} {a / o:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
