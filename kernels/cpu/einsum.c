/* CPU kernel: Einsum. Its geometry (ops/einsum_geom.h) parses the equation into one label
 * per axis (ellipsis dims get labels of their own, right-aligned across operands). Two-operand contractions without
 * diagonals or broadcasting become a batched cblas_sgemm between permuted copies; every
 * other equation (diagonals, sums, traces, 1 or 3+ operands, double) runs as a loop. */
#include "kernels/cpu/blas.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm_impl.h"
#include "ops/einsum_geom.h"

#define N_LABELS AMP_EINSUM_LABELS
#define MAX_OPS AMP_EINSUM_MAX_OPS

typedef AmpEinsumTerm Term;
typedef AmpEinsumGeom Eq; /* the parsed equation (ops/einsum_geom.h) */

/* ---- the general loop ------------------------------------------------------------ */

/* Element strides of operand `op` per label (repeated labels add up: a diagonal; a size-1
 * axis of a larger label reads stride 0: broadcast). */
static void label_strides(const Eq *e, const AmpBuf *b, int op, int64_t *st) {
    for (int l = 0; l < N_LABELS; l++) st[l] = 0;
    int64_t s = 1;
    for (int a = b->rank - 1; a >= 0; a--) {
        int l = e->in[op].lab[a];
        if (b->dims[a] != 1 || e->size[l] == 1) st[l] += s;
        s *= b->dims[a];
    }
}

/* out[o] = sum over the contracted labels of the product of the operands, in double. */
static void einsum_loop(const Eq *e, const AmpBuf *const *in, const double *const *x, double *out) {
    int64_t st[MAX_OPS][N_LABELS];
    for (int op = 0; op < e->n_ops; op++) label_strides(e, in[op], op, st[op]);
    uint64_t n_out = 1, n_con = 1;
    for (int a = 0; a < e->out.rank; a++) n_out *= (uint64_t)e->size[e->out.lab[a]];
    for (int c = 0; c < e->n_con; c++) n_con *= (uint64_t)e->size[e->con[c]];
    int64_t oi[AMP_MAX_RANK] = {0}, ci[N_LABELS] = {0};
    int64_t base[MAX_OPS] = {0}, off[MAX_OPS];
    for (uint64_t o = 0; o < n_out; o++) {
        double acc = 0.0;
        for (int op = 0; op < e->n_ops; op++) off[op] = base[op];
        for (uint64_t c = 0; c < n_con; c++) {
            double p = 1.0;
            for (int op = 0; op < e->n_ops; op++) p *= x[op][off[op]];
            acc += p;
            for (int d = e->n_con - 1; d >= 0; d--) {
                int l = e->con[d];
                for (int op = 0; op < e->n_ops; op++) off[op] += st[op][l];
                if (++ci[d] < e->size[l]) break;
                for (int op = 0; op < e->n_ops; op++) off[op] -= st[op][l] * e->size[l];
                ci[d] = 0;
            }
        }
        out[o] = acc;
        for (int d = e->out.rank - 1; d >= 0; d--) {
            int l = e->out.lab[d];
            for (int op = 0; op < e->n_ops; op++) base[op] += st[op][l];
            if (++oi[d] < e->size[l]) break;
            for (int op = 0; op < e->n_ops; op++) base[op] -= st[op][l] * e->size[l];
            oi[d] = 0;
        }
    }
}

static double *to_f64(const AmpBuf *b) {
    double *d = malloc((b->nelem ? b->nelem : 1) * sizeof *d);
    if (!d) return NULL;
    if (b->dtype == AMP_DT_DOUBLE) {
        if (b->nelem) memcpy(d, b->data, b->nelem * sizeof *d);
        return d;
    }
    float *tmp;
    const float *f = amp_buf_f32_in(b, &tmp);
    if (!f) {
        free(d);
        return NULL;
    }
    for (uint64_t i = 0; i < b->nelem; i++) d[i] = f[i];
    free(tmp);
    return d;
}

static AmpCode run_loop(AmpKernelCtx *k, const Eq *e, AmpBuf *y) {
    double *x[MAX_OPS] = {NULL};
    double *out = malloc((y->nelem ? y->nelem : 1) * sizeof *out);
    AmpCode rc = AMP_OK;
    for (int op = 0; op < e->n_ops && out; op++)
        if (!(x[op] = to_f64(k->in[op]))) rc = amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    if (!out) rc = amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    if (!rc) {
        einsum_loop(e, k->in, (const double *const *)x, out);
        if (y->dtype == AMP_DT_DOUBLE) {
            if (y->nelem) memcpy(y->data, out, y->nelem * sizeof *out);
        } else {
            float *tmp, *f = amp_buf_f32_out(y, &tmp);
            if (!f) rc = amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
            else {
                for (uint64_t i = 0; i < y->nelem; i++) f[i] = (float)out[i];
                amp_buf_f32_commit(y, tmp);
            }
        }
    }
    for (int op = 0; op < e->n_ops; op++) free(x[op]);
    free(out);
    return rc;
}

/* ---- two operands as a batched GEMM ---------------------------------------------- */

/* dst = src with its axes reordered: dst axis i is src axis perm[i]. src is (dims). */
static void permute(const float *src, int rank, const int64_t *dims, const int *perm, float *dst) {
    int64_t sst[AMP_MAX_RANK], dd[AMP_MAX_RANK], ds[AMP_MAX_RANK], idx[AMP_MAX_RANK] = {0};
    int64_t s = 1;
    for (int a = rank - 1; a >= 0; a--) sst[a] = s, s *= dims[a];
    for (int i = 0; i < rank; i++) dd[i] = dims[perm[i]], ds[i] = sst[perm[i]];
    uint64_t n = amp_shape_nelem(rank, dims), off = 0;
    for (uint64_t i = 0; i < n; i++) {
        dst[i] = src[off];
        for (int d = rank - 1; d >= 0; d--) {
            off += (uint64_t)ds[d];
            if (++idx[d] < dd[d]) break;
            off -= (uint64_t)(ds[d] * dd[d]);
            idx[d] = 0;
        }
    }
}

static int axis_of(const Term *t, int l) {
    for (int a = 0; a < t->rank; a++)
        if (t->lab[a] == l) return a;
    return -1;
}

/* The GEMM plan: batch labels (in both and the output), M (A and output), N (B and
 * output), K (both, not the output). false when the equation does not fit: a label
 * repeated in an operand, a broadcast size-1 axis, or a label only one operand sums. */
typedef struct Plan {
    int nb, nm, nn, nk;
    int b[AMP_MAX_RANK], m[AMP_MAX_RANK], n[AMP_MAX_RANK], kl[AMP_MAX_RANK];
    int64_t B, M, N, K;
} Plan;

static bool plan_gemm(const Eq *e, const AmpBuf *const *in, Plan *p) {
    memset(p, 0, sizeof *p);
    if (e->n_ops != 2) return false;
    for (int op = 0; op < 2; op++)
        for (int a = 0; a < e->in[op].rank; a++) {
            int l = e->in[op].lab[a];
            if (in[op]->dims[a] != e->size[l] || axis_of(&e->in[op], l) != a) return false;
        }
    p->B = p->M = p->N = p->K = 1;
    for (int a = 0; a < e->out.rank; a++) {
        int l = e->out.lab[a];
        bool ia = e->in_op[l][0], ib = e->in_op[l][1];
        if (ia && ib) p->b[p->nb++] = l, p->B *= e->size[l];
        else if (ia) p->m[p->nm++] = l, p->M *= e->size[l];
        else p->n[p->nn++] = l, p->N *= e->size[l];
    }
    for (int c = 0; c < e->n_con; c++) {
        int l = e->con[c];
        if (!e->in_op[l][0] || !e->in_op[l][1]) return false;
    }
    /* K labels in A's axis order. */
    for (int a = 0; a < e->in[0].rank; a++) {
        int l = e->in[0].lab[a];
        if (e->in_op[l][1] && axis_of(&e->out, l) < 0) p->kl[p->nk++] = l, p->K *= e->size[l];
    }
    return p->M <= INT_MAX && p->N <= INT_MAX && p->K <= INT_MAX;
}

static AmpCode run_gemm(AmpKernelCtx *k, const Eq *e, const Plan *p, AmpBuf *y) {
    const AmpBuf *a = k->in[0], *b = k->in[1];
    int pa[AMP_MAX_RANK], pb[AMP_MAX_RANK], py[AMP_MAX_RANK], ra = 0, rb = 0;
    int64_t cdims[AMP_MAX_RANK]; /* C's dims: (batch labels, M labels, N labels) */
    int rc_ = 0, cl[AMP_MAX_RANK];
    for (int i = 0; i < p->nb; i++) pa[ra++] = axis_of(&e->in[0], p->b[i]), pb[rb++] = axis_of(&e->in[1], p->b[i]);
    for (int i = 0; i < p->nm; i++) pa[ra++] = axis_of(&e->in[0], p->m[i]);
    for (int i = 0; i < p->nk; i++) pa[ra++] = axis_of(&e->in[0], p->kl[i]), pb[rb++] = axis_of(&e->in[1], p->kl[i]);
    for (int i = 0; i < p->nn; i++) pb[rb++] = axis_of(&e->in[1], p->n[i]);
    for (int i = 0; i < p->nb; i++) cl[rc_++] = p->b[i];
    for (int i = 0; i < p->nm; i++) cl[rc_++] = p->m[i];
    for (int i = 0; i < p->nn; i++) cl[rc_++] = p->n[i];
    for (int i = 0; i < rc_; i++) cdims[i] = e->size[cl[i]];
    for (int i = 0; i < e->out.rank; i++) {
        py[i] = -1;
        for (int j = 0; j < rc_; j++)
            if (cl[j] == e->out.lab[i]) py[i] = j;
    }
    float *ta, *tb, *ty;
    const float *A = amp_buf_f32_in(a, &ta), *B = amp_buf_f32_in(b, &tb);
    float *Y = amp_buf_f32_out(y, &ty);
    float *Ap = malloc((a->nelem ? a->nelem : 1) * sizeof *Ap); /* (batch, M, K) */
    float *Bp = malloc((b->nelem ? b->nelem : 1) * sizeof *Bp); /* (batch, K, N) */
    float *C = malloc((y->nelem ? y->nelem : 1) * sizeof *C);   /* (batch, M, N) */
    if (!A || !B || !Y || !Ap || !Bp || !C) {
        free(ta), free(tb), free(ty), free(Ap), free(Bp), free(C);
        return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    }
    permute(A, a->rank, a->dims, pa, Ap);
    permute(B, b->rank, b->dims, pb, Bp);
    uint64_t mc = (uint64_t)(p->M * p->N);
    if (!p->K) {
        memset(C, 0, (size_t)p->B * mc * sizeof *C);
    } else if (mc) {
        uint64_t ma = (uint64_t)(p->M * p->K), mb = (uint64_t)(p->K * p->N);
        for (int64_t i = 0; i < p->B; i++)
            amp_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p->M, (int)p->N, (int)p->K, 1.0f,
                        Ap + (uint64_t)i * ma, (int)p->K, Bp + (uint64_t)i * mb, (int)p->N, 0.0f, C + (uint64_t)i * mc,
                        (int)p->N);
    }
    permute(C, rc_, cdims, py, Y);
    amp_buf_f32_commit(y, ty);
    free(ta), free(tb), free(Ap), free(Bp), free(C);
    return AMP_OK;
}

/* The attributes are the equation, a NUL-terminated copy kept as written: its terms are
 * read against the inputs' ranks (an ellipsis spans what the letters leave), so its
 * geometry parses it once per input shapes (ops/einsum_geom.h). */
AmpCode amp_cpu_einsum_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    const char *eqs = amp_node_attr_string(n, "equation", NULL);
    if (!eqs)
        return amp_node_fail(n, st, AMP_ERR_INPUT, "no equation attribute");
    size_t len = strlen(eqs);
    char *eq = malloc(len + 1);
    if (!eq) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    memcpy(eq, eqs, len + 1);
    *attrs = eq;
    return AMP_OK;
}

AmpCode amp_cpu_einsum(AmpKernelCtx *k) {
    Eq *own = malloc(sizeof *own);
    if (!own) return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
    const Eq *e; /* amp_einsum_geom (ops/einsum_geom.h): the labels, their sizes, Y checked */
    AmpCode rc = amp_kernel_geom(k, own, (const void **)&e);
    int dt = rc ? AMP_DT_FLOAT : k->in[0]->dtype;
    for (int op = 0; !rc && op < e->n_ops; op++)
        if (k->in[op]->dtype != dt) rc = amp_kernel_fail(k, AMP_ERR_INPUT, "inputs have different types");
    if (!rc && !amp_is_f32_family(dt) && dt != AMP_DT_DOUBLE) rc = amp_kernel_bad_dtype(k, dt);
    AmpBuf *y = NULL;
    if (!rc) rc = amp_kernel_outputs(k, 1, &y);
    if (rc || !y) {
        free(own);
        return rc;
    }
    /* An empty input leaves an empty output or sums nothing: zeros (and keeps hostile
     * dims of empty tensors out of the stride arithmetic below). */
    bool empty = false;
    for (int op = 0; op < e->n_ops; op++) empty = empty || !k->in[op]->nelem;
    Plan p;
    if (empty) memset(y->data, 0, amp_buf_bytes(y));
    else if (dt != AMP_DT_DOUBLE && plan_gemm(e, k->in, &p)) rc = run_gemm(k, e, &p, y);
    else rc = run_loop(k, e, y);
    free(own);
    return rc;
}
