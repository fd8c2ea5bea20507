#!/usr/bin/env python3
"""A save interrupted, and an input cut short under a conversion (issue 43, items 2 and 3).

Item 2: SIGINT or SIGTERM during a save left its temporary files behind (`OUT.tmp.*`,
`OUT.data.tmp.*`, up to 128 MiB each); OUT itself stayed intact. Now ampc's handlers
remove what this process created and it dies of the signal as before; and a save removes
the temporaries that processes which died (SIGKILL, a crash) left for the same OUT.
Item 3: an external-data file truncated while ampc converted the model killed it with
SIGBUS (or failed the save as an internal error, "Bad address"), leaving a temporary
file. Now it is an input error (exit 1) naming the file, with nothing left behind.

Each case stops ampc (SIGSTOP) once its temporary file appears in OUT's folder, so the
signal or the truncation lands in the middle of the save, then lets it go on:

- SIGINT, SIGTERM, SIGHUP mid-save (with a data file, and inline): ampc dies of the
  signal, OUT keeps its old contents, no `*.tmp.*` is left; a SIGHUP ampc started with
  ignored (nohup) stays ignored: the save completes;
- SIGKILL mid-save leaves its temporary file; the next save to that OUT removes it, and
  the temporaries of a dead process for OUT, OUT.data and OUT.1.data, but keeps one whose
  pid is alive and one a process holds locked (flock: a writer in another pid namespace);
- the input's data file cut short mid-save (a save with a data file, an inline one, and
  the default conversion, whose float16 weights are made as they are written): exit 1,
  the message names the data file, OUT intact, nothing left behind.

usage: test_interrupted_save.py --ampc PATH [--testdata DIR] [--verbose]"""
import argparse
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ampc_testlib as tl  # noqa: E402

ROWS, COLS = 4096, 6144  # a 96 MiB weight: long enough a save to stop in the middle
OLD = b"the previous OUT\n"


def write_model(folder):
    os.makedirs(folder, exist_ok=True)
    w = np.full((ROWS, COLS), 0.5, np.float32)
    with open(os.path.join(folder, "model.onnx.data"), "wb") as f:
        f.write(w.tobytes())
    t = onnx.TensorProto()
    t.name, t.data_type = "W", TensorProto.FLOAT
    t.dims.extend([ROWS, COLS])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "model.onnx.data"), ("offset", "0"), ("length", str(w.nbytes))):
        e = t.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], "g",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, ROWS])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, COLS])], [t])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())


def temps(folder):
    return sorted(f for f in os.listdir(folder) if ".tmp." in f)


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


class Ctx:
    def __init__(self, ampc, tmp, verbose):
        self.ampc, self.tmp, self.verbose = ampc, tmp, verbose
        self.src = os.path.join(tmp, "src")
        write_model(self.src)

    def fresh(self, label):
        """A folder with a copy of the model (in/) and an old OUT (out/out.onnx)."""
        d = os.path.join(self.tmp, label)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(self.src, os.path.join(d, "in"))
        os.makedirs(os.path.join(d, "out"))
        with open(os.path.join(d, "out", "out.onnx"), "wb") as f:
            f.write(OLD)
        return d

    def stopped_mid_save(self, d, args, ignore=None):
        """ampc converting in/model.onnx to out/out.onnx, stopped once a temporary file of
        OUT exists; None when the save ended first every time. `ignore`: a signal ampc
        starts with ignored (as nohup leaves SIGHUP)."""
        out = os.path.join(d, "out")
        for _ in range(5):
            for f in temps(out):
                os.unlink(os.path.join(out, f))
            p = subprocess.Popen([self.ampc, os.path.join(d, "in", "model.onnx"), "-o", os.path.join(out, "out.onnx"),
                                  *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 preexec_fn=(lambda: signal.signal(ignore, signal.SIG_IGN)) if ignore else None)
            while p.poll() is None and not temps(out):
                time.sleep(0.0002)
            if p.poll() is None:
                os.kill(p.pid, signal.SIGSTOP)
                if temps(out):
                    return p
                os.kill(p.pid, signal.SIGCONT)
            p.wait()
        return None

    def finish(self, p):
        os.kill(p.pid, signal.SIGCONT)
        _, err = p.communicate(timeout=120)
        if self.verbose:
            print(f"exit {p.returncode}: {err.decode()}")
        return p.returncode, err.decode()


def out_intact(d):
    with open(os.path.join(d, "out", "out.onnx"), "rb") as f:
        assert f.read() == OLD, "OUT was replaced"


def interrupted(ctx, sig, args):
    d = ctx.fresh(f"sig{sig}")
    p = ctx.stopped_mid_save(d, args)
    assert p, "the save ended before it could be stopped"
    os.kill(p.pid, sig)
    rc, err = ctx.finish(p)
    assert rc == -sig, f"exit {rc}, want death by signal {sig}: {err}"
    out_intact(d)
    left = temps(os.path.join(d, "out"))
    assert not left, f"left behind: {left}"


def ignored_stays_ignored(ctx):
    """A signal ampc started with ignored stays ignored: the save goes on to its end."""
    d = ctx.fresh("ignored")
    p = ctx.stopped_mid_save(d, ["--passes", "none", "--external-data", "always"], ignore=signal.SIGHUP)
    assert p, "the save ended before it could be stopped"
    os.kill(p.pid, signal.SIGHUP)
    rc, err = ctx.finish(p)
    assert rc == 0, f"exit {rc}, want 0 (SIGHUP ignored): {err}"
    with open(os.path.join(d, "out", "out.onnx"), "rb") as f:
        assert f.read() != OLD, "OUT was not written"
    left = temps(os.path.join(d, "out"))
    assert not left, f"left behind: {left}"


def killed_then_saved(ctx):
    d = ctx.fresh("killed")
    out = os.path.join(d, "out")
    p = ctx.stopped_mid_save(d, ["--passes", "none", "--external-data", "always"])
    assert p, "the save ended before it could be stopped"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    left = temps(out)
    assert left, "SIGKILL left nothing (the case needs a stale temporary file)"
    dead = dead_pid()
    stale = [f"out.onnx.tmp.{dead}.0", f"out.onnx.data.tmp.{dead}.1", f"out.onnx.1.data.tmp.{dead}.2"]
    live = f"out.onnx.tmp.{os.getpid()}.0"  # this process: alive
    held = f"out.onnx.data.tmp.{dead_pid()}.3"  # a dead pid, but locked: another namespace's writer
    for f in stale + [live, held]:
        with open(os.path.join(out, f), "wb") as fh:
            fh.write(b"partial")
    unrelated = ["out.onnx.tmp.x.0", "other.onnx.tmp.1.0", "out.onnx.tmpfile"]
    for f in unrelated:
        open(os.path.join(out, f), "wb").close()
    lock = open(os.path.join(out, held), "rb")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        r = subprocess.run([ctx.ampc, os.path.join(d, "in", "model.onnx"), "-o", os.path.join(out, "out.onnx"),
                            "--passes", "none", "-q"], capture_output=True, text=True)
    finally:
        lock.close()
    assert r.returncode == 0, f"the next save: exit {r.returncode}: {r.stderr}"
    now = sorted(os.listdir(out))
    for f in left + stale:
        assert f not in now, f"{f}, a dead process's temporary file, is still there: {now}"
    for f in [live, held] + unrelated:
        assert f in now, f"{f} was removed: {now}"


def cut_short(ctx, label, args):
    d = ctx.fresh(f"cut_{label}")
    data = os.path.join(d, "in", "model.onnx.data")
    p = ctx.stopped_mid_save(d, args)
    assert p, "the save ended before it could be stopped"
    os.truncate(data, 1 << 20)
    rc, err = ctx.finish(p)
    assert rc == 1, f"exit {rc}, want 1 (an input error): {err}"
    assert "model.onnx.data: the file was cut short while ampc read it" in err, err
    out_intact(d)
    left = temps(os.path.join(d, "out"))
    assert not left, f"left behind: {left}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    ctx = Ctx(os.path.abspath(a.ampc), tl.tempdir("ampc_interrupted_"), a.verbose)
    ext, inline = ["--passes", "none", "--external-data", "always"], ["--passes", "none", "--external-data", "never"]
    tests = [
        ("SIGINT mid-save (a data file): dies of it, nothing left", lambda c: interrupted(c, signal.SIGINT, ext)),
        ("SIGTERM mid-save (inline): dies of it, nothing left", lambda c: interrupted(c, signal.SIGTERM, inline)),
        ("SIGHUP mid-save (a data file): dies of it, nothing left", lambda c: interrupted(c, signal.SIGHUP, ext)),
        ("SIGHUP mid-save, ignored when ampc started: the save completes", ignored_stays_ignored),
        ("SIGKILL mid-save: the next save removes what dead processes left", killed_then_saved),
        ("data cut short mid-save (a data file): exit 1, nothing left", lambda c: cut_short(c, "ext", ext)),
        ("data cut short mid-save (inline): exit 1, nothing left", lambda c: cut_short(c, "inline", inline)),
        ("data cut short mid-conversion (default passes): exit 1, nothing left",
         lambda c: cut_short(c, "default", ["-q"])),
    ]
    return tl.run(tests, ctx, verbose=a.verbose)


if __name__ == "__main__":
    sys.exit(main())
