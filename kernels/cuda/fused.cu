// Kernels of the executor's fused nodes: a fused elementwise program evaluated per element
// with the CPU reference's own step function (ops/fused_eval.h), and the
// multi-tensor unscale and finiteness check of every gradient. Built with -fmad=false
// (CMakeLists.txt): a product and a sum of two instructions stay two roundings, as on the
// CPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define AMP_FUSED_ROUND_F16(x) __half2float(__float2half_rn(x))
#define AMP_FUSED_ROUND_BF16(x) __bfloat162float(__float2bfloat16_rn(x))
#include "ops/fused_eval.h"
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/fused.h"

static_assert(sizeof(AmpCudaFusedArgs) <= 4096 && sizeof(AmpCudaUnscaleArgs) <= 4096,
              "a launch's arguments are passed by value: 4 KiB at most");

__device__ static AmpFusedReg load(const void *p, int dtype, uint64_t i) {
    AmpFusedReg r;
    switch (dtype) {
    case AMP_FDT_FLOAT: r.f = ((const float *)p)[i]; break;
    case AMP_FDT_FLOAT16: r.f = __half2float(((const __half *)p)[i]); break;
    case AMP_FDT_BFLOAT16: r.f = __bfloat162float(((const __nv_bfloat16 *)p)[i]); break;
    case AMP_FDT_INT32: r.i = ((const int32_t *)p)[i]; break;
    case AMP_FDT_INT64: r.i = ((const int64_t *)p)[i]; break;
    default: r.i = ((const uint8_t *)p)[i] != 0; break; /* bool */
    }
    return r;
}

__device__ static void store(void *p, int dtype, uint64_t i, AmpFusedReg r) {
    switch (dtype) {
    case AMP_FDT_FLOAT: ((float *)p)[i] = r.f; break;
    case AMP_FDT_FLOAT16: ((__half *)p)[i] = __float2half_rn(r.f); break;
    case AMP_FDT_BFLOAT16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(r.f); break;
    case AMP_FDT_INT32: ((int32_t *)p)[i] = (int32_t)r.i; break;
    case AMP_FDT_INT64: ((int64_t *)p)[i] = r.i; break;
    default: ((uint8_t *)p)[i] = r.i != 0; break;
    }
}

// Per set t: (nelem[t]) per input (or 1, broadcast) -> (nelem[t]) per output; the sets'
// elements laid end to end over one grid-stride loop.
__global__ void fused_elementwise_kernel(const AmpCudaFusedArgs a) {
    GRID_STRIDE_U64(g, a.total) {
        int lo = 0, hi = a.tensors - 1; /* the last set starting at or before g */
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (a.start[mid] <= g) lo = mid;
            else hi = mid - 1;
        }
        const int t = lo;
        const uint64_t e = g - a.start[t];
        const int ib = t * a.n_in, ob = t * a.n_out;
        AmpFusedReg r[AMP_FUSED_MAX_REG];
        for (int i = 0; i < a.n_in; i++) {
            const uint64_t n = a.in_n[ib + i];
            r[i] = load(a.in[ib + i], a.in_dtype[i], n == a.nelem[t] ? e : e % n);
        }
        for (int j = 0; j < a.n_instr; j++) {
            AmpFusedInstr in = {a.code[j][0], a.code[j][1], a.code[j][2], a.code[j][3], a.code[j][4]};
            r[a.n_in + j] = amp_fused_step(&in, r, a.cls);
        }
        for (int o = 0; o < a.n_out; o++)
            if (a.out[ob + o]) store(a.out[ob + o], a.out_dtype[o], e, r[a.out_reg[o]]);
    }
}

extern "C" int amp_cuda_fused_elementwise_launch(const AmpCudaFusedArgs *a, void *stream) {
    if (!a->total) return 0;
    const unsigned block = 256;
    fused_elementwise_kernel<<<amp_cuda_grid_for(a->total, block), block, 0, (cudaStream_t)stream>>>(*a);
    return (int)cudaGetLastError();
}

// found = before (one thread): the check kernel only ever writes 1 into it.
__global__ void found_init_kernel(uint8_t *found, const uint8_t *before) {
    *found = before ? *before != 0 : 0;
}

// Sum(nelem[t]) elements over the tensors -> g[t] = x[t] * inv; found |= !finite(g)
__global__ void unscale_check_kernel(const AmpCudaUnscaleArgs a, uint64_t total) {
    const float inv = *a.inv;
    bool bad = false;
    GRID_STRIDE_U64(e, total) {
        uint64_t i = e;
        int t = 0;
        while (t < a.n - 1 && i >= a.nelem[t]) i -= a.nelem[t++];
        float g = load(a.x[t], a.x_dtype[t], i).f * inv;
        a.g[t][i] = g;
        bad |= !isfinite(g);
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0) *a.found = 1; /* every writer writes 1 */
}

extern "C" int amp_cuda_unscale_check_launch(const AmpCudaUnscaleArgs *a, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    found_init_kernel<<<1, 1, 0, s>>>(a->found, a->before);
    cudaError_t err = cudaGetLastError();
    uint64_t total = 0;
    for (int t = 0; t < a->n; t++) total += a->nelem[t];
    if (err || !total) return (int)err;
    const unsigned block = 256;
    unscale_check_kernel<<<amp_cuda_grid_for(total, block), block, 0, s>>>(*a, total);
    return (int)cudaGetLastError();
}
