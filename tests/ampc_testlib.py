"""What the project's Python tests share: the runner that prints "N passed, M failed"
last (ctest reads the exit status: 0, 1, or 77 for a skip), Skip, a temporary folder
removed when the test ends (kept with AMPC_KEEP_TMP=1, to look at what failed), ampc
run with its output captured, and the command line they take (args).

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import ampc_testlib as tl
    sys.exit(tl.run([("title", fn), ...], ctx, verbose=args.verbose, notes=ctx.notes))
"""
import argparse
import atexit
import os
import shutil
import subprocess
import tempfile
import traceback


def args(doc):
    """The command line every python test takes (ctest passes --ampc and --testdata), parsed;
    doc: the test's docstring, whose first line describes it."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--ampc", required=True)
    ap.add_argument("--testdata", help="unused here; accepted like every python test")
    ap.add_argument("--verbose", action="store_true")
    return ap.parse_args()


def tempdir(prefix):
    """A fresh folder under the system's temporary one, removed at exit."""
    path = tempfile.mkdtemp(prefix=prefix)
    if os.environ.get("AMPC_KEEP_TMP"):
        print(f"note: keeping {path}")
    else:
        atexit.register(shutil.rmtree, path, True)
    return path


def ampc(binary, *args, verbose=False):
    """`binary args...` run to its end, stdout and stderr captured as text (printed, with the
    command and its exit status, when verbose)."""
    r = subprocess.run([binary, *args], capture_output=True, text=True)
    if verbose:
        print(f"$ ampc {' '.join(map(repr, args))} -> {r.returncode}\n{r.stdout}{r.stderr}")
    return r


class Skip(Exception):
    """Raised by a test that cannot run here (a missing package): reported, not failed."""


def run(tests, ctx, verbose=False, notes=None):
    """Runs each (title, fn) as fn(ctx); prints failures (with a traceback for crashes or
    with verbose), the notes and skips, then the counts. Returns the exit status."""
    passed = failed = 0
    skips = []
    for title, fn in tests:
        try:
            fn(ctx)
        except Skip as e:
            skips.append(f"{title}: {e}")
            continue
        except Exception as e:
            failed += 1
            print(f"FAIL {title}: {e}")
            if verbose or not isinstance(e, AssertionError):
                traceback.print_exc()
            continue
        passed += 1
        if verbose:
            print(f"ok   {title}")
    for note in notes or []:
        print(f"note: {note}")
    for s in skips:
        print(f"note: skipped {s}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
