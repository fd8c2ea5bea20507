/* The host side of the CUDA training kernels (kernels/cuda/grad_ops.c, grad_ops_index.c), on the
 * CPU (no GPU needed): the table entries (the CUDA kernel with the CPU's prepare, so both
 * backends parse a node alike), the supports predicates (what runs on the GPU and what
 * goes to the CPU fallback), Dropout's refusal of the seeded MT19937 path before anything
 * is launched or drawn, GatherGrad's scratch chunking, which MaxPool nodes take the
 * Indices kernel (grad_ops_pool.c), and that kernel's per-element walk (maxpool_elem.h,
 * run here on the host with the launch parameters amp_cuda_maxpool_plan gives) against
 * the CPU's MaxPool, Y and Indices exactly. The numerics against the CPU
 * kernels are test_cuda_ops.c's grad table (GPU only); Dropout's shared mask generator is
 * tests/kernels/test_dropout_rng.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h" /* the CPU's prepares and MaxPool, the reference */
#include "kernels/cuda/grad_ops.h"
#include "kernels/cuda/maxpool_elem.h"
#include "ops/conv_geom.h"
#include "ops/dropout_rng.h"
#include "tests/runtime/rt_util.h"

enum {
    F = AMP_DT_FLOAT, H = AMP_DT_FLOAT16, BF = AMP_DT_BFLOAT16, D = AMP_DT_DOUBLE, B8 = AMP_DT_BOOL,
    I32 = AMP_DT_INT32, I64 = AMP_DT_INT64, U8 = AMP_DT_UINT8, S = AMP_DT_STRING
};

/* ---- table entries ---------------------------------------------------------------------- */

static const AmpOpId OPS[] = {AMP_OP_Ms_ReluGrad,      AMP_OP_Ms_SigmoidGrad,     AMP_OP_Ms_TanhGrad,
                              AMP_OP_Ms_GeluGrad,      AMP_OP_Ms_BiasGelu,        AMP_OP_Ms_BiasGeluGrad_dX,
                              AMP_OP_Ms_DropoutGrad,   AMP_OP_Dropout,            AMP_OP_Ms_InPlaceAccumulatorV2,
                              AMP_OP_OneHot,           AMP_OP_ScatterND,          AMP_OP_Ms_GatherGrad};

Test(cuda_grad_host, table_entries_use_the_cpu_prepares) {
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        const AmpCudaOp *op = &amp_cuda_ops[OPS[i]];
        const char *name = amp_op_info(OPS[i])->name;
        cr_assert_not_null(op->fn, "%s has a CUDA kernel", name);
        cr_assert_not_null(op->supports, "%s has a supports predicate", name);
        cr_assert_eq(op->prepare, amp_cpu_kernel_prepare(OPS[i]), "%s parses its node as the CPU does", name);
    }
}

/* ---- supports predicates ------------------------------------------------------------------ */

/* Whether the CUDA backend takes op (domain "" or com.microsoft) at opset with these
 * input dtypes (0: the input absent) and one string attribute (or none). */
static bool takes(const char *domain, const char *op, int64_t opset, int n_in, const int *dts, const char *attr,
                  const char *value) {
    AmpModel *m = rt_model(opset);
    static const char *ins[5] = {"", "a", "a,b", "a,b,c", "a,b,c,d"};
    AmpNode *n = rt_node(m->graph, domain, op, ins[n_in], "y");
    for (int i = 0; i < n_in; i++)
        if (!dts[i]) n->inputs[i] = NULL;
    if (attr) {
        AmpAttr *a = amp_node_add_attr(n, attr, AMP_ATTR_STRING);
        a->s.data = (const uint8_t *)amp_arena_strdup(&m->arena, value);
        a->s.len = strlen(value);
    }
    int in_dtypes[8] = {0};
    memcpy(in_dtypes, dts, (size_t)n_in * sizeof *dts);
    const AmpCudaOp *e = &amp_cuda_ops[n->op];
    cr_assert_not_null(e->supports, "%s has an entry", op);
    bool r = e->supports(n, opset, in_dtypes);
    amp_model_free(m);
    return r;
}

#define MS "com.microsoft"

Test(cuda_grad_host, elementwise_gradients_take_one_float_type) {
    const char *ops[] = {"ReluGrad", "SigmoidGrad", "TanhGrad", "GeluGrad", "BiasGelu"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const int f[2] = {F, F}, h[2] = {H, H}, b[2] = {BF, BF}, mixed[2] = {H, F}, d[2] = {D, D}, ints[2] = {I32, I32};
        cr_assert(takes(MS, ops[i], 1, 2, f, NULL, NULL), "%s f32", ops[i]);
        cr_assert(takes(MS, ops[i], 1, 2, h, NULL, NULL), "%s f16", ops[i]);
        cr_assert(takes(MS, ops[i], 1, 2, b, NULL, NULL), "%s bf16", ops[i]);
        cr_assert_not(takes(MS, ops[i], 1, 2, mixed, NULL, NULL), "%s mixed types: the CPU's error", ops[i]);
        cr_assert_not(takes(MS, ops[i], 1, 2, d, NULL, NULL), "%s double: the CPU's", ops[i]);
        cr_assert_not(takes(MS, ops[i], 1, 2, ints, NULL, NULL), "%s int32", ops[i]);
    }
    const int g3[3] = {BF, BF, BF}, g3m[3] = {BF, BF, F};
    cr_assert(takes(MS, "BiasGeluGrad_dX", 1, 3, g3, NULL, NULL));
    cr_assert_not(takes(MS, "BiasGeluGrad_dX", 1, 3, g3m, NULL, NULL), "a bias of another type");
}

Test(cuda_grad_host, dropout_inputs) {
    const int x[1] = {H}, xrt[3] = {BF, F, B8}, xdt[3] = {F, D, B8}, x_t[3] = {F, 0, B8};
    const int bad_t[3] = {F, F, I64}, bad_x[1] = {D}, bad_r[3] = {F, I32, B8};
    cr_assert(takes("", "Dropout", 13, 1, x, NULL, NULL));
    cr_assert(takes("", "Dropout", 13, 3, xrt, NULL, NULL), "ratio of another float type");
    cr_assert(takes("", "Dropout", 13, 3, xdt, NULL, NULL), "a double ratio");
    cr_assert(takes("", "Dropout", 13, 3, x_t, NULL, NULL), "ratio absent, training_mode given");
    cr_assert(takes("", "Dropout", 7, 1, x, NULL, NULL), "opset 7 (mask of x's type)");
    cr_assert_not(takes("", "Dropout", 13, 3, bad_t, NULL, NULL), "an int64 training_mode");
    cr_assert_not(takes("", "Dropout", 13, 1, bad_x, NULL, NULL), "double data: the CPU's");
    cr_assert_not(takes("", "Dropout", 13, 3, bad_r, NULL, NULL), "an int32 ratio: the CPU's error");
    const int g[2] = {H, B8}, grt[4] = {F, B8, H, B8}, gm[2] = {F, U8}, gd[2] = {D, B8};
    cr_assert(takes(MS, "DropoutGrad", 1, 2, g, NULL, NULL));
    cr_assert(takes(MS, "DropoutGrad", 1, 4, grt, NULL, NULL));
    cr_assert_not(takes(MS, "DropoutGrad", 1, 2, gm, NULL, NULL), "a uint8 mask");
    cr_assert_not(takes(MS, "DropoutGrad", 1, 2, gd, NULL, NULL), "double dY");
}

Test(cuda_grad_host, accumulator_flag_types) {
    const int a[2] = {F, H}, af[3] = {F, F, B8}, ai[3] = {BF, BF, I64}, a32[3] = {H, H, I32};
    const int ad[2] = {D, D}, au[3] = {F, F, U8};
    cr_assert(takes(MS, "InPlaceAccumulatorV2", 1, 2, a, NULL, NULL), "16-bit gradients into a float32 buffer");
    cr_assert(takes(MS, "InPlaceAccumulatorV2", 1, 3, af, NULL, NULL));
    cr_assert(takes(MS, "InPlaceAccumulatorV2", 1, 3, ai, NULL, NULL));
    cr_assert(takes(MS, "InPlaceAccumulatorV2", 1, 3, a32, NULL, NULL));
    cr_assert_not(takes(MS, "InPlaceAccumulatorV2", 1, 2, ad, NULL, NULL), "double: the CPU's");
    cr_assert_not(takes(MS, "InPlaceAccumulatorV2", 1, 3, au, NULL, NULL), "a uint8 flag: the CPU's");
}

Test(cuda_grad_host, index_ops) {
    const int oh[3] = {I64, I64, H}, oh32[3] = {I32, F, I64}, ohb[3] = {I64, I64, B8};
    const int ohf[3] = {F, I64, F}, ohs[3] = {I64, I64, S}, ohu[3] = {AMP_DT_UINT16, I64, F};
    cr_assert(takes("", "OneHot", 13, 3, oh, NULL, NULL));
    cr_assert(takes("", "OneHot", 13, 3, oh32, NULL, NULL));
    cr_assert(takes("", "OneHot", 13, 3, ohb, NULL, NULL), "bool values");
    cr_assert_not(takes("", "OneHot", 13, 3, ohf, NULL, NULL), "float indices (truncated by the CPU)");
    cr_assert_not(takes("", "OneHot", 13, 3, ohs, NULL, NULL), "string values");
    cr_assert_not(takes("", "OneHot", 13, 3, ohu, NULL, NULL), "uint16 indices");

    const int sf[3] = {F, I64, F}, sh[3] = {H, I32, H}, sb[3] = {BF, I64, BF}, si[3] = {I64, I64, I64};
    const int sd[3] = {D, I64, D}, sbool[3] = {B8, I64, B8}, smix[3] = {F, I64, H}, su[3] = {F, U8, F};
    cr_assert(takes("", "ScatterND", 18, 3, si, NULL, NULL), "none, int64 data");
    cr_assert(takes("", "ScatterND", 18, 3, sbool, "reduction", "none"));
    cr_assert(takes("", "ScatterND", 18, 3, sd, "reduction", "none"), "none moves 8-byte elements");
    cr_assert(takes("", "ScatterND", 18, 3, sf, "reduction", "add"), "add, float32: atomics");
    cr_assert(takes("", "ScatterND", 18, 3, sh, "reduction", "add"), "add, float16: ordered");
    cr_assert(takes("", "ScatterND", 18, 3, sb, "reduction", "add"), "add, bfloat16: ordered");
    cr_assert_not(takes("", "ScatterND", 18, 3, si, "reduction", "add"), "add on int64: the CPU's");
    cr_assert_not(takes("", "ScatterND", 18, 3, sd, "reduction", "add"), "add on double: the CPU's");
    cr_assert_not(takes("", "ScatterND", 18, 3, sf, "reduction", "mul"), "mul: the CPU's");
    cr_assert_not(takes("", "ScatterND", 18, 3, sf, "reduction", "max"), "max: the CPU's");
    cr_assert_not(takes("", "ScatterND", 18, 3, smix, NULL, NULL), "updates of another type");
    cr_assert_not(takes("", "ScatterND", 18, 3, su, NULL, NULL), "uint8 indices");

    const int gg[3] = {I64, I64, F}, gg32[3] = {I64, I32, BF}, ggd[3] = {I64, I64, D}, ggu[3] = {I64, U8, F};
    cr_assert(takes(MS, "GatherGrad", 1, 3, gg, NULL, NULL));
    cr_assert(takes(MS, "GatherGrad", 1, 3, gg32, NULL, NULL));
    cr_assert_not(takes(MS, "GatherGrad", 1, 3, ggd, NULL, NULL), "double dY");
    cr_assert_not(takes(MS, "GatherGrad", 1, 3, ggu, NULL, NULL), "uint8 indices");
}

/* MaxPool listing Indices: grad_ops_pool.c's kernel, any window; without it cuDNN's rules. */
static bool pool_takes(int dt, int n_out, int64_t dil) {
    AmpModel *m = rt_model(13);
    AmpNode *n = rt_node(m->graph, "", "MaxPool", "x", n_out == 2 ? "y,i" : "y");
    int64_t dils[2] = {dil, 1};
    AmpAttr *a = amp_node_add_attr(n, "dilations", AMP_ATTR_INTS);
    a->ints = amp_arena_calloc(&m->arena, 2, sizeof *a->ints);
    memcpy(a->ints, dils, sizeof dils);
    a->n_ints = 2;
    int in_dtypes[1] = {dt};
    bool r = amp_cuda_ops[AMP_OP_MaxPool].supports(n, 13, in_dtypes);
    amp_model_free(m);
    return r;
}

Test(cuda_grad_host, maxpool_indices) {
    cr_assert(pool_takes(F, 2, 1));
    cr_assert(pool_takes(BF, 2, 2), "dilated, with Indices: the own kernel");
    cr_assert_not(pool_takes(D, 2, 1), "double: the CPU's");
    cr_assert(pool_takes(H, 1, 1), "no Indices: cuDNN");
    cr_assert_not(pool_takes(H, 1, 2), "dilated without Indices: cuDNN cannot");
}

/* The kernel's element walk on the host, float32 data. */
#define F32_ID(v) (v)
AMP_CUDA_MAXPOOL_ELEM(host_maxpool_elem, float, F32_ID)

/* A MaxPool node of the given int-list attributes ("name=a,b,..." separated by spaces;
 * auto_pad=... a string), run by the CPU kernel on x (dims xd), and the host walk of
 * every output under amp_cuda_maxpool_plan's parameters: both must agree exactly. */
static void maxpool_agrees(int rank, const int64_t *xd, const char *spec) {
    AmpModel *m = rt_model(12);
    AmpNode *n = rt_node(m->graph, "", "MaxPool", "x", "y,i");
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *sv = NULL, *t = strtok_r(buf, " ", &sv); t; t = strtok_r(NULL, " ", &sv)) {
        char *v = strchr(t, '=');
        *v++ = '\0';
        if (!strcmp(t, "auto_pad")) {
            AmpAttr *a = amp_node_add_attr(n, amp_arena_strdup(&m->arena, t), AMP_ATTR_STRING);
            a->s.data = (const uint8_t *)amp_arena_strdup(&m->arena, v);
            a->s.len = strlen(v);
            continue;
        }
        int64_t vals[8];
        size_t cnt = 0;
        for (char *sv2 = NULL, *u = strtok_r(v, ",", &sv2); u; u = strtok_r(NULL, ",", &sv2)) vals[cnt++] = atoll(u);
        bool list = strcmp(t, "ceil_mode") && strcmp(t, "storage_order");
        AmpAttr *a = amp_node_add_attr(n, amp_arena_strdup(&m->arena, t), list ? AMP_ATTR_INTS : AMP_ATTR_INT);
        if (!list) {
            a->i = vals[0];
            continue;
        }
        a->ints = amp_arena_calloc(&m->arena, cnt, sizeof *a->ints);
        memcpy(a->ints, vals, cnt * sizeof *vals);
        a->n_ints = cnt;
    }
    AmpStatus st = {0};
    void *attrs = NULL;
    cr_assert_eq(amp_conv_prepare(n, 12, &attrs, &st), AMP_OK, "%s: %s", spec, st.msg);
    AmpBuf X = {.dtype = F, .rank = rank};
    memcpy(X.dims, xd, (size_t)rank * sizeof *xd);
    X.nelem = amp_shape_nelem(rank, xd);
    float *x = malloc(X.nelem * sizeof *x);
    uint64_t r = 0x1234567ull;
    for (uint64_t i = 0; i < X.nelem; i++) { /* small integers: many ties; a few NaN */
        r ^= r >> 12, r ^= r << 25, r ^= r >> 27;
        uint64_t u = (r * 0x2545f4914f6cdd1dull) >> 40;
        x[i] = u % 97 == 0 ? NAN : (float)(u % 7) - 5.0f;
    }
    X.data = x;
    const AmpBuf *in[1] = {&X};
    AmpBuf outs[2] = {{0}};
    AmpKernelCtx k = {.node = n, .opset = 12, .n_in = 1, .in = in, .n_out = 2, .out = outs, .attrs = attrs, .st = &st};
    AmpCudaPoolIdx p;
    int64_t yd[AMP_MAX_RANK];
    cr_assert_eq(amp_cuda_maxpool_plan(&k, &X, &p, yd), AMP_OK, "%s: %s", spec, st.msg);
    uint64_t ny = amp_shape_nelem(rank, yd);
    float *y = malloc((ny ? ny : 1) * sizeof *y);
    int64_t *iy = malloc((ny ? ny : 1) * sizeof *iy);
    outs[0] = (AmpBuf){.dtype = F, .rank = rank, .nelem = ny, .data = y};
    outs[1] = (AmpBuf){.dtype = I64, .rank = rank, .nelem = ny, .data = iy};
    memcpy(outs[0].dims, yd, sizeof outs[0].dims);
    memcpy(outs[1].dims, yd, sizeof outs[1].dims);
    cr_assert_eq(amp_cpu_maxpool(&k), AMP_OK, "%s: %s", spec, st.msg);
    for (uint64_t i = 0; i < ny; i++) {
        float best;
        int64_t arg = host_maxpool_elem(&p, i, x, &best);
        cr_assert_eq(arg, iy[i], "%s: output %llu index", spec, (unsigned long long)i);
        cr_assert(isnan(y[i]) ? isnan(best) : best == y[i], "%s: output %llu: %g, CPU %g", spec,
                  (unsigned long long)i, best, y[i]);
    }
    free(x), free(y), free(iy), free(attrs);
    amp_model_free(m);
}

Test(cuda_grad_host, maxpool_elem_matches_the_cpu) {
    const int64_t a[4] = {2, 4, 33, 17}, b[4] = {2, 3, 10, 11}, c[3] = {2, 3, 17}, d[5] = {1, 2, 5, 6, 7};
    maxpool_agrees(4, a, "kernel_shape=3,3 strides=2,2");
    maxpool_agrees(4, b, "kernel_shape=3,2 pads=1,0,2,1 ceil_mode=1");
    maxpool_agrees(4, b, "kernel_shape=3,3 dilations=2,1 storage_order=1");
    maxpool_agrees(4, b, "kernel_shape=2,2 dilations=3,2 pads=2,1,2,1 strides=3,1");
    maxpool_agrees(3, c, "kernel_shape=2 auto_pad=SAME_UPPER");
    maxpool_agrees(3, c, "kernel_shape=4 strides=3 auto_pad=SAME_LOWER storage_order=1");
    maxpool_agrees(5, d, "kernel_shape=2,3,2 strides=1,2,2");
    maxpool_agrees(5, d, "kernel_shape=2,2,2 pads=1,0,1,1,1,0 storage_order=1");
}

/* ---- Dropout's device path ------------------------------------------------------------------ */

Test(cuda_grad_host, dropout_device_path) {
    cr_assert(amp_cuda_dropout_on_device(true, true, true), "a training step: the counter path, seed or not");
    cr_assert(amp_cuda_dropout_on_device(false, true, false), "training_mode without a seed");
    cr_assert(amp_cuda_dropout_on_device(false, false, true), "inference with a seed: the identity");
    cr_assert_not(amp_cuda_dropout_on_device(false, true, true), "training_mode with a seed: MT19937, the CPU's");
    /* wherever the device path may train, a key was drawn */
    for (int t = 0; t < 2; t++)
        for (int m = 0; m < 2; m++)
            for (int s = 0; s < 2; s++)
                if (amp_cuda_dropout_on_device(t, m, s) && (t || m))
                    cr_assert(amp_dropout_draws(t, m, s, 1), "step %d mode %d seed %d", t, m, s);
}

/* The seeded training_mode call is refused before any launch and before any draw, so
 * the fallback CPU kernel draws the same stream. */
Test(cuda_grad_host, seeded_dropout_is_refused_before_drawing) {
    AmpModel *m = rt_model(13);
    AmpNode *n = rt_node(m->graph, "", "Dropout", "x,r,t", "y,mask");
    amp_node_add_attr(n, "seed", AMP_ATTR_INT)->i = 5;
    AmpStatus st = {0};
    void *attrs = NULL;
    cr_assert_eq(amp_cuda_ops[AMP_OP_Dropout].prepare(n, 13, &attrs, &st), AMP_OK, "%s", st.msg);
    float x[4] = {1, 2, 3, 4}, r = 0.5f;
    uint8_t t = 1;
    AmpBuf X = {.dtype = F, .rank = 1, .dims = {4}, .nelem = 4, .data = x};
    AmpBuf R = {.dtype = F, .rank = 0, .nelem = 1, .data = &r}, T = {.dtype = B8, .rank = 0, .nelem = 1, .data = &t};
    const AmpBuf *in[3] = {&X, &R, &T};
    uint64_t rng = 77;
    AmpKernelCtx k = {.node = n, .opset = 13, .n_in = 3, .in = in, .n_out = 2, .attrs = attrs, .rng = &rng, .st = &st};
    cr_assert_eq(amp_cuda_ops[AMP_OP_Dropout].fn(&k), AMP_ERR_UNSUPPORTED);
    cr_assert_eq(rng, 77, "nothing drawn");
    free(attrs);
    amp_model_free(m);
}

/* ---- GatherGrad's fp32 scratch -------------------------------------------------------------- */

Test(cuda_grad_host, gather_grad_chunks_fit_the_workspace) {
    const size_t ws = 64u << 20;
    cr_assert_eq(amp_cuda_gather_grad_chunk(1, 1000, 64, ws), 1000, "all rows at once");
    /* GPT-2's embedding (50257 x 768) in 16 bits: 21845 rows of fp32 per pass, 3 passes */
    int64_t c = amp_cuda_gather_grad_chunk(1, 50257, 768, ws);
    cr_assert_eq(c, (int64_t)(ws / (768 * 4)));
    cr_assert_eq((50257 + c - 1) / c, 3);
    cr_assert_eq(amp_cuda_gather_grad_chunk(4, 10, 1u << 23, ws), 0, "not one row per outer index fits");
    cr_assert_eq(amp_cuda_gather_grad_chunk(3, 7, 0, ws), 7, "empty rows");
}
