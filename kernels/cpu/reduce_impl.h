/* Private to the reduce, norm, train and rnn kernel files (reduce.c, softmax.c, loss.c,
 * norm.c, optim.c, rnn.c): small helpers to read and write float tensors of any float
 * storage type in double, and the checks shared by kernels that write the outputs the
 * executor placed. */
#ifndef AMP_CPU_REDUCE_IMPL_H
#define AMP_CPU_REDUCE_IMPL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"

/* An error naming the node and its op, then the formatted reason. */

static inline AmpCode amp_red_oom(AmpKernelCtx *k) {
    return amp_kernel_fail(k, AMP_ERR_INTERNAL, "out of memory");
}

/* ---- placed outputs and prepared attributes --------------------------------------- */


/* The attributes the node's prepare function parsed (k->attrs), or NULL with st set:
 * a kernel run without its prepare is the runtime's error, not the model's. */
static inline const void *amp_red_attrs(AmpKernelCtx *k) {
    if (!k->attrs) amp_kernel_fail(k, AMP_ERR_INTERNAL, "the node's attributes were not prepared");
    return k->attrs;
}

/* float32, float16, bfloat16 or double: the float types these kernels take. */
static inline bool amp_red_is_float(int dtype) {
    return amp_is_f32_family(dtype) || dtype == AMP_DT_DOUBLE;
}

/* ---- float views: read any float storage type as double ------------------------- */

/* A read view of a float tensor: f (float32 data, or a converted copy in tmp for
 * 16-bit storage) or d (double data). */
typedef struct AmpFv {
    const float *f;
    const double *d;
    float *tmp;
} AmpFv;

/* Opens a view of b; UNSUPPORTED (naming the dtype) for non-float types. */
static inline AmpCode amp_fv_open(AmpKernelCtx *k, const AmpBuf *b, AmpFv *v) {
    memset(v, 0, sizeof *v);
    if (!b->nelem && amp_is_f32_family(b->dtype)) return AMP_OK; /* nothing to read; data may be NULL */
    if (b->dtype == AMP_DT_DOUBLE) {
        v->d = b->data;
        return AMP_OK;
    }
    if (!amp_is_f32_family(b->dtype)) return amp_kernel_bad_dtype(k, b->dtype);
    v->f = amp_buf_f32_in(b, &v->tmp);
    return v->f ? AMP_OK : amp_red_oom(k);
}

static inline double amp_fv_get(const AmpFv *v, uint64_t i) {
    return v->f ? (double)v->f[i] : v->d[i];
}

static inline void amp_fv_close(AmpFv *v) {
    free(v->tmp);
    v->tmp = NULL;
}

/* A write view of a float output: values are stored as float32 (rounded to 16 bits
 * at commit for 16-bit storage) or as double. */
typedef struct AmpFo {
    AmpBuf *b;
    float *f;
    double *d;
    float *tmp;
} AmpFo;

static inline AmpCode amp_fo_open(AmpKernelCtx *k, AmpBuf *b, AmpFo *o) {
    memset(o, 0, sizeof *o);
    o->b = b;
    if (!b->nelem && amp_is_f32_family(b->dtype)) return AMP_OK; /* nothing to write; data may be NULL */
    if (b->dtype == AMP_DT_DOUBLE) {
        o->d = b->data;
        return AMP_OK;
    }
    if (!amp_is_f32_family(b->dtype)) return amp_kernel_bad_dtype(k, b->dtype);
    o->f = amp_buf_f32_out(b, &o->tmp);
    return o->f ? AMP_OK : amp_red_oom(k);
}

static inline void amp_fo_set(AmpFo *o, uint64_t i, double x) {
    if (o->f) o->f[i] = (float)x;
    else o->d[i] = x;
}

/* Rounds 16-bit outputs into their buffer and frees the scratch. */
static inline void amp_fo_commit(AmpFo *o) {
    if (o->tmp) amp_buf_f32_commit(o->b, o->tmp);
    o->tmp = NULL;
}

/* Frees the scratch without storing (error paths). */
static inline void amp_fo_discard(AmpFo *o) {
    free(o->tmp);
    o->tmp = NULL;
}

/* ---- axis layout -------------------------------------------------------------- */

/* Splits dims around `axis` into (outer, D, inner): element (o, j, i) lies at
 * (o * D + j) * inner + i. */
static inline void amp_red_split(const AmpBuf *b, int axis, uint64_t *outer, uint64_t *d, uint64_t *inner) {
    *outer = amp_shape_nelem(axis, b->dims);
    *d = (uint64_t)b->dims[axis];
    *inner = amp_shape_nelem(b->rank - axis - 1, b->dims + axis + 1);
}


#endif
