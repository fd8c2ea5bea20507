/* The memory planner on synthetic lifetimes (no two live-overlapping buffers share a
 * byte, the arena never exceeds the sum of sizes and meets the max-live bound in simple
 * cases), and the interpreter's arena on real models: every conformance model whose ops
 * the CPU runs gives bit-identical outputs from its planned second run and its first. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/test_file_util.h"
#include "runtime/amp_auto.h"
#include "runtime/exec.h"
#include "runtime/plan.h"

static void assert_valid(const AmpPlanItem *it, size_t n, size_t align, size_t arena) {
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(it[i].offset % align, 0, "item %zu at %zu is not aligned", i, it[i].offset);
        if (it[i].size) cr_assert_leq(it[i].offset + it[i].size, arena, "item %zu past the arena", i);
        for (size_t j = i + 1; j < n; j++) {
            bool live_together = it[i].first <= it[j].last && it[j].first <= it[i].last;
            bool bytes_overlap = it[i].size && it[j].size && it[i].offset < it[j].offset + it[j].size &&
                                 it[j].offset < it[i].offset + it[i].size;
            cr_assert_not(live_together && bytes_overlap, "items %zu [%d,%d] and %zu [%d,%d] share bytes", i,
                          it[i].first, it[i].last, j, it[j].first, it[j].last);
        }
    }
}

static size_t sum_sizes(const AmpPlanItem *it, size_t n, size_t align) {
    size_t s = 0;
    for (size_t i = 0; i < n; i++) s += (it[i].size + align - 1) / align * align;
    return s;
}

Test(plan, chain_reuses_memory) {
    /* a -> b -> c -> d: each buffer lives from its producer to its one consumer. */
    AmpPlanItem it[4] = {{1000, 0, 1, 0}, {1000, 1, 2, 0}, {1000, 2, 3, 0}, {1000, 3, 4, 0}};
    size_t arena;
    AmpStatus st = {0};
    cr_assert_eq(amp_plan_offsets(it, 4, 64, &arena, &st), AMP_OK, "%s", st.msg);
    assert_valid(it, 4, 64, arena);
    cr_assert_eq(arena, amp_plan_max_live(it, 4, 64), "arena %zu, max live %zu", arena, amp_plan_max_live(it, 4, 64));
    cr_assert_eq(arena, 2 * 1024);
}

Test(plan, all_live_is_the_sum) {
    AmpPlanItem it[3] = {{100, 0, 5, 0}, {200, 1, 5, 0}, {300, 2, 5, 0}};
    size_t arena;
    cr_assert_eq(amp_plan_offsets(it, 3, 64, &arena, NULL), AMP_OK);
    assert_valid(it, 3, 64, arena);
    cr_assert_eq(arena, sum_sizes(it, 3, 64));
}

Test(plan, disjoint_lifetimes_share_one_place) {
    AmpPlanItem it[3] = {{4096, 0, 0, 0}, {4096, 1, 1, 0}, {4096, 2, 2, 0}};
    size_t arena;
    cr_assert_eq(amp_plan_offsets(it, 3, 64, &arena, NULL), AMP_OK);
    for (int i = 0; i < 3; i++) cr_assert_eq(it[i].offset, 0);
    cr_assert_eq(arena, 4096);
}

Test(plan, zero_sizes_and_empty) {
    AmpPlanItem it[2] = {{0, 0, 3, 7}, {10, 1, 2, 0}};
    size_t arena = 1;
    cr_assert_eq(amp_plan_offsets(NULL, 0, 64, &arena, NULL), AMP_OK);
    cr_assert_eq(arena, 0);
    cr_assert_eq(amp_plan_offsets(it, 2, 16, &arena, NULL), AMP_OK);
    cr_assert_eq(it[0].offset, 0);
    cr_assert_eq(arena, 16);
}

Test(plan, bad_items_are_errors) {
    AmpPlanItem it[1] = {{10, 5, 2, 0}};
    size_t arena;
    AmpStatus st = {0};
    cr_assert_eq(amp_plan_offsets(it, 1, 64, &arena, &st), AMP_ERR_INTERNAL);
    cr_assert_not_null(strstr(st.msg, "before it starts"), "%s", st.msg);
    AmpPlanItem big[1] = {{SIZE_MAX - 3, 0, 0, 0}};
    amp_status_clear(&st);
    cr_assert_eq(amp_plan_offsets(big, 1, 64, &arena, &st), AMP_ERR_INTERNAL);
    amp_status_clear(&st);
    cr_assert_eq(amp_plan_offsets(it, 1, 48, &arena, &st), AMP_ERR_INTERNAL, "48 is no power of two");
}

/* Random lifetimes: always valid, never above the sum, never below the max-live bound,
 * and deterministic. */
Test(plan, random_lifetimes) {
    uint64_t r = 12345;
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + (size_t)(round % 60);
        AmpPlanItem it[64], again[64];
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            int first = (int)((r >> 33) % 40);
            int len = (int)((r >> 20) % 12);
            size_t size = (size_t)((r >> 40) % 5000);
            it[i] = (AmpPlanItem){size, first, first + len, 0};
        }
        memcpy(again, it, sizeof it);
        size_t arena, arena2;
        cr_assert_eq(amp_plan_offsets(it, n, 64, &arena, NULL), AMP_OK);
        assert_valid(it, n, 64, arena);
        cr_assert_leq(arena, sum_sizes(it, n, 64));
        cr_assert_geq(arena, amp_plan_max_live(it, n, 64));
        cr_assert_eq(amp_plan_offsets(again, n, 64, &arena2, NULL), AMP_OK);
        cr_assert_eq(arena, arena2);
        for (size_t i = 0; i < n; i++) cr_assert_eq(it[i].offset, again[i].offset);
    }
}

/* The planner before its segment tree (a scan of every placed buffer per buffer, O(n^2)):
 * the tree must find the same overlapping set, so every offset is the same. */
static int cmp_ref_key(const void *pa, const void *pb) {
    const size_t *a = pa, *b = pb; /* {size, first, index} */
    if (a[0] != b[0]) return a[0] > b[0] ? -1 : 1;
    if (a[1] != b[1]) return a[1] < b[1] ? -1 : 1;
    return a[2] < b[2] ? -1 : a[2] > b[2];
}

static int cmp_ref_span(const void *pa, const void *pb) {
    const size_t *a = pa, *b = pb;
    return a[0] < b[0] ? -1 : a[0] > b[0];
}

static size_t reference_plan(AmpPlanItem *it, size_t n, size_t align) {
    size_t(*keys)[3] = malloc(n * sizeof *keys), (*spans)[2] = malloc(n * sizeof *spans), *placed = malloc(n * sizeof *placed);
    for (size_t i = 0; i < n; i++) {
        keys[i][0] = (it[i].size + align - 1) / align * align;
        keys[i][1] = (size_t)(it[i].first + 1000000); /* ordered as the ints are */
        keys[i][2] = i;
        it[i].offset = 0;
    }
    qsort(keys, n, sizeof *keys, cmp_ref_key);
    size_t np = 0, end = 0;
    for (size_t k = 0; k < n; k++) {
        size_t size = keys[k][0];
        AmpPlanItem *x = &it[keys[k][2]];
        if (!size) continue;
        size_t ns = 0;
        for (size_t j = 0; j < np; j++) {
            const AmpPlanItem *o = &it[placed[j]];
            if (o->first <= x->last && x->first <= o->last) {
                spans[ns][0] = o->offset;
                spans[ns++][1] = o->offset + (o->size + align - 1) / align * align;
            }
        }
        qsort(spans, ns, sizeof *spans, cmp_ref_span);
        size_t off = 0;
        for (size_t j = 0; j < ns; j++) {
            if (spans[j][0] >= off && spans[j][0] - off >= size) break;
            if (spans[j][1] > off) off = spans[j][1];
        }
        x->offset = off;
        if (off + size > end) end = off + size;
        placed[np++] = keys[k][2];
    }
    free(keys), free(spans), free(placed);
    return end;
}

Test(plan, same_offsets_as_the_quadratic_scan) {
    uint64_t r = 777;
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + (size_t)(round * 7 % 400);
        AmpPlanItem *it = malloc(n * sizeof *it), *ref = malloc(n * sizeof *ref);
        int horizon = 1 + round % 97, start = round % 3 ? 0 : -50; /* negative steps too */
        for (size_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            int first = start + (int)((r >> 33) % (uint64_t)horizon);
            int len = (int)((r >> 20) % (uint64_t)(round % 5 ? 6 : horizon)); /* short, or long lives */
            size_t size = (r >> 45) % 7 == 0 ? 0 : (size_t)((r >> 40) % 5000);
            it[i] = (AmpPlanItem){size, first, first + len, 0};
        }
        memcpy(ref, it, n * sizeof *it);
        size_t arena;
        cr_assert_eq(amp_plan_offsets(it, n, 64, &arena, NULL), AMP_OK);
        cr_assert_eq(arena, reference_plan(ref, n, 64), "round %d: the arena differs", round);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(it[i].offset, ref[i].offset, "round %d item %zu: %zu, the scan gave %zu", round, i,
                         it[i].offset, ref[i].offset);
        free(it), free(ref);
    }
}

/* A chain of a million buffers (each live from its producer to its reader) plans into two
 * slots. Before the segment tree this took minutes; the time is not asserted (a benchmark's
 * business: `ampc run` of tools/gen_graph.py's chain, docs/internals.md), only the result. */
Test(plan, million_buffer_chain, .timeout = 120) {
    size_t n = 1000000;
    AmpPlanItem *it = malloc(n * sizeof *it);
    for (size_t i = 0; i < n; i++) it[i] = (AmpPlanItem){4096, (int)i, (int)i + 1, 0};
    size_t arena;
    cr_assert_eq(amp_plan_offsets(it, n, 64, &arena, NULL), AMP_OK);
    cr_assert_eq(arena, 2 * 4096);
    cr_assert_eq(amp_plan_max_live(it, n, 64), 2 * 4096);
    for (size_t i = 1; i < n; i++) cr_assert_neq(it[i].offset, it[i - 1].offset, "neighbours %zu share a slot", i);
    free(it);
}

/* ---- the arena on real models ---------------------------------------------------------- */


typedef struct PlanCounts {
    int ran, planned_runs;
    int fully_sized;   /* models whose every intermediate was sized before the first run */
    int first_planned; /* models whose first run already used an arena */
    long sized, dynamic;
} PlanCounts;

/* The backend of these runs: the CPU, or what AMP_BACKEND names (ctest runs this file
 * again with sim). */
static AmpBackend *test_backend(void) {
    static AmpBackend *be;
    if (be) return be;
    AmpStatus st = {0};
    AmpAutoConfig cfg; /* AMP_BACKEND and the backend's settings, as a session reads them */
    cr_assert_eq(amp_auto_config(NULL, &cfg, &st), AMP_OK, "%s", st.msg);
    int choice = cfg.backend == AMP_BACKEND_AUTO ? AMP_BACKEND_CPU : cfg.backend;
    cr_assert_eq(amp_backend_open(choice, &cfg.be, &be, &st), AMP_OK, "%s", st.msg);
    amp_auto_config_free(&cfg);
    return be;
}

/* Runs test_data_set_0 of one folder three times (the first planned from the shape
 * functions where they know every shape, the others from the sizes of the first too);
 * returns whether the model ran at all. Ops drawing random numbers are left out. */
static bool check_case(const char *dir, const char *name, PlanCounts *c) {
    if (strstr(name, "dropout") || strstr(name, "random") || strstr(name, "bernoulli")) return false;
    char path[4096];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    AmpStatus st = {0};
    AmpModel *m = NULL;
    if (amp_model_load_file(path, NULL, &m, &st)) return false;
    AmpExec *e = NULL;
    bool ran = false;
    AmpGraph *g = m->graph;
    AmpNamedBuf ins[16];
    size_t n_in = 0;
    AmpExecOptions eo = {.backend = test_backend()};
    if (amp_exec_prepare(m, g, &eo, &e, &st)) goto done;
    for (size_t k = 0; k < 16; k++) {
        snprintf(path, sizeof path, "%s/test_data_set_0/input_%zu.pb", dir, k);
        size_t len;
        char *bytes = read_file(path, &len);
        if (!bytes) break;
        AmpTensor *t;
        AmpCode rc = amp_tensor_load_bytes(m, bytes, len, &t, &st);
        free(bytes);
        if (rc) goto done;
        const char *iname = NULL;
        size_t r = 0;
        for (size_t i = 0; i < g->inputs.n && !iname; i++) {
            if (g->inputs.items[i].value->initializer) continue;
            if (r++ == k) iname = g->inputs.items[i].value->name;
        }
        if (t->name && *t->name && amp_graph_lookup(g, t->name)) iname = t->name;
        if (!iname || amp_buf_from_tensor(m, t, &ins[n_in].buf, &st)) goto done;
        ins[n_in++].name = iname;
    }
    size_t no = g->outputs.n;
    AmpBuf *first = calloc(no + 1, sizeof *first), *again = calloc(no + 1, sizeof *again);
    if (amp_exec_run(e, ins, n_in, first, &st) == AMP_OK) {
        ran = true;
        AmpExecMemory mem;
        amp_exec_memory(e, &mem);
        c->sized += (long)mem.values_sized;
        c->dynamic += (long)mem.values_dynamic;
        if (mem.values_sized && !mem.values_dynamic) {
            c->fully_sized++;
            cr_assert(mem.planned, "%s: every shape was known, yet the first run had no arena", name);
        }
        c->first_planned += mem.planned;
        for (int rep = 0; rep < 2; rep++) {
            amp_status_clear(&st);
            cr_assert_eq(amp_exec_run(e, ins, n_in, again, &st), AMP_OK, "%s: second run: %s", name, st.msg);
            AmpExecMemory mem;
            amp_exec_memory(e, &mem);
            c->planned_runs += mem.planned;
            for (size_t k = 0; k < no; k++) {
                cr_assert_eq(again[k].dtype, first[k].dtype, "%s", name);
                cr_assert_eq(again[k].nelem, first[k].nelem, "%s", name);
                size_t bytes = amp_buf_bytes(&first[k]);
                cr_assert(bytes == 0 || memcmp(again[k].data, first[k].data, bytes) == 0,
                          "%s: output %zu differs once the arena is used", name, k);
                amp_buf_free(&again[k]);
            }
        }
        for (size_t k = 0; k < no; k++) amp_buf_free(&first[k]);
    }
    free(first);
    free(again);
done:
    amp_exec_free(e);
    amp_model_free(m);
    return ran;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_corpus(const char *sub) {
    char root[4096];
    snprintf(root, sizeof root, "%s/%s", AMPC_TESTDATA, sub);
    DIR *d = opendir(root);
    if (!d) cr_skip_test("no conformance data at %s", root);
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) names = realloc(names, (cap = cap ? cap * 2 : 256) * sizeof *names);
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    PlanCounts c = {0};
    for (size_t i = 0; i < n; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        c.ran += check_case(dir, names[i], &c);
        free(names[i]);
    }
    free(names);
    printf("arena %s: %d models ran; %d with every intermediate sized before the first run, %d whose first run "
           "used an arena; %ld intermediates sized before running, %ld only by their kernel; %d planned later runs\n",
           sub, c.ran, c.fully_sized, c.first_planned, c.sized, c.dynamic, c.planned_runs);
    cr_assert_gt(c.ran, 50, "only %d models of %s ran", c.ran, sub);
    cr_expect_gt(c.planned_runs, 0, "no run used a planned arena");
    /* Most models are sized whole before they run: only data-dependent shapes wait. */
    cr_expect_geq(c.fully_sized * 10, c.ran * 9, "only %d of %d models were sized before running", c.fully_sized,
                  c.ran);
}

Test(plan_exec, node_models_give_the_same_outputs_from_the_arena, .timeout = 600) {
    run_corpus("node");
}

Test(plan_exec, pytorch_models_give_the_same_outputs_from_the_arena, .timeout = 600) {
    run_corpus("pytorch-converted");
}
