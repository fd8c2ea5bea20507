/* The CUDA backend against the CPU reference, op by op: each row of the tables
 * (cuda_ops_cases.h) is one op with its dtypes, input shapes and attributes; every (dtype,
 * shapes) pair becomes a one-node model that a CPU session and a CUDA session (no
 * fallback: the node runs on the GPU or the open fails) both run on the same deterministic
 * random inputs, and the outputs are compared: exactly for integers, bools and exact float
 * ops (data movement, Max, Floor, ...), else within a per-dtype tolerance. A case whose
 * node the CUDA backend refuses (AMP_ERR_UNSUPPORTED: at open, no kernel for it or its
 * dtype; or when it runs, a geometry the library cannot do, which a session with the
 * fallback gives to the CPU) is counted as "not on the GPU" and printed, never failed; a
 * mismatch or any other error fails.
 * Each test prints one line per op: "op: N cases, M on GPU, K match", and after it which
 * dtype bindings were refused.
 *
 * Skips without a GPU. AMPC_TEST_CUDA_OPS_BACKEND=sim runs the same cases against the
 * device simulator instead (no GPU needed: it proves the cases are valid models the CPU
 * runs, and the harness sound); AMPC_TEST_CUDA_OPS_ONLY=Op,Op limits the ops;
 * AMPC_TEST_CUDA_OPS_VERBOSE=1 prints every case.
 *
 * The tables' little language:
 *   dtypes  "FLT" (f32 f16 bf16), "INT" (i32 i64), "ALL" (FLT INT bool) or single names
 *           (f32 f16 bf16 f64 i8 u8 i32 i64 bool), space-separated, each binding T;
 *           "A>B" binds T to each of A and U to each of B (Cast).
 *   inputs  alternatives separated by '|', each a space-separated input list:
 *           T[3,1,5]  a graph input ([] rank 0), random data; a suffix picks the values:
 *                     + positive, ~ away from 0, # small integers, p near 1, s small
 *                     ([-0.5, 0.5)), @N indices in [-N, N), %N class labels in
 *                     [0, N); with no suffix the row's
 *                     .gen (one char per input)
 *           i64{1,-1} a 1-D initializer; T(2.5) a rank-0 initializer; - absent.
 *   attrs   "axis=1 perm=[1,0] alpha=0.5 mode=reflect to=U value=T(2.5)": ints, floats
 *           (with a '.' or an exponent), lists, strings, a dtype (T, U), a 1-element
 *           tensor. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/convert.h"
#include "ir/half.h"
#include "tests/runtime/rt_util.h"

#include "tests/cuda/cuda_ops_cases.h" /* the cases */

/* ---- tolerances ------------------------------------------------------------------ */

/* elementwise: |got - ref| <= rtol |ref| + atol; accumulating: <= acc * max |ref| + atol.
 * 16-bit: about one unit in the last place of the output (fp16 2^-10, bf16 2^-7). */
static const struct {
    int dt;
    double rtol, atol, acc;
} tolerances[] = {
    {AMP_DT_FLOAT, 1e-5, 1e-6, 1e-3},
    {AMP_DT_FLOAT16, 1e-3, 1e-5, 2e-3},
    {AMP_DT_BFLOAT16, 8e-3, 1e-5, 1e-2},
    {AMP_DT_DOUBLE, 1e-12, 1e-12, 1e-9},
};

/* ---- dtypes and values ----------------------------------------------------------- */

static const struct {
    const char *name;
    int dt;
} dtypes[] = {{"f32", AMP_DT_FLOAT}, {"f16", AMP_DT_FLOAT16}, {"bf16", AMP_DT_BFLOAT16}, {"f64", AMP_DT_DOUBLE},
              {"i8", AMP_DT_INT8},   {"u8", AMP_DT_UINT8},    {"i32", AMP_DT_INT32},      {"i64", AMP_DT_INT64},
              {"bool", AMP_DT_BOOL}};
static const struct {
    const char *name, *members;
} groups[] = {{"FLT", "f32 f16 bf16"}, {"INT", "i32 i64"}, {"ALL", "f32 f16 bf16 i32 i64 bool"}};

static const char *dt_short(int dt) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dt == dt) return dtypes[i].name;
    return amp_dtype_name(dt);
}

/* A dtype name of len chars; T and U are the case's bindings. */
static int dt_parse(const char *s, size_t len, int T, int U) {
    if (len == 1 && *s == 'T') return T;
    if (len == 1 && *s == 'U') return U;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strlen(dtypes[i].name) == len && !strncmp(s, dtypes[i].name, len)) return dtypes[i].dt;
    cr_assert_fail("unknown dtype '%.*s'", (int)len, s);
    return 0;
}

/* The dtypes a name or group stands for; returns the count. */
static int dt_list(const char *s, size_t len, int *out) {
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        if (strlen(groups[g].name) != len || strncmp(s, groups[g].name, len)) continue;
        int n = 0;
        for (const char *p = groups[g].members; *p; p += strspn(p, " ")) {
            size_t l = strcspn(p, " ");
            out[n++] = dt_parse(p, l, 0, 0);
            p += l;
        }
        return n;
    }
    out[0] = dt_parse(s, len, 0, 0);
    return 1;
}

static bool dt_is_float(int dt) {
    return dt == AMP_DT_FLOAT || dt == AMP_DT_FLOAT16 || dt == AMP_DT_BFLOAT16 || dt == AMP_DT_DOUBLE;
}

static void put(int dt, void *p, uint64_t i, double v) {
    switch (dt) {
    case AMP_DT_FLOAT: ((float *)p)[i] = (float)v; break;
    case AMP_DT_DOUBLE: ((double *)p)[i] = v; break;
    case AMP_DT_FLOAT16: ((uint16_t *)p)[i] = amp_f32_to_f16((float)v); break;
    case AMP_DT_BFLOAT16: ((uint16_t *)p)[i] = amp_f32_to_bf16((float)v); break;
    case AMP_DT_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case AMP_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case AMP_DT_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case AMP_DT_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
    case AMP_DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: cr_assert_fail("no values for %s", amp_dtype_name(dt));
    }
}

static double get(int dt, const void *p, uint64_t i) {
    switch (dt) {
    case AMP_DT_FLOAT: return ((const float *)p)[i];
    case AMP_DT_DOUBLE: return ((const double *)p)[i];
    case AMP_DT_FLOAT16: return amp_f16_to_f32(((const uint16_t *)p)[i]);
    case AMP_DT_BFLOAT16: return amp_bf16_to_f32(((const uint16_t *)p)[i]);
    case AMP_DT_INT8: return ((const int8_t *)p)[i];
    case AMP_DT_UINT8: case AMP_DT_BOOL: return ((const uint8_t *)p)[i];
    case AMP_DT_INT32: return ((const int32_t *)p)[i];
    case AMP_DT_INT64: return (double)((const int64_t *)p)[i];
    default: return NAN;
    }
}

/* xorshift64*: the same inputs every run, on every machine. */
static uint64_t rng;

static double urand(void) {
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) * 0x1p-53;
}

/* One random value for a generator (see the header); ill-conditioned regions avoided. */
static double gen_value(int dt, char gen, int64_t bound) {
    bool fl = dt_is_float(dt);
    double u = urand();
    if (dt == AMP_DT_BOOL) return u < 0.5;
    switch (gen) {
    case '+': return fl ? 0.1 + 2.9 * u : 1 + floor(20 * u);
    case '~': return (urand() < 0.5 ? -1 : 1) * (fl ? 0.5 + 2.5 * u : 1 + floor(20 * u));
    case '#': return floor(9 * u) - 4;
    case 'p': return fl ? 0.5 + u : 1 + floor(2 * u);
    case 's': return fl ? u - 0.5 : floor(9 * u) - 4;
    case '@': return floor(2 * (double)bound * u) - (double)bound;
    case '%': return floor((double)bound * u);
    default: return fl ? 6 * u - 3 : floor(41 * u) - 20;
    }
}

/* ---- one input ------------------------------------------------------------------- */

typedef struct In {
    int kind; /* 0 absent, 1 graph input, 2 initializer */
    int dt, rank;
    int64_t dims[AMP_TENSOR_MAX_RANK];
    uint64_t n;
    void *data;
} In;

/* Parses one input token and fills its data; gen is the row's default generator. */
static void parse_in(const char *tok, int T, int U, char gen, In *in) {
    memset(in, 0, sizeof *in);
    if (!strcmp(tok, "-")) return;
    size_t nl = strcspn(tok, "[{(");
    cr_assert(tok[nl], "input '%s': no shape or value", tok);
    in->dt = dt_parse(tok, nl, T, U);
    const char *p = tok + nl + 1;
    char close = tok[nl] == '[' ? ']' : tok[nl] == '{' ? '}' : ')';
    const char *end = strchr(p, close);
    cr_assert_not_null(end, "input '%s': unclosed", tok);
    /* the numbers between the brackets */
    char *vals[1024];
    int nv = 0;
    char body[16384];
    snprintf(body, sizeof body, "%.*s", (int)(end - p), p);
    for (char *s = body, *save = NULL, *t; (t = strtok_r(s, ",", &save)); s = NULL) {
        cr_assert_lt(nv, 1024);
        vals[nv++] = t;
    }
    if (tok[nl] == '[') {
        in->kind = 1;
        in->rank = nv;
        for (int i = 0; i < nv; i++) in->dims[i] = atoll(vals[i]);
    } else {
        in->kind = 2;
        in->rank = tok[nl] == '{';
        in->dims[0] = nv;
        cr_assert(tok[nl] == '{' || nv == 1, "input '%s': a scalar takes one value", tok);
    }
    in->n = 1;
    for (int i = 0; i < in->rank; i++) in->n *= (uint64_t)in->dims[i];
    size_t bytes = 0;
    cr_assert(amp_tensor_expected_bytes(in->dt, in->n, &bytes));
    in->data = calloc(1, bytes ? bytes : 1);
    if (in->kind == 2) {
        for (int i = 0; i < nv; i++) {
            char *e;
            long long iv = strtoll(vals[i], &e, 10);
            if (*e || dt_is_float(in->dt)) put(in->dt, in->data, (uint64_t)i, strtod(vals[i], NULL));
            else if (in->dt == AMP_DT_INT64) ((int64_t *)in->data)[i] = iv; /* exact, up to INT64_MAX */
            else put(in->dt, in->data, (uint64_t)i, (double)iv);
        }
        return;
    }
    const char *suffix = end + 1;
    char g = *suffix ? *suffix : gen;
    int64_t bound = g == '@' || g == '%' ? atoll(suffix + 1) : 0;
    for (uint64_t i = 0; i < in->n; i++) put(in->dt, in->data, i, gen_value(in->dt, g, bound));
}

/* ---- the model ------------------------------------------------------------------- */

/* Sets the attributes of a spec on n. */
static void set_attrs(AmpModel *m, AmpNode *n, const char *spec, int T, int U) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    for (char *s = buf, *save = NULL, *t; (t = strtok_r(s, " ", &save)); s = NULL) {
        char *v = strchr(t, '=');
        cr_assert_not_null(v, "attribute '%s' has no value", t);
        *v++ = '\0';
        const char *name = amp_arena_strdup(&m->arena, t);
        char *e;
        if (*v == '[') { /* a list: ints, or floats when one is not an int */
            char *items[64];
            int k = 0;
            bool ints = true;
            v[strcspn(v, "]")] = '\0';
            for (char *s2 = v + 1, *sv2 = NULL, *t2; (t2 = strtok_r(s2, ",", &sv2)); s2 = NULL) {
                items[k++] = t2;
                strtoll(t2, &e, 10);
                ints = ints && !*e;
            }
            AmpAttr *a = amp_node_add_attr(n, name, ints ? AMP_ATTR_INTS : AMP_ATTR_FLOATS);
            if (ints) a->ints = amp_arena_calloc(&m->arena, (size_t)k + 1, sizeof *a->ints), a->n_ints = (size_t)k;
            else a->floats = amp_arena_calloc(&m->arena, (size_t)k + 1, sizeof *a->floats), a->n_floats = (size_t)k;
            for (int i = 0; i < k; i++) {
                if (ints) a->ints[i] = strtoll(items[i], NULL, 10);
                else a->floats[i] = strtof(items[i], NULL);
            }
        } else if (strchr(v, '(')) { /* a 1-element tensor: value=T(2.5) */
            In c;
            parse_in(v, T, U, 0, &c);
            AmpTensor *tt = amp_arena_calloc(&m->arena, 1, sizeof *tt);
            size_t bytes = 0;
            amp_tensor_expected_bytes(c.dt, 1, &bytes);
            tt->dtype = c.dt;
            tt->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
            tt->ndims = 1;
            tt->dims = amp_arena_calloc(&m->arena, 1, sizeof *tt->dims);
            tt->dims[0] = 1;
            tt->nelem = 1;
            tt->raw.data = amp_arena_memdup(&m->arena, c.data, bytes);
            tt->raw.len = bytes;
            free(c.data);
            amp_node_add_attr(n, name, AMP_ATTR_TENSOR)->t = tt;
        } else if (!strcmp(v, "T") || !strcmp(v, "U")) {
            amp_node_add_attr(n, name, AMP_ATTR_INT)->i = *v == 'T' ? T : U;
        } else {
            long long iv = strtoll(v, &e, 10);
            if (!*e) {
                amp_node_add_attr(n, name, AMP_ATTR_INT)->i = iv;
                continue;
            }
            float fv = strtof(v, &e);
            if (!*e) {
                amp_node_add_attr(n, name, AMP_ATTR_FLOAT)->f = fv;
                continue;
            }
            AmpAttr *a = amp_node_add_attr(n, name, AMP_ATTR_STRING);
            a->s.data = (const uint8_t *)amp_arena_strdup(&m->arena, v);
            a->s.len = strlen(v);
        }
    }
}

/* The one-node model, serialised: inputs in0.., outputs y0... */
static void build(const Case *c, const In *in, int n_in, int T, int U, uint8_t **bytes, size_t *len) {
    AmpModel *m = rt_model(c->opset ? c->opset : 18);
    AmpGraph *g = m->graph;
    char ins[512] = "", outs[128] = "", name[16], dims[256];
    for (int i = 0; i < n_in; i++) {
        snprintf(name, sizeof name, "in%d", i);
        size_t l = strlen(ins);
        snprintf(ins + l, sizeof ins - l, "%s%s", i ? "," : "", in[i].kind ? name : "");
        if (in[i].kind == 1) {
            dims[0] = '\0';
            for (int d = 0; d < in[i].rank; d++) {
                l = strlen(dims);
                snprintf(dims + l, sizeof dims - l, "%s%lld", d ? "," : "", (long long)in[i].dims[d]);
            }
            rt_input(g, name, in[i].dt, dims);
        } else if (in[i].kind == 2) {
            rt_init(g, name, in[i].dt, in[i].rank, in[i].dims, in[i].data);
        }
    }
    int nout = c->nout ? c->nout : 1;
    for (int i = 0; i < nout; i++) {
        size_t l = strlen(outs);
        snprintf(outs + l, sizeof outs - l, "%sy%d", i ? "," : "", i);
    }
    /* "domain:Op" names an op of another domain (com.microsoft, opset 1) */
    const char *colon = strchr(c->op, ':'), *op = colon ? colon + 1 : c->op;
    char domain[64] = "";
    if (colon) {
        snprintf(domain, sizeof domain, "%.*s", (int)(colon - c->op), c->op);
        m->opsets[m->n_opsets++] = (AmpOpset){amp_arena_strdup(&m->arena, domain), 1, true};
    }
    AmpNode *n = rt_node(g, domain, op, ins, outs);
    set_attrs(m, n, c->attrs, T, U);
    AmpStatus st = {0};
    amp_infer_model(m, &st); /* types the outputs where it can */
    for (int i = 0; i < nout; i++) {
        snprintf(name, sizeof name, "y%d", i);
        rt_output(g, name, AMP_DT_UNDEFINED, NULL);
    }
    amp_status_clear(&st);
    cr_assert_eq(amp_model_save_bytes(m, bytes, len, &st), AMP_OK, "save: %s", st.msg);
    amp_model_free(m);
}

/* Opens the model on a backend and runs it; *opened says whether the open succeeded. */
static AmpCode run_on(AmpBackendKind be, const uint8_t *bytes, size_t len, const AmpTensorView *iv, size_t niv,
                      AmpTensorView *out, int nout, bool *opened, AmpStatus *st) {
    AmpSessionOptions o = {.backend = be, .ignore_env = true, .no_fallback = be != AMP_BACKEND_CPU};
    AmpSession *s = NULL;
    amp_status_clear(st);
    AmpCode rc = amp_session_open_bytes(bytes, len, NULL, &o, &s, st);
    *opened = rc == AMP_OK;
    if (rc) return rc;
    rc = amp_session_run(s, iv, niv, NULL, (size_t)nout, out, st);
    amp_session_close(s);
    return rc;
}

/* ---- comparing ------------------------------------------------------------------- */

/* Whether got matches ref under the case's tolerance; why says where it does not. */
static bool compare(const AmpTensorView *ref, const AmpTensorView *got, char tol, char *why, size_t wl) {
    if (ref->dtype != got->dtype || ref->rank != got->rank) {
        snprintf(why, wl, "dtype/rank %s/%d, expected %s/%d", dt_short(got->dtype), got->rank, dt_short(ref->dtype),
                 ref->rank);
        return false;
    }
    uint64_t n = 1;
    for (int i = 0; i < ref->rank; i++) {
        if (ref->dims[i] != got->dims[i]) {
            snprintf(why, wl, "dim %d is %lld, expected %lld", i, (long long)got->dims[i], (long long)ref->dims[i]);
            return false;
        }
        n *= (uint64_t)ref->dims[i];
    }
    int dt = ref->dtype;
    double rtol = 0, atol = 0, acc = 0, maxabs = 0;
    bool exact = !dt_is_float(dt) || tol == 'X';
    for (size_t i = 0; i < sizeof tolerances / sizeof tolerances[0]; i++)
        if (tolerances[i].dt == dt) rtol = tolerances[i].rtol, atol = tolerances[i].atol, acc = tolerances[i].acc;
    if (tol == 'A')
        for (uint64_t i = 0; i < n; i++) {
            double r = fabs(get(dt, ref->data, i));
            if (isfinite(r) && r > maxabs) maxabs = r;
        }
    uint64_t bad = 0, first = 0;
    for (uint64_t i = 0; i < n; i++) {
        double r = get(dt, ref->data, i), x = get(dt, got->data, i);
        bool ok;
        if (isnan(r) || isnan(x)) ok = isnan(r) && isnan(x);
        else if (exact || isinf(r)) ok = r == x;
        else ok = fabs(x - r) <= (tol == 'A' ? acc * maxabs : rtol * fabs(r)) + atol;
        if (!ok && !bad++) first = i;
    }
    if (bad)
        snprintf(why, wl, "%llu of %llu elements differ; element %llu: %.9g, expected %.9g", (unsigned long long)bad,
                 (unsigned long long)n, (unsigned long long)first, get(dt, got->data, first),
                 get(dt, ref->data, first));
    return !bad;
}

/* ---- the driver ------------------------------------------------------------------ */

typedef struct Stat {
    const char *op;
    int cases, on_gpu, match, refused;
    char off[512]; /* the dtype bindings of refused cases, " f16 bf16 " */
} Stat;

typedef struct Run {
    AmpBackendKind be;
    const char *dev; /* "cuda" or "sim" */
    bool verbose;
    int failures;
} Run;

/* The (T, U) bindings of a dtypes spec; returns their count. */
static int bindings(const char *dts, int *ts, int *us) {
    int n = 0;
    for (const char *p = dts; *p; p += strspn(p, " ")) {
        size_t l = strcspn(p, " "), gt = strcspn(p, ">");
        int a[16], b[16] = {0}, na = dt_list(p, gt < l ? gt : l, a), nb = 1;
        if (gt < l) nb = dt_list(p + gt + 1, l - gt - 1, b);
        for (int i = 0; i < na; i++)
            for (int j = 0; j < nb; j++) ts[n] = a[i], us[n++] = b[j];
        p += l;
    }
    return n;
}

/* One case: the inputs alternative `alt` of row c with T and U bound, its random data
 * drawn from `seed`. */
static void run_case(Run *r, Stat *stt, const Case *c, uint64_t seed, const char *alt, int T, int U) {
    rng = seed;
    for (int k = 0; k < 4; k++) urand();
    In in[16];
    int n_in = 0;
    char toks[1024];
    snprintf(toks, sizeof toks, "%s", alt);
    for (char *s = toks, *save = NULL, *t; (t = strtok_r(s, " ", &save)); s = NULL) {
        char g = c->gen && (size_t)n_in < strlen(c->gen) && c->gen[n_in] != ' ' ? c->gen[n_in] : 0;
        cr_assert_lt(n_in, 16);
        parse_in(t, T, U, g, &in[n_in++]);
    }
    char label[1200], bind[32];
    snprintf(bind, sizeof bind, "%s%s%s", dt_short(T), U ? ">" : "", U ? dt_short(U) : "");
    snprintf(label, sizeof label, "%s[%s] %s {%s}", c->op, bind, alt, c->attrs ? c->attrs : "");
    uint8_t *bytes = NULL;
    size_t len = 0;
    build(c, in, n_in, T, U, &bytes, &len);
    static const char *const names[16] = {"in0", "in1", "in2",  "in3",  "in4",  "in5",  "in6",  "in7",
                                          "in8", "in9", "in10", "in11", "in12", "in13", "in14", "in15"};
    AmpTensorView iv[16];
    size_t niv = 0;
    for (int i = 0; i < n_in; i++)
        if (in[i].kind == 1) iv[niv++] = rt_view(names[i], in[i].dt, in[i].data, in[i].rank, in[i].dims);
    int nout = c->nout ? c->nout : 1;
    AmpTensorView ref[8] = {0}, got[8] = {0};
    AmpStatus st = {0};
    bool opened = false;
    stt->cases++;
    AmpCode rc = run_on(AMP_BACKEND_CPU, bytes, len, iv, niv, ref, nout, &opened, &st);
    if (rc) {
        fprintf(stderr, "ERROR %s: the CPU reference fails: %s\n", label, st.msg);
        r->failures++;
    } else if ((rc = run_on(r->be, bytes, len, iv, niv, got, nout, &opened, &st)) == AMP_ERR_UNSUPPORTED) {
        /* no kernel (refused at open), or a kernel that refuses these shapes when it runs
         * (a geometry cuDNN cannot do; with the fallback on, the CPU then runs the node):
         * the first refusal of an op with its reason, then only which dtypes */
        if (!stt->refused++ || r->verbose) fprintf(stderr, "not on %s: %s: %s\n", r->dev, label, st.msg);
        char word[40];
        snprintf(word, sizeof word, " %s ", bind);
        size_t ol = strlen(stt->off), at = ol ? ol - 1 : 0; /* entries share their spaces */
        if (!strstr(stt->off, word) && at + strlen(word) < sizeof stt->off)
            snprintf(stt->off + at, sizeof stt->off - at, "%s", word);
    } else if (rc) {
        fprintf(stderr, "ERROR %s: %s fails: %s\n", label, r->dev, st.msg);
        stt->on_gpu += opened;
        r->failures++;
    } else {
        stt->on_gpu++;
        bool ok = true;
        char why[256];
        for (int o = 0; o < nout && ok; o++) {
            ok = compare(&ref[o], &got[o], c->tol ? c->tol : 'E', why, sizeof why);
            if (!ok) fprintf(stderr, "MISMATCH %s: output %d: %s\n", label, o, why);
        }
        stt->match += ok;
        r->failures += !ok;
        if (ok && r->verbose) fprintf(stderr, "ok %s\n", label);
    }
    for (int o = 0; o < nout; o++) amp_tensor_view_free(&ref[o]), amp_tensor_view_free(&got[o]);
    for (int i = 0; i < n_in; i++) free(in[i].data);
    free(bytes);
}

/* Runs every case of a table; prints the per-op summary; fails on a mismatch or error. */
static void run_table(const Case *cases, size_t n_cases) {
    const char *mode = getenv("AMPC_TEST_CUDA_OPS_BACKEND"), *only = getenv("AMPC_TEST_CUDA_OPS_ONLY");
    const char *vb = getenv("AMPC_TEST_CUDA_OPS_VERBOSE");
    bool sim = mode && !strcmp(mode, "sim");
    if (!sim && !amp_cuda_device_available()) cr_skip_test("no CUDA device");
    Run r = {sim ? AMP_BACKEND_SIM : AMP_BACKEND_CUDA, sim ? "sim" : "cuda", vb && *vb && strcmp(vb, "0"), 0};
    Stat stats[64];
    int n_stats = 0;
    for (size_t ci = 0; ci < n_cases; ci++) {
        const Case *c = &cases[ci];
        if (only) { /* AMPC_TEST_CUDA_OPS_ONLY=Op,Op */
            char pat[80], list[512];
            snprintf(pat, sizeof pat, ",%s,", c->op);
            snprintf(list, sizeof list, ",%s,", only);
            if (!strstr(list, pat)) continue;
        }
        Stat *stt = NULL;
        for (int i = 0; i < n_stats && !stt; i++)
            if (!strcmp(stats[i].op, c->op)) stt = &stats[i];
        if (!stt) {
            cr_assert_lt(n_stats, 64);
            stt = &stats[n_stats++];
            *stt = (Stat){.op = c->op};
        }
        int ts[64], us[64], n_tu = bindings(c->dts, ts, us);
        char alts[4096];
        snprintf(alts, sizeof alts, "%s", c->ins);
        uint64_t ai = 0;
        for (char *s = alts, *save = NULL, *a; (a = strtok_r(s, "|", &save)); s = NULL, ai++) {
            a += strspn(a, " ");
            for (size_t l = strlen(a); l && a[l - 1] == ' ';) a[--l] = '\0';
            for (int tu = 0; tu < n_tu; tu++)
                run_case(&r, stt, c, 0x9e3779b97f4a7c15ull ^ (ci << 40) ^ (ai << 20) ^ (uint64_t)tu, a, ts[tu], us[tu]);
        }
    }
    for (int i = 0; i < n_stats; i++) {
        Stat *t = &stats[i];
        fprintf(stderr, "%s: %d cases, %d on %s, %d match", t->op, t->cases, t->on_gpu, sim ? "sim" : "GPU", t->match);
        if (t->refused) fprintf(stderr, " (%d refused, for%.*s)", t->refused, (int)strlen(t->off) - 1, t->off);
        fputc('\n', stderr);
    }
    cr_assert_eq(r.failures, 0, "%d cases mismatch or fail (see above)", r.failures);
}

#define RUN(table) run_table(table, sizeof table / sizeof table[0])

Test(cuda_ops, elementwise, .timeout = 1200) {
    RUN(elementwise);
}

Test(cuda_ops, movement, .timeout = 1200) {
    RUN(movement);
}

Test(cuda_ops, reduce_norm, .timeout = 1200) {
    RUN(reduce_norm);
}

Test(cuda_ops, resize, .timeout = 1200) {
    RUN(resize);
}

Test(cuda_ops, gemm_conv_pool, .timeout = 1200) {
    RUN(gemm_conv);
}

Test(cuda_ops, attention, .timeout = 1200) {
    RUN(attention);
}

Test(cuda_ops, loss_train, .timeout = 1200) {
    RUN(loss_train);
}

Test(cuda_ops, optim, .timeout = 1200) {
    RUN(optim);
}

Test(cuda_ops, grad, .timeout = 1200) {
    RUN(grad);
}
