/* Throughput of the CUDA conversion kernels (kernels/cuda/convert.cu): for each
 * direction and size, the median of REPS timed launches (CUDA events, after warm-ups),
 * printed as time and as GB/s of bytes read plus written. A copy of the same number of
 * bytes (cudaMemcpy device to device) is printed beside them as the memory's roofline.
 *
 * Usage: bench_convert_cuda [ELEMENTS...]   (default: 1M 16M 256M)
 * Needs a GPU; exits 2 without one. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/convert.h"

#define REPS 21

typedef int (*DownFn)(uint16_t *, const float *, size_t, void *);
typedef int (*UpFn)(float *, const uint16_t *, size_t, void *);

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

#define CHECK(call)                                                                     \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "bench_convert_cuda: %s: %s\n", #call, cudaGetErrorString(e_)); \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

/* Median milliseconds of REPS runs of one launch (kind 0: down, 1: up, 2: copy). */
static float time_ms(int kind, DownFn down, UpFn up, void *f32, void *b16, size_t n) {
    cudaEvent_t start, stop;
    float ms[REPS];
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    for (int r = -3; r < REPS; r++) {
        CHECK(cudaEventRecord(start, 0));
        if (kind == 0) CHECK((cudaError_t)down(b16, f32, n, NULL));
        else if (kind == 1) CHECK((cudaError_t)up(f32, b16, n, NULL));
        else CHECK(cudaMemcpyAsync(b16, f32, n * 3, cudaMemcpyDeviceToDevice, 0));
        CHECK(cudaEventRecord(stop, 0));
        CHECK(cudaEventSynchronize(stop));
        if (r >= 0) CHECK(cudaEventElapsedTime(&ms[r], start, stop));
    }
    cudaEventDestroy(start), cudaEventDestroy(stop);
    qsort(ms, REPS, sizeof *ms, cmp_float);
    return ms[REPS / 2];
}

int main(int argc, char **argv) {
    size_t sizes[16] = {1u << 20, 16u << 20, 256u << 20};
    int nsizes = 3;
    if (argc > 1) {
        nsizes = 0;
        for (int i = 1; i < argc && nsizes < 16; i++) sizes[nsizes++] = strtoull(argv[i], NULL, 0);
    }
    if (!amp_cuda_device_available()) {
        fprintf(stderr, "bench_convert_cuda: no CUDA device\n");
        return 2;
    }
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    printf("%-14s %12s %10s %10s\n", "kernel", "elements", "ms", "GB/s");
    for (int s = 0; s < nsizes; s++) {
        size_t n = sizes[s];
        void *f32, *b16; /* b16 is sized for the copy's 3 bytes per element too */
        CHECK(cudaMalloc(&f32, n * 4));
        CHECK(cudaMalloc(&b16, n * 3));
        CHECK(cudaMemset(f32, 0x3f, n * 4)); /* finite values, all the same */
        const struct { const char *name; int kind; DownFn down; UpFn up; } k[] = {
            {"f32_to_f16", 0, amp_cuda_f32_to_f16, NULL},
            {"f32_to_bf16", 0, amp_cuda_f32_to_bf16, NULL},
            {"f16_to_f32", 1, NULL, amp_cuda_f16_to_f32},
            {"bf16_to_f32", 1, NULL, amp_cuda_bf16_to_f32},
            {"copy (6 B/el)", 2, NULL, NULL},
        };
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            float ms = time_ms(k[i].kind, k[i].down, k[i].up, f32, b16, n);
            double bytes = (double)n * 6; /* 4 read + 2 written, or 2 + 4, or a 3-byte copy read and written */
            printf("%-14s %12zu %10.4f %10.1f\n", k[i].name, n, ms, bytes / (ms * 1e-3) / 1e9);
        }
        cudaFree(f32), cudaFree(b16);
    }
    return 0;
}
