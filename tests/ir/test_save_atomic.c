/* A save with external data is one step for whoever reads it: the model file and its data
 * file always match, whatever interrupts the save. Fault injection: this executable
 * defines rename() and unlink(), which the saver's calls reach before libc's, and makes
 * the k-th of them fail (EIO) or end the process there (as a kill would), for every k of
 * a save. After each, the model on disk must load and read exactly the weights it was
 * saved with: the old model with the old weights, or the new one with the new. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/ir.h"
#include "tests/ir/irtest_util.h"

enum { N = 2048 }; /* floats in W: 8 KiB, saved external */

/* ---- fault injection ------------------------------------------------------------ */

static int fail_at = -1; /* the call (counted from 0) that fails; -1: none */
static int calls;
static bool kill_there; /* end the process there instead of failing */

static bool trip(void) {
    if (fail_at < 0 || calls++ != fail_at) return false;
    if (kill_there) _exit(0);
    errno = EIO;
    return true;
}

int rename(const char *from, const char *to) {
    return trip() ? -1 : renameat(AT_FDCWD, from, AT_FDCWD, to);
}

int unlink(const char *path) {
    return trip() ? -1 : unlinkat(AT_FDCWD, path, 0);
}

/* ---- models ----------------------------------------------------------------------- */

/* Weights of model `gen`: W[i] = gen * 10000 + i. */
static float w_of(int gen, size_t i) {
    return (float)gen * 10000.0f + (float)i;
}

/* Z = X + W, the graph named "g<gen>", W of generation gen. */
static AmpModel *build(int gen) {
    AmpModel *m = amp_model_new();
    cr_assert_not_null(m);
    m->has |= AMP_MODEL_HAS_IR_VERSION;
    m->ir_version = 8;
    m->opsets = amp_arena_calloc(&m->arena, 1, sizeof *m->opsets);
    m->opsets[0] = (AmpOpset){.domain = "", .version = 13, .has_version = true};
    m->n_opsets = 1;
    AmpGraph *g = m->graph;
    char *name = amp_arena_calloc(&m->arena, 1, 16);
    snprintf(name, 16, "g%d", gen);
    g->name = name;
    AmpValue *x = amp_graph_value(g, "X"), *w = amp_graph_value(g, "W"), *z = amp_graph_value(g, "Z");
    AmpValue *vs[3] = {x, w, z};
    for (int i = 0; i < 3; i++) {
        AmpDim *d = amp_arena_calloc(&m->arena, 1, sizeof *d);
        d->value = N;
        vs[i]->type = (AmpType){AMP_TYPE_TENSOR, AMP_DT_FLOAT, 1, d};
    }
    AmpTensor *t = amp_arena_calloc(&m->arena, 1, sizeof *t);
    t->dtype = AMP_DT_FLOAT;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->ndims = 1;
    t->dims = amp_arena_calloc(&m->arena, 1, sizeof *t->dims);
    t->dims[0] = N;
    t->nelem = N;
    float *d = amp_arena_calloc(&m->arena, N, sizeof *d);
    for (size_t i = 0; i < N; i++) d[i] = w_of(gen, i);
    t->raw.data = (const uint8_t *)d;
    t->raw.len = N * sizeof *d;
    amp_graph_add_input(g, x);
    cr_assert_eq(amp_graph_add_initializer(g, w, t), AMP_OK);
    AmpNode *add = amp_node_new(g, "", "Add", "add", 2, 1);
    amp_node_set_input(add, 0, x);
    amp_node_set_input(add, 1, w);
    amp_node_set_output(add, 0, z);
    amp_node_append(g, add);
    amp_graph_add_output(g, z);
    return m;
}

static AmpCode save(int gen, const char *path, AmpStatus *st) {
    AmpModel *m = build(gen);
    AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_ALWAYS, .external_min_bytes = 1024};
    AmpCode rc = amp_model_save_file(m, path, &so, st);
    amp_model_free(m);
    return rc;
}

/* The generation of the model at path, after checking that W is that generation's. */
static int check_consistent(const char *path) {
    AmpStatus st = {0};
    AmpModel *m = NULL;
    cr_assert_eq(amp_model_load_file(path, NULL, &m, &st), AMP_OK, "%s: %s", path, st.msg);
    int gen = -1;
    cr_assert_eq(sscanf(m->graph->name, "g%d", &gen), 1);
    AmpValue *w = amp_graph_lookup(m->graph, "W");
    cr_assert(w && w->initializer && w->initializer->is_external);
    AmpBytes b;
    cr_assert_eq(amp_tensor_bytes(m, w->initializer, &b, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(b.len, N * sizeof(float));
    for (size_t i = 0; i < N; i++) {
        float f;
        memcpy(&f, b.data + 4 * i, 4);
        cr_assert_eq(f, w_of(gen, i), "model g%d reads W[%zu] = %g: another save's data", gen, i, (double)f);
    }
    amp_model_free(m);
    return gen;
}

/* Files in dir other than leftover temporaries (a killed save may leave those). */
static int count_kept(const char *dir) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

/* Saves generation 1 (and 2, when `twice`: the data file then has its other name) over
 * nothing, then generation 9 with the k-th rename/unlink failing or killing the process.
 * Returns false once k is past the save's last such call. */
static bool interrupted_save(int k, bool kill, bool twice) {
    char *dir = tu_mkdtemp(), *path = tu_path(dir, "model.onnx");
    AmpStatus st = {0};
    int first = twice ? 2 : 1;
    cr_assert_eq(save(1, path, &st), AMP_OK, "%s", st.msg);
    if (twice) cr_assert_eq(save(2, path, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(check_consistent(path), first);
    bool reached = true;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        fail_at = k, calls = 0, kill_there = kill;
        AmpStatus cst = {0};
        AmpCode rc = save(9, path, &cst);
        /* 3: not reached; 4: reached, the save failed; 0: it succeeded anyway. */
        _exit(calls <= k ? 3 : rc ? 4 : 0);
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFEXITED(ws));
    int code = WEXITSTATUS(ws);
    if (code == 3) reached = false;
    int gen = check_consistent(path);
    cr_assert(gen == first || gen == 9, "generation %d", gen);
    if (!kill && code == 4) cr_assert_eq(gen, first, "a failed save replaced the model");
    /* The next save goes through and leaves the model and its data only. */
    cr_assert_eq(save(5, path, &st), AMP_OK, "%s", st.msg);
    cr_assert_eq(check_consistent(path), 5);
    cr_assert_eq(count_kept(dir), 2, "a stale data file was left (after k=%d)", k);
    tu_rmtree(dir);
    free(dir);
    free(path);
    return reached;
}

static void every_step(bool kill, bool twice) {
    int k = 0;
    while (interrupted_save(k, kill, twice)) k++;
    cr_assert_geq(k, 2, "the save made %d renames", k);
}

Test(save_atomic, a_failure_at_any_step_keeps_model_and_data_matched) {
    every_step(false, false);
    every_step(false, true);
}

Test(save_atomic, a_kill_at_any_step_keeps_model_and_data_matched) {
    every_step(true, false);
    every_step(true, true);
}

/* Saving without external data over a model that had some removes its data file. */
Test(save_atomic, a_single_file_save_removes_the_replaced_data) {
    char *dir = tu_mkdtemp(), *path = tu_path(dir, "model.onnx");
    AmpStatus st = {0};
    cr_assert_eq(save(1, path, &st), AMP_OK, "%s", st.msg);
    AmpModel *m = build(2);
    AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_NEVER};
    cr_assert_eq(amp_model_save_file(m, path, &so, &st), AMP_OK, "%s", st.msg);
    amp_model_free(m);
    cr_assert_eq(tu_count_entries(dir), 1);
    tu_rmtree(dir);
    free(dir);
    free(path);
}

/* Concurrent saves to one output take turns: whatever order they end in, the model left
 * reads its own data, and one data file is left. */
Test(save_atomic, concurrent_saves_leave_a_matched_pair) {
    char *dir = tu_mkdtemp(), *path = tu_path(dir, "model.onnx");
    enum { WRITERS = 4, ROUNDS = 25 };
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        cr_assert_geq(pids[w] = fork(), 0);
        if (pids[w] == 0) {
            AmpStatus st = {0};
            for (int r = 0; r < ROUNDS; r++)
                if (save(10 + w, path, &st)) _exit(1);
            _exit(0);
        }
    }
    for (int w = 0; w < WRITERS; w++) {
        int ws;
        cr_assert_eq(waitpid(pids[w], &ws, 0), pids[w]);
        cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "writer %d failed", w);
    }
    int gen = check_consistent(path);
    cr_assert(gen >= 10 && gen < 10 + WRITERS);
    cr_assert_eq(tu_count_entries(dir), 2);
    tu_rmtree(dir);
    free(dir);
    free(path);
}
