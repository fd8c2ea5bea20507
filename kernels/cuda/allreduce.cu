// The mean of AllReduceMean's sums (allreduce.h): one division per element in float32, as
// the CPU kernel divides, then the store in the gradient's type.
#include "kernels/cuda/allreduce.h"
#include "kernels/cuda/device.cuh"

enum { DT_FLOAT16 = 10, DT_BFLOAT16 = 16 };

template <typename T>
__global__ void mean_kernel(T *y, const float *s, uint64_t n, float ranks) {
    GRID_STRIDE_U64(i, n) st(y, (int64_t)i, s[i] / ranks);
}

extern "C" int amp_cuda_mean_launch(void *y, int dtype, const float *s, size_t n, float ranks, void *stream) {
    if (!n) return 0;
    cudaStream_t q = (cudaStream_t)stream;
    unsigned grid = amp_cuda_grid_for(n, 256);
    if (dtype == DT_FLOAT16) mean_kernel<<<grid, 256, 0, q>>>((__half *)y, s, n, ranks);
    else if (dtype == DT_BFLOAT16) mean_kernel<<<grid, 256, 0, q>>>((__nv_bfloat16 *)y, s, n, ranks);
    else mean_kernel<<<grid, 256, 0, q>>>((float *)y, s, n, ranks);
    return (int)cudaGetLastError();
}
