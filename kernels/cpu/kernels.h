/* The CPU kernels: the reference executor's compute, one file per op family. A kernel
 * reads its input buffers and the attributes its prepare function parsed (ctx->attrs),
 * and fills the outputs the executor placed (amp_kernel_outputs) with the shapes the op's
 * shape function gave; it checks what keeps memory safe (input dtypes and index values,
 * and that the placed outputs have the shapes its loops assume) and computes no shapes.
 * Only ops whose output shape is the data's (NonZero) ask ctx->alloc. 16-bit float
 * tensors are stored in 16 bits, computed in fp32 and rounded (to nearest even) on store. */
#ifndef AMP_CPU_KERNELS_H
#define AMP_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "ir/kernel.h" /* AmpKernelCtx, AmpKernelFn */
#include "ir/tensor.h" /* AmpBuf and its shape helpers */

/* The CPU kernel of each op (table.c, from ops.def's CPU column, by op id); NULL where
 * the CPU has none. */
extern const AmpKernelFn amp_cpu_kernels[AMP_OP__COUNT];

/* The kernel for an op, or NULL when the CPU backend has none (the executor's error
 * then names the op). Chosen once per node when the session is prepared. */
AmpKernelFn amp_cpu_kernel(AmpOpId op);

/* Kernels that parse their node's attributes once, at prepare (table.c, from the same
 * column, by op id); NULL where a kernel reads them itself. */
extern const AmpKernelPrepareFn amp_cpu_kernel_prepares[AMP_OP__COUNT];
AmpKernelPrepareFn amp_cpu_kernel_prepare(AmpOpId op);

/* The CPU backend's prepare_node and release_node (backend_cpu.c), shared with the device
 * simulator: the kernel, and its parsed attributes as impl. */
struct AmpBackendKernel;
AmpCode amp_cpu_prepare_node(const AmpNode *n, int64_t opset, struct AmpBackendKernel *out, AmpStatus *st);
void amp_cpu_release_node(struct AmpBackendKernel *k);

/* ---- helpers shared by the families (common.c) ----------------------------------- */

/* A float32 view of a float-family input: the buffer itself when it is float32, else a
 * converted copy in *tmp (free() it; NULL when no copy was made). NULL on OOM. */
const float *amp_buf_f32_in(const AmpBuf *b, float **tmp);
/* A float32 array to compute an output into: the buffer itself when float32, else a
 * scratch array; amp_buf_f32_commit rounds it into the buffer and frees it. */
float *amp_buf_f32_out(AmpBuf *b, float **tmp);
void amp_buf_f32_commit(AmpBuf *b, float *tmp);

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

/* AMP_ERR_UNSUPPORTED naming the node, op and dtype. */
AmpCode amp_kernel_bad_dtype(AmpKernelCtx *k, int dtype);

/* Stores v as element i of an integer buffer (wrapping, as C's conversions do) or a bool
 * one (v != 0); other types are left alone. */
void amp_buf_set_i64(AmpBuf *b, uint64_t i, int64_t v);

/* ---- every kernel: declared from ops.def's CPU column -------------------------------
 * CPU(kernel) or CPU(kernel, prepare) in the op's row declares both functions here and
 * puts them in table.c's two tables at the op's id: adding a kernel edits neither file.
 * AMP_CPU_ARG1_/2_/3_ pick an argument of the column, conforming C11 for one or two. */
#define AMP_CPU_ARG1_(a, ...) a
#define AMP_CPU_ARG2_(a, b, ...) b
#define AMP_CPU_ARG3_(a, b, c, ...) c
#define AMP_CPU_DECL1_(run) AmpCode run(AmpKernelCtx *k);
#define AMP_CPU_DECL2_(run, prep) \
    AmpCode run(AmpKernelCtx *k); \
    AmpCode prep(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);
#define CPU(...) AMP_CPU_ARG3_(__VA_ARGS__, AMP_CPU_DECL2_, AMP_CPU_DECL1_, -)(__VA_ARGS__)
#define NO_CPU
#define AMP_OP(id, domain, name, fp16_class, bf16_class, opsets, inputs, outputs, float_inputs, \
               infer, cpu, ...)                                                                \
    cpu
#include "ir/ops.def"
#undef AMP_OP
#undef NO_CPU
#undef CPU

#endif
