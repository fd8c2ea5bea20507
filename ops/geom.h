/* The prepared geometry of an op, below every backend (ops/geom.c): ONE table, by op id,
 * of the functions (AmpKernelGeomFn, ir/kernel.h) that compute what an op's kernels index
 * by (output dims, strides, row layouts, reduced axes) from its attributes and the shapes
 * of its inputs, and check once that the outputs the executor placed (from the op's shape
 * function, ir/infer*.c) are those. The executor makes it once per input shapes and hands
 * it to every backend's kernel as AmpKernelCtx.geom; the kernels compute with it and check
 * no shape of their own. */
#ifndef AMP_OPS_GEOM_H
#define AMP_OPS_GEOM_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"
#include "ir/kernel.h"
#include "ir/ops.h"

/* Op's geometry function and the bytes of what it makes: *fn NULL, *size 0 where the op
 * has none (each backend's prepare_node hands these to the executor, AmpBackendKernel). */
void amp_op_geom(AmpOpId op, AmpKernelGeomFn *fn, size_t *size);

/* The geometry of k's node for its kernel: k->geom where the executor made it, else made
 * now into own (a kernel run alone, outside the executor: amp_run_node_alone, tests).
 * *g NULL (and AMP_OK) where the geometry depends on an input's values: the kernel reads
 * them and calls the op's own geometry function with them. */
AmpCode amp_kernel_geom(AmpKernelCtx *k, void *own, const void **g);

#endif
