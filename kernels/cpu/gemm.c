/* CPU kernels: MatMul (numpy semantics), Gemm and com.microsoft FusedMatMul. Float32
 * and bfloat16 products go through oneDNN's matmul (dnnl.h: bfloat16 inputs as they are,
 * float32 accumulation, the output written in its type) where it is there and wins;
 * the rest through OpenBLAS (cblas_sgemm; cblas_dgemm for double): 16-bit inputs are
 * widened to fp32 and the result rounded to the output's type. Einsum is in einsum.c. */
#include "kernels/cpu/blas.h"
#include "kernels/cpu/dnnl.h"
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm_impl.h"

static AmpCode oom(AmpKernelCtx *k) {
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
}


/* ---- attributes, parsed once at prepare ------------------------------------------- */

const void *amp_gemm_prepared(AmpKernelCtx *k) {
    if (!k->attrs) amp_kernel_fail(k, AMP_ERR_INTERNAL, "the node's attributes were not prepared");
    return k->attrs;
}

/* The integer types the product takes: 32 and 64 bits (onnxruntime's MatMul). */
static bool is_int_mm(int dt) {
    return amp_dtype_is_int(dt) && amp_dtype_bits(dt) >= 32;
}

/* ---- batched matrix products ---------------------------------------------------- */

/* A batched product C = alpha * op(A) @ op(B) as its geometry gives it (ops/gemm_attrs.h:
 * A holds matrices of op-shape (m, kk), B (kk, n), C (m, n), over an output batch `batch`
 * that both inputs' batch dims broadcast to). */
typedef AmpMatmulGeom MmShape;

/* Walks the output batch in row-major order, tracking A's and B's matrix offsets. */
typedef struct BatchIt {
    const MmShape *s;
    int64_t idx[AMP_MAX_RANK];
    uint64_t oa, ob;
} BatchIt;

static void batch_next(BatchIt *it) {
    const MmShape *s = it->s;
    for (int d = s->nb - 1; d >= 0; d--) {
        it->oa += (uint64_t)s->sa[d];
        it->ob += (uint64_t)s->sb[d];
        if (++it->idx[d] < s->batch[d]) return;
        it->oa -= (uint64_t)(s->sa[d] * s->batch[d]);
        it->ob -= (uint64_t)(s->sb[d] * s->batch[d]);
        it->idx[d] = 0;
    }
}

/* A holds every matrix of the output batch in order and B is one matrix: the batch
 * folds into M and the product is a single GEMM. */
static bool fold_batch(const MmShape *s, bool ta) {
    return !ta && s->nbm == 1 && s->na == s->nbatch && s->nbatch * (uint64_t)s->m <= INT_MAX;
}

static void mm_f32(const MmShape *s, bool ta, bool tb, float alpha, const float *A, const float *B, float *C) {
    uint64_t mc = (uint64_t)(s->m * s->n), ma = (uint64_t)(s->m * s->kk), mb = (uint64_t)(s->kk * s->n);
    if (!mc || !s->nbatch) return;
    if (!s->kk) {
        memset(C, 0, s->nbatch * mc * sizeof *C);
        return;
    }
    int m = (int)s->m, n = (int)s->n, kk = (int)s->kk;
    int lda = ta ? m : kk, ldb = tb ? kk : n;
    CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
    if (fold_batch(s, ta)) {
        amp_sgemm(CblasRowMajor, opa, opb, (int)(s->nbatch * (uint64_t)s->m), n, kk, alpha, A, lda, B, ldb, 0.0f,
                    C, n);
        return;
    }
    BatchIt it = {.s = s};
    for (uint64_t i = 0; i < s->nbatch; i++, batch_next(&it))
        amp_sgemm(CblasRowMajor, opa, opb, m, n, kk, alpha, A + it.oa * ma, lda, B + it.ob * mb, ldb, 0.0f,
                    C + i * mc, n);
}

static void mm_f64(const MmShape *s, bool ta, bool tb, double alpha, const double *A, const double *B, double *C) {
    uint64_t mc = (uint64_t)(s->m * s->n), ma = (uint64_t)(s->m * s->kk), mb = (uint64_t)(s->kk * s->n);
    if (!mc || !s->nbatch) return;
    if (!s->kk) {
        memset(C, 0, s->nbatch * mc * sizeof *C);
        return;
    }
    int m = (int)s->m, n = (int)s->n, kk = (int)s->kk;
    int lda = ta ? m : kk, ldb = tb ? kk : n;
    CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
    if (fold_batch(s, ta)) {
        amp_dgemm(CblasRowMajor, opa, opb, (int)(s->nbatch * (uint64_t)s->m), n, kk, alpha, A, lda, B, ldb, 0.0, C,
                    n);
        return;
    }
    BatchIt it = {.s = s};
    for (uint64_t i = 0; i < s->nbatch; i++, batch_next(&it))
        amp_dgemm(CblasRowMajor, opa, opb, m, n, kk, alpha, A + it.oa * ma, lda, B + it.ob * mb, ldb, 0.0,
                    C + i * mc, n);
}

/* Through oneDNN, in the inputs' own type (float32 or bfloat16) into y's: false, having
 * done nothing, where it is off, loses to OpenBLAS for this size, or has no primitive. */
static bool mm_dnnl(const MmShape *s, bool ta, bool tb, float alpha, const AmpBuf *a, const AmpBuf *b, AmpBuf *y) {
    int dt = a->dtype;
    if ((dt != AMP_DT_FLOAT && dt != AMP_DT_BFLOAT16) || !s->nbatch || !s->m || !s->n || !s->kk ||
        s->nb > AMP_DNNL_MAX_BATCH || !amp_dnnl_wins(dt, (int64_t)s->nbatch * s->m, s->n, s->kk) ||
        !amp_dnnl_enabled())
        return false;
    AmpDnnlMatmul p = {.dt_ab = dt, .dt_dst = y->dtype, .m = s->m, .n = s->n, .k = s->kk, .ta = ta, .tb = tb,
                       .alpha = alpha};
    if (fold_batch(s, ta)) {
        p.m = (int64_t)s->nbatch * s->m;
    } else {
        p.nb = s->nb;
        for (int d = 0; d < s->nb; d++) {
            p.batch_a[d] = s->sa[d] ? s->batch[d] : 1;
            p.batch_b[d] = s->sb[d] ? s->batch[d] : 1;
        }
    }
    return amp_dnnl_matmul(&p, a->data, b->data, NULL, y->data);
}

/* Integer MatMul (no BLAS for integers): products wrap modulo 2^64, then to the type. */
static void mm_int(const MmShape *s, const AmpBuf *a, const AmpBuf *b, AmpBuf *y) {
    uint64_t mc = (uint64_t)(s->m * s->n), ma = (uint64_t)(s->m * s->kk), mb = (uint64_t)(s->kk * s->n);
    BatchIt it = {.s = s};
    for (uint64_t bi = 0; bi < s->nbatch; bi++, batch_next(&it))
        for (int64_t i = 0; i < s->m; i++)
            for (int64_t j = 0; j < s->n; j++) {
                uint64_t acc = 0;
                for (int64_t p = 0; p < s->kk; p++)
                    acc += (uint64_t)amp_buf_get_i64(a, it.oa * ma + (uint64_t)(i * s->kk + p)) *
                           (uint64_t)amp_buf_get_i64(b, it.ob * mb + (uint64_t)(p * s->n + j));
                amp_buf_set_i64(y, bi * mc + (uint64_t)(i * s->n + j), (int64_t)acc);
            }
}

/* MatMul and FusedMatMul: Y = alpha * op(A) @ op(B), batched with broadcasting. */
static AmpCode matmul_common(AmpKernelCtx *k, float alpha) {
    MmShape own;
    const MmShape *s; /* amp_matmul_geom (ops/gemm_attrs.h): m, n, K, the batch strides, Y checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&s);
    if (rc) return rc;
    const AmpBuf *a = k->in[0], *b = k->in[1];
    bool ta = s->ta, tb = s->tb;
    int dt = a->dtype;
    if (!amp_is_f32_family(dt) && dt != AMP_DT_DOUBLE && !(is_int_mm(dt) && !ta && !tb && alpha == 1.0f))
        return amp_kernel_bad_dtype(k, dt);
    if (s->m > INT_MAX || s->n > INT_MAX || s->kk > INT_MAX)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "a matrix dimension is over INT_MAX (BLAS limit)");
    AmpBuf *y;
    if ((rc = amp_kernel_outputs(k, 1, &y)) || !y) return rc;
    if (dt == AMP_DT_DOUBLE) {
        mm_f64(s, ta, tb, alpha, a->data, b->data, y->data);
        return AMP_OK;
    }
    if (is_int_mm(dt)) {
        mm_int(s, a, b, y);
        return AMP_OK;
    }
    if (mm_dnnl(s, ta, tb, alpha, a, b, y)) return AMP_OK;
    float *ta_tmp, *tb_tmp, *ty_tmp;
    const float *A = amp_buf_f32_in(a, &ta_tmp);
    const float *B = amp_buf_f32_in(b, &tb_tmp);
    float *C = amp_buf_f32_out(y, &ty_tmp);
    if (!A || !B || !C) {
        free(ta_tmp), free(tb_tmp), free(ty_tmp);
        return oom(k);
    }
    mm_f32(s, ta, tb, alpha, A, B, C);
    amp_buf_f32_commit(y, ty_tmp);
    free(ta_tmp), free(tb_tmp);
    return AMP_OK;
}

AmpCode amp_cpu_matmul(AmpKernelCtx *k) {
    return matmul_common(k, 1.0f);
}

/* com.microsoft FusedMatMul: alpha * op(A) @ op(B) (transA / transB: its geometry's). */
AmpCode amp_cpu_fused_matmul(AmpKernelCtx *k) {
    const AmpGemmAttrs *a = amp_gemm_prepared(k);
    return a ? matmul_common(k, a->alpha) : k->st->code;
}

/* ---- Gemm ------------------------------------------------------------------------ */

/* Gemm through oneDNN (see mm_dnnl): c, where given, is added as the primitive's bias
 * when alpha and beta are 1 and c is a row, (N) or (1, N) (a Linear's); otherwise y's float32 view is set to beta * C first and
 * the product added to it (a sum post-op), as the OpenBLAS path below does. */
static bool gemm_dnnl(const AmpGemmAttrs *at, const AmpGemmGeom *g, const AmpBuf *a, const AmpBuf *b,
                      const AmpBuf *c, AmpBuf *y) {
    int64_t m = g->m, n = g->n, ka = g->ka;
    int dt = a->dtype;
    if ((dt != AMP_DT_FLOAT && dt != AMP_DT_BFLOAT16) || !ka || !amp_dnnl_wins(dt, m, n, ka) || !amp_dnnl_enabled())
        return false;
    AmpDnnlMatmul p = {.dt_ab = dt, .dt_dst = y->dtype, .m = m, .n = n, .k = ka, .ta = at->ta, .tb = at->tb,
                       .alpha = at->alpha};
    if (!c) return amp_dnnl_matmul(&p, a->data, b->data, NULL, y->data);
    if (at->alpha == 1.0f && at->beta == 1.0f && c->rank >= 1 && c->dims[c->rank - 1] == n &&
        (c->rank == 1 || c->dims[0] == 1)) {
        p.bias = true;
        return amp_dnnl_matmul(&p, a->data, b->data, c->data, y->data);
    }
    float *tc_tmp, *ty_tmp;
    const float *C = amp_buf_f32_in(c, &tc_tmp);
    float *Y = amp_buf_f32_out(y, &ty_tmp);
    bool ok = C && Y;
    if (ok) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) Y[i * n + j] = at->beta * C[i * g->c_rs + j * g->c_cs];
        p.dt_dst = AMP_DT_FLOAT;
        p.accumulate = true;
        ok = amp_dnnl_matmul(&p, a->data, b->data, NULL, Y);
    }
    if (ok) amp_buf_f32_commit(y, ty_tmp);
    else free(ty_tmp);
    free(tc_tmp);
    return ok;
}

/* Y (M, N) = alpha * op(A) @ op(B) + beta * C, C unidirectionally broadcast to (M, N)
 * (optional since opset 11; older opsets' `broadcast` attribute is implied), as its
 * geometry g gives them (ops/gemm_attrs.h). Y is the placed output y (NULL: not listed,
 * nothing to compute), or a float32 stand-in of its shape for a 16-bit one. */
static AmpCode gemm(AmpKernelCtx *k, const AmpGemmAttrs *at, const AmpGemmGeom *g, AmpBuf *y) {
    const AmpBuf *a = k->in[0], *b = k->in[1], *c = g->has_c ? k->in[2] : NULL;
    int dt = a->dtype;
    if (!amp_is_f32_family(dt) && dt != AMP_DT_DOUBLE) return amp_kernel_bad_dtype(k, dt);
    bool ta = at->ta, tb = at->tb;
    float alpha = at->alpha, beta = at->beta;
    int64_t m = g->m, n = g->n, ka = g->ka, cs[2] = {g->c_rs, g->c_cs};
    if (m > INT_MAX || n > INT_MAX || ka > INT_MAX)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "a matrix dimension is over INT_MAX (BLAS limit)");
    if (!y) return AMP_OK;
    if (!m || !n) return AMP_OK;
    bool use_c = c && beta != 0.0f;
    CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
    int lda = (int)(ta ? m : ka), ldb = (int)(tb ? ka : n);
    if (dt == AMP_DT_DOUBLE) {
        double *Y = y->data;
        const double *C = c ? c->data : NULL;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) Y[i * n + j] = use_c ? beta * C[i * cs[0] + j * cs[1]] : 0.0;
        if (ka)
            amp_dgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)ka, alpha, a->data, lda, b->data, ldb, 1.0, Y,
                        (int)n);
        return AMP_OK;
    }
    if (gemm_dnnl(at, g, a, b, use_c ? c : NULL, y)) return AMP_OK;
    float *ta_tmp, *tb_tmp, *tc_tmp = NULL, *ty_tmp;
    const float *A = amp_buf_f32_in(a, &ta_tmp);
    const float *B = amp_buf_f32_in(b, &tb_tmp);
    const float *C = use_c ? amp_buf_f32_in(c, &tc_tmp) : NULL;
    float *Y = amp_buf_f32_out(y, &ty_tmp);
    if (!A || !B || (use_c && !C) || !Y) {
        free(ta_tmp), free(tb_tmp), free(tc_tmp), free(ty_tmp);
        return oom(k);
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) Y[i * n + j] = use_c ? beta * C[i * cs[0] + j * cs[1]] : 0.0f;
    if (ka) amp_sgemm(CblasRowMajor, opa, opb, (int)m, (int)n, (int)ka, alpha, A, lda, B, ldb, 1.0f, Y, (int)n);
    amp_buf_f32_commit(y, ty_tmp);
    free(ta_tmp), free(tb_tmp), free(tc_tmp);
    return AMP_OK;
}

AmpCode amp_gemm_into(AmpKernelCtx *k, const AmpGemmAttrs *a, const AmpGemmGeom *g, AmpBuf *y) {
    return gemm(k, a, g, y);
}

AmpCode amp_cpu_gemm(AmpKernelCtx *k) {
    AmpGemmGeom own;
    const AmpGemmGeom *g; /* amp_gemm_geom (ops/gemm_attrs.h): m, n, K, C's strides, Y checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    AmpBuf *y;
    if (rc || (rc = amp_kernel_outputs(k, 1, &y))) return rc;
    return gemm(k, k->attrs, g, y);
}
