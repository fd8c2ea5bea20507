/* The executor against the ONNX project's own conformance data: every test folder
 * (model.onnx + test_data_set_N/input_*.pb, output_*.pb) under node/, simple/ and
 * pytorch-converted/ whose ops the backend runs, compared per dtype with atol/rtol.
 * The backend is the CPU, or the one AMP_BACKEND names (ctest runs this test again with
 * AMP_BACKEND=sim: the device simulator).
 * Tests the backend cannot run (no kernel, or a kernel that says "unsupported") are
 * counted and listed with the reason; every other test must pass.
 * AMPC_CONFORMANCE_FILTER=substr limits the run to folders whose name contains substr;
 * AMPC_CONFORMANCE_VERBOSE=1 lists every skip and pass. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/test_file_util.h"
#include "runtime/amp_auto.h"
#include "runtime/exec.h"
#include "kernels/cpu/backend_sim.h"
#include "ir/half.h"
#include "tests/kernels/kernel_test_util.h"

typedef struct Counts {
    AmpBackend *be;
    int total, supported, passed;
    int n_fail;
    char fails[8192];
} Counts;


/* Empty string when equal within tolerance, else what differs. */
static void compare(const AmpBuf *got, const AmpBuf *want, char *why, size_t n) {
    why[0] = '\0';
    if (got->dtype != want->dtype) {
        snprintf(why, n, "dtype %s, expected %s", amp_dtype_name(got->dtype), amp_dtype_name(want->dtype));
        return;
    }
    bool shape_ok = got->rank == want->rank;
    for (int i = 0; shape_ok && i < got->rank; i++) shape_ok = got->dims[i] == want->dims[i];
    if (!shape_ok || got->nelem != want->nelem) {
        snprintf(why, n, "shape differs (rank %d, %llu elements; expected rank %d, %llu)", got->rank,
                 (unsigned long long)got->nelem, want->rank, (unsigned long long)want->nelem);
        return;
    }
    if (want->dtype == AMP_DT_STRING) return;
    double rtol = 1e-3, atol = 1e-5;
    if (want->dtype == AMP_DT_FLOAT16) rtol = 4e-3, atol = 1e-3;
    if (want->dtype == AMP_DT_BFLOAT16) rtol = 2e-2, atol = 1e-2;
    bool is_float = amp_dtype_is_float(want->dtype);
    for (uint64_t i = 0; i < want->nelem; i++) {
        double a = getf(got, i), b = getf(want, i);
        if (is_float) {
            if (isnan(a) && isnan(b)) continue;
            if (isinf(b) && a == b) continue;
            if (fabs(a - b) <= atol + rtol * fabs(b)) continue;
        } else if (a == b) {
            continue;
        }
        snprintf(why, n, "element %llu is %.9g, expected %.9g", (unsigned long long)i, a, b);
        return;
    }
}

static void add_fail(Counts *c, const char *name, const char *why) {
    c->n_fail++;
    size_t l = strlen(c->fails);
    if (l < sizeof c->fails - 200) snprintf(c->fails + l, sizeof c->fails - l, "\n  %s: %.160s", name, why);
}

/* The ONNX test data of this era stores bfloat16 tensors as uint16 (the same bits):
 * read them as the bfloat16 the graph declares. */
static void retag_bf16(AmpBuf *b, const AmpValue *v) {
    if (v && b->dtype == AMP_DT_UINT16 && v->type.kind == AMP_TYPE_TENSOR && v->type.dtype == AMP_DT_BFLOAT16)
        b->dtype = AMP_DT_BFLOAT16;
}

/* Upstream test data known to be wrong: skipped with the reason, counted apart. */
static const struct {
    const char *name, *why;
} KNOWN_BAD[] = {
    {"test_adam_multiple", "its expected outputs use epsilon=1e-2 but the model omits the attribute (onnx/onnx#7749)"},
};

/* Runs one test folder. */
static void run_case(const char *dir, const char *name, Counts *c, bool verbose) {
    for (size_t i = 0; i < sizeof KNOWN_BAD / sizeof *KNOWN_BAD; i++)
        if (strcmp(name, KNOWN_BAD[i].name) == 0) {
            c->total++;
            printf("skip %s: known-bad upstream data: %s\n", name, KNOWN_BAD[i].why);
            return;
        }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    AmpStatus st = {0};
    AmpModel *m = NULL;
    c->total++;
    if (amp_model_load_file(path, NULL, &m, &st)) {
        add_fail(c, name, st.msg);
        return;
    }
    AmpExec *e = NULL;
    AmpExecOptions eo = {.backend = c->be};
    if (amp_exec_prepare(m, m->graph, &eo, &e, &st)) {
        if (st.code != AMP_ERR_UNSUPPORTED) add_fail(c, name, st.msg);
        else if (verbose) printf("skip %s: %s\n", name, st.msg);
        amp_model_free(m);
        return;
    }
    bool supported = true, ok = true;
    char why[512] = "";
    for (int set = 0; ok && supported; set++) {
        char sd[4096];
        snprintf(sd, sizeof sd, "%s/test_data_set_%d", dir, set);
        struct stat sb;
        if (stat(sd, &sb) != 0) break;
        AmpGraph *g = m->graph;
        /* Inputs: input_k.pb matched by the tensor's name, else the k-th input that is
         * not an initializer. */
        size_t n_real = 0;
        for (size_t i = 0; i < g->inputs.n; i++)
            if (!g->inputs.items[i].value->initializer) n_real++;
        AmpNamedBuf *ins = calloc(n_real + 1, sizeof *ins);
        size_t n_in = 0;
        for (size_t k = 0;; k++) {
            snprintf(path, sizeof path, "%s/input_%zu.pb", sd, k);
            size_t len;
            char *bytes = read_file(path, &len);
            if (!bytes) break;
            AmpTensor *t;
            AmpCode rc = amp_tensor_load_bytes(m, bytes, len, &t, &st);
            free(bytes);
            if (rc) {
                snprintf(why, sizeof why, "input_%zu.pb: %s", k, st.msg);
                ok = false;
                break;
            }
            const char *iname = NULL;
            if (t->name && *t->name && amp_graph_lookup(g, t->name)) iname = t->name;
            else {
                size_t r = 0;
                for (size_t i = 0; i < g->inputs.n && !iname; i++) {
                    if (g->inputs.items[i].value->initializer) continue;
                    if (r++ == k) iname = g->inputs.items[i].value->name;
                }
            }
            if (!iname || n_in >= n_real) break;
            ins[n_in].name = iname;
            if ((rc = amp_buf_from_tensor(m, t, &ins[n_in].buf, &st))) {
                snprintf(why, sizeof why, "%s", st.msg);
                if (rc == AMP_ERR_UNSUPPORTED) supported = false; /* e.g. string inputs */
                else ok = false;
                break;
            }
            retag_bf16(&ins[n_in].buf, amp_graph_lookup(g, iname));
            n_in++;
        }
        AmpBuf *outs = calloc(g->outputs.n + 1, sizeof *outs);
        if (ok && supported) {
            amp_status_clear(&st);
            AmpCode rc = amp_exec_run(e, ins, n_in, outs, &st);
            if (rc == AMP_ERR_UNSUPPORTED) {
                supported = false;
                snprintf(why, sizeof why, "%s", st.msg);
            } else if (rc) {
                ok = false;
                snprintf(why, sizeof why, "%s", st.msg);
            } else {
                for (size_t k = 0; ok && k < g->outputs.n; k++) {
                    snprintf(path, sizeof path, "%s/output_%zu.pb", sd, k);
                    size_t len;
                    char *bytes = read_file(path, &len);
                    if (!bytes) break;
                    AmpTensor *t;
                    AmpBuf want;
                    if (amp_tensor_load_bytes(m, bytes, len, &t, &st) || amp_buf_from_tensor(m, t, &want, &st)) {
                        snprintf(why, sizeof why, "output_%zu.pb: %s", k, st.msg);
                        ok = false;
                    } else {
                        retag_bf16(&want, g->outputs.items[k].value);
                        char d[400];
                        compare(&outs[k], &want, d, sizeof d);
                        if (d[0]) {
                            snprintf(why, sizeof why, "output %zu '%s': %s", k, g->outputs.items[k].value->name, d);
                            ok = false;
                        }
                    }
                    free(bytes);
                }
                for (size_t k = 0; k < g->outputs.n; k++) amp_buf_free(&outs[k]);
            }
        }
        free(outs);
        free(ins);
    }
    if (!supported) {
        if (verbose) printf("skip %s: %s\n", name, why);
    } else {
        c->supported++;
        if (ok) {
            c->passed++;
            if (verbose) printf("pass %s\n", name);
        } else {
            add_fail(c, name, why);
            if (verbose) printf("FAIL %s: %s\n", name, why);
        }
    }
    amp_exec_free(e);
    amp_model_free(m);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_suite(const char *sub) {
    char root[4096];
    snprintf(root, sizeof root, "%s/%s", AMPC_TESTDATA, sub);
    DIR *d = opendir(root);
    if (!d) cr_skip_test("no conformance data at %s", root);
    const char *filter = getenv("AMPC_CONFORMANCE_FILTER");
    bool verbose = getenv("AMPC_CONFORMANCE_VERBOSE") != NULL;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        if (filter && !strstr(de->d_name, filter)) continue;
        if (n == cap) names = realloc(names, (cap = cap ? cap * 2 : 256) * sizeof *names);
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    Counts c;
    memset(&c, 0, sizeof c);
    /* The backend and its settings as a session reads them (AMP_BACKEND, AMP_SIM_LACKS, ...;
     * the CPU when AMP_BACKEND is unset). */
    AmpStatus st = {0};
    AmpAutoConfig cfg;
    cr_assert(amp_auto_config(NULL, &cfg, &st) == AMP_OK, "%s", st.msg);
    int choice = cfg.backend == AMP_BACKEND_AUTO ? AMP_BACKEND_CPU : cfg.backend;
    cr_assert(amp_backend_open(choice, &cfg.be, &c.be, &st) == AMP_OK, "%s", st.msg);
    amp_auto_config_free(&cfg);
    for (size_t i = 0; i < n; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        run_case(dir, names[i], &c, verbose);
        free(names[i]);
    }
    free(names);
    size_t live = amp_backend_sim_live(c.be);
    cr_expect(live == 0 || live == SIZE_MAX, "the device simulator holds %zu allocations after every test", live);
    printf("conformance %s (%s): %d passed / %d supported / %d total\n", sub, c.be->name, c.passed, c.supported,
           c.total);
    amp_backend_close(c.be);
    fflush(stdout);
    cr_expect_eq(c.n_fail, 0, "%s: %d of %d supported tests failed:%s", sub, c.n_fail, c.supported, c.fails);
}

Test(conformance, node, .timeout = 1200) {
    run_suite("node");
}

Test(conformance, simple, .timeout = 600) {
    run_suite("simple");
}

Test(conformance, pytorch_converted, .timeout = 1200) {
    run_suite("pytorch-converted");
}
