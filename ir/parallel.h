/* The CPU's threads for ampc's own kernels: slices of a range run on the OpenMP team that
 * oneDNN runs on (Debian's libdnnl uses libgomp), so the process has one pool of workers,
 * not a second one contending with it for the cores. libgomp is opened at run time, as
 * oneDNN and OpenBLAS are: the binary does not need it, and without it every range runs on
 * the calling thread. */
#ifndef AMP_IR_PARALLEL_H
#define AMP_IR_PARALLEL_H

#include <stdbool.h>
#include <stdint.h>

/* body(ctx, begin, end) computes items [begin, end) of a range. */
typedef void (*AmpRangeFn)(void *ctx, int64_t begin, int64_t end);

/* Runs body over [0, n) in contiguous slices, one per thread of the team (the CPU
 * backend's thread knob, amp_threads_requested, else OpenMP's own default), each slice a
 * multiple of `align` items (1: any) but the last, no slice under `grain` items. On the
 * calling thread alone, as body(ctx, 0, n), where the range has fewer than 2 * grain
 * items, one thread is asked for, no OpenMP runtime could be opened, or the caller is
 * inside a parallel region already. The slices are disjoint and each item is computed by
 * the same code whichever thread runs it: the bytes do not depend on the thread count. */
void amp_parallel_for(int64_t n, int64_t grain, int64_t align, AmpRangeFn body, void *ctx);

/* The team's size for a call made now (sets OpenMP's count from the thread knob when one
 * was set); 1 without an OpenMP runtime. */
int amp_parallel_threads(void);

/* Opens libgomp (once) after choosing how its threads wait: GOMP_SPINCOUNT=10000 where the
 * user set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT and no libgomp is in the process yet
 * (docs/speed.md, "Threads"). kernels/cpu/dnnl.c calls it before it opens libdnnl, whose
 * libgomp reads the variable when it loads. False where libgomp cannot be opened. */
bool amp_openmp_load(void);

#endif
