/* Resize below every backend (ops/resize_geom.c): its attributes, geometry and per-axis
 * tables, which the CPU kernel (kernels/cpu/resize.c) and the CUDA one
 * (kernels/cuda/resize.c) both compute with, so that both backends size and sample
 * alike. */
#ifndef AMP_OPS_RESIZE_GEOM_H
#define AMP_OPS_RESIZE_GEOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/tensor.h"

enum { AMP_RS_NEAREST, AMP_RS_LINEAR, AMP_RS_CUBIC };
enum { AMP_RS_NR_PREFER_FLOOR, AMP_RS_NR_PREFER_CEIL, AMP_RS_NR_FLOOR, AMP_RS_NR_CEIL };
enum {
    AMP_RS_CT_HALF_PIXEL,
    AMP_RS_CT_HALF_PIXEL_SYM,
    AMP_RS_CT_PYTORCH,
    AMP_RS_CT_ALIGN,
    AMP_RS_CT_ASYM,
    AMP_RS_CT_TF_NN,
    AMP_RS_CT_CROP
};
enum { AMP_RS_KA_STRETCH, AMP_RS_KA_NOT_LARGER, AMP_RS_KA_NOT_SMALLER };

/* Resize's attributes (amp_sh_resize_prepare); the axes as given (checked against the
 * rank in the kernel). */
typedef struct AmpResizeAttrs {
    int mode, ct, nr, policy;
    double A; /* cubic_coeff_a */
    bool exclude, antialias;
    float extrap;
    size_t na; /* axes given (0: all) */
    int64_t axes[AMP_MAX_RANK];
} AmpResizeAttrs;
/* Resize's prepare function (AmpKernelPrepareFn) on every backend. */
AmpCode amp_sh_resize_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* What the inputs ask for: per axis of X, the scale, the output size and the crop box
 * (roi; 0 and 1 where there is none). */
typedef struct AmpResizeGeom {
    int r;     /* X's rank */
    size_t na; /* resized axes */
    int64_t axes[AMP_MAX_RANK];
    double scale[AMP_MAX_RANK], r0[AMP_MAX_RANK], r1[AMP_MAX_RANK];
    int64_t out[AMP_MAX_RANK];
} AmpResizeGeom;

/* One axis: for each output index, `taps` source indices (-1: the output element is the
 * extrapolation value) and their weights. An axis left as it is has one tap of weight 1. */
typedef struct AmpResizeAxis {
    int taps;
    int64_t *idx; /* (out, taps) */
    double *w;    /* (out, taps) */
} AmpResizeAxis;

/* Resize's roi, scales and sizes by the node's opset (Resize-10: X, scales), each NULL
 * when absent or empty; AMP_ERR_INPUT unless exactly one of scales and sizes is given.
 * Only their nelem is read: they may live on a device. */
AmpCode amp_resize_inputs(AmpKernelCtx *k, const AmpBuf **roi, const AmpBuf **scales, const AmpBuf **sizes);
/* The geometry from scales or sizes (and roi for tf_crop_and_resize; each in host
 * memory), and the checks that follow from it: AMP_ERR_UNSUPPORTED for antialiased
 * downsampling (linear or cubic). */
AmpCode amp_resize_geom(AmpKernelCtx *k, const AmpResizeAttrs *ra, const AmpBuf *x, const AmpBuf *roi,
                        const AmpBuf *scales, const AmpBuf *sizes, AmpResizeGeom *g);
/* Every axis' table into ax (x's rank of them), in one allocation returned in *mem (the
 * caller frees it). */
AmpCode amp_resize_tables(AmpKernelCtx *k, const AmpResizeAttrs *ra, const AmpBuf *x, const AmpResizeGeom *g,
                          AmpResizeAxis *ax, void **mem);

#endif
