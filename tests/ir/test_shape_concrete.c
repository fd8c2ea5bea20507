/* Concrete shapes (ir/shape.h, amp_shape_node) against the ONNX conformance data: for
 * every test folder under node/, simple/ and pytorch-converted/, the graph's nodes are
 * walked in order from the concrete shapes of input_K.pb (and the initializers), each
 * node's output shapes computed from what the walk knows so far, and every graph output
 * the walk knows is compared with output_K.pb's dtype and shape. A known shape that is
 * wrong fails the test, naming the folder; unknown ones are counted, with the op where
 * knowledge stopped ("gaps"). The walk's env gives amp_shape_node no more than a runtime
 * has before running: shapes, and the elements of initializers, Constants and int (or,
 * for doubles_of, float) graph inputs; shape arithmetic (Shape -> Gather -> Concat) is
 * followed by inference itself. Folders whose model fails to load or that use sequences
 * or maps are skipped. AMPC_SHAPE_VERBOSE=1 lists every unknown output and its gaps.
 * Unit tests at the end: the PyTorch Reshape pattern, a Reshape target nobody knows,
 * NonZero, and inputs that do not broadcast. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/ir/graph_build_util.h"
#include "tests/ir/infer_test_util.h"
#include "ir/ops.h"
#include "ir/shape.h"
#include "ir/tensor.h"
#include "tests/test_file_util.h"

/* ---- the walk's knowledge, per value of the main graph (by AmpValue.id) ---------------- */

typedef struct Known {
    bool has; /* shape known */
    AmpBuf shape;
    AmpTensor *t; /* host data: initializer, Constant's tensor, or the input's .pb */
} Known;

typedef struct Walk {
    AmpModel *m;
    AmpGraph *g;
    Known *vals; /* g->n_values */
} Walk;

static Known *known_of(Walk *w, const AmpValue *v) {
    if (!v || v->graph != w->g || v->id >= w->g->n_values || w->g->values[v->id] != v) return NULL;
    return &w->vals[v->id];
}

static bool env_shape_of(void *user, const AmpValue *v, AmpBuf *out) {
    Known *k = known_of(user, v);
    if (!k || !k->has) return false;
    *out = k->shape;
    return true;
}

static bool int_dtype(int dt) {
    return dt == AMP_DT_INT64 || dt == AMP_DT_INT32 || dt == AMP_DT_INT16 || dt == AMP_DT_INT8 ||
           dt == AMP_DT_UINT8 || dt == AMP_DT_UINT16 || dt == AMP_DT_UINT32 || dt == AMP_DT_UINT64;
}

/* The host tensor of v when it is small (rank <= 1, at most max elements), as a buffer. */
static bool host_buf(Walk *w, const AmpValue *v, int max, AmpBuf *b) {
    Known *k = known_of(w, v);
    if (!k || !k->t || k->t->ndims > 1 || k->t->nelem > (uint64_t)max) return false;
    AmpStatus st;
    amp_status_clear(&st);
    return amp_buf_from_tensor(w->m, k->t, b, &st) == AMP_OK;
}

static int env_ints_of(void *user, const AmpValue *v, int64_t *out, int max) {
    Walk *w = user;
    AmpBuf b;
    if (!host_buf(w, v, max, &b) || !int_dtype(b.dtype)) {
        /* Constant(value_int / value_ints): no tensor to hold */
        const AmpNode *p = v->producer;
        const AmpAttr *a;
        if (!p || p->op != AMP_OP_Constant) return -1;
        if ((a = amp_node_attr(p, "value_int")) && max >= 1) {
            out[0] = a->i;
            return 1;
        }
        if ((a = amp_node_attr(p, "value_ints")) && a->n_ints <= (size_t)max) {
            for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
            return (int)a->n_ints;
        }
        return -1;
    }
    for (uint64_t i = 0; i < b.nelem; i++) out[i] = amp_buf_get_i64(&b, i);
    return (int)b.nelem;
}

static int env_doubles_of(void *user, const AmpValue *v, double *out, int max) {
    Walk *w = user;
    AmpBuf b;
    if (!host_buf(w, v, max, &b)) return -1;
    for (uint64_t i = 0; i < b.nelem; i++) {
        if (int_dtype(b.dtype)) out[i] = (double)amp_buf_get_i64(&b, i);
        else if (b.dtype == AMP_DT_FLOAT) out[i] = ((const float *)b.data)[i];
        else if (b.dtype == AMP_DT_DOUBLE) out[i] = ((const double *)b.data)[i];
        else return -1;
    }
    return (int)b.nelem;
}

static void set_from_tensor(Known *k, const AmpTensor *t, int dtype) {
    k->has = t->ndims <= AMP_MAX_RANK;
    memset(&k->shape, 0, sizeof k->shape);
    k->shape.dtype = dtype;
    k->shape.rank = (int)t->ndims;
    for (size_t i = 0; k->has && i < t->ndims; i++) k->shape.dims[i] = t->dims[i];
    k->shape.nelem = t->nelem;
}

/* The dtype the graph declares for v, where the test data's differs only in name: this
 * era's data stores bfloat16 as uint16 (the same bits). */
static int declared(const AmpValue *v, int dt) {
    if (dt == AMP_DT_UINT16 && v->type.kind == AMP_TYPE_TENSOR && v->type.dtype == AMP_DT_BFLOAT16)
        return AMP_DT_BFLOAT16;
    return dt;
}

/* ---- one conformance folder -------------------------------------------------------------- */

typedef struct Counts {
    int folders, skipped;
    int right, wrong; /* graph outputs known, over every test data set */
    /* graph outputs unknown because knowledge stopped at: an op not in the op table
     * (no inference), an op whose shape is the data's (ops.def AMP_SHAPE_FROM_DATA),
     * or anything else (a gap in inference: none expected) */
    int no_infer, from_data, gap;
    char gap_list[4096];
    char fails[8192];
    /* where knowledge stopped: op name -> count */
    int n_gap;
    struct {
        char op[48];
        int count;
        char example[96];
    } gaps[128];
} Counts;

static void add_gap(Counts *c, const char *op, const char *folder) {
    for (int i = 0; i < c->n_gap; i++)
        if (strcmp(c->gaps[i].op, op) == 0) {
            c->gaps[i].count++;
            return;
        }
    if (c->n_gap == 128) return;
    snprintf(c->gaps[c->n_gap].op, sizeof c->gaps[0].op, "%s", op);
    snprintf(c->gaps[c->n_gap].example, sizeof c->gaps[0].example, "%s", folder);
    c->gaps[c->n_gap++].count = 1;
}

static void add_fail(Counts *c, const char *name, const char *why) {
    size_t l = strlen(c->fails);
    if (l < sizeof c->fails - 300) snprintf(c->fails + l, sizeof c->fails - l, "\n  %s: %.240s", name, why);
}

static bool uses_other_types(const AmpGraph *g) {
    for (size_t i = 0; i < g->inputs.n; i++)
        if (g->inputs.items[i].value->type.kind == AMP_TYPE_OTHER) return true;
    for (size_t i = 0; i < g->outputs.n; i++)
        if (g->outputs.items[i].value->type.kind == AMP_TYPE_OTHER) return true;
    return false;
}

static AmpTensor *load_pb(AmpModel *m, const char *path) {
    size_t len;
    char *bytes = read_file(path, &len);
    if (!bytes) return NULL;
    AmpTensor *t = NULL;
    AmpStatus st;
    amp_status_clear(&st);
    if (amp_tensor_load_bytes(m, bytes, len, &t, &st)) t = NULL;
    free(bytes);
    return t;
}

/* Feeds test data set `sd`'s inputs into w (input_k.pb matched by the tensor's name, else
 * the k-th graph input that is not an initializer); false when one cannot be read. */
static bool feed_inputs(Walk *w, const char *sd) {
    AmpGraph *g = w->g;
    for (size_t k = 0;; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/input_%zu.pb", sd, k);
        struct stat sb;
        if (stat(path, &sb) != 0) return true;
        AmpTensor *t = load_pb(w->m, path);
        if (!t) return false; /* a sequence or map, or broken */
        AmpValue *v = NULL;
        if (t->name && *t->name) v = amp_graph_lookup(g, t->name);
        for (size_t i = 0, r = 0; !v && i < g->inputs.n; i++) {
            if (g->inputs.items[i].value->initializer) continue;
            if (r++ == k) v = g->inputs.items[i].value;
        }
        Known *kv = known_of(w, v);
        if (!kv) return false;
        set_from_tensor(kv, t, declared(v, t->dtype));
        kv->t = t;
    }
}

static void walk_folder(const char *dir, const char *name, Counts *c, bool verbose) {
    char path[4200];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    AmpStatus st;
    amp_status_clear(&st);
    AmpModel *m = NULL;
    if (amp_model_load_file(path, NULL, &m, &st) || uses_other_types(m->graph)) {
        c->skipped++;
        if (verbose) printf("skip %s: %s\n", name, m ? "sequence or map types" : st.msg);
        if (m) amp_model_free(m);
        return;
    }
    c->folders++;
    AmpGraph *g = m->graph;
    Walk w = {m, g, calloc(g->n_values + 1, sizeof(Known))};
    enum { MAX_OUT = 64 };
    AmpBuf out[MAX_OUT];
    bool known[MAX_OUT];
    for (int set = 0;; set++) {
        char sd[4200];
        snprintf(sd, sizeof sd, "%s/test_data_set_%d", dir, set);
        struct stat sb;
        if (stat(sd, &sb) != 0) break;
        memset(w.vals, 0, (g->n_values + 1) * sizeof(Known));
        for (size_t i = 0; i < g->n_initializers; i++) {
            AmpTensor *t = g->initializers[i];
            Known *k = t && t->name ? known_of(&w, amp_graph_lookup(g, t->name)) : NULL;
            if (!k) continue;
            set_from_tensor(k, t, t->dtype);
            k->t = t;
        }
        if (!feed_inputs(&w, sd)) {
            if (set == 0) {
                c->folders--;
                c->skipped++;
                if (verbose) printf("skip %s: an input is not a tensor\n", name);
            }
            break;
        }
        char gaps[512] = "";
        bool failed = false, stop_no_infer = false, stop_data = false, stop_other = false;
        for (AmpNode *n = g->first; n && !failed; n = n->next) {
            if (n->n_outputs > MAX_OUT) break;
            amp_status_clear(&st);
            AmpCode rc = amp_shape_node(n, amp_model_opset(m, n->domain), &(AmpShapeEnv){env_shape_of, env_ints_of, env_doubles_of, &w},
                                        out, known, &st);
            if (rc) {
                char why[1200];
                snprintf(why, sizeof why, "amp_shape_node failed on a valid model: %s", st.msg);
                add_fail(c, name, why);
                c->wrong++;
                failed = true;
                break;
            }
            bool ins_known = true, all_out = true;
            for (int i = 0; i < n->n_inputs; i++) {
                const Known *k = known_of(&w, n->inputs[i]);
                if (n->inputs[i] && (!k || !k->has)) ins_known = false;
            }
            for (int k = 0; k < n->n_outputs; k++) {
                Known *kv = known_of(&w, n->outputs[k]);
                if (!kv) continue;
                kv->has = known[k];
                kv->shape = out[k];
                if (!known[k]) all_out = false;
                const AmpAttr *a = n->op == AMP_OP_Constant ? amp_node_attr(n, "value") : NULL;
                if (a && a->type == AMP_ATTR_TENSOR) kv->t = a->t;
            }
            if (!all_out && ins_known) { /* knowledge stops here */
                if (set == 0) add_gap(c, n->op_type, name);
                size_t l = strlen(gaps);
                snprintf(gaps + l, sizeof gaps - l, " %s", n->op_type);
                if (n->op == AMP_OP_UNKNOWN) stop_no_infer = true;
                else if (amp_op_shape_from_data(n->op)) stop_data = true;
                else stop_other = true;
            }
        }
        for (size_t k = 0; !failed && k < g->outputs.n; k++) {
            snprintf(path, sizeof path, "%s/output_%zu.pb", sd, k);
            AmpTensor *t = load_pb(m, path);
            if (!t) break;
            const AmpValue *v = g->outputs.items[k].value;
            const Known *kv = known_of(&w, v);
            if (!kv || !kv->has) {
                if (verbose) printf("unknown %s output %zu '%s' (gaps:%s)\n", name, k, v->name, gaps);
                if (stop_other || (!stop_no_infer && !stop_data)) {
                    c->gap++;
                    size_t l = strlen(c->gap_list);
                    if (l < sizeof c->gap_list - 200)
                        snprintf(c->gap_list + l, sizeof c->gap_list - l, "\n  %s output %zu (stopped at:%s)", name, k, gaps);
                } else if (stop_no_infer) {
                    c->no_infer++;
                } else {
                    c->from_data++;
                }
                continue;
            }
            int want_dt = declared(v, t->dtype);
            bool ok = kv->shape.dtype == want_dt && (size_t)kv->shape.rank == t->ndims;
            for (int i = 0; ok && i < kv->shape.rank; i++) ok = kv->shape.dims[i] == t->dims[i];
            if (ok) {
                c->right++;
                continue;
            }
            c->wrong++;
            char got[128], want[128], why[400];
            AmpBuf wb;
            memset(&wb, 0, sizeof wb);
            wb.dtype = want_dt;
            wb.rank = t->ndims <= AMP_MAX_RANK ? (int)t->ndims : 0;
            for (int i = 0; i < wb.rank; i++) wb.dims[i] = t->dims[i];
            amp_buf_describe(&kv->shape, got, sizeof got);
            amp_buf_describe(&wb, want, sizeof want);
            snprintf(why, sizeof why, "set %d output %zu '%s': computed %s, expected %s", set, k, v->name, got, want);
            add_fail(c, name, why);
        }
    }
    free(w.vals);
    amp_model_free(m);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static Counts counts; /* big: not on the stack */

/* Walks every folder of suite `sub`; the known share must be at least min_share. */
static void run_suite(const char *sub, double min_share) {
    char root[4096];
    snprintf(root, sizeof root, "%s/%s", AMPC_TESTDATA, sub);
    DIR *d = opendir(root);
    if (!d) cr_skip_test("no conformance data at %s", root);
    bool verbose = getenv("AMPC_SHAPE_VERBOSE") != NULL;
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) names = realloc(names, (cap = cap ? cap * 2 : 256) * sizeof *names);
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    memset(&counts, 0, sizeof counts);
    for (size_t i = 0; i < n; i++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", root, names[i]);
        walk_folder(dir, names[i], &counts, verbose);
        free(names[i]);
    }
    free(names);
    Counts *c = &counts;
    int unknown = c->no_infer + c->from_data + c->gap;
    int total = c->right + c->wrong + unknown;
    /* the share among outputs of graphs that the op table covers */
    int covered = total - c->no_infer;
    double share = covered ? (double)(c->right + c->wrong) / covered : 0;
    printf("shapes %s: %d folders (%d skipped); outputs: %d known and right, %d known and WRONG, %d unknown "
           "(%d after an op without inference, %d after a data-dependent op, %d gaps); %.1f%% known of %d, %.1f%% of "
           "the %d the op table covers\n",
           sub, c->folders, c->skipped, c->right, c->wrong, unknown, c->no_infer, c->from_data, c->gap,
           total ? 100.0 * (c->right + c->wrong) / total : 0.0, total, 100 * share, covered);
    if (c->n_gap) {
        printf("  where knowledge stopped (op: nodes, e.g.):");
        for (int i = 0; i < c->n_gap; i++) printf(" %s: %d (%s);", c->gaps[i].op, c->gaps[i].count, c->gaps[i].example);
        printf("\n");
    }
    fflush(stdout);
    cr_expect_eq(c->wrong, 0, "%s: %d known shapes are wrong:%s", sub, c->wrong, c->fails);
    cr_expect_eq(c->gap, 0, "%s: %d outputs unknown where every op on the way has inference:%s", sub, c->gap,
                 c->gap_list);
    cr_expect(share >= min_share, "%s: only %.1f%% of the covered outputs' shapes are known (at least %.1f%% expected)",
              sub, 100 * share, 100 * min_share);
}

Test(shape_conformance, node, .timeout = 600) {
    run_suite("node", 0.985);
}

Test(shape_conformance, simple, .timeout = 600) {
    run_suite("simple", 1.0);
}

Test(shape_conformance, pytorch_converted, .timeout = 600) {
    run_suite("pytorch-converted", 1.0);
}

Test(shape_conformance, pytorch_operator, .timeout = 600) {
    run_suite("pytorch-operator", 1.0);
}

/* ---- unit tests: small graphs walked with a table of concrete shapes ---------------------- */

typedef struct Table {
    int n;
    const AmpValue *v[32];
    AmpBuf shape[32];
    int n_ints[32]; /* -1: no host values */
    int64_t ints[32][8];
} Table;

static int table_find(const Table *t, const AmpValue *v) {
    for (int i = 0; i < t->n; i++)
        if (t->v[i] == v) return i;
    return -1;
}

static bool table_shape(void *user, const AmpValue *v, AmpBuf *out) {
    int i = table_find(user, v);
    if (i < 0) return false;
    *out = ((Table *)user)->shape[i];
    return true;
}

static int table_ints(void *user, const AmpValue *v, int64_t *out, int max) {
    const Table *t = user;
    int i = table_find(t, v);
    if (i < 0 || t->n_ints[i] < 0 || t->n_ints[i] > max) return -1;
    memcpy(out, t->ints[i], (size_t)t->n_ints[i] * sizeof *out);
    return t->n_ints[i];
}

/* Records v with a shape of `rank` dims (and host values when n_ints >= 0). */
static void table_put(Table *t, const AmpValue *v, int dtype, int rank, const int64_t *dims, int n_ints,
                      const int64_t *ints) {
    cr_assert(t->n < 32);
    int i = t->n++;
    t->v[i] = v;
    memset(&t->shape[i], 0, sizeof t->shape[i]);
    t->shape[i].dtype = dtype;
    t->shape[i].rank = rank;
    for (int k = 0; k < rank; k++) t->shape[i].dims[k] = dims[k];
    t->shape[i].nelem = amp_shape_nelem(rank, dims);
    t->n_ints[i] = n_ints;
    for (int k = 0; k < n_ints; k++) t->ints[i][k] = ints[k];
}

/* Initializers go into the table with their shapes (not their values: inference reads
 * those itself). */
static void table_initializers(Table *t, AmpGraph *g) {
    for (size_t i = 0; i < g->n_initializers; i++) {
        AmpTensor *x = g->initializers[i];
        table_put(t, amp_graph_lookup(g, x->name), x->dtype, (int)x->ndims, x->dims, -1, NULL);
    }
}

/* Walks g's nodes in order as a runtime would, recording each known output; the status
 * of the first failure, or AMP_OK. */
static AmpCode walk_table(AmpGraph *g, Table *t, bool with_ints, AmpStatus *st) {
    AmpShapeEnv env = {table_shape, with_ints ? table_ints : NULL, NULL, t};
    for (AmpNode *n = g->first; n; n = n->next) {
        AmpBuf out[4];
        bool known[4];
        cr_assert(n->n_outputs <= 4);
        AmpCode rc = amp_shape_node(n, amp_model_opset(g->model, n->domain), &env, out, known, st);
        if (rc) return rc;
        for (int k = 0; k < n->n_outputs; k++) {
            if (!known[k]) continue;
            table_put(t, n->outputs[k], out[k].dtype, out[k].rank, out[k].dims, -1, NULL);
            cr_assert_null(out[k].data);
        }
    }
    return AMP_OK;
}

static const AmpBuf *table_get(const Table *t, AmpGraph *g, const char *name) {
    int i = table_find(t, amp_graph_lookup(g, name));
    return i < 0 ? NULL : &t->shape[i];
}

/* The PyTorch export of x.view(x.size(0), -1): the target is computed from x's shape,
 * which the model leaves symbolic; from the concrete shape it is known. */
Test(shape_node, reshape_from_shape_arithmetic_is_known) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    AmpValue *x = input(g, "x", AMP_DT_FLOAT, "N,C,H");
    init_i64(g, "zero", -1, I64(0));
    init_i64(g, "axes0", 1, I64(0));
    init_i64(g, "minus1", 1, I64(-1));
    node(g, "Shape", "shape", "x", "s");
    node(g, "Gather", "gather", "s,zero", "d0");
    node(g, "Unsqueeze", "unsqueeze", "d0,axes0", "u0");
    node(g, "Concat", "concat", "u0,minus1", "target");
    attr_int(amp_graph_lookup(g, "target")->producer, "axis", 0);
    node(g, "Reshape", "reshape", "x,target", "y");
    Table t = {0};
    table_put(&t, x, AMP_DT_FLOAT, 3, I64(2, 3, 4), -1, NULL);
    table_initializers(&t, g);
    AmpStatus st;
    amp_status_clear(&st);
    cr_assert_eq(walk_table(g, &t, false, &st), AMP_OK, "%s", st.msg);
    const AmpBuf *tg = table_get(&t, g, "target"), *y = table_get(&t, g, "y");
    cr_assert(tg && tg->dtype == AMP_DT_INT64 && tg->rank == 1 && tg->dims[0] == 2);
    cr_assert_not_null(y, "the Reshape's output shape is not known");
    cr_expect_eq(y->dtype, AMP_DT_FLOAT);
    cr_expect_eq(y->rank, 2);
    cr_expect(y->dims[0] == 2 && y->dims[1] == 12, "y is [%lld,%lld]", (long long)y->dims[0], (long long)y->dims[1]);
    cr_expect_eq(y->nelem, 24u);
    /* Concrete mode reads the model only: no type was written into it. */
    cr_expect_eq(amp_graph_lookup(g, "y")->type.kind, AMP_TYPE_NONE);
    cr_expect_eq(amp_graph_lookup(g, "target")->type.kind, AMP_TYPE_NONE);
    cr_expect_str_eq(type_str(x), "float[N,C,H]");
    amp_model_free(m);
}

/* A Reshape target that is a graph input: its values are the caller's to give. */
Test(shape_node, reshape_from_an_input_needs_its_values) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    AmpValue *x = input(g, "x", AMP_DT_FLOAT, "2,3,4");
    AmpValue *shape = input(g, "shape", AMP_DT_INT64, "2");
    node(g, "Reshape", "reshape", "x,shape", "y");
    AmpNode *r = amp_graph_lookup(g, "y")->producer;
    Table t = {0};
    table_put(&t, x, AMP_DT_FLOAT, 3, I64(2, 3, 4), -1, NULL);
    table_put(&t, shape, AMP_DT_INT64, 1, I64(2), -1, NULL);
    AmpShapeEnv env = {table_shape, table_ints, NULL, &t};
    AmpBuf out[1];
    bool known[1];
    AmpStatus st;
    amp_status_clear(&st);
    cr_assert_eq(amp_shape_node(r, 13, &env, out, known, &st), AMP_OK, "%s", st.msg);
    cr_expect_not(known[0], "no value for 'shape', yet the output is known");
    cr_expect_eq(out[0].dtype, AMP_DT_FLOAT, "the dtype is known all the same");
    /* Once the runtime holds the values, the shape is known. */
    t.n_ints[1] = 2;
    t.ints[1][0] = 4;
    t.ints[1][1] = -1;
    cr_assert_eq(amp_shape_node(r, 13, &env, out, known, &st), AMP_OK, "%s", st.msg);
    cr_assert(known[0]);
    cr_expect(out[0].rank == 2 && out[0].dims[0] == 4 && out[0].dims[1] == 6);
    /* A target that does not fit the data is the model's error, named. */
    t.ints[1][0] = 5;
    cr_expect_eq(amp_shape_node(r, 13, &env, out, known, &st), AMP_ERR_INPUT);
    cr_expect(strstr(st.msg, "reshape") != NULL, "%s", st.msg);
    cr_expect_not(known[0]);
    amp_model_free(m);
}

Test(shape_node, nonzero_is_unknown) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    AmpValue *x = input(g, "x", AMP_DT_FLOAT, "2,3");
    node(g, "NonZero", "nz", "x", "idx");
    Table t = {0};
    table_put(&t, x, AMP_DT_FLOAT, 2, I64(2, 3), -1, NULL);
    AmpShapeEnv env = {table_shape, table_ints, NULL, &t};
    AmpBuf out[1];
    bool known[1];
    AmpStatus st;
    amp_status_clear(&st);
    cr_assert_eq(amp_shape_node(amp_graph_lookup(g, "idx")->producer, 13, &env, out, known, &st), AMP_OK);
    cr_expect_not(known[0]);
    cr_expect_eq(out[0].dtype, AMP_DT_INT64);
    cr_expect(amp_op_shape_from_data(AMP_OP_NonZero) && amp_op_shape_from_data(AMP_OP_If) &&
              amp_op_shape_from_data(AMP_OP_Loop) && amp_op_shape_from_data(AMP_OP_Scan));
    cr_expect(!amp_op_shape_from_data(AMP_OP_Reshape) && !amp_op_shape_from_data(AMP_OP_TopK) &&
              !amp_op_shape_from_data(AMP_OP_UNKNOWN) && !amp_op_shape_from_data((AmpOpId)-1));
    amp_model_free(m);
}

Test(shape_node, broadcast_mismatch_is_an_input_error) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    /* Symbolic in the model, so graph mode cannot see the clash; the concrete shapes do. */
    AmpValue *a = input(g, "a", AMP_DT_FLOAT, "N,3");
    AmpValue *b = input(g, "b", AMP_DT_FLOAT, "M");
    node(g, "Add", "bad_add", "a,b", "y");
    Table t = {0};
    table_put(&t, a, AMP_DT_FLOAT, 2, I64(2, 3), -1, NULL);
    table_put(&t, b, AMP_DT_FLOAT, 1, I64(4), -1, NULL);
    AmpStatus st;
    amp_status_clear(&st);
    cr_assert_eq(walk_table(g, &t, true, &st), AMP_ERR_INPUT);
    cr_expect(strstr(st.msg, "bad_add") && strstr(st.msg, "broadcast"), "%s", st.msg);
    infer_ok(m); /* graph mode: no error, the dims are symbols */
    amp_model_free(m);
}

/* Shapes the caller does not know stay unknown downstream, and unknown ops say nothing. */
Test(shape_node, unknown_inputs_and_ops) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    input(g, "x", AMP_DT_FLOAT, "2,3");
    node(g, "Relu", "relu", "x", "r");
    node(g, "NotAnOp", "mystery", "x", "q");
    Table t = {0};
    AmpStatus st;
    amp_status_clear(&st);
    cr_assert_eq(walk_table(g, &t, true, &st), AMP_OK, "%s", st.msg);
    cr_expect_eq(t.n, 0, "something was known without x's shape");
    amp_model_free(m);
}

/* arange(x.size(1)) as exporters write it: Range's limit is shape arithmetic, which
 * amp_inf_const_doubles follows (it read only constants before). */
Test(shape_node, range_over_a_dim_is_known) {
    AmpModel *m = model(13);
    AmpGraph *g = m->graph;
    AmpValue *x = input(g, "x", AMP_DT_FLOAT, "B,T");
    init_i64(g, "one", -1, I64(1));
    init_i64(g, "zero", -1, I64(0));
    node(g, "Shape", "shape", "x", "s");
    node(g, "Gather", "gather", "s,one", "t");
    node(g, "Range", "range", "zero,t,one", "pos");
    init_i64(g, "half", -1, I64(2));
    node(g, "Div", "div", "t,half", "t2");
    node(g, "Range", "range2", "zero,t2,one", "pos2");
    Table t = {0};
    table_put(&t, x, AMP_DT_FLOAT, 2, I64(3, 7), -1, NULL);
    table_initializers(&t, g);
    AmpStatus st;
    amp_status_clear(&st);
    cr_assert_eq(walk_table(g, &t, false, &st), AMP_OK, "%s", st.msg);
    const AmpBuf *pos = table_get(&t, g, "pos"), *pos2 = table_get(&t, g, "pos2");
    cr_assert_not_null(pos, "Range over a dim is not known");
    cr_expect(pos->dtype == AMP_DT_INT64 && pos->rank == 1 && pos->dims[0] == 7);
    cr_assert_not_null(pos2);
    cr_expect_eq(pos2->dims[0], 3, "7 / 2 in int64 is 3");
    /* Graph mode knows it too where the dim is a number. */
    set_type(g, x, AMP_DT_FLOAT, "B,7");
    infer_ok(m);
    EXPECT_TYPE(g, "pos", "int64[7]");
    EXPECT_TYPE(g, "pos2", "int64[3]");
    amp_model_free(m);
}
