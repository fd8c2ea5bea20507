#!/usr/bin/env python3
"""The Python package ampc (python/ampc, ctypes over the build's libampc.so): convert equals
`ampc MODEL -o OUT` byte for byte on every bundled model, convert_file too; refused options
carry the options table's messages (the flags' own); a broken model raises ampc.InputError;
Session.run equals `ampc run --outputs`; train_step, save_state / load_state, stats, inputs
and outputs. Skipped (exit 77) where numpy or onnx is missing."""
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ampc_testlib as tl  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MODELS = os.path.join(ROOT, "models")


class Ctx:
    def __init__(self, args):
        self.bin = os.path.abspath(args.ampc)
        self.verbose = args.verbose
        self.tmp = tl.tempdir("ampc_py.")
        self.notes = []

    def cli(self, *a):
        return tl.ampc(self.bin, *a, verbose=self.verbose)


def model(name):
    return os.path.join(MODELS, name, "model.onnx")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def test_version_and_options(c):
    r = c.cli("--version")
    assert r.stdout.strip() == f"ampc {ampc.__version__}", (r.stdout, ampc.__version__)
    names = ampc.convert_options()
    for k in ("precision", "loss_scale", "allowlist_add", "denylist_remove", "keep_fp32", "keep_io_types", "loss",
              "calibration", "growth_interval", "level", "opset_upgrade"):
        assert k in names, k
    assert names["keep_io_types"] is False and names["precision"] is True
    # the session's own settings are not conversion options
    assert "backend" not in names and "amp_auto" not in names and "threads" not in names


def test_convert_equals_cli(c):
    """Every bundled model, default options and a few of the keywords: the same bytes."""
    cases = [({}, []), ({"precision": "fp16"}, ["--precision", "fp16"]),
             ({"precision": "bf16", "keep_io_types": False}, ["--precision", "bf16", "--no-keep-io-types"]),
             ({"precision": "fp16", "denylist_add": "MatMul", "level": "treat-infer-as-deny"},
              ["--precision", "fp16", "--deny", "MatMul", "--level", "treat-infer-as-deny"])]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMP_")}
    saved = os.environ.copy()
    os.environ.clear()
    os.environ.update(env)  # the command reads AMP_* variables; the library none
    try:
        n = 0
        for path in sorted(glob.glob(os.path.join(MODELS, "*", "model.onnx"))):
            for kw, flags in cases if "cnn" in path or "mlp_train" in path else cases[:2]:
                out = os.path.join(c.tmp, "cli.onnx")
                r = c.cli(path, "-o", out, "-q", *flags)
                assert r.returncode == 0, r.stderr
                data, report = ampc.convert_bytes(path, **kw)
                assert data == read(out), f"{path} {kw}: convert_bytes differs from ampc -o"
                proto = ampc.convert(read(path), **kw)
                assert proto.SerializeToString() == data, f"{path} {kw}: convert (bytes in) differs"
                dst = os.path.join(c.tmp, "lib.onnx")
                rep = ampc.convert_file(path, dst, **kw)
                assert read(dst) == data, f"{path} {kw}: convert_file differs"
                assert rep.nodes > 0 and rep.nodes_before > 0 and rep.passes, rep
                n += 1
        c.notes.append(f"{n} conversions byte for byte equal to ampc -o")
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_convert_run_and_write_options(c):
    """passes, no_value_info and external_data, the command's --passes, --no-value-info and
    --external-data through the same table rows: the same bytes (external data too)."""
    src = model("cnn_infer")
    for kw, flags in (({"passes": "none"}, ["--passes", "none"]),
                      ({"passes": "infer,amp", "precision": "fp16"}, ["--passes", "infer,amp", "--precision", "fp16"]),
                      ({"no_value_info": True, "precision": "bf16"}, ["--no-value-info", "--precision", "bf16"])):
        out = os.path.join(c.tmp, "cli_opts.onnx")
        r = c.cli(src, "-o", out, "-q", *flags)
        assert r.returncode == 0, r.stderr
        data, report = ampc.convert_bytes(src, **kw)
        assert data == read(out), f"{kw}: differs from ampc -o {flags}"
        assert report.passes == kw["passes"].split(",") if "passes" in kw else True, report
    for d in ("cli_ext", "lib_ext"):
        os.makedirs(os.path.join(c.tmp, d), exist_ok=True)
    r = c.cli(src, "-o", os.path.join(c.tmp, "cli_ext", "m.onnx"), "-q", "--external-data", "always")
    assert r.returncode == 0, r.stderr
    ampc.convert_file(src, os.path.join(c.tmp, "lib_ext", "m.onnx"), external_data="always")
    for f in ("m.onnx", "m.onnx.data"):
        assert read(os.path.join(c.tmp, "cli_ext", f)) == read(os.path.join(c.tmp, "lib_ext", f)), f
    for kw, want in (({"passes": "no_such_pass"}, "passes: "), ({"external_data": "sometimes"},
                                                                 "external_data='sometimes': expected auto, always")):
        try:
            ampc.convert_bytes(src, **kw)
            raise AssertionError(f"{kw} was taken")
        except ampc.UsageError as e:
            assert str(e).startswith(want), str(e)
    r = c.cli(src, "-o", os.path.join(c.tmp, "x.onnx"), "--passes", "no_such_pass")
    try:
        ampc.convert_bytes(src, passes="no_such_pass")
    except ampc.UsageError as e:  # the command's message, named as the keyword
        assert r.stderr.strip().removeprefix("ampc: --").startswith(str(e)), (str(e), r.stderr)


def test_convert_report_and_model_proto(c):
    proto = onnx.load(model("cnn_infer"))
    m, report = ampc.convert(proto, precision="fp16", return_report=True)
    assert isinstance(m, onnx.ModelProto)
    assert re.match(r"\d+ nodes \(\d+ before\), passes: ", report), report
    assert "amp: float16:" in report, report
    onnx.checker.check_model(m)
    # the same ModelProto converted twice: the same bytes (options serve again)
    assert ampc.convert(proto, precision="fp16").SerializeToString() == m.SerializeToString()


def test_refused_options(c):
    """Each refusal as the flag's: the same 'expected ...' of the table, named as the keyword."""
    cases = [("precision", "fp8", "--precision"), ("loss_scale", "foo", "--loss-scale"),
             ("opset_upgrade", "23", "--opset-upgrade"), ("growth_interval", "0", "--growth-interval"),
             ("backoff_factor", "2", "--backoff-factor"), ("level", "fast", "--level"),
             ("allowlist_add", "NoSuchOp", "--allow"), ("loss_scale_state", "x", "--loss-scale-state")]
    for kw, bad, flag in cases:
        try:
            ampc.convert_bytes(model("cnn_infer"), **{kw: bad})
            raise AssertionError(f"{kw}={bad!r} was taken")
        except ampc.UsageError as e:
            r = c.cli(model("cnn_infer"), "-o", os.path.join(c.tmp, "x.onnx"), flag, bad)
            assert r.returncode == 2, r.stderr
            cli = r.stderr.strip().removeprefix("ampc: ").replace(" (run 'ampc --help' for usage)", "")
            want = cli.replace(f"{flag} '{bad}'", f"{kw}='{bad}'").replace(f"{flag}:", f"{kw}:")
            assert str(e) == want, (str(e), r.stderr)
            assert e.code == 2
    try:
        ampc.convert_bytes(model("cnn_infer"), no_such_option="1")
        raise AssertionError("an unknown keyword was taken")
    except ampc.UsageError as e:
        assert "no conversion option 'no_such_option'" in str(e) and "loss_scale" in str(e), str(e)
    # the whole's checks, as the command's
    try:
        ampc.convert_bytes(model("cnn_infer"), precision="bf16", growth_interval=10)
        raise AssertionError("dynamic-scaling settings without dynamic scaling were taken")
    except ampc.UsageError as e:
        assert "dynamic" in str(e), str(e)


def test_broken_model(c):
    for data in (b"this is no model", read(model("cnn_infer"))[:200]):
        try:
            ampc.convert_bytes(data)
            raise AssertionError("a broken model converted")
        except ampc.InputError as e:
            assert e.code == 1 and str(e), str(e)
        try:
            ampc.Session(data, backend="cpu")
            raise AssertionError("a broken model opened")
        except ampc.InputError:
            pass
    try:
        ampc.convert_file(os.path.join(c.tmp, "nonexistent.onnx"), os.path.join(c.tmp, "o.onnx"))
        raise AssertionError("a missing file converted")
    except ampc.Error as e:
        assert "nonexistent.onnx" in str(e), str(e)
    try:
        ampc.Session(model("cnn_infer"), backend="tpu")
        raise AssertionError("backend tpu was taken")
    except ampc.UsageError:
        pass


def feed_of(name):
    """The bundled inputs of models/NAME/test_data_set_0, by the model's input names."""
    m = onnx.load(model(name))
    names = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    feed = {}
    for k, f in enumerate(sorted(glob.glob(os.path.join(MODELS, name, "test_data_set_0", "input_*.pb")))):
        t = onnx.TensorProto()
        t.ParseFromString(read(f))
        feed[t.name or names[k]] = numpy_helper.to_array(t)
    return feed


def cli_outputs(c, name, *extra):
    out = os.path.join(c.tmp, f"out_{name}")
    r = c.cli("run", model(name), "--backend", "cpu", "--inputs", os.path.join(MODELS, name, "test_data_set_0"),
              "--outputs", out, *extra)
    assert r.returncode == 0, r.stderr
    got = {}
    for f in os.listdir(out):
        t = onnx.TensorProto()
        t.ParseFromString(read(os.path.join(out, f)))
        got[t.name] = numpy_helper.to_array(t)
    return got


def test_run_equals_cli(c):
    for name in ("cnn_infer", "mlp_cls"):
        want = cli_outputs(c, name)
        with ampc.Session(model(name), backend="cpu") as s:
            got = s.run(feed_of(name))
        assert set(got) == set(want), (list(got), list(want))
        for k in want:
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
            assert got[k].tobytes() == want[k].tobytes(), f"{name}: output {k} differs from ampc run --outputs"


def test_io_info_and_16_bit_outputs(c):
    s = ampc.Session(model("cnn_infer"), backend="cpu")
    (x,), (y,) = s.inputs, s.outputs
    assert x.name == "x" and x.dtype == "float32" and x.shape == ("batch", 1, 16, 16), x
    assert y.dtype == "float32" and y.shape[1] == 10, y
    feed = feed_of("cnn_infer")
    ref = s.run(feed)["logits"]
    s.close()
    for precision, dtype in (("fp16", np.float16), ("bf16", np.float32)):
        m = ampc.convert(model("cnn_infer"), precision=precision, keep_io_types=False)
        with ampc.Session(m, backend="cpu") as s16:
            assert s16.outputs[0].dtype == {"fp16": "float16", "bf16": "bfloat16"}[precision]
            out = s16.run(feed)["logits"]  # the input: float32 values, narrowed to the declared type
        assert out.dtype == dtype, (precision, out.dtype)
        err = np.abs(out.astype(np.float32) - ref).max() / np.abs(ref).max()
        assert err < 0.05, (precision, err)
    # amp=True: the model rewritten as it opens (AMP_AUTO), float32 at its edges
    with ampc.Session(model("cnn_infer"), backend="cpu", amp=True, precision="bf16") as sa:
        out = sa.run(feed)["logits"]
        assert sa.stats["amp_applied"] and sa.stats["amp_precision"] == "bf16", sa.stats
    assert out.dtype == np.float32 and np.abs(out - ref).max() / np.abs(ref).max() < 0.05


def test_train_step_state_stats(c):
    name = "mlp_train"
    feed = feed_of(name)
    s = ampc.Session(model(name), backend="cpu")
    assert s.has_training_info
    assert [i.name for i in s.train_inputs][:2] == ["x", "labels"], s.train_inputs
    loss, first = s.train_step(feed, return_outputs=True)
    assert "loss" in first and np.isfinite(first["loss"]).all(), first
    assert loss == float(first["loss"]) and s.stats["loss"] == loss and s.stats["loss_name"] == "loss", s.stats
    ckpt = os.path.join(c.tmp, "state.onnx")
    s.save_state(ckpt)
    _, second = s.train_step(feed, return_outputs=True)
    assert s.stats["steps"] == 2, s.stats
    s.load_state(ckpt)
    assert s.stats["steps"] == 1, s.stats
    _, again = s.train_step(feed, return_outputs=True)
    for k in second:
        assert again[k].tobytes() == second[k].tobytes(), f"{k}: the step after load_state differs"
    st = s.stats
    assert st["backend"] == "cpu" and st["state_bytes"] > 0 and st["fallback_ops"] == "", st
    s.close()
    # 2 steps through the command: its outputs are the session's after the same 2 steps
    want = cli_outputs(c, name, "--steps", "2")
    for k in want:
        assert k in second and second[k].tobytes() == want[k].tobytes(), f"{k} differs from ampc run --steps 2"
    try:
        s.run(feed)
        raise AssertionError("a closed session ran")
    except ampc.UsageError:
        pass


def test_grad_equals_cli(c):
    """ampc.grad, grad_bytes and grad_file make `ampc grad`'s bytes, and say its summary."""
    cases = [({}, []), ({"optimizer": "adam", "lr": 0.01, "weight_decay": 0.1},
                        ["--optimizer", "adam", "--lr", "0.01", "--weight-decay", "0.1"]),
             ({"optimizer": "momentum", "momentum": 0.8, "freeze": ["0.*", "2.bias"], "train_mode": True},
              ["--optimizer", "momentum", "--momentum", "0.8", "--freeze", "0.*", "--freeze", "2.bias",
               "--train-mode"]),
             ({"loss": "mse", "labels": "y_ref", "class_axis": -1}, ["--loss", "mse", "--labels", "y_ref",
                                                                     "--class-axis", "-1"])]
    n = 0
    for name in ("mlp_cls", "cnn_infer"):
        for kw, flags in cases:
            out = os.path.join(c.tmp, "grad_cli.onnx")
            r = c.cli("grad", model(name), "-o", out, *flags)
            assert r.returncode == 0, r.stderr
            data, summary = ampc.grad_bytes(model(name), **kw)
            assert data == read(out), f"{name} {kw}: grad_bytes differs from ampc grad"
            assert r.stdout.strip() == f"grad: {summary} -> {out}", (r.stdout, summary)
            proto = ampc.grad(read(model(name)), **kw)
            assert proto.SerializeToString() == data, f"{name} {kw}: grad (bytes in) differs"
            dst = os.path.join(c.tmp, "grad_lib.onnx")
            assert ampc.grad_file(model(name), dst, **kw) == summary
            assert read(dst) == data, f"{name} {kw}: grad_file differs"
            n += 1
    c.notes.append(f"{n} training models byte for byte equal to ampc grad")
    names = ampc.grad_options()
    assert names["train_mode"] is False and names["lr"] is True and "freeze" in names, names


def test_grad_refusals(c):
    """The grad table's refusals, as the flags' (named as the keyword), and the whole's checks."""
    cases = [("lr", "x", "--lr"), ("lr", "2e6", "--lr"), ("momentum", "1", "--momentum"), ("beta1", "0", "--beta1"),
             ("eps", "-1", "--eps"), ("weight_decay", "-1", "--weight-decay"), ("class_axis", "2", "--class-axis"),
             ("optimizer", "rmsprop", "--optimizer")]
    for kw, bad, flag in cases:
        try:
            ampc.grad_bytes(model("mlp_cls"), **{kw: bad})
            raise AssertionError(f"{kw}={bad!r} was taken")
        except ampc.UsageError as e:
            r = c.cli("grad", model("mlp_cls"), "-o", os.path.join(c.tmp, "x.onnx"), flag, bad)
            assert r.returncode == 2, r.stderr
            cli = r.stderr.strip().removeprefix("ampc: ").replace(" (run 'ampc grad --help' for usage)", "")
            assert str(e) == cli.replace(f"{flag} '{bad}'", f"{kw}='{bad}'"), (str(e), r.stderr)
    for kw, words in (({"momentum": 0.5}, 'momentum is for optimizer="momentum"'),
                      ({"optimizer": "sgd", "beta2": 0.9}, 'beta1, beta2 and eps are for optimizer="adam"'),
                      ({"no_such": 1}, "no grad option 'no_such'")):
        try:
            ampc.grad_bytes(model("mlp_cls"), **kw)
            raise AssertionError(f"{kw} was taken")
        except ampc.UsageError as e:
            assert words in str(e), str(e)
    try:
        ampc.grad_bytes(model("mlp_cls"), loss="no_such_output")
        raise AssertionError("a loss naming no output was taken")
    except ampc.Error as e:
        r = c.cli("grad", model("mlp_cls"), "-o", os.path.join(c.tmp, "x.onnx"), "--loss", "no_such_output")
        assert r.returncode == e.code and r.stderr.strip().endswith(str(e)), (str(e), r.stderr)
    try:
        ampc.grad_bytes(b"no model")
        raise AssertionError("a broken model was differentiated")
    except ampc.InputError:
        pass


def test_grad_then_train_step(c):
    """docs/python.md's training workflow: ampc.grad, then Session.train_step with amp."""
    train = ampc.grad(model("mlp_cls"), loss="cross-entropy", optimizer="adam")
    feed = feed_of("mlp_cls")
    x = feed["x"]
    with ampc.Session(train, backend="cpu", amp=True, precision="bf16") as s:
        names = [i.name for i in s.train_inputs]
        assert "labels" in names, names
        labels = np.arange(x.shape[0], dtype=np.int64) % 4
        losses = [s.train_step({"x": x, "labels": labels}) for _ in range(5)]
        assert all(isinstance(v, float) for v in losses), losses
        assert s.stats["steps"] == 5 and s.stats["amp_applied"], s.stats
    assert all(np.isfinite(losses)) and losses[-1] < losses[0], losses


STEP_RE = re.compile(r"^step (\d+): loss (\S+) \([^)]*\)(?:, loss scale (\S+))?( \(inf/NaN gradients: update "
                     r"skipped\))?$", re.M)


def write_inputs(folder, feed):
    """feed as the TensorProto files input_K.pb `ampc run --inputs` reads."""
    os.makedirs(folder, exist_ok=True)
    for k, (name, a) in enumerate(feed.items()):
        with open(os.path.join(folder, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, name).SerializeToString())
    return folder


def cli_steps(c, path, data, steps, *extra):
    """`ampc run TRAIN --steps N`'s step lines: (loss, loss scale or None, skipped) each."""
    r = c.cli("run", path, "--backend", "cpu", "--steps", str(steps), "--inputs", data, *extra)
    assert r.returncode == 0, r.stderr
    lines = STEP_RE.findall(r.stdout)
    assert len(lines) == steps, r.stdout
    return [(loss, scale or None, bool(sk)) for _, loss, scale, sk in lines]


def test_train_step_loss_equals_cli(c):
    """Session.train_step's float is the loss `ampc run TRAIN` prints, step by step, for every
    training form: ampc grad's model, a TrainingInfoProto one (mlp_train), gradients as outputs
    (mlp_grads: nothing applied), onnxruntime-training's imported set (ort_mlp)."""
    x = feed_of("mlp_cls")["x"]
    grad_feed = {"x": x, "labels": (np.arange(x.shape[0]) % 4).astype(np.int64)}
    ort = os.path.join(MODELS, "ort_mlp")
    forms = [("ampc.grad", ampc.grad(model("mlp_cls"), optimizer="adam"), grad_feed, {}, []),
             ("mlp_train", model("mlp_train"), feed_of("mlp_train"), {}, []),
             ("mlp_grads", model("mlp_grads"), feed_of("mlp_grads"), {}, []),
             ("ort_mlp", os.path.join(ort, "training_model.onnx"), None,
              {"ort_optimizer": os.path.join(ort, "optimizer_model.onnx"),
               "ort_checkpoint": os.path.join(ort, "checkpoint")},
              ["--optimizer", os.path.join(ort, "optimizer_model.onnx"), "--checkpoint", os.path.join(ort, "checkpoint")])]
    for tag, m, feed, kw, flags in forms:
        path = m if isinstance(m, str) else os.path.join(c.tmp, f"{tag}.onnx")
        if not isinstance(m, str):
            with open(path, "wb") as f:
                f.write(m.SerializeToString())
        data = os.path.join(ort, "test_data_set_0") if feed is None else write_inputs(os.path.join(c.tmp, tag), feed)
        want = cli_steps(c, path, data, 3, *flags)
        with ampc.Session(path, backend="cpu", **kw) as s:
            if feed is None:  # the bundled inputs, by the training inputs' order
                names = [i.name for i in s.train_inputs if not i.optional]
                feed = {}
                for k, f in enumerate(sorted(glob.glob(os.path.join(data, "input_*.pb")))):
                    t = onnx.TensorProto()
                    t.ParseFromString(read(f))
                    feed[t.name or names[k]] = numpy_helper.to_array(t)
            got = [s.train_step(feed) for _ in range(3)]
            assert s.stats["steps"] == 3 and s.stats["loss"] == got[-1], s.stats
        assert [f"{v:.9g}" for v in got] == [w[0] for w in want], (tag, got, want)
    c.notes.append(f"train_step's loss equals ampc run's for {len(forms)} training forms")
    with ampc.Session(model("cnn_infer"), backend="cpu") as s:
        try:
            s.train_step(feed_of("cnn_infer"))
            raise AssertionError("a model without a loss trained")
        except ampc.UsageError as e:
            assert "loss" in str(e), str(e)
    try:
        ampc.Session(model("mlp_train"), backend="cpu", loss="no_such")
        raise AssertionError("loss naming no output was taken")
    except ampc.UsageError as e:
        assert 'loss="no_such": the model has no output of that name' in str(e), str(e)


def test_stats_loss_scaling(c):
    """stats: a loss-scaled model whose first steps overflow (an initial scale of 2^24, as
    tests/passes/test_loss_scale.py forces it): skipped_steps, loss_scale and loss follow what
    `ampc run` prints; step and run times, peak memory, fallback nodes."""
    conv = os.path.join(c.tmp, "backoff.onnx")
    ampc.convert_file(model("mlp_train"), conv, precision="fp16", loss_scale_init=16777216, growth_interval=3)
    data = os.path.join(MODELS, "mlp_train", "test_data_set_0")
    want = cli_steps(c, conv, data, 8)
    feed = feed_of("mlp_train")
    with ampc.Session(conv, backend="cpu") as s:
        st = s.stats
        assert st["loss_scale"] == 16777216 and st["skipped_steps"] == 0 and np.isnan(st["loss"]), st
        assert st["step_ms_last"] == 0 and st["step_ms_mean"] == 0, st
        skipped = 0
        for loss, scale, sk in want:
            got = s.train_step(feed)
            skipped += sk
            st = s.stats
            assert f"{got:.9g}" == loss and f"{st['loss_scale']:.9g}" == scale, (got, st, loss, scale)
            assert st["skipped_steps"] == skipped, (st, want)
        assert 0 < skipped < len(want), want  # some skipped, then training went on
        assert st["step_ms_last"] > 0 and st["step_ms_mean"] > 0, st
        assert st["peak_bytes"] == st["intermediate_bytes"] + st["state_bytes"] > 0, st
        ckpt = os.path.join(c.tmp, "backoff_state.onnx")
        s.save_state(ckpt)
        s.load_state(ckpt)  # the scale is state: read back as it was
        assert f"{s.stats['loss_scale']:.9g}" == want[-1][1], s.stats
    # without loss scaling: NaN; inference runs are timed apart; fallback nodes counted
    os.environ["AMP_SIM_LACKS"] = "Relu"  # the simulator's test hook: Relu runs on the CPU fallback
    try:
        with ampc.Session(model("cnn_infer"), backend="sim", ignore_env=False) as s:
            s.run(feed_of("cnn_infer"))
            st = s.stats
    finally:
        del os.environ["AMP_SIM_LACKS"]
    assert np.isnan(st["loss_scale"]) and st["loss_name"] == "" and st["run_ms_last"] > 0, st
    assert st["step_ms_mean"] == 0 and st["skipped_steps"] == 0, st
    assert st["fallback_nodes"] > 0 and "Relu" in st["fallback_ops"], st


def test_session_refusals(c):
    try:
        ampc.Session(model("cnn_infer"), backend="cpu", amp=True, loss_scale="foo")
        raise AssertionError("loss_scale foo was taken")
    except ampc.UsageError as e:
        # named as the keyword it came by, with the table's expectation
        assert "loss_scale='foo'" in str(e) and "expected dynamic, none or a positive" in str(e), str(e)
    try:
        ampc.Session(model("cnn_infer"), backend="cpu", no_such="1")
        raise AssertionError("an unknown keyword was taken")
    except TypeError:
        pass
    # data_parallel by the variable's words, refused as the variable is (but for its name)
    env = dict(os.environ, AMP_DATA_PARALLEL="sometimes")
    r = subprocess.run([c.bin, "run", model("mlp_train"), "--backend", "cpu", "--steps", "1"], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 2, r.stderr
    want = r.stderr.strip().removeprefix("ampc: ").replace("AMP_DATA_PARALLEL=", "data_parallel=")
    try:
        ampc.Session(model("mlp_train"), backend="cpu", data_parallel="sometimes")
        raise AssertionError("data_parallel='sometimes' was taken")
    except ampc.UsageError as e:
        assert want.endswith(str(e)) and "expected auto, mpi or off" in str(e), (str(e), r.stderr)
    losses = []
    for dp in ("off", "auto", 2, None):  # off (by word or number) and auto without a launcher: one process
        with ampc.Session(model("mlp_train"), backend="cpu", data_parallel=dp) as s:
            losses.append(s.train_step(feed_of("mlp_train")))
    assert len(set(losses)) == 1, losses
    with ampc.Session(model("cnn_infer"), backend="cpu") as s:
        try:
            s.run({"x": np.zeros((2, 3), np.float32)})
            raise AssertionError("a wrong shape ran")
        except ampc.UsageError as e:
            assert "x" in str(e), str(e)


def main():
    args = tl.args(__doc__)
    global ampc, np, onnx, numpy_helper
    try:
        import numpy as np
        import onnx
        from onnx import numpy_helper
    except ImportError as e:
        print(f"skip: {e}")
        return 77
    lib = os.path.join(os.path.dirname(os.path.abspath(args.ampc)), "libampc.so")
    if not os.path.exists(lib):
        print(f"skip: no {lib}")
        return 77
    os.environ["AMPC_LIBRARY"] = lib
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import ampc
    ctx = Ctx(args)
    tests = [(f.__name__, f) for n, f in sorted(globals().items()) if n.startswith("test_")]
    return tl.run(tests, ctx, verbose=args.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
