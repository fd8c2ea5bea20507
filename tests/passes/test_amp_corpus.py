#!/usr/bin/env python3
"""The AMP pipeline over a corpus: every float model of the ONNX conformance data
(--testdata), of models/, three synthetic networks written here (a transformer block,
a residual CNN with BatchNormalization and Resize, If/Loop control flow), and the whole
networks of the onnx package's own backend tests (AlexNet, ResNet-50, VGG-19, ...). For each model `ampc MODEL -o OUT` (infer, amp,
cast_cleanup) must give a model that
- passes ampc's verifier (`ampc verify`) and onnx.checker with full_check (when the
  original does);
- keeps the graph inputs and outputs and their types, and every node of the original
  in order (only Casts are added or removed);
- computes every MatMul / Gemm / Conv whose data is float32 in float16, and no op of the
  deny list in 16 bits;
- gives the same outputs as the original on the CPU executor (`ampc run --inputs
  test_data_set_0 --outputs DIR` on both) within fp16 tolerance (rtol 1e-2, atol 1e-3
  relative to the output's largest magnitude); the worst relative error is reported;
- runs in onnxruntime;
- is a fixed point: converting it again gives the same bytes;
- carries the types of its intermediates (value_info), which onnx's strict shape
  inference accepts (when it accepts the original), and with which `ampc OUT --passes
  none --report` prints what `--report` printed during the conversion (whose first line
  the success line's counts equal).
The same with --precision bf16 (checker, verifier, idempotence). Also checks that the
pass's opset table (ir/ops.def's OPSETS column) agrees with onnx.defs.

Prints one line per model whose outputs were compared (every model with -v): nodes in 16
bits, casts, the worst relative error in fp16 and bf16; then a summary and "N passed,
M failed" last; exit 77 (skip) when numpy, onnx or onnxruntime is missing.

usage: test_amp_corpus.py --ampc PATH --testdata DIR [-v] [--filter SUBSTR] [--jobs N]
"""
import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, numpy_helper
except ImportError as e:
    print(f"{e.name} is not installed: skipping (pip install numpy onnx onnxruntime)")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RTOL, ATOL = 1e-2, 1e-3
LIGHT_MAX_WEIGHT_BYTES = 128 << 20
BF16_RTOL, BF16_ATOL = 6e-2, 1e-2
TENSOR_CORE_OPS = ("MatMul", "Gemm", "Conv")
ort.set_default_logger_severity(4)


# ---- the op table, read from ir/ops.def ---------------------------------------------

def _split_top(text):
    """text split at the commas outside parentheses and string literals."""
    parts, depth, cur, quoted = [], 0, "", False
    for c in text:
        if quoted:
            quoted = c != '"'
        elif c == '"':
            quoted = True
        elif c in "()":
            depth += 1 if c == "(" else -1
        elif c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += c
    return parts + [cur.strip()]


def read_op_rows():
    """ops.def's rows, each a dict of its columns (the header comment of ops.def names them)."""
    text = open(os.path.join(ROOT, "ir", "ops.def")).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    rows = []
    for m in re.finditer(r"^AMP_OP\(", text, re.M):
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        f = _split_top(text[m.end():i - 1])
        rows.append({"id": f[0], "domain": f[1].strip('"'), "name": f[2].strip('"'), "fp16": f[3], "bf16": f[4],
                     "opsets": re.match(r"OPSETS\((\w+), (\w+)\)$", f[5]).groups(), "slots": f[8]})
    return rows


def read_op_table():
    """{(domain, name): (fp16 class, float slot mask, bf16 class)} from the X-macro rows."""
    rows = {}
    for r in read_op_rows():
        expr = " ".join(r["slots"].split()).replace("AMP_SLOTS_ALL", "0xFFFFFFFF").replace("AMP_SLOTS_NONE", "0")
        expr = re.sub(r"AMP_SLOT\((\d+)\)", r"(1 << \1)", expr)
        rows[(r["domain"], r["name"])] = (r["fp16"], eval(expr) & 0xFFFFFFFF, r["bf16"])  # noqa: S307 (our own file)
    return rows


OPS = read_op_table()


def float_slots(node):
    info = OPS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
    if not info:
        return []
    mask = info[1]
    return [i for i in range(len(node.input)) if node.input[i] and (mask == 0xFFFFFFFF or (i < 32 and mask >> i & 1))]


def op_class(node, bf16=False):
    info = OPS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
    return (info[2] if bf16 else info[0]) if info else None


# ---- helpers ---------------------------------------------------------------------------

def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def value_types(model):
    """{value name: elem_type} of the main graph after onnx's shape inference."""
    try:
        m = onnx.shape_inference.infer_shapes(model)
    except Exception:
        m = model
    g = m.graph
    types = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    for t in g.initializer:
        types[t.name] = t.data_type
    for n in g.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    types[n.output[0]] = a.t.data_type
    return types


def report_lines(text):
    return [x for x in text.splitlines() if not x.startswith("note:")]


# What the loss-scaling pass adds to a training graph (its state, amp_found_inf, the new
# scale): tested in test_loss_scale.py, left out of the comparisons here.
LOSS_SCALE_PREFIXES = ("amp_loss_scale", "amp_growth_tracker", "amp_found_inf")


def io_types(model):
    def sig(vis):
        return [(v.name, v.type.tensor_type.elem_type if v.type.HasField("tensor_type") else None)
                for v in vis if not v.name.startswith(LOSS_SCALE_PREFIXES)]
    init = {t.name for t in model.graph.initializer}
    return sig([v for v in model.graph.input if v.name not in init]), sig(model.graph.output)


def is_float_model(model):
    g = model.graph
    for v in g.input:
        if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type == TensorProto.FLOAT:
            return True
    return any(t.data_type == TensorProto.FLOAT for t in g.initializer)


def read_outputs(folder, model):
    out = {}
    for i, o in enumerate(model.graph.output):
        f = os.path.join(folder, f"output_{i}.pb")
        if os.path.exists(f):
            out[o.name] = numpy_helper.to_array(onnx.load_tensor(f))
    return out


def worst_error(got, want):
    with np.errstate(invalid="ignore", over="ignore"):
        return _worst_error(got, want)


def _worst_error(got, want):
    """max |got - want| / max |want| over the float outputs (NaN where both are NaN
    counts as equal); and whether every element is within atol + rtol * |want| scaled
    by the output's largest magnitude. Non-float outputs must be equal."""
    worst, ok, bad = 0.0, True, ""
    for name, w in want.items():
        g = got.get(name)
        if g is None or g.shape != w.shape:
            return float("inf"), False, f"output {name!r}: shape {None if g is None else g.shape} vs {w.shape}"
        if not (np.issubdtype(w.dtype, np.floating) or "float" in str(w.dtype)):  # ml_dtypes' bfloat16 too
            if not np.array_equal(g, w):
                # Indices (ArgMax, TopK) may pick another of two nearly equal elements.
                frac = float(np.mean(g != w))
                if frac > 0.05:
                    ok, bad = False, f"output {name!r}: {frac:.1%} of non-float elements differ"
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        both_nan = np.isnan(g64) & np.isnan(w64)
        same_inf = np.isinf(w64) & (g64 == w64)
        finite = np.isfinite(w64) & ~both_nan
        scale = float(np.max(np.abs(w64[finite]))) if finite.any() else 0.0
        diff = np.where(both_nan | same_inf, 0.0, np.abs(g64 - w64))
        diff = np.where(np.isnan(diff), np.inf, diff)
        err = float(np.max(diff)) / scale if scale > 0 and diff.size else float(np.max(diff, initial=0.0))
        worst = max(worst, err)
        if diff.size and not np.all(diff <= ATOL * max(scale, 1.0) + RTOL * np.abs(np.where(finite, w64, 0))):
            if err > RTOL:
                ok, bad = False, f"output {name!r}: worst relative error {err:.3g}"
    return worst, ok, bad


def ort_feeds(model_file, folder):
    sess = ort.InferenceSession(model_file, providers=["CPUExecutionProvider"])
    feeds = {}
    data = os.path.join(folder, "test_data_set_0")
    files = sorted(glob.glob(os.path.join(data, "input_*.pb")), key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
    inputs = sess.get_inputs()
    for i, f in enumerate(files):
        t = onnx.load_tensor(f)
        name = t.name if t.name in {x.name for x in inputs} else (inputs[i].name if i < len(inputs) else None)
        if name:
            feeds[name] = numpy_helper.to_array(t)
    return sess, feeds


# ---- one model -------------------------------------------------------------------------

class Result:
    def __init__(self, name):
        self.name = name
        self.failures = []
        self.notes = []
        self.worst = None
        self.worst_bf16 = None
        self.skipped = None
        self.casts = 0
        self.nodes16 = 0
        self.float_nodes = 0


def gelu_cube(model, node):
    """Whether node may be the Pow(x, 3) of GELU's tanh form (which passes/amp_color.c's
    group_rule colours as Gelu, infer): Pow -> Mul -> Add(x) -> Mul -> Tanh, one reader each."""
    if node.op_type != "Pow":
        return False
    readers = {}
    for n in model.graph.node:
        for v in n.input:
            readers.setdefault(v, []).append(n)
    v, x = node.output[0], node.input[0]
    for op in ("Mul", "Add", "Mul", "Tanh"):
        r = readers.get(v, [])
        if len(r) != 1 or r[0].op_type != op:
            return False
        if op == "Add" and x not in r[0].input:
            return False
        v = r[0].output[0]
    return True


MOVES = ("Cast", "Transpose", "Reshape", "Unsqueeze", "Squeeze", "Expand", "Concat", "Identity", "Flatten")


def reads_positions(model, node):
    """Whether node reads positions (rotary angles' integers: a Range, or a float arange of 4 or
    more constants along one axis, through data movement): ampc keeps such products float32 (amp_range.c)."""
    g = model.graph
    prod = {o: n for n in g.node for o in n.output}
    consts = {i.name: i for i in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = a.t

    def arange(t):
        a = numpy_helper.to_array(t)
        v = a.ravel()
        return v.dtype == np.float32 and v.size >= 4 and max(a.shape) == v.size and \
            np.all(v == np.floor(v)) and np.all(np.diff(v) == 1)

    todo, seen = list(node.input), set()
    while todo:
        v = todo.pop()
        if not v or v in seen:
            continue
        seen.add(v)
        if v in consts and arange(consts[v]):
            return True
        p = prod.get(v)
        if p is not None and p.op_type == "Range":
            return True
        if p is not None and p.op_type in MOVES:
            todo += list(p.input)
    return False


def structure_checks(res, orig, conv, tag):
    if io_types(orig) != io_types(conv):
        res.failures.append(f"{tag}: graph inputs/outputs changed: {io_types(orig)} -> {io_types(conv)}")
    a = [n for n in orig.graph.node if n.op_type != "Cast"]
    b = [n for n in conv.graph.node if n.op_type != "Cast" and not n.name.startswith(LOSS_SCALE_PREFIXES)]
    def opset(m):
        return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    # A raised opset (the opset_upgrade pass) may adapt nodes: Softmax-12 along a middle
    # axis becomes Shape, Flatten, Softmax, Reshape; Upsample becomes Resize.
    if opset(orig) == opset(conv) and [n.op_type for n in a] != [n.op_type for n in b]:
        res.failures.append(f"{tag}: the non-Cast nodes changed")
        return
    ta, tb = value_types(orig), value_types(conv)
    sixteen = (TensorProto.FLOAT16, TensorProto.BFLOAT16)
    pairs = zip(a, b)
    if [n.op_type for n in a] != [n.op_type for n in b]:
        # Adapted or fused at the raised opset (bf16 raises it to 22 for Conv, where
        # fuse_norm then fuses GELU): the nodes no longer pair by position; compare those
        # kept, by name (a fused node has a new name).
        by_name = {n.name: n for n in b if n.name}
        pairs = [(x, by_name[x.name]) for x in a if x.name in by_name and by_name[x.name].op_type == x.op_type]
    for x, y in pairs:
        slots = float_slots(x)
        if not slots:
            continue
        was = [ta.get(x.input[i]) for i in slots]
        now = [tb.get(y.input[i]) for i in slots]
        cls = op_class(x, tag == "bf16")
        if cls == "DENY" and any(t in sixteen for t in now) and not any(t in sixteen for t in was) and \
                not gelu_cube(orig, x):
            res.failures.append(f"{tag}: deny op {x.op_type} {x.name!r} computes in 16 bits")
        if tag == "fp16" and x.op_type in TENSOR_CORE_OPS and x.domain in ("", "ai.onnx") and \
                all(t == TensorProto.FLOAT for t in was) and now[0] != TensorProto.FLOAT16 and \
                not reads_positions(orig, x):
            res.failures.append(f"{tag}: {x.op_type} {x.name!r} has float32 data but stays float32")


def check_one(args, folder, tmp):
    model_file = os.path.join(folder, "model.onnx")
    if folder.startswith(args.testdata):
        name = os.path.relpath(folder, args.testdata)
    elif "/synthetic/" in folder:
        name = folder[folder.index("synthetic/"):]
    elif "/light/" in folder:
        name = folder[folder.index("light/"):]
    else:
        name = os.path.relpath(folder, ROOT)
    res = Result(name)
    orig = onnx.load(model_file)
    if not is_float_model(orig):
        res.skipped = "no float32 input or initializer"
        return res
    work = tempfile.mkdtemp(dir=tmp)
    try:
        conv = os.path.join(work, "fp16.onnx")
        p = run([args.ampc, model_file, "-o", conv, "--report"])
        if p.returncode:
            q = run([args.ampc, model_file, "-o", os.path.join(work, "none.onnx"), "--passes", "none", "-q"])
            if q.returncode:
                res.skipped = "ampc cannot load it: " + q.stderr.strip()[:200]
            else:
                res.failures.append(f"convert exited {p.returncode}: {p.stderr.strip()[:300]}")
            return res
        m = re.search(r"(\d+) of (\d+) float nodes in 16 bits, (\d+) casts", p.stderr)
        if m:
            res.nodes16, res.float_nodes, res.casts = int(m.group(1)), int(m.group(2)), int(m.group(3))
        first = re.match(r"converted (\d+) of (\d+) float nodes using (\d+) casts", p.stdout)
        if m and (not first or first.groups() != m.groups()):
            res.failures.append(f"success line '{m.group(0)}' vs report '{p.stdout.splitlines()[0] if p.stdout else ''}'")
        # The file alone reports what the conversion did: the types are in it. (Not the
        # "note:" line: values of sequence or optional type cannot be written back.)
        q = run([args.ampc, conv, "--passes", "none", "--report"])
        if q.returncode or report_lines(q.stdout) != report_lines(p.stdout):
            res.failures.append("--passes none --report of the output differs from --report of the conversion: " +
                                (q.stdout.splitlines() or [""])[0] + " vs " + (p.stdout.splitlines() or [""])[0])
        v = run([args.ampc, "verify", conv])
        if v.returncode:
            res.failures.append(f"ampc verify: {v.stderr.strip()[:300]}")
        conv_m = onnx.load(conv)
        try:
            onnx.shape_inference.infer_shapes(orig, strict_mode=True)
            orig_infers = True
        except Exception:
            orig_infers = False
        if orig_infers:
            try:
                onnx.shape_inference.infer_shapes(conv_m, strict_mode=True)
            except Exception as e:
                res.failures.append(f"onnx strict shape inference: {str(e).strip().splitlines()[0][:300]}")
        try:
            onnx.checker.check_model(orig, full_check=True)
            orig_checks = True
        except Exception:
            orig_checks = False
        if orig_checks:
            try:
                onnx.checker.check_model(conv_m, full_check=True)
            except Exception as e:
                res.failures.append(f"onnx.checker: {str(e).strip().splitlines()[0][:300]}")
        # ONNX's Gradient op (the conformance data's simple/test_gradient_of_*): the
        # conversion expands it first (the gradient pass), so the nodes to compare with
        # are the expansion's; its y is then a loss (the seed y_grad is scaled), which
        # `ampc run` of the converted model is told.
        grad_nodes = [n for n in orig.graph.node if n.op_type == "Gradient" and n.domain == "ai.onnx.preview.training"]
        run_loss = []
        if grad_nodes:
            exp = os.path.join(work, "expanded.onnx")
            q = run([args.ampc, model_file, "-o", exp, "--passes", "gradient", "-q"])
            if q.returncode:
                res.failures.append(f"the gradient pass alone: exit {q.returncode}: {q.stderr.strip()[:300]}")
                return res
            orig = onnx.load(exp)
            y = next(a.s.decode() for a in grad_nodes[0].attribute if a.name == "y")
            run_loss = ["--loss", y]
        structure_checks(res, orig, conv_m, "fp16")
        again = os.path.join(work, "fp16_again.onnx")
        p = run([args.ampc, conv, "-o", again, "-q"])
        if p.returncode or open(again, "rb").read() != open(conv, "rb").read():
            res.failures.append("not idempotent: converting the converted model changed it" +
                                (f" (exit {p.returncode}: {p.stderr.strip()[:200]})" if p.returncode else ""))
        # The CPU executor: original against converted.
        data = os.path.join(folder, "test_data_set_0")
        if os.path.isdir(data):
            ref = os.path.join(work, "out_fp32")
            r = run([args.ampc, "run", model_file, "--inputs", data, "--outputs", ref])
            if r.returncode:
                res.notes.append("the CPU executor does not run the original")
            else:
                want = read_outputs(ref, orig)
                got_dir = os.path.join(work, "out_fp16")
                r = run([args.ampc, "run", conv, "--inputs", data, "--outputs", got_dir, *run_loss])
                if r.returncode:
                    res.failures.append(f"ampc run of the converted model: {r.stderr.strip()[:300]}")
                else:
                    res.worst, ok, bad = worst_error(read_outputs(got_dir, conv_m), want)
                    if not ok:
                        res.failures.append(f"fp16 outputs differ: {bad}")
            # onnxruntime runs the converted model (when it runs the original).
            try:
                sess, feeds = ort_feeds(model_file, folder)
                sess.run(None, feeds)
                ort_ok = True
            except Exception:
                ort_ok = False
            if ort_ok:
                try:
                    sess, feeds = ort_feeds(conv, folder)
                    sess.run(None, feeds)
                except Exception as e:
                    res.failures.append(f"onnxruntime: {str(e).strip().splitlines()[0][:300]}")
        # bfloat16: valid, verified, a fixed point, and close on the CPU executor.
        convb = os.path.join(work, "bf16.onnx")
        p = run([args.ampc, model_file, "-o", convb, "-q", "--precision", "bf16"])
        if p.returncode:
            res.failures.append(f"bf16: convert exited {p.returncode}: {p.stderr.strip()[:300]}")
            return res
        convb_m = onnx.load(convb)
        if orig_checks:
            try:
                onnx.checker.check_model(convb_m, full_check=True)
            except Exception as e:
                res.failures.append(f"bf16: onnx.checker: {str(e).strip().splitlines()[0][:300]}")
        structure_checks(res, orig, convb_m, "bf16")
        p = run([args.ampc, convb, "-o", again, "-q", "--precision", "bf16"])
        if p.returncode or open(again, "rb").read() != open(convb, "rb").read():
            res.failures.append("bf16: not idempotent")
        if os.path.isdir(data) and os.path.isdir(os.path.join(work, "out_fp32")):
            got_dir = os.path.join(work, "out_bf16")
            r = run([args.ampc, "run", convb, "--inputs", data, "--outputs", got_dir, *run_loss])
            if r.returncode:
                res.failures.append(f"ampc run of the bf16 model: {r.stderr.strip()[:300]}")
            else:
                res.worst_bf16, _, _ = worst_error(read_outputs(got_dir, convb_m), read_outputs(os.path.join(work, "out_fp32"), orig))
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- synthetic models: whole networks, where the propagation rules meet ------------------

def _save_case(folder, model, feeds):
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(folder, "model.onnx"))
    for i, (name, arr) in enumerate(feeds.items()):
        t = numpy_helper.from_array(arr, name)
        with open(os.path.join(folder, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())


def _model(nodes, inputs, outputs, inits, opset=17, name="synthetic"):
    from onnx import helper
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="test_amp_corpus.py")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def synthetic_models(root):
    """Writes a transformer block, a residual CNN and a control-flow model (with test
    inputs) under root; returns their folders."""
    from onnx import helper
    rng = np.random.RandomState(7)
    F = TensorProto.FLOAT

    def w(name, *shape, scale=None):
        a = (rng.randn(*shape) * (scale if scale is not None else 1 / np.sqrt(shape[0]))).astype(np.float32)
        return numpy_helper.from_array(a, name)

    def i64(name, vals):
        return numpy_helper.from_array(np.array(vals, dtype=np.int64), name)

    folders = []
    # A pre-norm transformer block: LayerNorm, attention with Softmax, GELU (Erf) MLP, residuals.
    B, T, D, H = 2, 8, 16, 2
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln1_s", "ln1_b"], ["ln1"], name="ln1", axis=-1),
        n("MatMul", ["ln1", "Wq"], ["q"], name="q"), n("MatMul", ["ln1", "Wk"], ["k"], name="k"),
        n("MatMul", ["ln1", "Wv"], ["v"], name="v"),
        n("Reshape", ["q", "heads"], ["qh"], name="qh"), n("Transpose", ["qh"], ["qt"], name="qt", perm=[0, 2, 1, 3]),
        n("Reshape", ["k", "heads"], ["kh"], name="kh"), n("Transpose", ["kh"], ["kt"], name="kt", perm=[0, 2, 3, 1]),
        n("Reshape", ["v", "heads"], ["vh"], name="vh"), n("Transpose", ["vh"], ["vt"], name="vt", perm=[0, 2, 1, 3]),
        n("MatMul", ["qt", "kt"], ["s"], name="scores"), n("Div", ["s", "sqrt_d"], ["sd"], name="scale"),
        n("Softmax", ["sd"], ["p"], name="softmax", axis=-1), n("MatMul", ["p", "vt"], ["a"], name="attn"),
        n("Transpose", ["a"], ["at"], name="at", perm=[0, 2, 1, 3]), n("Reshape", ["at", "merge"], ["am"], name="am"),
        n("MatMul", ["am", "Wo"], ["o"], name="o"), n("Add", ["x", "o"], ["r1"], name="res1"),
        n("LayerNormalization", ["r1", "ln2_s", "ln2_b"], ["ln2"], name="ln2", axis=-1),
        n("MatMul", ["ln2", "W1"], ["f1"], name="fc1"), n("Add", ["f1", "b1"], ["f1b"], name="fc1_bias"),
        n("Div", ["f1b", "sqrt2"], ["g0"], name="gelu_div"), n("Erf", ["g0"], ["g1"], name="gelu_erf"),
        n("Add", ["g1", "one"], ["g2"], name="gelu_add"), n("Mul", ["f1b", "g2"], ["g3"], name="gelu_mul"),
        n("Mul", ["g3", "half"], ["g4"], name="gelu_half"),
        n("MatMul", ["g4", "W2"], ["f2"], name="fc2"), n("Add", ["r1", "f2"], ["y"], name="res2"),
        n("ReduceMean", ["y"], ["ym"], name="pool", axes=[1], keepdims=0),
    ]
    inits = [numpy_helper.from_array(np.ones(D, np.float32), "ln1_s"), numpy_helper.from_array(np.zeros(D, np.float32), "ln1_b"),
             numpy_helper.from_array(np.ones(D, np.float32), "ln2_s"), numpy_helper.from_array(np.zeros(D, np.float32), "ln2_b"),
             w("Wq", D, D), w("Wk", D, D), w("Wv", D, D), w("Wo", D, D), w("W1", D, 4 * D), w("W2", 4 * D, D),
             w("b1", 4 * D, scale=0.1), i64("heads", [B, T, H, D // H]), i64("merge", [B, T, D]),
             numpy_helper.from_array(np.array(np.sqrt(D // H), np.float32), "sqrt_d"),
             numpy_helper.from_array(np.array(np.sqrt(2), np.float32), "sqrt2"),
             numpy_helper.from_array(np.array(1, np.float32), "one"), numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [B, T, D])],
               [helper.make_tensor_value_info("y", F, [B, T, D]), helper.make_tensor_value_info("ym", F, [B, D])], inits,
               opset=17, name="transformer_block")
    folder = os.path.join(root, "synthetic", "transformer_block")
    _save_case(folder, m, {"x": rng.randn(B, T, D).astype(np.float32)})
    folders.append(folder)

    # A residual CNN: Conv, BatchNormalization, Relu, MaxPool, 1x1 shortcut, Resize with
    # float scales, Concat, GlobalAveragePool, Gemm, Softmax.
    nodes = [
        n("Conv", ["x", "c1"], ["a1"], name="conv1", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["a1", "bn_s", "bn_b", "bn_m", "bn_v"], ["a2"], name="bn1"),
        n("Relu", ["a2"], ["a3"], name="relu1"), n("MaxPool", ["a3"], ["a4"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["a4", "c2"], ["b1"], name="conv2", pads=[1, 1, 1, 1]), n("Relu", ["b1"], ["b2"], name="relu2"),
        n("Conv", ["a4", "sc"], ["s1"], name="shortcut"), n("Add", ["b2", "s1"], ["b3"], name="residual"),
        n("Resize", ["b3", "", "scales"], ["u1"], name="upsample", mode="nearest"),
        n("Concat", ["u1", "a3"], ["cc"], name="concat", axis=1),
        n("GlobalAveragePool", ["cc"], ["gp"], name="gap"), n("Flatten", ["gp"], ["fl"], name="flatten"),
        n("Gemm", ["fl", "fc", "fcb"], ["lg"], name="fc", transB=1), n("Softmax", ["lg"], ["y"], name="softmax", axis=1),
    ]
    C = 8
    inits = [w("c1", C, 3, 3, 3, scale=0.3), numpy_helper.from_array(np.ones(C, np.float32), "bn_s"),
             numpy_helper.from_array(np.zeros(C, np.float32), "bn_b"), numpy_helper.from_array((rng.randn(C) * 0.1).astype(np.float32), "bn_m"),
             numpy_helper.from_array(np.ones(C, np.float32), "bn_v"), w("c2", C, C, 3, 3, scale=0.15), w("sc", C, C, 1, 1, scale=0.3),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"), w("fc", 10, 2 * C, scale=0.3),
             w("fcb", 10, scale=0.1)]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3, 16, 16])], [helper.make_tensor_value_info("y", F, [2, 10])],
               inits, opset=17, name="residual_cnn")
    folder = os.path.join(root, "synthetic", "residual_cnn")
    _save_case(folder, m, {"x": rng.randn(2, 3, 16, 16).astype(np.float32)})
    folders.append(folder)

    # Control flow: If branches with MatMuls reading outer values; a Loop whose body
    # multiplies a carried value.
    then_g = helper.make_graph([n("MatMul", ["h", "W"], ["t1"], name="then/mm"), n("Relu", ["t1"], ["t_out"], name="then/relu")],
                               "then", [], [helper.make_tensor_value_info("t_out", F, [4, 4])])
    else_g = helper.make_graph([n("Exp", ["h"], ["e_out"], name="else/exp")], "else", [],
                               [helper.make_tensor_value_info("e_out", F, [4, 4])])
    body = helper.make_graph([n("Identity", ["c_in"], ["c_out"], name="body/cond"),
                              n("MatMul", ["v_in", "W"], ["v_mm"], name="body/mm"), n("Tanh", ["v_mm"], ["v_out"], name="body/tanh")],
                             "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                      helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                                      helper.make_tensor_value_info("v_in", F, [4, 4])],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("v_out", F, [4, 4])])
    nodes = [n("MatMul", ["x", "W"], ["h"], name="outer"), n("ReduceSum", ["h"], ["hs"], name="sum", keepdims=0),
             n("Greater", ["hs", "zero"], ["c"], name="cond"),
             n("If", ["c"], ["yi"], name="if", then_branch=then_g, else_branch=else_g),
             n("Loop", ["trips", "", "x"], ["yl"], name="loop", body=body)]
    inits = [w("W", 4, 4), numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(3, np.int64), "trips")]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [4, 4])],
               [helper.make_tensor_value_info("yi", F, [4, 4]), helper.make_tensor_value_info("yl", F, [4, 4])], inits,
               opset=17, name="control_flow")
    folder = os.path.join(root, "synthetic", "control_flow")
    _save_case(folder, m, {"x": rng.randn(4, 4).astype(np.float32)})
    folders.append(folder)
    return folders


def _light_weights(m):
    """{weight name: shape} of a light model's ConstantOfShape(shape initializer) nodes."""
    shapes = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    return {n.output[0]: [int(d) for d in shapes[n.input[0]]] for n in m.graph.node
            if n.op_type == "ConstantOfShape" and n.input[0] in shapes}


def _real_weights(m, rng):
    """A light model's weights, which it makes by ConstantOfShape(shape initializer) with
    one value (0.02) everywhere, as initializers a trained network could have: random with
    variance 1 / fan-in for tensors of rank 2 and up (He's 2 / fan-in still grows
    ShuffleNet's residual sums past fp16's range: 3.5e6 by its end); 1 for vectors that
    scale or divide (BatchNormalization's scale and variance, the Mul of a normalisation
    written out, as DenseNet's is, seen through Unsqueeze and Reshape), 0 for the others
    (biases, means). With 0.02 everywhere the activations grow layer by layer past fp16's
    range (65504), and the fp16 comparison would only measure that."""
    weights = _light_weights(m)
    users = {}
    for n in m.graph.node:
        for k, v in enumerate(n.input):
            users.setdefault(v, []).append((n, k))

    def scales(v, depth=0):
        for n, k in users.get(v, []):
            if n.op_type in ("Unsqueeze", "Reshape", "Identity") and k == 0 and depth < 4:
                if any(scales(o, depth + 1) for o in n.output):
                    return True
            elif n.op_type in ("Mul", "Div", "Sqrt") or (n.op_type == "BatchNormalization" and k in (1, 4)):
                return True
        return False
    nodes = []
    for n in m.graph.node:
        shape = weights.get(n.output[0]) if n.op_type == "ConstantOfShape" else None
        if shape is None:
            nodes.append(n)
            continue
        if len(shape) >= 2:
            a = rng.standard_normal(shape) * np.sqrt(1.0 / max(1, int(np.prod(shape[1:]))))
        else:
            a = np.full(shape, 1.0 if scales(n.output[0]) else 0.0)
        m.graph.initializer.append(numpy_helper.from_array(a.astype(np.float32), n.output[0]))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    m.ir_version = max(m.ir_version, 4)  # initializers that are not graph inputs


def light_models(root):
    """onnx's own whole-network test models (onnx/backend/test/data/light, shipped with the
    onnx package: AlexNet, DenseNet-121, Inception v1 and v2, ResNet-50, ShuffleNet,
    SqueezeNet, VGG-19, ZFNet-512), their weights made real (_real_weights), each with a
    deterministic input; returns their folders (none without the package's data). Those
    whose weights would pass LIGHT_MAX_WEIGHT_BYTES are left out (AlexNet 244 MB, ZFNet
    350 MB, VGG-19 574 MB: minutes of writing and running for no rule the others miss;
    Inception v1 has AlexNet's LRN)."""
    src = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    rng = np.random.RandomState(11)
    folders = []
    for path in sorted(glob.glob(os.path.join(src, "light_*.onnx"))):
        m = onnx.load(path)
        if sum(4 * int(np.prod(shape)) for shape in _light_weights(m).values()) > LIGHT_MAX_WEIGHT_BYTES:
            continue
        _real_weights(m, rng)
        inits = {i.name for i in m.graph.initializer}
        feeds = {}
        for i in m.graph.input:
            if i.name in inits:
                continue
            t = i.type.tensor_type
            shape = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
            feeds[i.name] = rng.standard_normal(shape).astype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))
        folder = os.path.join(root, "light", os.path.basename(path)[len("light_"):-len(".onnx")])
        _save_case(folder, m, feeds)
        folders.append(folder)
    return folders


def check_opset_table():
    """ops.def's OPSETS column against onnx.defs: the first opset taking float16/bfloat16."""
    # A com.microsoft op whose column names an ai.onnx opset: onnxruntime runs it through a
    # function body of ai.onnx ops where it has no kernel, so the body's op decides.
    body_op = {("com.microsoft", "DropoutGrad"): "Where"}
    bad = []
    for r in read_op_rows():
        if r["opsets"] == ("ANY", "ANY"):
            continue
        dom, name = r["domain"], r["name"]
        if (dom, name) in body_op:
            dom, name = "", body_op[r["domain"], r["name"]]
        versions = sorted({s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == name and s.domain == dom})

        def first(t):
            for ver in versions:
                s = onnx.defs.get_schema(name, ver, dom)
                if any(t in c.allowed_type_strs for c in s.type_constraints):
                    return ver
            return 0
        want = (first("tensor(float16)"), first("tensor(bfloat16)"))
        have = tuple(0 if v == "NONE" else None if v == "ANY" else int(v) for v in r["opsets"])
        want = tuple(w if h is not None else None for w, h in zip(want, have))
        if want != have:
            bad.append(f"{name}: table {have[0]}/{have[1]}, onnx {want[0]}/{want[1]}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--filter", default="")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    args.testdata = os.path.abspath(args.testdata)
    folders = sorted(glob.glob(os.path.join(args.testdata, "*", "*", "model.onnx")))
    folders += sorted(glob.glob(os.path.join(ROOT, "models", "*", "model.onnx")))
    tmp = tempfile.mkdtemp(prefix="ampc_amp_corpus_")
    folders = [os.path.dirname(f) for f in folders] + synthetic_models(tmp) + light_models(tmp)
    folders = [f for f in folders if args.filter in f]
    passed = failed = 0
    try:
        bad = check_opset_table()
        if bad:
            failed += 1
            print("FAIL opset table: " + "; ".join(bad[:10]))
        else:
            passed += 1
        results = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
            futs = {ex.submit(check_one, args, f, tmp): f for f in folders}
            for fut in concurrent.futures.as_completed(futs):
                try:
                    results.append(fut.result())
                except Exception:
                    r = Result(os.path.basename(futs[fut]))
                    r.failures.append("crashed: " + traceback.format_exc().strip().splitlines()[-1])
                    results.append(r)
        results.sort(key=lambda r: r.name)
        skipped = [r for r in results if r.skipped]
        ran = [r for r in results if not r.skipped]
        for r in ran:
            if r.failures:
                failed += 1
                print(f"FAIL {r.name}: " + " | ".join(r.failures))
            else:
                passed += 1
            if args.verbose or r.worst is not None:
                w = "-" if r.worst is None else f"{r.worst:.2e}"
                wb = "-" if r.worst_bf16 is None else f"{r.worst_bf16:.2e}"
                print(f"  {r.name}: {r.nodes16}/{r.float_nodes} nodes 16-bit, {r.casts} casts, worst rel err fp16 {w}, "
                      f"bf16 {wb}{' (' + '; '.join(r.notes) + ')' if r.notes else ''}")
        compared = [r for r in ran if r.worst is not None]
        print(f"models: {len(results)} ({len(ran)} float models converted, {len(skipped)} skipped); "
              f"{sum(r.nodes16 for r in ran)} of {sum(r.float_nodes for r in ran)} float nodes in 16 bits, "
              f"{sum(r.casts for r in ran)} casts; outputs compared on {len(compared)}")
        if compared:
            top = sorted(compared, key=lambda r: -r.worst)[:5]
            print("worst fp16 relative errors: " + ", ".join(f"{r.name} {r.worst:.2e}" for r in top))
            topb = sorted([r for r in compared if r.worst_bf16 is not None], key=lambda r: -r.worst_bf16)[:5]
            print("worst bf16 relative errors: " + ", ".join(f"{r.name} {r.worst_bf16:.2e}" for r in topb))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
