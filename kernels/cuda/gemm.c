/* MatMul, Gemm and com.microsoft FusedMatMul on CUDA through cuBLASLt. Inputs of
 * float16 / bfloat16 multiply with fp32 accumulation; float32 with CUBLAS_COMPUTE_32F (a
 * true FP32 baseline) unless the session allows TF32 (AmpCudaCtx.tf32). The plan of each
 * shape (descriptors, layouts, the heuristic's algorithm) is made once and cached.
 *
 * cuBLASLt is column-major: a row-major Y (m x n) = op(A) op(B) is computed as the
 * column-major Y^T = op(B)^T op(A)^T, so B is cuBLASLt's first operand, A its second, and
 * a row-major matrix is its own transpose in column-major with the same leading dim. */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gemm.h"
#include "ops/gemm_attrs.h" /* AmpGemmAttrs, the geometry */
#include "ops/geom.h"
#include "kernels/cuda/cuda_libs.h" /* last: cuBLASLt and cuDNN through dlopen */

/* One product's shape: Y[b] (m x n) = alpha * op(A[b]) op(B[b]) + beta * Y[b] (+ bias[n]),
 * b < batch, each operand stridden by its batch stride in elements (0: shared). */
typedef struct MmKey {
    int dtype, ta, tb, bias, tf32;
    int ydtype; /* Y's dtype when not dtype (float32 scores of 16-bit inputs); 0: dtype */
    unsigned align_a, align_b, align_y, align_bias;
    int64_t m, n, k, batch, sa, sb, sy;
    int64_t lda, ldb, ldy;    /* leading dims when not the dense ones; 0: dense */
    size_t ws_bytes;          /* the workspace cuBLASLt may use; 0: the session's whole one */
} MmKey;

typedef struct MmPlan {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ly; /* cuBLASLt's A (our B), B (our A), C = D (our Y) */
    cublasLtMatmulAlgo_t algo;
} MmPlan;

static void plan_free(void *p) {
    MmPlan *x = p;
    if (!x) return;
    if (x->desc) cublasLtMatmulDescDestroy(x->desc);
    if (x->la) cublasLtMatrixLayoutDestroy(x->la);
    if (x->lb) cublasLtMatrixLayoutDestroy(x->lb);
    if (x->ly) cublasLtMatrixLayoutDestroy(x->ly);
    free(x);
}

static cudaDataType_t cuda_type(int dtype) {
    return dtype == AMP_DT_FLOAT16 ? CUDA_R_16F : dtype == AMP_DT_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
}

static size_t dtype_size(int dtype) {
    return dtype == AMP_DT_FLOAT ? 4 : 2;
}

/* The alignment cuBLASLt may assume for a batched operand: its base's and its stride's. */
static unsigned batch_align(const void *p, int64_t stride_elems, size_t esz) {
    unsigned a = amp_cuda_align(p);
    if (stride_elems) {
        unsigned s = amp_cuda_align((const void *)(uintptr_t)((uint64_t)stride_elems * esz));
        if (s < a) a = s;
    }
    return a;
}

static cublasStatus_t layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld,
                             int64_t batch, int64_t stride) {
    cublasStatus_t s = cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld);
    if (s || batch <= 1) return s;
    int32_t count = (int32_t)batch;
    s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    if (!s) s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    return s;
}

static AmpCode make_plan(AmpKernelCtx *k, const MmKey *key, MmPlan **out) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    MmPlan *p = calloc(1, sizeof *p);
    if (!p) return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
    cudaDataType_t t = cuda_type(key->dtype);
    cublasComputeType_t ct = key->dtype == AMP_DT_FLOAT && key->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasOperation_t op_a = key->tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = key->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t s = cublasLtMatmulDescCreate(&p->desc, ct, CUDA_R_32F);
    if (!s) s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a);
    if (!s) s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b);
    if (!s && key->bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    }
    /* our B: row-major (tb ? n x k : k x n); our A: row-major (ta ? k x m : m x k); Y: m x n */
    int64_t lda = key->lda ? key->lda : key->ta ? key->m : key->k, ldb = key->ldb ? key->ldb : key->tb ? key->k : key->n;
    int64_t ldy = key->ldy ? key->ldy : key->n;
    if (!s) s = key->tb ? layout(&p->la, t, key->k, key->n, ldb, key->batch, key->sb)
                        : layout(&p->la, t, key->n, key->k, ldb, key->batch, key->sb);
    if (!s) s = key->ta ? layout(&p->lb, t, key->m, key->k, lda, key->batch, key->sa)
                        : layout(&p->lb, t, key->k, key->m, lda, key->batch, key->sa);
    if (!s) s = layout(&p->ly, key->ydtype ? cuda_type(key->ydtype) : t, key->n, key->m, ldy, key->batch, key->sy);
    cublasLtMatmulPreference_t pref = NULL;
    if (!s) s = cublasLtMatmulPreferenceCreate(&pref);
    size_t ws = key->ws_bytes ? key->ws_bytes : c->workspace_bytes;
    uint32_t al_a = key->align_b, al_b = key->align_a, al_y = key->align_y; /* cuBLASLt's A is our B */
    if (!s) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (!s) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    if (!s) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    if (!s) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_y, sizeof al_y);
    if (!s) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_y, sizeof al_y);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    if (!s) s = cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->la, p->lb, p->ly, p->ly, pref, 1, &res, &found);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (!s && !found) s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (s) {
        plan_free(p);
        return amp_cuda_check_blas(k, s, "planning the matrix product");
    }
    p->algo = res.algo;
    *out = p;
    return AMP_OK;
}

/* Runs one (batched) product; bias: a device vector of n elements or NULL. */
static AmpCode run_mm(AmpKernelCtx *k, MmKey key, const void *a, const void *b, void *y, const void *bias, float alpha,
                      float beta) {
    AmpCudaCtx *c = amp_cuda_ctx(k);
    if (key.m == 0 || key.n == 0 || key.batch == 0) return AMP_OK;
    size_t esz = dtype_size(key.dtype);
    key.tf32 = c->tf32;
    key.bias = bias != NULL;
    if (!key.align_a) key.align_a = batch_align(a, key.sa, esz);
    if (!key.align_b) key.align_b = batch_align(b, key.sb, esz);
    if (!key.align_y) key.align_y = batch_align(y, key.sy, key.ydtype ? dtype_size(key.ydtype) : esz);
    key.align_bias = bias ? amp_cuda_align(bias) : 0;
    MmPlan *p = amp_cuda_cache_get(c, AMP_CUDA_CACHE_GEMM, &key, sizeof key);
    if (!p) {
        AmpCode rc = make_plan(k, &key, &p);
        if (rc) return rc;
        if (!amp_cuda_cache_put(c, AMP_CUDA_CACHE_GEMM, &key, sizeof key, p, plan_free)) {
            plan_free(p);
            return amp_fail(k->st, AMP_ERR_INTERNAL, "out of memory");
        }
    }
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (bias) s = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (!s)
        s = cublasLtMatmul(c->lt, p->desc, &alpha, b, p->la, a, p->lb, &beta, y, p->ly, y, p->ly, &p->algo,
                           c->workspace, key.ws_bytes ? key.ws_bytes : c->workspace_bytes, (cudaStream_t)c->stream);
    return amp_cuda_check_blas(k, s, "cublasLtMatmul");
}

AmpCode amp_cuda_mm(AmpKernelCtx *k, const AmpCudaMm *mm) {
    MmKey key = {.dtype = mm->dtype, .ta = mm->ta, .tb = mm->tb, .m = mm->m, .n = mm->n, .k = mm->k,
                 .batch = mm->batch, .sa = mm->sa, .sb = mm->sb, .sy = mm->sy, .lda = mm->lda, .ldb = mm->ldb,
                 .ldy = mm->ldy, .ydtype = mm->ydtype != mm->dtype ? mm->ydtype : 0, .ws_bytes = mm->ws_bytes};
    /* the alignment a leading dim allows too (every row of a batch starts on one) */
    size_t esz = dtype_size(mm->dtype), ysz = dtype_size(mm->ydtype ? mm->ydtype : mm->dtype);
    unsigned la = batch_align(mm->a, mm->lda, esz), lb = batch_align(mm->b, mm->ldb, esz);
    unsigned ly = batch_align(mm->y, mm->ldy, ysz);
    key.align_a = batch_align(mm->a, mm->sa, esz) < la ? batch_align(mm->a, mm->sa, esz) : la;
    key.align_b = batch_align(mm->b, mm->sb, esz) < lb ? batch_align(mm->b, mm->sb, esz) : lb;
    key.align_y = batch_align(mm->y, mm->sy, ysz) < ly ? batch_align(mm->y, mm->sy, ysz) : ly;
    return run_mm(k, key, mm->a, mm->b, mm->y, mm->bias, mm->alpha, mm->beta);
}

static bool same_dims(const int64_t *a, const int64_t *b, int n) {
    return n == 0 || memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* The batched product of MatMul and FusedMatMul as their geometry gives it
 * (amp_matmul_geom, ops/gemm_attrs.h: numpy's 1-D promotion and batch broadcasting; ta / tb
 * transpose the last two axes of A / B). */
static AmpCode matmul_into(AmpKernelCtx *k, float alpha) {
    AmpMatmulGeom own;
    const AmpMatmulGeom *g;
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpBuf *A = k->in[0], *B = k->in[1];
    AmpBuf *Y;
    if ((rc = amp_kernel_outputs(k, 1, &Y))) return rc;
    if (!amp_cuda_is_float(A->dtype)) return amp_kernel_bad_dtype(k, A->dtype);
    /* the matrices: A is (m x k) after op, B (k x n); a 1-D operand is not transposed */
    bool ta = g->ta && A->rank > 1, tb = g->tb && B->rank > 1;
    int64_t m = g->m, kk = g->kk, n = g->n;
    int rba = g->nba, rbb = g->nbb, rb = g->nb;
    const int64_t *bd = g->batch, *sa_b = g->sa, *sb_b = g->sb;
    int64_t nb = (int64_t)g->nbatch, nba = (int64_t)g->na, nbb = (int64_t)g->nbm;
    if (!Y->nelem) return AMP_OK;
    if (kk == 0) return amp_cuda_check(k, amp_cuda_gemm_fill_c(Y->data, NULL, Y->dtype, nb * m, n, 0, 0, 0.f,
                                                               amp_cuda_ctx(k)->stream), "zero fill");
    MmKey key = {.dtype = A->dtype, .ta = ta, .tb = tb, .m = m, .n = n, .k = kk, .batch = 1};
    size_t esz = dtype_size(A->dtype);
    /* B shared by every batch and A's batches contiguous, untransposed: one tall product */
    if (nbb == 1 && !ta && (nba == nb) && (rba == rb)) {
        key.m = nb * m;
        return run_mm(k, key, A->data, B->data, Y->data, NULL, alpha, 0.f);
    }
    bool a_whole = nba == 1 || (rba == rb && same_dims(A->dims, bd, rb));
    bool b_whole = nbb == 1 || (rbb == rb && same_dims(B->dims, bd, rb));
    if (a_whole && b_whole) { /* strided batches, stride 0 for an operand all batches share */
        key.batch = nb;
        key.sa = nba == 1 ? 0 : m * kk;
        key.sb = nbb == 1 ? 0 : kk * n;
        key.sy = m * n;
        return run_mm(k, key, A->data, B->data, Y->data, NULL, alpha, 0.f);
    }
    /* mixed broadcasting: one product per output batch */
    key.align_a = batch_align(A->data, m * kk, esz);
    key.align_b = batch_align(B->data, kk * n, esz);
    key.align_y = batch_align(Y->data, m * n, esz);
    for (int64_t i = 0; i < nb && !rc; i++) {
        int64_t rem = i, ia = 0, ib = 0;
        for (int d = rb - 1; d >= 0; d--) {
            int64_t idx = rem % bd[d];
            rem /= bd[d];
            ia += idx * sa_b[d];
            ib += idx * sb_b[d];
        }
        rc = run_mm(k, key, (const char *)A->data + (size_t)(ia * m * kk) * esz,
                    (const char *)B->data + (size_t)(ib * kk * n) * esz, (char *)Y->data + (size_t)(i * m * n) * esz,
                    NULL, alpha, 0.f);
    }
    return rc;
}

AmpCode amp_cuda_matmul(AmpKernelCtx *k) {
    return matmul_into(k, 1.f);
}

AmpCode amp_cuda_fused_matmul(AmpKernelCtx *k) {
    const AmpGemmAttrs *a = k->attrs;
    if (!a) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "attributes not prepared");
    return matmul_into(k, a->alpha);
}

AmpCode amp_cuda_gemm(AmpKernelCtx *k) {
    AmpGemmGeom own;
    const AmpGemmGeom *g; /* amp_gemm_geom (ops/gemm_attrs.h): m, n, K, C's strides, Y checked */
    AmpCode rc = amp_kernel_geom(k, &own, (const void **)&g);
    if (rc) return rc;
    const AmpGemmAttrs *at = k->attrs;
    const AmpBuf *A = k->in[0], *B = k->in[1], *C = g->has_c ? k->in[2] : NULL;
    AmpBuf *Y;
    if ((rc = amp_kernel_outputs(k, 1, &Y))) return rc;
    if (!amp_cuda_is_float(A->dtype)) return amp_kernel_bad_dtype(k, A->dtype);
    int64_t m = g->m, n = g->n, ka = g->ka, c_rs = g->c_rs, c_cs = g->c_cs;
    if (!Y->nelem) return AMP_OK;
    bool use_c = C && at->beta != 0.f && C->nelem;
    AmpCudaCtx *cx = amp_cuda_ctx(k);
    /* C = a row of n added with beta 1: cuBLASLt's bias epilogue; else Y = beta * C first */
    bool bias = use_c && at->beta == 1.f && c_rs == 0 && c_cs == 1 && ka > 0;
    if ((use_c && !bias) || ka == 0) {
        rc = amp_cuda_check(k, amp_cuda_gemm_fill_c(Y->data, use_c ? C->data : NULL, Y->dtype, m, n, c_rs, c_cs,
                                                    at->beta, cx->stream),
                            "Gemm's C");
        if (rc || ka == 0) return rc;
    }
    MmKey key = {.dtype = A->dtype, .ta = at->ta, .tb = at->tb, .m = m, .n = n, .k = ka, .batch = 1};
    return run_mm(k, key, A->data, B->data, Y->data, bias ? C->data : NULL, at->alpha, use_c && !bias ? 1.f : 0.f);
}

/* float32 / float16 / bfloat16, both operands alike (Gemm's C too). */
bool amp_cuda_supports_matmul(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    return amp_cuda_supports_float(n, opset, in_dtypes);
}

bool amp_cuda_supports_fused_matmul(const AmpNode *n, int64_t opset, const int *in_dtypes) {
    return !amp_node_attr_int(n, "transBatchA", 0) && !amp_node_attr_int(n, "transBatchB", 0) &&
           amp_cuda_supports_float(n, opset, in_dtypes);
}
