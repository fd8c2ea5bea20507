/* The checks every backend's kernels make of the outputs the executor placed and of the
 * dtypes they take, and how a prepare function hands over its attributes
 * (ops/kernel_out.c): the CPU kernels (kernels/cpu), the CUDA ones (kernels/cuda) and the
 * prepare functions of ops/ call these, so both backends refuse a node with the same
 * message. */
#ifndef AMP_OPS_KERNEL_OUT_H
#define AMP_OPS_KERNEL_OUT_H

#include "ir/ir.h"
#include "ir/kernel.h" /* AmpKernelCtx */
#include "ir/tensor.h" /* AmpBuf */

/* The first n outputs as the executor placed them (AmpKernelCtx.out), for a kernel that
 * computes no shapes: out[i] NULL where the node does not list output i; a listed output
 * left unplaced is AMP_ERR_UNSUPPORTED naming the node: with every input known, the op's
 * shape function could not size it (inputs it does not take: 74 Squeeze axes on a rank-4
 * tensor, say), and only data-dependent ops may size their outputs themselves. */
AmpCode amp_kernel_outputs(AmpKernelCtx *k, int n, AmpBuf **out);
/* AMP_ERR_INTERNAL naming the node and both shapes unless y, an output the executor
 * placed, has the dtype and dims (rank entries) the kernel's loops are written for: a
 * shape function that disagrees with its kernel must not become an out-of-bounds write. */
AmpCode amp_kernel_check_out(AmpKernelCtx *k, const AmpBuf *y, int dtype, int rank, const int64_t *dims);

/* The one check of a geometry function (ops/geom.h) on output i: the check above where
 * the executor placed it; AMP_OK where the node does not list it or it is not placed (the
 * kernel's amp_kernel_outputs then names the node). */
AmpCode amp_geom_check(AmpKernelCtx *k, int i, int dtype, int rank, const int64_t *dims);

/* AMP_ERR_UNSUPPORTED naming the node, op and dtype. */
AmpCode amp_kernel_bad_dtype(AmpKernelCtx *k, int dtype);

/* A prepare function's (AmpKernelPrepareFn) result: *attrs = a malloc'd copy of the `size`
 * bytes at p, the struct it parsed. */
AmpCode amp_prep_out(const void *p, size_t size, void **attrs, AmpStatus *st);

#endif
