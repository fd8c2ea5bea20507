#!/usr/bin/env python3
"""The layering of docs/design.md ("Layers") as a test: every #include "x.h" of the project's
C, CUDA and header files names a header of a folder the including folder may use.

    ir/            -> ir
    ops/           -> ir, ops                (what every backend computes alike: the
                                            scalar math of the elementwise functions, each
                                            op's attributes parsed at prepare, its shape
                                            checks and geometry, the output checks)
    passes/        -> ir, passes
    backend/       -> ir, backend            (the backend interface)
    kernels/cpu/   -> ir, ops, backend, kernels/cpu
    kernels/cuda/  -> ir, ops, backend, kernels/cuda   (what it shares with the CPU kernels
                                            is in ops/, never a kernels/cpu header)
    runtime/       -> ir, passes, backend, runtime   (never a kernels/ header)
    comm/          -> backend, comm          (the MPI plugin: backend/comm.h's interface)
    tools/         -> anything

So the runtime reaches devices only through backend/backend.h, and nothing includes a
layer above its own; the one exception is data: runtime/ may expand ops/unary.def (which
unary ops fuse: DATA_TABLES). A header named in two folders, or an include the table does not
allow, fails the test with the file and line.

And every include names its header from the repository root ("ir/ir.h",
"kernels/cpu/kernels.h", "tests/runtime/rt_util.h") or, for the public headers of
include/, as "ampc/ampc.h" and "ampc/status.h" (every layer may use status.h; the runtime
and tools ampc.h, and backend/ its AmpBackendKind); only the generated "onnx.pb-c.h" is named bare. So two folders may hold
headers of one name (a `kernels.h` per backend) without an include meaning either.

And below the includes, the symbols (tests/layout/test_layers.py parses the sources: the
functions and variables each .c / extern "C" .cu file defines with external linkage, and
every identifier each file names; no build needed, so kernels/cuda is checked on a machine
without CUDA):

- calls across layers: a file may name a symbol defined in a layer it may include (the
  table above), never one of a layer above it (a kernel calling the runtime, backend/
  calling a backend it selects, a header of a lower layer declaring a higher layer's
  function). ir/ops.def is data: its columns are named where a table expands them;
- one definition per name: a function defined in two files (a stub sharing the real
  function's name under #ifdef) fails;
- import circles across files: file A names a symbol defined in B, or includes B's header
  (b.h of b.c / b.cu), and B reaches A back the same way. Helpers several files share go
  to a leaf file of their own. The circles that stand today are listed in KNOWN_CIRCLES
  (issue 37), each to be split: a circle with a file outside every listed one fails.

Prints "N passed, M failed" last.

usage: test_layers.py [--ampc PATH] [--testdata DIR]   (both ignored: no build needed)
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ALLOWED = {
    "ir": {"ir"},
    "ops": {"ir", "ops"},
    "passes": {"ir", "passes"},
    "backend": {"ir", "backend"},
    "kernels/cpu": {"ir", "ops", "backend", "kernels/cpu"},
    "kernels/cuda": {"ir", "ops", "backend", "kernels/cuda"},
    "runtime": {"ir", "passes", "backend", "runtime"},
    # the MPI communicator plugin (libampc_mpi.so): backend/comm.h's interface, nothing else
    "comm": {"backend", "comm"},
    "tools": None,  # the command and its benchmarks may use every layer
}
# Data tables of ops/ that the runtime may expand, though it includes no other ops/ file:
# ops/unary.def's lines say which unary ops fuse (their FUSE column), which the runtime's
# fusion (runtime/fuse_chain.c) reads, keeping that column and the op's id and dropping the
# math, so it names nothing of ops/ (the symbol check below holds it to that).
DATA_TABLES = {("runtime", "unary.def")}
SOURCE_EXT = (".c", ".h", ".cu", ".cuh", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_files():
    for layer in ALLOWED:
        d = os.path.join(ROOT, layer)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(SOURCE_EXT):
                yield layer, name


def check(files):
    """Returns the list of violations (strings) for files = [(layer, name)]."""
    home, problems = {}, []
    for layer, name in files:
        if name.endswith((".h", ".cuh", ".def")):
            if name in home and home[name] != layer:
                problems.append(f"header {name} is in both {home[name]}/ and {layer}/")
            home[name] = layer
    for layer, name in files:
        allowed = ALLOWED[layer]
        with open(os.path.join(ROOT, layer, name), encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = os.path.basename(m.group(1))
                where = home.get(inc)
                if where is None:
                    continue  # generated (onnx.pb-c.h) or a system header in quotes
                if allowed is not None and where not in allowed and (layer, inc) not in DATA_TABLES:
                    problems.append(f"{layer}/{name}:{lineno}: includes {inc} of {where}/, "
                                    f"which {layer}/ may not use")
    return problems


GENERATED = {"onnx.pb-c.h"}
QUALIFY_DIRS = ("ir", "ops", "passes", "backend", "kernels", "runtime", "tools", "tests", "include")


def unqualified(root):
    """Includes of the tree's own files that do not name them from the root (or ampc/)."""
    problems = []
    for top in QUALIFY_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(1) in GENERATED:
                            continue
                        inc = m.group(1)
                        target = os.path.join(root, "include", inc) if inc.startswith("ampc/") else os.path.join(root, inc)
                        if inc.startswith(".") or "/" not in inc or not os.path.isfile(target):
                            if "/" not in inc and not os.path.isfile(os.path.join(dirpath, inc)) \
                                    and not any(os.path.isfile(os.path.join(root, d, inc)) for d in ALLOWED):
                                continue  # a system header in quotes
                            problems.append(f'{rel}:{lineno}: #include "{inc}" does not name the file from the '
                                            f"repository root (or ampc/ for include/)")
    return problems


# ---- symbols: definitions, uses, circles -------------------------------------------------

TOKEN = re.compile(r'[A-Za-z_]\w*|->|\S')
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "goto", "_Alignof",
            "_Static_assert", "typedef", "struct", "union", "enum", "static", "extern", "inline", "const",
            "volatile", "register", "void", "char", "short", "int", "long", "float", "double", "signed",
            "unsigned", "_Bool", "bool", "defined", "__attribute__", "template", "namespace", "using"}


def strip(text):
    """The code of a C / CUDA file without comments, string and character literals, and
    preprocessor lines (continued lines included); newlines kept."""
    out, i, n = [], 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if at_line_start and c == "#":  # a directive, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                if text.startswith("/*", i):  # a comment inside a directive may span lines
                    j = text.find("*/", i + 2)
                    j = n if j < 0 else j + 2
                    out.append("\n" * text.count("\n", i, j))
                    i = j
                    continue
                i += 1
            continue
        at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)  # an empty literal: extern "C" stays recognisable as extern ""
            out.append("\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "\n":
            at_line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def scan(path):
    """(definitions, uses) of one file: the names of the functions and variables it defines
    at file scope with external linkage (for .cu, only extern "C" functions), and every
    identifier it names that is not a member (after . or ->), with its line."""
    with open(path, encoding="utf-8", errors="replace") as f:
        code = strip(f.read())
    cu = path.endswith((".cu", ".cuh"))
    header = path.endswith((".h", ".cuh", ".def"))
    toks = []  # (token, line)
    for lineno, line in enumerate(code.split("\n"), 1):
        toks.extend((t, lineno) for t in TOKEN.findall(line))
    defs, uses, decls = {}, [], set()
    depth = 0
    chunk = []  # tokens of the current file-scope declaration
    paren = 0
    prev = None
    for t, line in toks:
        if re.match(r'[A-Za-z_]', t) and prev not in (".", "->") and t not in KEYWORDS:
            uses.append((t, line))
        prev = t
        if depth == 0:
            if t == "(":
                paren += 1
            elif t == ")":
                paren -= 1
            if t == "{" and paren == 0:
                name = declared(chunk, cu, function=True)
                if name and not header:
                    defs.setdefault(name, chunk[0][1] if chunk else line)
                elif not name and not header:
                    # an initializer: `T name[] = {` (variable)
                    name = declared(chunk, cu, function=False)
                    if name:
                        defs.setdefault(name, chunk[0][1])
                depth += 1
                continue
            if t == ";" and paren == 0:
                if header:
                    name = prototype(chunk)
                    if name:
                        decls.add(name)
                if not header:
                    name = declared(chunk, cu, function=False)
                    if name:
                        defs.setdefault(name, chunk[0][1])
                chunk = []
                continue
            chunk.append((t, line))
        else:
            if t == "{":
                depth += 1
            elif t == "}":
                depth -= 1
                if depth == 0:
                    # the end of a function body ends its declaration; an initializer's
                    # `};` ends at the ';'
                    if chunk and not any(x == "=" for x, _ in chunk):
                        chunk = []
    return defs, uses, decls


def declared(chunk, cu, function):
    """The name a file-scope declaration defines with external linkage, or None."""
    words = [t for t, _ in chunk]
    if not words or words[0] in ("typedef", "struct", "union", "enum") and "(" not in words and "=" not in words:
        return None
    if "static" in words or "typedef" in words:
        return None
    if cu and not (len(words) > 1 and words[0] == "extern" and words[1] == '""'):
        return None
    if function:
        if "=" in words or "(" not in words:
            return None
        # the identifier before the first '(' that opens the parameter list
        i = words.index("(")
        while i > 0 and words[i - 1] == ")":  # a parenthesised declarator: rare, not ours
            return None
        name = words[i - 1] if i > 0 else None
        return name if name and re.match(r'[A-Za-z_]\w*$', name) and name not in KEYWORDS else None
    if "extern" in words and "=" not in words:
        return None  # a declaration, not a definition
    if "(" in words and ("=" not in words or words.index("(") < words.index("=")):
        return None  # a function prototype (or a function pointer: left out)
    end = words.index("=") if "=" in words else len(words)
    head = words[:end]
    if "[" in head:
        head = head[:head.index("[")]
    name = head[-1] if head else None
    if name in ("struct", "union", "enum") or not name or not re.match(r'[A-Za-z_]\w*$', name) or name in KEYWORDS:
        return None
    if len(head) < 2:
        return None
    return name


def prototype(chunk):
    """The name a header's file-scope declaration declares (a function prototype or an
    extern variable), or None."""
    words = [t for t, _ in chunk]
    if not words or words[0] in ("typedef", "static") or "static" in words:
        return None
    if "(" in words:
        i = words.index("(")
        name = words[i - 1] if i > 0 else None
    elif words[0] == "extern":
        head = words[:words.index("[")] if "[" in words else words
        name = head[-1]
    else:
        return None
    return name if name and re.match(r'[A-Za-z_]\w*$', name) and name not in KEYWORDS else None


# The folder whose calls a folder may make: the include table (ALLOWED).
CALLABLE = ALLOWED

# Circles that stand today (issue 37, "Import circles"), each a set of files that reach one
# another; a circle passes when all its files are in one set. Each is to be split by moving
# the helpers its files share to a leaf file, or by handing a recursion's way back up down
# as a function pointer (the loader's LoadCtx.load_graph, the executor's AmpExecBodyFn);
# remove the set then. None stands.
KNOWN_CIRCLES = []


# `#define vfail amp_verify_fail`: a short name for a function, which the stripped code
# names in its place.
ALIAS = re.compile(r'^\s*#\s*define\s+([A-Za-z_]\w*)\s+([A-Za-z_]\w*)\s*$')


def symbol_graph(root, files, why=None):
    """(problems, circles) for files = [(layer, name)] under root: calls a layer may not
    make, names defined twice, and the circles (lists of files, each sorted). why, a dict,
    gets for each edge (a, b) the symbols (or "#include b.h") that make it."""
    defs, uses, includes, own, aliases = {}, {}, {}, {}, {}
    problems = []
    for layer, name in files:
        path = f"{layer}/{name}"
        d, u, _ = scan(os.path.join(root, path))
        uses[path] = u
        own[path] = set(d)
        for sym, line in d.items():
            if sym in defs and sym != "main":  # every program has its main
                problems.append(f"{path}:{line}: {sym} is defined in {defs[sym]} too")
            defs.setdefault(sym, path)
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        includes[path] = [m.group(1) for m in map(INCLUDE.match, lines) if m]
        for m in filter(None, map(ALIAS.match, lines)):
            aliases.setdefault(m.group(1), m.group(2))
    why = {} if why is None else why
    edges = {p: set() for p in uses}
    for path, u in uses.items():
        layer = os.path.dirname(path)
        allowed = CALLABLE[layer]
        reported = set()
        for sym, line in u:
            if sym not in defs and aliases.get(sym) in defs:
                sym = aliases[sym]
            q = defs.get(sym)
            if not q or sym in own[path] or sym == "main":
                continue
            if path.endswith(".def"):
                continue  # data, named where a table expands it
            edges[path].add(q)
            why.setdefault((path, q), set()).add(sym)
            where = os.path.dirname(q)
            if allowed is not None and where not in allowed and (sym, q) not in reported:
                reported.add((sym, q))
                problems.append(f"{path}:{line}: names {sym} of {q}, a layer {layer}/ may not call")
    stem = lambda p: os.path.splitext(p)[0]
    for path, incs in includes.items():
        for inc in incs:
            for ext in (".c", ".cu"):
                q = stem(inc) + ext
                if q in edges and stem(q) != stem(path):  # x.c and x.cu share x.h
                    edges[path].add(q)
                    why.setdefault((path, q), set()).add("#include " + inc)
    return problems, strongly_connected(edges)


def strongly_connected(edges):
    """The strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def new_circles(circles, known):
    return [c for c in circles if not any(set(c) <= k for k in known)]


def main():
    global ROOT
    files = list(layer_files())
    passed = failed = 0
    problems = check(files)
    for p in problems:
        print("FAIL", p)
    failed += bool(problems)
    passed += not problems
    problems = unqualified(os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
    for p in problems[:40]:
        print("FAIL", p)
    failed += bool(problems)
    passed += not problems
    why = {}
    problems, circles = symbol_graph(ROOT, files, why)
    for p in problems:
        print("FAIL", p)
    failed += bool(problems)
    passed += not problems
    fresh = new_circles(circles, KNOWN_CIRCLES)
    for c in fresh:
        print(f"FAIL an import circle of {len(c)} files:", " ".join(c))
        for (a, b), syms in sorted(why.items()):
            if a in c and b in c:  # what makes it: each edge inside it, with its symbols
                print(f"    {a} -> {b}: {' '.join(sorted(syms))[:300]}")
    failed += bool(fresh)
    passed += not fresh
    for k in KNOWN_CIRCLES:
        if not any(set(c) <= k for c in circles):
            print("note: a circle of KNOWN_CIRCLES is gone; remove it:", " ".join(sorted(k))[:200])
    print(f"{len(circles)} import circles ({len(circles) - len(fresh)} known): largest "
          f"{max((len(c) for c in circles), default=0)} files")
    # The check itself must be able to fail: a runtime file that includes a CPU kernel
    # header, and a kernel that includes a runtime header, are both caught.
    import tempfile
    real_root = ROOT
    with tempfile.TemporaryDirectory() as tmp:
        for layer in ("runtime", "kernels/cpu", "backend", "ir"):
            os.makedirs(os.path.join(tmp, layer))
        planted = {
            "runtime/bad.c": '#include "kernels.h"\n',
            "kernels/cpu/kernels.h": "\n",
            "kernels/cpu/bad2.c": '#include "exec.h"\n',
            "runtime/exec.h": "\n",
            "backend/backend.h": "\n",
            "ir/ir.h": "\n",
        }
        for path, text in planted.items():
            with open(os.path.join(tmp, path), "w") as f:
                f.write(text)
        ROOT = tmp
        got = check([(os.path.dirname(p), os.path.basename(p)) for p in planted])
        ROOT = real_root
    if len(got) == 2:
        passed += 1
    else:
        failed += 1
        print("FAIL the planted violations were not both found:", got)
    # ... and so must the qualified-path rule: a bare name and a relative path are caught,
    # a qualified one and the generated header are not
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("ir", "tests/ir", "include/ampc"):
            os.makedirs(os.path.join(tmp, d))
        planted = {"ir/ir.h": "\n", "include/ampc/status.h": "\n", "tests/ir/util.h": "\n",
                   "ir/a.c": '#include "ir.h"\n#include "ir/ir.h"\n#include "ampc/status.h"\n#include "onnx.pb-c.h"\n',
                   "tests/ir/b.c": '#include "../ir/util.h"\n#include "tests/ir/util.h"\n'}
        for path, text in planted.items():
            with open(os.path.join(tmp, path), "w") as f:
                f.write(text)
        got = unqualified(tmp)
    if len(got) == 2 and "ir/a.c:1:" in got[0] and "tests/ir/b.c:1:" in got[1]:
        passed += 1
    else:
        failed += 1
        print("FAIL the planted unqualified includes were not both found:", got)
    # ... and so must the symbol checks: backend/ calling a backend it selects, a kernel
    # calling the runtime, the runtime calling a kernel, a stub sharing a name, a circle
    # through a header and one through calls; but not a runtime file calling backend/, a
    # static function named alike in two files, or a .c and .cu sharing their header.
    with tempfile.TemporaryDirectory() as tmp:
        for layer in ("runtime", "kernels/cpu", "kernels/cuda", "backend", "ir"):
            os.makedirs(os.path.join(tmp, layer))
        planted = {
            "backend/backend.h": "int amp_be_open(void);\n",
            "backend/backend.c": '#include "backend/backend.h"\nint amp_cuda_open(void);\n'
                                 'int amp_be_open(void) { return amp_cuda_open(); }\n',
            "kernels/cuda/be_cuda.c": '#include "backend/backend.h"\nint amp_cuda_open(void) { return 1; }\n'
                                      'static int helper(void) { return 2; }\n',
            "kernels/cpu/k.c": "int amp_session_go(void);\nint amp_k(void) { return amp_session_go(); }\n"
                               "static int helper(void) { return 3; }\n",
            "runtime/s.c": '#include "backend/backend.h"\nint amp_k(void);\n'
                           "int amp_session_go(void) { return amp_be_open() + amp_k(); }\n",
            "runtime/stub.c": "int amp_cuda_open(void) { return 0; } /* a stub of the real one */\n",
            "ir/a.c": '#include "ir/b.h"\nint amp_a(void) { return 1; }\n',
            "ir/b.h": "int amp_b(void);\n",
            "ir/b.c": "int amp_a(void);\nint amp_b(void) { return amp_a(); }\n",
            "ir/c.h": "int amp_c(void);\n",
            "ir/c.c": '#include "ir/c.h"\nint amp_c(void) { return 0; }\n',
            "ir/c.cu": '#include "ir/c.h"\nextern "C" int amp_c_launch(void) { return amp_c(); }\n',
        }
        for path, text in planted.items():
            with open(os.path.join(tmp, path), "w") as f:
                f.write(text)
        got, circ = symbol_graph(tmp, [(os.path.dirname(p), os.path.basename(p)) for p in sorted(planted)])
    want = ["backend/backend.c:2: names amp_cuda_open of kernels/cuda/be_cuda.c",
            "kernels/cpu/k.c:1: names amp_session_go of runtime/s.c",
            "runtime/s.c:2: names amp_k of kernels/cpu/k.c",
            "amp_cuda_open is defined in kernels/cuda/be_cuda.c too"]
    circ_want = [["backend/backend.c", "kernels/cuda/be_cuda.c"], ["ir/a.c", "ir/b.c"],
                 ["kernels/cpu/k.c", "runtime/s.c"]]
    if len(got) == len(want) and all(any(w in g for g in got) for w in want) and sorted(circ) == circ_want \
            and new_circles(circ, [{"ir/a.c", "ir/b.c"}]) == [circ_want[0], circ_want[2]]:
        passed += 1
    else:
        failed += 1
        print("FAIL the planted symbol violations were not found as planted:", got, circ)
    print(f"{len(files)} files checked")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
