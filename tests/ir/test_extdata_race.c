/* External data against the check-then-open race (issue 26, point 2; the CVE-2024-27318
 * class): a component of the data file's path is swapped for a symlink out of the model's
 * folder at the very moment the loader opens it. The swap is made deterministic by
 * interposing open() and openat(): this executable defines them, so the library's calls
 * reach these first; they plant the symlink, then do the real open with the system call.
 * A loader that checks a name (realpath) and opens it again by name reads the file outside;
 * one that opens each component beneath a descriptor it holds, without following links,
 * refuses the link or reads the file that was inside. Either way never the outside bytes. */
#define _GNU_SOURCE /* syscall() */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ir/ir.h"
#include "tests/ir/irtest_util.h"

/* ---- the interposer ------------------------------------------------------------------ */

static struct {
    bool armed;
    const char *name;    /* swap when a component with this name is opened ... */
    const char *suffix;  /* ... or a whole path ending with this */
    const char *victim;  /* the entry replaced by the link */
    const char *moved;   /* where it goes */
    const char *target;  /* what the link points to */
    int swaps;
} race;

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static void maybe_swap(const char *path) {
    if (!race.armed || !path) return;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strcmp(base, race.name) != 0 && !ends_with(path, race.suffix)) return;
    race.armed = false;
    if (rename(race.victim, race.moved) == 0 && symlink(race.target, race.victim) == 0) race.swaps++;
}

int open(const char *path, int flags, ...);
int openat(int dirfd, const char *path, int flags, ...);

int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    maybe_swap(path);
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    maybe_swap(path);
    return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

/* ---- the model ----------------------------------------------------------------------- */

/* Y = Add(A, B): A external at `loc` (3 floats from offset 0), B inline. */
static void race_model(PbBuf *out, const char *loc) {
    const int64_t d[1] = {3};
    const float bv[3] = {1, 2, 3};
    PbBuf ta = {0}, tb = {0}, g = {0};
    onnx_tensor_head(&ta, "A", 1, 1, d);
    onnx_tensor_external(&ta, loc, 0, 12);
    onnx_tensor_head(&tb, "B", 1, 1, d);
    pb_bytes(&tb, T_RAW, bv, sizeof bv);
    const char *in[2] = {"A", "B"}, *o[1] = {"Y"};
    onnx_node(&g, "Add", "add", 2, in, 1, o, NULL);
    pb_str(&g, G_NAME, "g");
    pb_msg(&g, G_INIT, &ta);
    pb_msg(&g, G_INIT, &tb);
    onnx_vi(&g, G_OUTPUT, "Y", 1, 1, d);
    onnx_model(out, &g, 13);
}

static void write_floats(const char *path, float v) {
    const float f[3] = {v, v, v};
    cr_assert(tu_write(path, f, sizeof f), "writing %s", path);
}

/* root/model/sub/w.bin holds 1.0s (inside); root/outside/sub/w.bin holds 66.0s. */
typedef struct {
    char *root, *model, *sub, *file, *osub, *ofile, *moved;
} Tree;

static Tree make_tree(void) {
    Tree t;
    t.root = tu_mkdtemp();
    cr_assert_not_null(t.root);
    t.model = tu_path(t.root, "model");
    t.sub = tu_path(t.model, "sub");
    t.file = tu_path(t.sub, "w.bin");
    char *outside = tu_path(t.root, "outside");
    t.osub = tu_path(outside, "sub");
    t.ofile = tu_path(t.osub, "w.bin");
    cr_assert_eq(mkdir(t.model, 0755), 0);
    cr_assert_eq(mkdir(t.sub, 0755), 0);
    cr_assert_eq(mkdir(outside, 0755), 0);
    cr_assert_eq(mkdir(t.osub, 0755), 0);
    write_floats(t.file, 1.0f);
    write_floats(t.ofile, 66.0f);
    t.moved = NULL;
    free(outside);
    return t;
}

static void free_tree(Tree *t) {
    tu_rmtree(t->root);
    free(t->root), free(t->model), free(t->sub), free(t->file), free(t->osub), free(t->ofile);
    free(t->moved);
}

/* Loads the model with the swap armed; the load must fail, or A must hold the inside 1.0s. */
static void load_under_race(Tree *t) {
    PbBuf model = {0};
    race_model(&model, "sub/w.bin");
    AmpStatus st = {0};
    AmpModel *m = NULL;
    race.armed = true;
    race.swaps = 0;
    AmpCode rc = amp_model_load_bytes(model.data, model.len, t->model, NULL, &m, &st);
    if (rc == AMP_OK) {
        AmpValue *a = amp_graph_lookup(m->graph, "A");
        cr_assert(a && a->initializer);
        AmpBytes b;
        rc = amp_tensor_bytes(m, a->initializer, &b, &st);
        if (rc == AMP_OK) {
            cr_assert_eq(b.len, 12);
            float v[3];
            memcpy(v, b.data, 12);
            cr_assert(v[0] != 66.0f, "read the file outside the model's folder through the link");
            cr_assert(v[0] == 1.0f && v[1] == 1.0f && v[2] == 1.0f, "A = %g %g %g", (double)v[0],
                      (double)v[1], (double)v[2]);
        }
        amp_model_free(m);
    }
    race.armed = false;
    cr_assert_eq(race.swaps, 1, "the symlink was never planted: the open was not intercepted");
    if (rc != AMP_OK) {
        cr_assert_eq(rc, AMP_ERR_INPUT, "%s: %s", amp_code_name(rc), st.msg);
        cr_assert(tu_contains(st.msg, "sub/w.bin"), "%s", st.msg);
        cr_log_info("refused: %s", st.msg);
    }
    pb_free(&model);
}

/* The folder `sub` becomes a link to root/outside/sub (absolute or relative) when it, or
 * the path through it, is opened. */
static void swap_folder(const char *target_kind) {
    Tree t = make_tree();
    t.moved = tu_path(t.model, "sub.moved");
    char *rel = strdup("../outside/sub");
    race.name = "sub";
    race.suffix = "/sub/w.bin";
    race.victim = t.sub;
    race.moved = t.moved;
    race.target = strcmp(target_kind, "absolute") == 0 ? t.osub : rel;
    load_under_race(&t);
    free(rel);
    free_tree(&t);
}

Test(extdata_race, folder_swapped_for_an_absolute_link_while_opening) {
    swap_folder("absolute");
}

Test(extdata_race, folder_swapped_for_a_relative_link_while_opening) {
    swap_folder("relative");
}

/* The file itself becomes a link to root/outside/sub/w.bin when it is opened. */
Test(extdata_race, file_swapped_for_a_link_while_opening) {
    Tree t = make_tree();
    t.moved = tu_path(t.sub, "w.moved");
    race.name = "w.bin";
    race.suffix = "/sub/w.bin";
    race.victim = t.file;
    race.moved = t.moved;
    race.target = t.ofile;
    load_under_race(&t);
    free_tree(&t);
}

/* Without a race: a link planted beforehand in the middle of the path, to outside, is
 * refused by the open itself; one that stays inside (through "..") is followed. */
Test(extdata_race, links_planted_before_the_load) {
    Tree t = make_tree();
    char *l1 = tu_path(t.model, "out"), *l2 = tu_path(t.model, "in"), *l3 = tu_path(t.sub, "back");
    cr_assert_eq(symlink(t.osub, l1), 0);
    cr_assert_eq(symlink("sub", l2), 0);
    cr_assert_eq(symlink("../sub/./w.bin", l3), 0);
    const char *bad[] = {"out/w.bin"}, *good[] = {"in/w.bin", "sub/back", "in/back", "./sub//w.bin"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad + sizeof good / sizeof *good; i++) {
        bool ok = i >= sizeof bad / sizeof *bad;
        const char *loc = ok ? good[i - sizeof bad / sizeof *bad] : bad[i];
        PbBuf model = {0};
        race_model(&model, loc);
        AmpStatus st = {0};
        AmpModel *m = NULL;
        AmpCode rc = amp_model_load_bytes(model.data, model.len, t.model, NULL, &m, &st);
        AmpBytes b = {0};
        if (rc == AMP_OK) {
            rc = amp_tensor_bytes(m, amp_graph_lookup(m->graph, "A")->initializer, &b, &st);
            if (rc == AMP_OK) {
                float v;
                memcpy(&v, b.data, 4);
                cr_assert_eq(v, 1.0f, "%s: read %g", loc, (double)v);
            }
        }
        if (ok) {
            cr_assert_eq(rc, AMP_OK, "%s: %s", loc, st.msg);
        } else {
            cr_assert_eq(rc, AMP_ERR_INPUT, "%s: %s", loc, amp_code_name(rc));
            cr_assert(tu_contains(st.msg, "outside the model's folder"), "%s: %s", loc, st.msg);
        }
        if (m) amp_model_free(m);
        pb_free(&model);
    }
    free(l1), free(l2), free(l3);
    free_tree(&t);
}
