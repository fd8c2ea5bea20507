// The optimizers' multi-tensor kernel: one launch per table of up to
// AMP_CUDA_OPT_MAX_TENSORS tensors (optim.h), passed by value as __grid_constant__
// parameters (read in place, never copied to local memory). Blocks stride over the
// launch's chunks; a chunk's tensor is found by a binary search over the table's chunk
// ends, and its threads stride over its elements (coalesced). The update is
// amp_opt_update (ops/optim_math.h) in double, as the CPU kernel computes it, and
// each result is rounded as the CPU stores it: to float32, then to 16 bits. The first
// thread of each block reads R, T and the gate from device memory and derives the step's
// rates; where the gate holds true, every listed output becomes a bit copy of the input it
// replaces.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/cuda/optim.h"

static_assert(sizeof(AmpCudaOptNode) + sizeof(AmpCudaOptTable) <= AMP_CUDA_OPT_PARAM_LIMIT,
              "an optimizer launch's parameters exceed the kernel-parameter limit");

// AmpDType numbers (ir/ir.h).
enum { DT_FLOAT = 1, DT_INT32 = 6, DT_INT64 = 7, DT_FLOAT16 = 10, DT_DOUBLE = 11, DT_BFLOAT16 = 16 };

static const unsigned BLOCK = 256;

// A block per chunk, at most one full-occupancy wave (the blocks then stride on).
static unsigned grid_for(int64_t chunks) {
    static unsigned max_blocks;
    if (!max_blocks) {
        int dev = 0, sms = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0)
            sms = 132;
        max_blocks = (unsigned)sms * (2048 / BLOCK);
    }
    return chunks < (int64_t)max_blocks ? (unsigned)chunks : max_blocks;
}

// ---- typed access -------------------------------------------------------------------------

// Element i of a float tensor of type dt, as double (exact). F32: the launch's tensors
// are all float32.
template <bool F32>
__device__ __forceinline__ double ld(const void *p, int dt, int64_t i) {
    if (F32 || dt == DT_FLOAT) return (double)((const float *)p)[i];
    if (dt == DT_FLOAT16) return (double)__half2float(((const __half *)p)[i]);
    if (dt == DT_BFLOAT16) return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const double *)p)[i];
}

// Stores v as the CPU does (amp_fo_set, then amp_buf_f32_commit for 16-bit storage):
// rounded to float32, then to 16 bits, to nearest even.
template <bool F32>
__device__ __forceinline__ void st(void *p, int dt, int64_t i, double v) {
    if (F32 || dt == DT_FLOAT) ((float *)p)[i] = __double2float_rn(v);
    else if (dt == DT_FLOAT16) ((__half *)p)[i] = __float2half_rn(__double2float_rn(v));
    else if (dt == DT_BFLOAT16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(__double2float_rn(v));
    else ((double *)p)[i] = v;
}

__device__ __forceinline__ int64_t ld_int(const void *p, int dt) {
    return dt == DT_INT32 ? (int64_t)((const int32_t *)p)[0] : ((const int64_t *)p)[0];
}

// The gated step: elements [b, e) of src copied bit for bit into dst (skipped when the
// output is not listed or is the input itself).
__device__ __forceinline__ void copy_range(void *dst, const void *src, int dt, int64_t b, int64_t e) {
    if (!dst || dst == src) return;
    for (int64_t i = b + threadIdx.x; i < e; i += blockDim.x) {
        if (dt == DT_DOUBLE) ((uint64_t *)dst)[i] = ((const uint64_t *)src)[i];
        else if (dt == DT_FLOAT) ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i];
        else ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i];
    }
}

// ---- the kernel ----------------------------------------------------------------------------

// Elements [b, e) of tensor i of the table.
template <bool F32>
__device__ __forceinline__ void update_range(const AmpCudaOptNode &nd, const AmpOptStep &step,
                                             const AmpCudaOptTable &tb, int i, int64_t b, int64_t e) {
    const void *x = tb.in[0][i], *g = tb.in[1][i], *s1 = tb.in[2][i], *s2 = tb.in[3][i];
    void *ox = tb.out[0][i], *o1 = tb.out[1][i], *o2 = tb.out[2][i];
    int dx = tb.dt[0][i], dg = tb.dt[1][i], d1 = tb.dt[2][i], d2 = tb.dt[3][i];
    bool two = nd.n_state > 1;
#pragma unroll 4
    for (int64_t k = b + threadIdx.x; k < e; k += blockDim.x) {
        double xn, n1, n2;
        amp_opt_update(&nd.a, &step, ld<F32>(x, dx, k), ld<F32>(g, dg, k), ld<F32>(s1, d1, k),
                       two ? ld<F32>(s2, d2, k) : 0.0, &xn, &n1, &n2);
        if (ox) st<F32>(ox, dx, k, xn);
        if (o1) st<F32>(o1, d1, k, n1);
        if (two && o2) st<F32>(o2, d2, k, n2);
    }
}

template <bool F32>
__global__ void __launch_bounds__(256)
    optimizer_kernel(const __grid_constant__ AmpCudaOptNode nd, const __grid_constant__ AmpCudaOptTable tb) {
    __shared__ AmpOptStep s_step;
    __shared__ int s_skip;
    if (threadIdx.x == 0) {
        s_skip = nd.gate && *nd.gate;
        if (!s_skip) s_step = amp_opt_step(&nd.a, ld<false>(nd.r, nd.r_dtype, 0), ld_int(nd.t, nd.t_dtype));
    }
    __syncthreads();
    bool skip = s_skip;
    AmpOptStep step = {0.0, 0.0, 0.0}; // in registers; s_step is unset when the step is skipped
    if (!skip) step = s_step;
    for (int64_t c = blockIdx.x; c < tb.chunks; c += gridDim.x) {
        int i = amp_cuda_opt_find(&tb, c);
        int64_t b = (c - (i ? tb.chunk_end[i - 1] : 0)) * AMP_CUDA_OPT_CHUNK;
        int64_t e = b + AMP_CUDA_OPT_CHUNK < tb.nelem[i] ? b + AMP_CUDA_OPT_CHUNK : tb.nelem[i];
        if (!skip) {
            update_range<F32>(nd, step, tb, i, b, e);
            continue;
        }
        for (int j = 0; j < AMP_CUDA_OPT_OUT; j++) {
            int src = j ? j + 1 : 0;
            if (src < 2 + nd.n_state) copy_range(tb.out[j][i], tb.in[src][i], tb.dt[src][i], b, e);
        }
    }
}

extern "C" int amp_cuda_opt_launch(const AmpCudaOptNode *node, const AmpCudaOptTable *t, void *stream) {
    if (t->n <= 0 || t->chunks <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = grid_for(t->chunks);
    if (t->all_f32) optimizer_kernel<true><<<g, BLOCK, 0, s>>>(*node, *t);
    else optimizer_kernel<false><<<g, BLOCK, 0, s>>>(*node, *t);
    return (int)cudaGetLastError();
}
