/* The FLOPs of the nodes that dominate a network's cost (ir.h, amp_node_flops): counted by
 * the amp pass's summary and by `ampc --report`, from static shapes only. */
#include "ir/ir.h"

/* The elements of v's tensor as a double, when every dim is known. */
static bool numel(const AmpValue *v, double *out) {
    if (!v || v->type.kind != AMP_TYPE_TENSOR || v->type.rank < 0) return false;
    double n = 1;
    for (int i = 0; i < v->type.rank; i++) {
        if (v->type.dims[i].value < 0) return false;
        n *= (double)v->type.dims[i].value;
    }
    *out = n;
    return true;
}

/* Dim i of v (negative: from the end), when known. */
static bool dim(const AmpValue *v, int i, double *out) {
    if (!v || v->type.kind != AMP_TYPE_TENSOR || v->type.rank < 1) return false;
    if (i < 0) i += v->type.rank;
    if (i < 0 || i >= v->type.rank || v->type.dims[i].value < 0) return false;
    *out = (double)v->type.dims[i].value;
    return true;
}

/* The product of W's dims after the first (C/group · kernel for Conv's weight,
 * M/group · kernel for ConvTranspose's). */
static bool kernel_size(const AmpValue *w, double *out) {
    double all, first;
    if (!numel(w, &all) || !dim(w, 0, &first) || w->type.rank < 3) return false;
    *out = first > 0 ? all / first : 0;
    return true;
}

static const AmpValue *in(const AmpNode *n, int i) { return i < n->n_inputs ? n->inputs[i] : NULL; }
static const AmpValue *out0(const AmpNode *n) { return n->n_outputs > 0 ? n->outputs[0] : NULL; }

int amp_node_flops(const AmpNode *n, double *flops) {
    double y, k, x;
    switch (n->op) {
    case AMP_OP_MatMul: /* Y[..., M, N] = A[..., M, K] · B[..., K, N] */
        if (!numel(out0(n), &y) || !dim(in(n, 0), -1, &k)) return -1;
        *flops = 2 * y * k;
        return 1;
    case AMP_OP_Gemm: /* Y[M, N] = A[M, K] · B[K, N] (A may be transposed) */
        if (!numel(out0(n), &y) || !dim(in(n, 0), amp_node_attr_int(n, "transA", 0) ? 0 : 1, &k))
            return -1;
        *flops = 2 * y * k;
        return 1;
    case AMP_OP_Conv: /* each output element: C/group · kernel multiply-adds */
        if (!numel(out0(n), &y) || !kernel_size(in(n, 1), &k)) return -1;
        *flops = 2 * y * k;
        return 1;
    case AMP_OP_ConvTranspose: /* each input element scatters into M/group · kernel outputs */
        if (!numel(in(n, 0), &x) || !kernel_size(in(n, 1), &k)) return -1;
        *flops = 2 * x * k;
        return 1;
    default: return 0;
    }
}
