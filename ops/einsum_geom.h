/* Einsum's geometry below every backend (ops/einsum_geom.c): the equation (the node's
 * attributes, kept as written: its terms are read against the inputs' ranks, an ellipsis
 * spanning what the letters leave) parsed into one label per axis, ellipsis dims getting
 * labels of their own, right-aligned across operands; each label's size, which operands
 * hold it, and the labels summed over. The CPU kernel (kernels/cpu/einsum.c) computes with
 * it. */
#ifndef AMP_OPS_EINSUM_GEOM_H
#define AMP_OPS_EINSUM_GEOM_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h"

enum {
    AMP_EINSUM_LETTERS = 52,                               /* a-z -> 0..25, A-Z -> 26..51 */
    AMP_EINSUM_LABELS = AMP_EINSUM_LETTERS + AMP_MAX_RANK, /* then the ellipsis dims */
    AMP_EINSUM_MAX_OPS = 16
};

/* One operand's (or the output's) labels, one per axis. */
typedef struct AmpEinsumTerm {
    int rank;
    int lab[AMP_MAX_RANK];
} AmpEinsumTerm;

typedef struct AmpEinsumGeom {
    int n_ops;
    AmpEinsumTerm in[AMP_EINSUM_MAX_OPS], out;
    int n_ell;                        /* ellipsis dims (the widest operand's) */
    int64_t size[AMP_EINSUM_LABELS];  /* size of each label; -1 when unused */
    bool in_op[AMP_EINSUM_LABELS][AMP_EINSUM_MAX_OPS];
    int n_con, con[AMP_EINSUM_LABELS]; /* labels summed over (in some input, not in the output) */
} AmpEinsumGeom;

/* Einsum's AmpKernelGeomFn (k->attrs: the equation, NUL-terminated): 1 to
 * AMP_EINSUM_MAX_OPS inputs, all present, the equation's terms matching their ranks and
 * each label one size (AMP_ERR_INPUT or AMP_ERR_UNSUPPORTED naming what does not); Y
 * checked: the first input's dtype, the output labels' sizes. */
AmpCode amp_einsum_geom(AmpKernelCtx *k, void *geom, bool *made);

#endif
