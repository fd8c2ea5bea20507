/* Pad, below every backend (ops/pad.c): its attributes parsed at prepare (the mode, and
 * before opset 11 the pads and the constant), and the geometry the CPU kernel
 * (kernels/cpu/slice.c) and the CUDA kernel (kernels/cuda/movement.c) copy by: per axis the
 * elements added before (negative: cropped) and the output's dims, checked. Each backend
 * reads the pads / axes inputs and the constant from its own memory and hands the values
 * here. */
#ifndef AMP_OPS_PAD_H
#define AMP_OPS_PAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"

enum { AMP_PAD_CONSTANT, AMP_PAD_REFLECT, AMP_PAD_EDGE, AMP_PAD_WRAP };
/* The mode's name ("constant", "reflect", "edge", "wrap"). */
const char *amp_pad_mode_name(int mode);
/* The node's mode attribute as AMP_PAD_*, or -1 for one Pad does not have. */
int amp_pad_mode(const AmpNode *n);

/* The mode; before opset 11 also the pads (Pad-1 'paddings', Pad-2 'pads') and the
 * constant ('value', a float). */
typedef struct AmpPadAttrs {
    int mode;
    const char *pads_name;
    size_t np;                      /* values the attribute holds */
    int64_t pads[2 * AMP_MAX_RANK]; /* its first 2 * AMP_MAX_RANK */
    float value;
} AmpPadAttrs;
AmpCode amp_pad_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* Pad-1/2 (opset < 11): the pads attribute into pads (np values, at most 2 * x's rank),
 * and for mode constant a non-zero 'value' as one element of x's dtype in *cval (left as
 * it is where the value is 0). */
AmpCode amp_pad_attr_values(AmpKernelCtx *k, const AmpPadAttrs *at, const AmpBuf *x, int64_t *pads, size_t *np,
                            void *cval);

/* The geometry of padding x by pads (np values: the befores, then the afters) along axes
 * (na values; 0: every axis in order, then np must be 2 * rank): before[d] (negative:
 * cropped) and the output's dims[d] for every axis d of x (axes not listed: 0, x's dim).
 * AMP_ERR_INPUT for counts that do not match, an axis out of range or repeated, pads too
 * large for int64, a crop past the axis, or a mode other than constant on an empty axis
 * that grows. */
AmpCode amp_pad_geom(AmpKernelCtx *k, int mode, const AmpBuf *x, const int64_t *pads, size_t np, const int64_t *axes,
                     size_t na, int64_t *before, int64_t *dims);

#endif
