#!/usr/bin/env python3
"""Data-parallel training under mpirun (issue 41, docs/parallel.md): N ranks on slices of a
batch train as one process on the whole batch.

- `mpirun -np 2` and `-np 4 --oversubscribe`, CPU backend and the device simulator: the
  losses rank 0 prints and the final parameters (its checkpoint) equal one process's on the
  whole batch, within float32 summation order (FP32: losses 1e-5 relative, parameters
  2e-6 + 2e-5 relative), and every rank's checkpoint is the same bytes;
- fp16 and bf16 with dynamic loss scaling (AMP_AUTO): the same within 16-bit rounding
  (losses 5e-3 relative, parameters 1e-3 + 1e-2 relative), the loss scales exactly equal;
- an overflow planted in one rank's data only: every rank skips the step (rank 0 says so,
  its own data clean), the scale backs off on every rank, and every rank's checkpoint
  is the initial parameters;
- an `ampc grad` model (SGD, symbolic batch) and onnxruntime-training's artifacts (ort_mlp,
  SGD; its batch is fixed, so each rank gets its own batch with --inputs-per-rank and the
  one step is checked against the mean of one process's steps on each batch: SGD is
  linear in the gradient);
- the pass's buckets (1 MiB first, then 4 MiB, in backward order, each node right after its
  last gradient is made, ampc grad's naming Identities dropped) and the kernels' in-place runs
  (the bytes and collectives a step the documented rule gives), both training as one process;
- BatchNormalization in training mode (`ampc grad --train-mode`, one step): rank 0's checkpoint
  holds rank 0's running statistics, those of one process on its slice alone; rank 1's are its
  slice's; both differ from the whole batch's (not averaged, not broadcast); the weights are the
  mean of the slice runs' (the loss and gradients are the slices' mean, as in DDP without
  SyncBatchNorm);
- the C API from an application (AmpSessionOptions.data_parallel = MPI, through the Python
  package under mpirun, each rank feeding its own slice to Session.train_step): the ranks'
  mean loss is one process's on the whole batch, every rank's weights the same and one
  process's; notes said once, by rank 0, errors tagged with the rank;
- mismatched models refused at open naming the rank; a batch the ranks cannot split is a
  usage error naming the input and both numbers; one rank under mpirun prints and saves
  exactly what no MPI does (AMP_DATA_PARALLEL=mpi too, on the CPU); AMP_DATA_PARALLEL=off
  under mpirun runs unrelated processes, and a bad value is a usage error naming it
  (the options table's message); AMP_MPI_PLUGIN names the plugin a job opens (a file that is
  no library fails every rank naming it, one that does not exist fails even one process);
- a rank that exits mid-run (AMP_TEST_DIE_AT_STEP=2 on rank 1) ends the job non-zero in
  bounded time, mpirun naming rank 1; a rank that hangs (AMP_TEST_HANG_AT_STEP) ends the job
  after AMP_COMM_TIMEOUT with rank 0 naming rank 1 as not arrived.

Skipped (77) where mpirun or the MPI plugin (libampc_mpi.so beside ampc) is absent.

usage: test_data_parallel.py --ampc PATH [--testdata DIR] [--verbose]"""
import os
import re
import shutil
import subprocess
import sys
import time

try:
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import ampc_testlib as tl  # noqa: E402

MLP = os.path.join(ROOT, "models", "mlp_train")
ORT = os.path.join(ROOT, "models", "ort_mlp")
STEP = re.compile(r"^step (\d+): loss (\S+) \([^)]*\)(?:, loss scale (\S+))?(.*)$", re.M)
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"}
AMP16 = {"fp16": {"AMP_AUTO": "1", "AMP_PRECISION": "fp16", "AMP_LOSS_SCALE": "dynamic"},
         "bf16": {"AMP_AUTO": "1", "AMP_PRECISION": "bf16", "AMP_LOSS_SCALE": "dynamic"}}


class Ctx:
    def __init__(self, a):
        self.ampc = os.path.abspath(a.ampc)
        self.verbose = a.verbose
        self.tmp = tl.tempdir("ampc_dp_")
        self.notes = []


def single(ctx, args, env=None):
    e = dict(os.environ, **(env or {}))
    r = subprocess.run([ctx.ampc, *args], capture_output=True, text=True, env=e, timeout=300)
    if ctx.verbose:
        print(f"$ ampc {' '.join(args)} -> {r.returncode}\n{r.stdout}{r.stderr}")
    return r


def mpirun(ctx, np_, args, env=None, timeout=300, mpmd=None):
    """mpirun -np N ampc ARGS (or an MPMD line: mpmd is a list of (n, args)), env forwarded with -x."""
    env = dict(env or {})
    e = dict(os.environ, **ROOT_ENV, **env)
    fwd = [x for k in env for x in ("-x", k)]
    if mpmd:
        cmd = ["mpirun", "--oversubscribe", *fwd]
        for i, (n, a) in enumerate(mpmd):
            cmd += ([":"] if i else []) + ["-np", str(n), ctx.ampc, *a]
    else:
        cmd = ["mpirun", "--oversubscribe", "-np", str(np_), *fwd, ctx.ampc, *args]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout)
    r.seconds = time.monotonic() - t0
    if ctx.verbose:
        print(f"$ {' '.join(cmd)} -> {r.returncode} in {r.seconds:.1f}s\n{r.stdout}{r.stderr}")
    return r


def steps(out):
    return [(float(m.group(2)), float(m.group(3)) if m.group(3) else None, "skipped" in m.group(4))
            for m in STEP.finditer(out)]


def state(path):
    return {t.name: nh.to_array(t).astype(np.float64) for t in onnx.load(path).graph.initializer}


def ok(r, what):
    assert r.returncode == 0, f"{what}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def same_run(ctx, model_args, n, backend, env=None, loss_rtol=1e-5, p_atol=2e-6, p_rtol=2e-5, n_steps=4):
    """One process on the whole batch against n ranks on its slices."""
    tag = f"{os.path.basename(os.path.dirname(model_args[0]))}_{n}_{backend}_{len(env or {})}"
    ref_ck, dp_ck = os.path.join(ctx.tmp, tag + "_ref.ckpt"), os.path.join(ctx.tmp, tag + "_dp.ckpt")
    common = ["run", *model_args, "--steps", str(n_steps), "--backend", backend]
    ref = ok(single(ctx, [*common, "--save-state", ref_ck], env), "one process")
    dp = ok(mpirun(ctx, n, [*common, "--save-state", dp_ck], dict(env or {}, AMP_TEST_SAVE_EVERY_RANK="1")),
            f"{n} ranks")
    a, b = steps(ref.stdout), steps(dp.stdout)
    assert len(a) == n_steps and len(b) == n_steps, f"step lines: {ref.stdout}\n--\n{dp.stdout}"
    for (la, sa, _), (lb, sb, _) in zip(a, b):
        assert abs(la - lb) <= loss_rtol * abs(la) + 1e-7, f"losses {[x[0] for x in a]} vs {[x[0] for x in b]}"
        assert sa == sb, f"loss scales {[x[1] for x in a]} vs {[x[1] for x in b]}"
    assert f"data parallel: {n} ranks" in dp.stdout, dp.stdout
    assert dp.stdout.count("step 1:") == 1, "only rank 0 prints"
    ra, rb = state(ref_ck), state(dp_ck)
    assert ra.keys() == rb.keys()
    for k in ra:
        assert np.allclose(ra[k], rb[k], atol=p_atol, rtol=p_rtol), f"{k}: max diff {np.abs(ra[k] - rb[k]).max()}"
    first = open(dp_ck, "rb").read()
    for r in range(1, n):
        assert open(f"{dp_ck}.rank{r}", "rb").read() == first, f"rank {r}'s checkpoint differs from rank 0's"
    return a


def mlp_args():
    return [os.path.join(MLP, "model.onnx"), "--inputs", os.path.join(MLP, "test_data_set_0")]


def t_fp32(ctx, n, backend):
    same_run(ctx, mlp_args(), n, backend)


def t_amp(ctx, prec, n):
    s = same_run(ctx, mlp_args(), n, "cpu", AMP16[prec], loss_rtol=5e-3, p_atol=1e-3, p_rtol=1e-2)
    assert s[0][1] is not None, "a loss-scaled model prints its scale"


def write_inputs(folder, arrays):
    os.makedirs(folder, exist_ok=True)
    for i, (name, a) in enumerate(arrays):
        t = nh.from_array(a, name)
        with open(os.path.join(folder, f"input_{i}.pb"), "wb") as f:
            f.write(t.SerializeToString())


def mlp_data():
    x = nh.to_array(onnx.load_tensor(os.path.join(MLP, "test_data_set_0", "input_0.pb")))
    y = nh.to_array(onnx.load_tensor(os.path.join(MLP, "test_data_set_0", "input_1.pb")))
    return x, y


def t_overflow(ctx):
    x, y = mlp_data()
    per = os.path.join(ctx.tmp, "planted")
    half = len(x) // 2
    bad = x[half:].copy()
    bad[3, 5] = np.inf
    write_inputs(os.path.join(per, "rank0"), [("x", x[:half]), ("labels", y[:half])])
    write_inputs(os.path.join(per, "rank1"), [("x", bad), ("labels", y[half:])])
    ck = os.path.join(ctx.tmp, "planted.ckpt")
    dp = ok(mpirun(ctx, 2, ["run", os.path.join(MLP, "model.onnx"), "--inputs-per-rank", per, "--steps", "2",
                            "--save-state", ck], dict(AMP16["fp16"], AMP_TEST_SAVE_EVERY_RANK="1")), "planted")
    s = steps(dp.stdout)
    assert s[0][2] and s[1][2], f"both steps skipped on rank 0, whose data is clean: {dp.stdout}"
    assert s[1][1] == s[0][1] / 2, f"the scale backs off each step: {s}"
    assert open(ck, "rb").read() == open(ck + ".rank1", "rb").read(), "every rank's checkpoint the same"
    init = {t.name: nh.to_array(t) for t in onnx.load(os.path.join(MLP, "model.onnx")).graph.initializer}
    got = state(ck)
    for k in ("W1", "b1", "W2", "b2"):
        assert np.array_equal(got[k], init[k].astype(np.float64)), f"{k} changed by a skipped step"


def grad_model(ctx, tag, nodes, inits, *grad_args):
    """x [batch, 16] -> NODES -> logits [batch, 4], made a training graph by `ampc grad` (SGD, lr 0.1)."""
    g = h.make_graph(nodes, "fwd", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 16])],
                     [h.make_tensor_value_info("logits", T.FLOAT, ["batch", 4])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    fwd, train = os.path.join(ctx.tmp, f"{tag}_fwd.onnx"), os.path.join(ctx.tmp, f"{tag}_sgd.onnx")
    onnx.save(m, fwd)
    ok(single(ctx, ["grad", fwd, "-o", train, "--optimizer", "sgd", "--lr", "0.1", *grad_args]), "ampc grad")
    return train


def t_grad_model(ctx):
    rng = np.random.RandomState(0)
    inits = [nh.from_array((rng.randn(16, 32) * 0.3).astype(np.float32), "W1"), nh.from_array(np.zeros(32, np.float32), "b1"),
             nh.from_array((rng.randn(32, 4) * 0.3).astype(np.float32), "W2"), nh.from_array(np.zeros(4, np.float32), "b2")]
    nodes = [h.make_node("MatMul", ["x", "W1"], ["z1m"]), h.make_node("Add", ["z1m", "b1"], ["z1"]),
             h.make_node("Relu", ["z1"], ["h1"]), h.make_node("MatMul", ["h1", "W2"], ["z2m"]),
             h.make_node("Add", ["z2m", "b2"], ["logits"])]
    train = grad_model(ctx, "grad", nodes, inits)
    x, y = mlp_data()
    data = os.path.join(ctx.tmp, "grad_data")
    write_inputs(data, [("x", x), ("labels", y)])
    same_run(ctx, [train, "--inputs", data], 2, "cpu")


def mlp3(ctx, tag, dims, seed):
    """x [batch, dims[0]] -> 3 x (MatMul, Add; Relu between) -> logits [batch, dims[3]], W_i and b_i
    random, made a training graph by `ampc grad`; (its path, the initializers)."""
    rng = np.random.RandomState(seed)
    inits, nodes, x = [], [], "x"
    for i in range(3):
        w, b, z = f"W{i + 1}", f"b{i + 1}", f"z{i + 1}"
        inits += [nh.from_array((rng.randn(dims[i], dims[i + 1]) / np.sqrt(dims[i])).astype(np.float32), w),
                  nh.from_array((rng.randn(dims[i + 1]) * 0.1).astype(np.float32), b)]
        last = i == 2
        nodes += [h.make_node("MatMul", [x, w], [f"m{i + 1}"]), h.make_node("Add", [f"m{i + 1}", b], ["logits" if last else z])]
        if not last:
            nodes.append(h.make_node("Relu", [z], [f"h{i + 1}"]))
        x = f"h{i + 1}"
    return grad_model(ctx, tag, nodes, inits), inits


def expected_runs(model, size):
    """What the documented rule (docs/parallel.md) says the kernels do per step on `model` as the
    allreduce pass writes it: in each AllReduceMean, in input order, float32 gradients lie end to
    end and a run goes on while the previous gradient's size is on the 64-byte grid; runs of
    64 KB or more are reduced where they lie, one collective each; the rest of the node's
    gradients share one more. Returns (bytes in place, collectives)."""
    placed = calls = 0
    for node in (n for n in model.graph.node if n.op_type == "AllReduceMean"):
        sizes = [size[o[:-len("_grad")]] for o in node.output]
        runs, cur = [], [sizes[0]]
        for prev, b in zip(sizes, sizes[1:]):
            if prev % 64 == 0:
                cur.append(b)
            else:
                runs.append(cur)
                cur = [b]
        runs.append(cur)
        big = [sum(r) for r in runs if sum(r) >= 64 * 1024]
        placed += sum(big)
        calls += len(big) + (sum(sizes) > sum(big))
    return placed, calls


def t_in_place(ctx, n, backend):
    """Float32 gradients lie end to end in the arena with their means over them (runtime/exec_plan.c)
    and runs of them of 64 KB or more are reduced there, each in one collective; the rest go through
    one packed buffer (kernels/cpu/comm.c). Sizes off the 64-byte grid (W2 257,292 bytes, b1 4,084,
    b2 252, W3 1,008) end runs, so both paths run, every step (the plan sizes the first one too);
    the bytes and collectives a step are what the documented rule gives for the nodes the pass
    wrote, and the result one process's."""
    train, inits = mlp3(ctx, f"wide_{n}_{backend}", [16, 1021, 63, 4], seed=1)
    xs, ys = mlp_data()
    data = os.path.join(ctx.tmp, "wide_data")
    write_inputs(data, [("x", xs), ("labels", ys)])
    same_run(ctx, [train, "--inputs", data], n, backend)
    dp = ok(mpirun(ctx, n, ["run", train, "--inputs", data, "--steps", "3", "--backend", backend]), "in place")
    m = re.search(r"per step: (\d+) bytes in ([\d.]+) calls? \((\d+) where they lie\)", dp.stdout)
    assert m, dp.stdout
    total, calls, placed = int(m.group(1)), float(m.group(2)), int(m.group(3))
    size = {t.name: nh.to_array(t).size * 4 for t in inits}
    assert total == sum(size.values()), f"{total} bytes reduced per step, the parameters are {sum(size.values())}"
    written = os.path.join(ctx.tmp, f"wide_{n}_{backend}_ar.onnx")
    ok(single(ctx, [train, "--passes", "allreduce", "-o", written]), "ampc --passes allreduce")
    want_placed, want_calls = expected_runs(onnx.load(written), size)
    assert 0 < want_placed < total, f"the model exercises both paths: {want_placed} of {total} bytes in place"
    assert placed == want_placed, f"{placed} bytes a step reduced where they lie, the rule says {want_placed}: {dp.stdout}"
    assert calls == want_calls, f"{calls} collectives a step, the rule says {want_calls}: {dp.stdout}"


def t_buckets(ctx):
    """The pass's buckets (passes/allreduce.c), on an `ampc grad` MLP 16 -> 1024 -> 1024 -> 4: cut in
    backward order once a bucket holds 1 MiB (the first) or 4 MiB (the rest), each node right after
    its last gradient is made, so the first runs before the backward makes the later buckets'
    gradients; ampc grad's naming Identities (W_grad = Identity(dW)) are gone; 2 ranks train as one
    process."""
    train, inits = mlp3(ctx, "buckets", [16, 1024, 1024, 4], seed=2)
    written = os.path.join(ctx.tmp, "buckets_ar.onnx")
    ok(single(ctx, [train, "--passes", "allreduce", "-o", written]), "ampc --passes allreduce")
    g = onnx.load(written).graph
    size = {t.name: nh.to_array(t).size * 4 for t in inits}
    at = {o: i for i, n in enumerate(g.node) for o in n.output}
    arm = [(i, n) for i, n in enumerate(g.node) if n.op_type == "AllReduceMean"]
    assert len(arm) >= 2, f"{len(arm)} AllReduceMean nodes: the 4 MiB W2 gradient closes the first bucket"
    assert not [n.output[0] for n in g.node if n.op_type == "Identity" and n.output[0].endswith("_grad")], \
        "ampc grad's naming Identities are dropped"
    assert sorted(o for _, n in arm for o in n.output) == sorted(f"{k}_grad" for k in size), "every gradient once"
    for k, (i, n) in enumerate(arm):
        made = [at[x] for x in n.input]
        assert max(made) == i - 1, f"node {k} at {i}, right after its last gradient is made ({made})"
        b = [size[o[:-len("_grad")]] for o in n.output]
        cap = (4 if k else 1) << 20
        assert sum(b[:-1]) < cap, f"bucket {k} {b}: closed once it held {cap} bytes"
        assert k == len(arm) - 1 or sum(b) >= cap, f"bucket {k} {b} closed under {cap} bytes"
    later = [at[x] for _, n in arm[1:] for x in n.input]
    assert arm[0][0] < max(later), "the first bucket is reduced before the backward makes the last"
    xs, ys = mlp_data()
    data = os.path.join(ctx.tmp, "buckets_data")
    write_inputs(data, [("x", xs), ("labels", ys)])
    same_run(ctx, [train, "--inputs", data], 2, "cpu")


def t_batchnorm(ctx):
    """BatchNormalization in training mode (`ampc grad --train-mode`), batch 8, one step: each rank's running
    statistics are those of its own slice of 4 (the gradients are all-reduced, the statistics are not), and rank 0's
    checkpoint holds rank 0's. One step, so the weights that fed the statistics were the initial ones on every rank:
    rank R's statistics equal one process's on slice R alone and differ from one process's on the whole batch (averaged
    over the ranks, the means would equal the whole batch's), and rank 1's differ from rank 0's (not broadcast). The
    gradients are the mean of the slices' (each normalised by its own batch statistics), so with SGD the weights are
    the mean of the slice runs'."""
    rng = np.random.RandomState(1)
    inits = [nh.from_array((rng.randn(16, 8) * 0.3).astype(np.float32), "W1"),
             nh.from_array(np.ones(8, np.float32), "bn_scale"), nh.from_array(np.zeros(8, np.float32), "bn_bias"),
             nh.from_array(np.zeros(8, np.float32), "bn_mean"), nh.from_array(np.ones(8, np.float32), "bn_var"),
             nh.from_array((rng.randn(8, 4) * 0.3).astype(np.float32), "W2")]
    nodes = [h.make_node("MatMul", ["x", "W1"], ["z1"]),
             h.make_node("BatchNormalization", ["z1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["n1"]),
             h.make_node("Relu", ["n1"], ["h1"]), h.make_node("MatMul", ["h1", "W2"], ["logits"])]
    train = grad_model(ctx, "bn", nodes, inits, "--train-mode")
    x, y = mlp_data()
    x, y = x[:8], y[:8]
    runs = {}  # one process: the whole batch, rank 0's slice, rank 1's slice -> (loss, checkpoint)
    for tag, sl in (("whole", slice(0, 8)), ("slice0", slice(0, 4)), ("slice1", slice(4, 8))):
        data, ck = os.path.join(ctx.tmp, f"bn_{tag}"), os.path.join(ctx.tmp, f"bn_{tag}.ckpt")
        write_inputs(data, [("x", x[sl]), ("labels", y[sl])])
        out = ok(single(ctx, ["run", train, "--inputs", data, "--steps", "1", "--save-state", ck]), tag)
        runs[tag] = (steps(out.stdout)[0][0], state(ck))
    ck = os.path.join(ctx.tmp, "bn_dp.ckpt")
    dp = ok(mpirun(ctx, 2, ["run", train, "--inputs", os.path.join(ctx.tmp, "bn_whole"), "--steps", "1",
                            "--save-state", ck], {"AMP_TEST_SAVE_EVERY_RANK": "1"}), "2 ranks")
    got = {0: state(ck), 1: state(ck + ".rank1")}
    whole, init = runs["whole"][1], {t.name: nh.to_array(t) for t in inits}
    for k in ("bn_mean", "bn_var"):
        assert np.abs(whole[k] - init[k]).max() > 1e-3, f"{k}: the checkpoint entry a training-mode step updates"
        for r in (0, 1):
            want = runs[f"slice{r}"][1][k]
            assert np.allclose(got[r][k], want, atol=1e-6, rtol=1e-5), \
                f"rank {r}'s {k} is not its slice's: max diff {np.abs(got[r][k] - want).max()}"
        for a, b, what in ((got[0][k], whole[k], "the whole batch's"), (got[0][k], got[1][k], "rank 1's")):
            assert np.abs(a - b).max() > 1e-3, f"rank 0's {k} equals {what}: the test cannot tell them apart"
    for k in ("W1", "bn_scale", "bn_bias", "W2"):
        assert np.array_equal(got[0][k], got[1][k]), f"{k}: the ranks' weights differ"
        want = (runs["slice0"][1][k] + runs["slice1"][1][k]) / 2
        assert np.allclose(got[0][k], want, atol=2e-6, rtol=2e-5), f"{k}: max diff {np.abs(got[0][k] - want).max()}"
    loss, want = steps(dp.stdout)[0][0], (runs["slice0"][0] + runs["slice1"][0]) / 2
    assert abs(loss - want) <= 1e-5 * abs(want), f"loss {loss}, the slices' mean {want}"
    ctx.notes.append(f"BatchNormalization: rank 0's bn_mean {got[0]['bn_mean'][:2]}, rank 1's {got[1]['bn_mean'][:2]},"
                     f" the whole batch's {whole['bn_mean'][:2]}")


def t_ort(ctx):
    d = np.load(os.path.join(ORT, "data.npz"))
    per = os.path.join(ctx.tmp, "ort")
    for r in range(2):
        write_inputs(os.path.join(per, f"rank{r}"), [("input", d["input"][r]), ("labels", d["labels"][r])])
    art = [os.path.join(ORT, "training_model.onnx"), "--optimizer", os.path.join(ORT, "optimizer_model_sgd.onnx"),
           "--checkpoint", os.path.join(ORT, "checkpoint"), "--lr", "0.1"]
    refs, losses = [], []
    for r in range(2):
        ck = os.path.join(ctx.tmp, f"ort_ref{r}.ckpt")
        out = ok(single(ctx, ["run", *art, "--inputs", os.path.join(per, f"rank{r}"), "--save-state", ck]), "ort")
        refs.append(state(ck))
        losses.append(steps(out.stdout)[0][0])
    ck = os.path.join(ctx.tmp, "ort_dp.ckpt")
    dp = ok(mpirun(ctx, 2, ["run", *art, "--inputs-per-rank", per, "--save-state", ck]), "ort 2 ranks")
    loss = steps(dp.stdout)[0][0]
    assert abs(loss - (losses[0] + losses[1]) / 2) <= 1e-5 * abs(loss), f"{loss} vs the mean of {losses}"
    got = state(ck)
    for k in refs[0]:
        if refs[0][k].dtype.kind != "f" or np.array_equal(refs[0][k], refs[1][k]) and "step" in k:
            continue
        want = (refs[0][k] + refs[1][k]) / 2
        assert np.allclose(got[k], want, atol=2e-6, rtol=2e-5), f"{k}: max diff {np.abs(got[k] - want).max()}"


def t_mismatch(ctx):
    other = os.path.join(ctx.tmp, "other.onnx")
    m = onnx.load(os.path.join(MLP, "model.onnx"))
    m.graph.initializer[0].float_data[:] = []  # a different tensor: its raw bytes changed
    arr = nh.to_array(m.graph.initializer[0]) + 1
    m.graph.initializer[0].CopyFrom(nh.from_array(arr, m.graph.initializer[0].name))
    onnx.save(m, other)
    a = mlp_args()
    r = mpirun(ctx, 0, None, mpmd=[(1, ["run", *a]), (1, ["run", other, *a[1:]])], timeout=120)
    assert r.returncode != 0, r.stdout
    assert "rank 1 opened a different model or options than rank 0" in r.stderr, r.stderr


def t_indivisible(ctx):
    r = mpirun(ctx, 3, ["run", *mlp_args()], timeout=120)
    assert r.returncode != 0
    assert "input 'x' has a batch of 32, which 3 ranks cannot split" in r.stderr, r.stderr
    # each rank says its error, the others' tagged with their rank (MPI_Abort may stop one
    # before it speaks); notes are rank 0's alone
    lines = [ln for ln in r.stderr.splitlines() if "cannot split" in ln]
    assert lines and sum(ln.startswith("ampc: ") for ln in lines) <= 1, r.stderr
    assert all(ln.startswith("ampc: ") or re.match(r"ampc \(rank [12]\): ", ln) for ln in lines), r.stderr


def t_notes_once(ctx):
    """A note (a free batch dim taken as 1) is said once for the job, by rank 0; the error
    that follows (a batch of 1 does not split) by each rank, rank 1's tagged."""
    r = mpirun(ctx, 2, ["run", os.path.join(MLP, "model.onnx"), "--steps", "1"], timeout=120)
    assert r.returncode != 0, r.stdout
    # (the first rank to fail calls MPI_Abort, which may end rank 0 before it speaks: at
    # most one note, and never a rank's other than 0)
    notes = [ln for ln in r.stderr.splitlines() if "note:" in ln]
    assert len(notes) <= 1 and all(ln.startswith("ampc: note: input 'x' dim 0") for ln in notes), r.stderr
    errors = [ln for ln in r.stderr.splitlines() if "cannot split" in ln]
    assert errors and all(ln.startswith(("ampc: ", "ampc (rank 1): ")) for ln in errors), r.stderr


C_API_SCRIPT = r"""
import os, sys
import numpy as np
import onnx
from onnx import numpy_helper as nh
sys.path.insert(0, sys.argv[1])
import ampc
model, data, ck, steps = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
rank, n = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
feed = {}
for f in sorted(os.listdir(data)):
    if f.startswith("input_"):
        t = onnx.load_tensor(os.path.join(data, f))
        a = nh.to_array(t)
        k = a.shape[0] // n
        feed[t.name] = np.ascontiguousarray(a[rank * k:(rank + 1) * k])  # this rank's slice
with ampc.Session(model, backend="cpu", data_parallel="mpi") as s:  # AMP_DATA_PARALLEL_MPI
    losses = [s.train_step(feed) for _ in range(steps)]
    s.save_state(ck + ".rank%d" % rank)
print("rank %d losses %s" % (rank, " ".join("%.9g" % x for x in losses)))
"""


def t_c_api(ctx):
    """What `ampc run` does, through the C API (AmpSessionOptions.data_parallel = MPI) from an
    application: the Python package under mpirun, each rank opening a session and feeding its
    own slice; every rank's weights the same, and one process's on the whole batch."""
    lib = os.path.join(os.path.dirname(os.path.abspath(ctx.ampc)), "libampc.so")
    if not os.path.exists(lib):
        raise tl.Skip("no libampc.so beside the ampc binary")
    script = os.path.join(ctx.tmp, "c_api_rank.py")
    with open(script, "w") as f:
        f.write(C_API_SCRIPT)
    ref_ck, dp_ck = os.path.join(ctx.tmp, "c_api_ref.ckpt"), os.path.join(ctx.tmp, "c_api_dp.ckpt")
    model, data = os.path.join(MLP, "model.onnx"), os.path.join(MLP, "test_data_set_0")
    ref_run = ok(single(ctx, ["run", model, "--inputs", data, "--steps", "3", "--backend", "cpu", "--save-state",
                              ref_ck]), "one process")
    env = dict(os.environ, **ROOT_ENV, AMPC_LIBRARY=lib)
    cmd = ["mpirun", "--oversubscribe", "-np", "2", "-x", "AMPC_LIBRARY", sys.executable, script,
           os.path.join(ROOT, "python"), model, data, dp_ck, "3"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    # each rank's loss is its slice's: their mean is the whole batch's, one process's
    per_rank = [[float(x) for x in m.group(2).split()] for m in re.finditer(r"^rank (\d) losses (.*)$", r.stdout, re.M)]
    whole = [la for la, _, _ in steps(ref_run.stdout)]
    assert len(per_rank) == 2 and len(whole) == 3, r.stdout
    for i in range(3):
        mean = (per_rank[0][i] + per_rank[1][i]) / 2
        assert abs(mean - whole[i]) <= 1e-5 * abs(whole[i]) + 1e-7, \
            f"step {i + 1}: the ranks' mean loss {mean}, one process's {whole[i]}"
    ref = state(ref_ck)
    ranks = [state(f"{dp_ck}.rank{k}") for k in range(2)]
    assert ranks[0].keys() == ref.keys() == ranks[1].keys()
    for k in ref:
        assert np.array_equal(ranks[0][k], ranks[1][k]), f"{k}: the ranks' weights differ"
        assert np.allclose(ranks[0][k], ref[k], atol=2e-6, rtol=2e-5), \
            f"{k}: max diff {np.abs(ranks[0][k] - ref[k]).max()}"
    ctx.notes.append("C API under mpirun: " + " | ".join(ln for ln in r.stdout.splitlines() if "losses" in ln))


def t_one_rank(ctx):
    a = [*mlp_args(), "--steps", "3"]
    c1, c2 = os.path.join(ctx.tmp, "one_a.ckpt"), os.path.join(ctx.tmp, "one_b.ckpt")
    r1 = ok(single(ctx, ["run", *a, "--save-state", c1]), "no MPI")
    r2 = ok(mpirun(ctx, 1, ["run", *a, "--save-state", c2]), "one rank")
    strip = re.compile(r"\([0-9.]+ ms\)|[0-9.]+ ms \(median")
    assert strip.sub("", r1.stdout) == strip.sub("", r2.stdout), f"{r1.stdout}\n--\n{r2.stdout}"
    assert open(c1, "rb").read() == open(c2, "rb").read(), "one rank saves what no MPI saves"
    # AMP_DATA_PARALLEL=mpi asks for the job even with one rank; on the CPU (no device
    # collective to check) it is still the process without MPI, byte for byte
    c3 = os.path.join(ctx.tmp, "one_c.ckpt")
    r3 = ok(mpirun(ctx, 1, ["run", *a, "--backend", "cpu", "--save-state", c3], {"AMP_DATA_PARALLEL": "mpi"}),
            "one rank, AMP_DATA_PARALLEL=mpi")
    assert strip.sub("", r1.stdout) == strip.sub("", r3.stdout), f"{r1.stdout}\n--\n{r3.stdout}"
    assert open(c1, "rb").read() == open(c3, "rb").read(), "AMP_DATA_PARALLEL=mpi, one rank on cpu: no MPI's bytes"


def t_env_mode(ctx):
    """AMP_DATA_PARALLEL: off runs unrelated processes under mpirun; a bad value is a usage error naming it
    (the options table's, docs/env.md). AMP_MPI_PLUGIN: the file a job opens (the build's runs; a file
    that is no library fails every rank naming it); one that does not exist fails even one process."""
    r = ok(mpirun(ctx, 2, ["run", *mlp_args(), "--steps", "2", "--backend", "cpu"], {"AMP_DATA_PARALLEL": "off"}),
           "AMP_DATA_PARALLEL=off")
    assert r.stdout.count("step 1:") == 2 and "data parallel:" not in r.stdout, r.stdout
    r = single(ctx, ["run", *mlp_args(), "--steps", "1"], {"AMP_DATA_PARALLEL": "ranks"})
    assert r.returncode == 2 and "AMP_DATA_PARALLEL='ranks': expected auto, mpi or off" in r.stderr, r.stderr
    plugin = os.path.join(os.path.dirname(ctx.ampc), "libampc_mpi.so")
    r = ok(mpirun(ctx, 2, ["run", *mlp_args(), "--steps", "2", "--backend", "cpu"], {"AMP_MPI_PLUGIN": plugin}),
           "AMP_MPI_PLUGIN naming the build's plugin")
    assert "data parallel:" in r.stdout, r.stdout
    not_lib = os.path.join(MLP, "model.onnx")
    r = mpirun(ctx, 2, ["run", *mlp_args(), "--steps", "2", "--backend", "cpu"], {"AMP_MPI_PLUGIN": not_lib})
    assert r.returncode != 0 and f"did not open (tried {not_lib} (" in r.stderr, r.stderr
    r = single(ctx, ["run", *mlp_args(), "--steps", "1"], {"AMP_MPI_PLUGIN": "/nonexistent/libampc_mpi.so"})
    assert r.returncode == 2 and "AMP_MPI_PLUGIN='/nonexistent/libampc_mpi.so': expected" in r.stderr, r.stderr


def t_dies(ctx):
    r = mpirun(ctx, 2, ["run", *mlp_args(), "--steps", "50"], {"AMP_TEST_DIE_AT_STEP": "2", "AMP_COMM_TIMEOUT": "30"},
               timeout=120)
    assert r.returncode != 0, r.stdout
    assert r.seconds < 60, f"took {r.seconds:.1f}s"
    # mpirun sees the rank leave and ends the job first, naming it (job rank 1)
    assert re.search(r"Process name: \[\[\d+,\d+\],1\]", r.stdout + r.stderr), r.stdout + r.stderr
    ctx.notes.append(f"a rank exiting at step 2: the job ended in {r.seconds:.1f}s, exit {r.returncode}")


def t_hangs(ctx):
    r = mpirun(ctx, 2, ["run", *mlp_args(), "--steps", "5"], {"AMP_TEST_HANG_AT_STEP": "2", "AMP_COMM_TIMEOUT": "3"},
               timeout=120)
    assert r.returncode != 0, r.stdout
    assert r.seconds < 60, f"took {r.seconds:.1f}s"
    assert re.search(r"rank 0: data parallel: .* did not complete within 3 s .*: rank 1 did not arrive", r.stderr), r.stderr


def main():
    a = tl.args(__doc__)
    ctx = Ctx(a)
    plugin = os.path.join(os.path.dirname(ctx.ampc), "libampc_mpi.so")
    if not shutil.which("mpirun") or not os.path.exists(plugin):
        print(f"skip: {'mpirun' if not shutil.which('mpirun') else plugin} not found (data parallel needs Open MPI)")
        return 77
    tests = [(f"{n} ranks, {b}, fp32", lambda c, n=n, b=b: t_fp32(c, n, b)) for n in (2, 4) for b in ("cpu", "sim")]
    tests += [("2 ranks, fp16, dynamic scale", lambda c: t_amp(c, "fp16", 2)),
              ("4 ranks, bf16, dynamic scale", lambda c: t_amp(c, "bf16", 4)),
              ("an overflow on one rank skips the step on all", t_overflow),
              ("an ampc grad model", t_grad_model),
              ("buckets by bytes in backward order, each right after its gradients", t_buckets),
              ("2 ranks, cpu: large gradients reduced where they lie", lambda c: t_in_place(c, 2, "cpu")),
              ("4 ranks, sim: large gradients reduced where they lie", lambda c: t_in_place(c, 4, "sim")),
              ("BatchNormalization's running statistics are rank 0's", t_batchnorm),
              ("onnxruntime-training artifacts", t_ort),
              ("mismatched models refused", t_mismatch),
              ("a batch the ranks cannot split", t_indivisible),
              ("notes said once, by rank 0", t_notes_once),
              ("the C API from an application under mpirun", t_c_api),
              ("one rank under mpirun is no MPI", t_one_rank),
              ("AMP_DATA_PARALLEL off and a bad value; AMP_MPI_PLUGIN", t_env_mode),
              ("a rank that exits ends the job", t_dies),
              ("a rank that hangs ends the job after the timeout", t_hangs)]
    return tl.run(tests, ctx, verbose=a.verbose, notes=ctx.notes)


if __name__ == "__main__":
    sys.exit(main())
