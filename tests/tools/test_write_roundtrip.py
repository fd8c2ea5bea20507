#!/usr/bin/env python3
"""Every file ampc writes to be read back reads back, for every model ampc accepts (issue 43,
item 12), and so with names of any kind: a property test over the corpus (models/, the
models of tests/, and the ONNX conformance data), each model as it is and renamed so that
every value and node name starts with a space, quotes, non-ASCII letters, a backslash, a
carriage return, a newline and a tab. For each that `ampc verify` accepts:

- the renamed model is accepted, converted, run and calibrated exactly when the original
  is (the same exit status);
- the converted model (`ampc MODEL -o A`) saves again unchanged: `ampc A -o B --passes none`
  gives B == A byte for byte;
- checkpoints: `run --steps 2 --save-state C2` equals `run --steps 1 --save-state C1`
  then `run --load-state C1 --steps 1 --save-state C2'`, byte for byte, and so do the two
  runs' `--outputs` files, whose tensors are named as the graph's outputs;
- `ampc export`'s model saves again unchanged, and export reads run's checkpoint;
- AMP_AUTO's logs (AMP_LOG_PATH: before.onnx, after.onnx) verify, and save again unchanged;
- the calibration file: `ampc calibrate -o S` names only values of the model (its names
  read back by this file's reader of the format, docs/calibration.md; a Gradient node's
  expansion adds values the file does not hold) and nodes of it, and
  `ampc MODEL --calibration S` reads it.

Any exit status ampc never gives (a crash, a signal, a sanitizer's report: ampc exits 0 to
4) fails the test, so it is worth running with a sanitized ampc. Models with a
test_data_set_0 run on it (its tensors renamed with the inputs); the others on
ampc's random inputs. The original calibration format could not hold a name with a newline
(it wrote a line that did not read back).

usage: test_write_roundtrip.py --ampc PATH --testdata DIR [--jobs N] [--filter S] [--verbose]"""
import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import onnx
    from onnx import external_data_helper  # noqa: F401 (onnx.load reads external data with it)
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# Put in front of every name: conventions between names (the gradient of `loss` is
# `loss_grad`) hold for the renamed model too.
HOSTILE = " \"q\" 'é€' \\ #x\r\n\t|"


def hostile(name):
    return HOSTILE + name if name else name


def rename_graph(g):
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        vi.name = hostile(vi.name)
    for t in g.initializer:
        t.name = hostile(t.name)
    for sp in g.sparse_initializer:
        sp.values.name = hostile(sp.values.name)
    for qa in g.quantization_annotation:
        qa.tensor_name = hostile(qa.tensor_name)
        for e in qa.quant_parameter_tensor_names:
            e.value = hostile(e.value)
    for n in g.node:
        n.name = hostile(n.name)
        n.input[:] = [hostile(x) for x in n.input]
        n.output[:] = [hostile(x) for x in n.output]
        for a in n.attribute:
            if a.HasField("g"):
                rename_graph(a.g)
            for sg in a.graphs:
                rename_graph(sg)
            # Gradient's xs, zs and y name values of the graph.
            if n.op_type == "Gradient" and a.name in ("xs", "zs", "y"):
                if a.type == onnx.AttributeProto.STRING:
                    a.s = hostile(a.s.decode()).encode()
                a.strings[:] = [hostile(s.decode()).encode() for s in a.strings]


def rename_model(m):
    rename_graph(m.graph)
    for ti in m.training_info:
        rename_graph(ti.initialization)
        rename_graph(ti.algorithm)
        for b in list(ti.initialization_binding) + list(ti.update_binding):
            b.key, b.value = hostile(b.key), hostile(b.value)
    return m


def value_names(g):
    names = {vi.name for vi in list(g.input) + list(g.output) + list(g.value_info)}
    names |= {t.name for t in g.initializer} | {sp.values.name for sp in g.sparse_initializer}
    for n in g.node:
        names |= set(n.output)
    return names


def read_calibration(path):
    """(value names, reduce node names) of an ampc calibration file (docs/calibration.md)."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    head = lines[0].decode()
    assert head in ("ampc-calibration 1", "ampc-calibration 2"), f"calibration file header {head!r}"
    escaped = head.endswith("2")

    def name(raw):
        s = raw.decode("utf-8", "surrogateescape")
        if not escaped:
            return s
        out, i = [], 0
        while i < len(s):
            if s[i] != "\\":
                out.append(s[i])
                i += 1
                continue
            c = s[i + 1]
            if c == "x":
                out.append(chr(int(s[i + 2:i + 4], 16)))
                i += 4
                continue
            out.append({"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}[c])
            i += 2
        return "".join(out)
    values, nodes = [], []
    for ln in lines[1:]:
        ln = ln.rstrip(b"\r")
        if ln.startswith(b"value ") or ln.startswith(b"grad "):
            values.append(name(ln.split(b" ", 6)[6]))
        elif ln.startswith(b"reduce "):
            nodes.append(name(ln.split(b" ", 2)[2]))
    return values, nodes


class Runner:
    """ampc, run; an exit status ampc never gives (it exits 0 to 4: a crash, a signal, a
    sanitizer's report) is kept in `crashes`, whatever the case expected."""
    def __init__(self, ampc, verbose):
        self.ampc, self.verbose, self.crashes = ampc, verbose, []

    def __call__(self, *args, env=None):
        r = subprocess.run([self.ampc, *args], capture_output=True, timeout=300,
                           env=dict(os.environ, **env) if env else None)
        if self.verbose:
            print(f"$ ampc {' '.join(args)!r} -> {r.returncode}\n{r.stderr.decode(errors='replace')}")
        if not 0 <= r.returncode <= 4:
            self.crashes.append(f"ampc {' '.join(map(repr, args))}: exit {r.returncode}: "
                                f"{r.stderr.decode(errors='replace')[-400:]}")
        return r


def same_bytes(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def resaves_unchanged(ampc, model, copy, what):
    """A problem (a string) unless the model file ampc wrote at `model` verifies, and loads
    and saves (--passes none, into `copy`) to the same bytes; None when it does."""
    r = ampc(model, "-o", copy, "--passes", "none", "--no-verify", "-q")
    if r.returncode or ampc("verify", model).returncode:
        return f"{what} does not load: exit {r.returncode}: {r.stderr.decode()[-300:]}"
    if not same_bytes(model, copy):
        return f"{what} saves differently when loaded and saved again"
    return None


def variant(ampc, m, folder, inputs):
    """Runs every writer on model proto m saved in folder; returns (exit statuses, problems)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(m, path)
    data = []
    if inputs:
        data = ["--inputs", inputs]
    codes, bad = {}, []
    out = lambda name: os.path.join(folder, name)  # noqa: E731
    codes["verify"] = ampc("verify", path).returncode
    if codes["verify"]:
        return codes, bad
    # The converted model saves again unchanged.
    codes["convert"] = ampc(path, "-o", out("a.onnx"), "-q").returncode
    if codes["convert"] == 0:
        bad.append(resaves_unchanged(ampc, out("a.onnx"), out("b.onnx"), "the converted model"))
    # Checkpoints and --outputs: two steps in one run, or one, a checkpoint, and one more.
    r = ampc("run", path, *data, "--steps", "2", "--save-state", out("c2"), "--outputs", out("o2"))
    codes["run"] = r.returncode
    if codes["run"] == 0:
        r1 = ampc("run", path, *data, "--steps", "1", "--save-state", out("c1"))
        r2 = ampc("run", path, *data, "--load-state", out("c1"), "--steps", "1", "--save-state", out("c2b"),
                  "--outputs", out("o2b"))
        if r1.returncode or r2.returncode:
            bad.append(f"a checkpoint does not load back: exit {r1.returncode}, {r2.returncode}: "
                       f"{(r1.stderr + r2.stderr).decode()[-300:]}")
        else:
            if not same_bytes(out("c2"), out("c2b")):
                bad.append("two steps differ from one, a checkpoint and one more (the checkpoints differ)")
            outs = sorted(os.listdir(out("o2")))
            if outs != sorted(os.listdir(out("o2b"))) or \
                    any(not same_bytes(os.path.join(out("o2"), f), os.path.join(out("o2b"), f)) for f in outs):
                bad.append("the --outputs files differ after a checkpoint was loaded")
            # The main graph's outputs in order, then (training) the algorithms' outputs.
            main = [o.name for o in m.graph.output]
            others = {o.name for ti in m.training_info for o in ti.algorithm.output}
            for f in outs:
                k = int(re.match(r"output_(\d+)\.pb$", f).group(1))
                t = onnx.TensorProto()
                with open(os.path.join(out("o2"), f), "rb") as fh:
                    t.ParseFromString(fh.read())
                if t.name != (main[k] if k < len(main) else t.name) or (k >= len(main) and t.name not in others):
                    bad.append(f"{f} is named {t.name!r}: no output of the model in that place")
    # The inference model `ampc export` writes, and the checkpoint it may read.
    codes["export"] = ampc("export", path, "-o", out("e.onnx")).returncode
    if codes["export"] == 0:
        bad.append(resaves_unchanged(ampc, out("e.onnx"), out("e2.onnx"), "ampc export's model"))
    if codes["export"] == 0 and codes["run"] == 0:
        r = ampc("export", path, "--load-state", out("c2"), "-o", out("e3.onnx"))
        if r.returncode:
            bad.append(f"ampc export does not read run's checkpoint: exit {r.returncode}: {r.stderr.decode()[-300:]}")
    # AMP_AUTO's logs of the model before and after its rewrite (AMP_LOG_PATH).
    logs = out("logs")
    r = ampc("run", path, *data, "--steps", "1", env={"AMP_AUTO": "1", "AMP_LOG_PATH": logs})
    codes["auto"] = r.returncode
    for f in ("before.onnx", "after.onnx") if r.returncode == 0 else ():
        bad.append(resaves_unchanged(ampc, os.path.join(logs, f), out("resaved_" + f), f"AMP_LOG_PATH's {f}"))
    # The calibration file.
    codes["calibrate"] = ampc("calibrate", path, *data, "-o", out("s.stats")).returncode
    if codes["calibrate"] == 0:
        values, nodes = read_calibration(out("s.stats"))
        known = value_names(m.graph)
        # (Gradient nodes are expanded into values the file does not hold.)
        expanded = any(n.op_type == "Gradient" for n in m.graph.node)
        strangers = [v for v in values if v not in known and not expanded]
        if strangers:
            bad.append(f"the calibration file names values the model lacks: {strangers[:3]!r}")
        node_names = {n.name for n in m.graph.node}
        strangers = [n for n in nodes if n not in node_names and not n.startswith("(unnamed ") and not expanded]
        if strangers:
            bad.append(f"the calibration file names nodes the model lacks: {strangers[:3]!r}")
        r = ampc(path, "--calibration", out("s.stats"), "-o", out("x.onnx"), "-q")
        if r.returncode:
            bad.append(f"--calibration does not read ampc calibrate's file: exit {r.returncode}: "
                       f"{r.stderr.decode()[-300:]}")
    return codes, [b for b in bad if b]


def hostile_inputs(src, dst, m):
    """test_data_set_0 of the renamed model: its input tensors renamed too."""
    os.makedirs(dst, exist_ok=True)
    names = {i.name for i in m.graph.input}
    for f in sorted(os.listdir(src)):
        if not f.startswith("input_"):
            continue
        t = onnx.TensorProto()
        with open(os.path.join(src, f), "rb") as fh:
            t.ParseFromString(fh.read())
        if t.name in names:
            t.name = hostile(t.name)
        with open(os.path.join(dst, f), "wb") as fh:
            fh.write(t.SerializeToString())
    return dst


def check_model(ampc, path, tmp, index):
    """Problems (strings) of one corpus model; [] when it passes or is not accepted."""
    work = os.path.join(tmp, str(index))
    try:
        m = onnx.load(path)
    except Exception:  # not a model onnx reads (a fuzzer's seed): nothing to check
        return [], False
    inputs = os.path.join(os.path.dirname(path), "test_data_set_0")
    inputs = inputs if os.path.isdir(inputs) else None
    try:
        plain, bad = variant(ampc, m, os.path.join(work, "plain"), inputs)
        if plain["verify"]:
            return [], False
        h_in = hostile_inputs(inputs, os.path.join(work, "h_in"), m) if inputs else None
        renamed, h_bad = variant(ampc, rename_model(m), os.path.join(work, "hostile"), h_in)
        bad += [f"renamed: {b}" for b in h_bad]
        if renamed != plain:
            bad.append(f"renamed, the exit statuses change: {plain} -> {renamed}")
        return bad, True
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", required=True)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--filter", default="")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    models = sorted(glob.glob(os.path.join(ROOT, "models", "*", "model.onnx")))
    models += sorted(glob.glob(os.path.join(ROOT, "tests", "**", "*.onnx"), recursive=True))
    models += sorted(glob.glob(os.path.join(a.testdata, "*", "*", "model.onnx")))
    models = [p for p in models if a.filter in p]
    if not models:
        print("skip: no models")
        return 77
    tmp = tempfile.mkdtemp(prefix="ampc_write_roundtrip_")
    ampc = Runner(os.path.abspath(a.ampc), a.verbose)
    failed, accepted = [], 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = {pool.submit(check_model, ampc, p, tmp, i): p for i, p in enumerate(models)}
        for fut in concurrent.futures.as_completed(futures):
            bad, ok = fut.result()
            accepted += ok
            if bad:
                failed.append((futures[fut], bad))
    shutil.rmtree(tmp, ignore_errors=True)
    for c in ampc.crashes:
        print(f"FAIL {c}")
    for p, bad in sorted(failed):
        print(f"FAIL {os.path.relpath(p, ROOT) if p.startswith(ROOT) else p}:")
        for b in bad:
            print(f"    {b}")
    print(f"{len(models)} corpus models, {accepted} accepted by ampc verify, each checked as it is and renamed")
    print(f"{accepted - len(failed)} passed, {len(failed) + len(ampc.crashes)} failed")
    return 1 if failed or ampc.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
