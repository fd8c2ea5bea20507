/* Dropout below every backend: its attributes (amp_ew_prepare_dropout, ops/dropout_rng.c)
 * and its counter-based mask, shared by the CPU kernel (kernels/cpu/dropout.c) and the CUDA
 * one (kernels/cuda/grad_ops.c, .cu), so both backends drop the same elements bit for bit.
 * A training-step Dropout draws one 64-bit key per call from the session's random state
 * (amp_dropout_key: one xorshift64* step, so masks change from step to step and follow
 * the seed and checkpoints), and element i is decided by a stateless function of (key, i):
 * splitmix64 with the key as its state, i.e. Stafford's mix of key + (i + 1) * golden,
 * whose top 53 bits are a uniform integer u in [0, 2^53). The element is kept when
 * u >= ceil(ratio * 2^53), i.e. when u / 2^53 >= ratio (exact: no rounding anywhere). */
#ifndef AMP_OPS_DROPOUT_RNG_H
#define AMP_OPS_DROPOUT_RNG_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define AMP_DR_FN __host__ __device__ __forceinline__
#else
#define AMP_DR_FN static inline
#endif

#define AMP_DROPOUT_GOLDEN 0x9e3779b97f4a7c15ull

/* splitmix64's output function (Stafford's variant 13): a bijection of 64-bit words. */
AMP_DR_FN uint64_t amp_dropout_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Element i's 53 random bits under key: the (i + 1)-th output of splitmix64 seeded with key. */
AMP_DR_FN uint64_t amp_dropout_bits(uint64_t key, uint64_t i) {
    return amp_dropout_mix(key + (i + 1) * AMP_DROPOUT_GOLDEN) >> 11;
}

/* The keep threshold of a ratio in [0, 1): ceil(ratio * 2^53) (exact in double). */
AMP_DR_FN uint64_t amp_dropout_threshold(double ratio) {
    double t = ceil(ratio * 9007199254740992.0);
    return t <= 0 ? 0 : t >= 9007199254740992.0 ? (1ull << 53) : (uint64_t)t;
}

/* Whether element i survives: its 53 bits at or above the threshold. */
AMP_DR_FN bool amp_dropout_keep(uint64_t key, uint64_t i, uint64_t threshold) {
    return amp_dropout_bits(key, i) >= threshold;
}

#ifndef __CUDACC__
#include "ir/ir.h"
#include "ir/kernel.h"

/* Dropout's attributes as amp_ew_prepare_dropout parses them (read by both backends): the
 * ratio (an attribute before opset 12, then an optional input whose default is 0.5) and
 * the seed. */
typedef struct AmpDropoutAttrs {
    double ratio;
    bool has_seed;
    int64_t seed;
} AmpDropoutAttrs;
/* Dropout's prepare function (AmpKernelPrepareFn) on every backend. */
AmpCode amp_ew_prepare_dropout(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st);

/* Dropout's geometry (ops/geom.h): the mask's dtype (bool, x's before opset 10); y and the
 * mask, where listed, shaped as x. The ratio and training_mode inputs are values, read per
 * run. Its AmpKernelGeomFn: AMP_ERR_INPUT without x. */
typedef struct AmpDropoutGeom {
    int mask_dtype;
} AmpDropoutGeom;
AmpCode amp_dropout_geom(AmpKernelCtx *k, void *geom, bool *made);

/* com.microsoft DropoutGrad's geometry (ops/geom.h): dY and the mask present, the mask bool
 * of dY's shape (AMP_ERR_INPUT if not); dX, where listed, of dY's dtype and shape. n: dY's
 * elements. ratio and training_mode are values, read per run. Its AmpKernelGeomFn. */
typedef struct AmpDropoutGradGeom {
    uint64_t n;
} AmpDropoutGradGeom;
AmpCode amp_dropout_grad_geom(AmpKernelCtx *k, void *geom, bool *made);

/* The key of one Dropout call: one xorshift64* step of the session's state (a zero state,
 * which xorshift would keep, is replaced first), its 64-bit output. */
static inline uint64_t amp_dropout_key(uint64_t *state) {
    uint64_t x = *state ? *state : AMP_DROPOUT_GOLDEN;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Whether a Dropout call draws a key: when it may train on the counter path (in a
 * training step, or with a training_mode input, whose value may live on a device) and X
 * has elements; never when the model's own seed picks the MT19937 path (training_mode
 * outside a training step with a seed attribute). The rule reads only what a host knows,
 * so both backends advance the session's state alike whatever the device values hold. */
static inline bool amp_dropout_draws(bool training_step, bool has_mode_input, bool has_seed, uint64_t nelem) {
    if (!nelem) return false;
    if (training_step) return true;
    return has_mode_input && !has_seed;
}
#endif

#endif
