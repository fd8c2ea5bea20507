/* The cast engine below every backend (ops/cast_engine.c): every numeric dtype to every
 * other, 16-bit floats rounded to nearest even (directly from double, without double
 * rounding), and Cast's attribute parsed at prepare. The CPU kernels (kernels/cpu/tensor.c's
 * Cast, slice.c's Pad, resize.c) and the CUDA ones (kernels/cuda/movement.c,
 * elementwise.c's Cast, resize.c) convert host values and read Cast's target alike. */
#ifndef AMP_OPS_CAST_ENGINE_H
#define AMP_OPS_CAST_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"

/* n elements of dtype sdt at src to dtype ddt at dst. Integer
 * targets truncate floats toward zero (NaN -> 0, saturating out of range); 16-bit float
 * targets round to nearest even. AMP_ERR_UNSUPPORTED for types it does not convert. */
AmpCode amp_sh_convert(AmpKernelCtx *k, const void *src, int sdt, void *dst, int ddt, uint64_t n);
/* Whether amp_sh_convert takes the dtype. */
bool amp_sh_convertible(int dtype);

/* One element in a form that holds every source value exactly. */
typedef enum { AMP_CV_FLOAT, AMP_CV_INT, AMP_CV_UINT } AmpCastKind;
typedef struct AmpCastVal {
    AmpCastKind kind;
    double f;   /* AMP_CV_FLOAT: float, double, float16, bfloat16 */
    int64_t i;  /* AMP_CV_INT: signed integers */
    uint64_t u; /* AMP_CV_UINT: unsigned integers, bool */
} AmpCastVal;

/* Element i of dtype dt at p, exactly (a dtype amp_sh_convert does not take reads as 0.0). */
AmpCastVal amp_cast_load(int dt, const void *p, uint64_t i);
/* v as a double (integers past 2^53 rounded). */
double amp_cast_as_double(const AmpCastVal *v);
/* v stored as element i of dtype dt at p, converted as amp_sh_convert converts. */
void amp_cast_store(int dt, void *p, uint64_t i, const AmpCastVal *v);

/* Cast's target type. */
typedef struct CastAttrs {
    int to;
} CastAttrs;
/* Cast's prepare function (AmpKernelPrepareFn) on every backend. */
AmpCode amp_cast_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

#endif
