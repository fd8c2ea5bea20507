/* CUDA precision conversions (the Cast kernels of the fast path). The CPU reference is
 * ir/half.c; tests/cuda compares the two bit for bit. */
#ifndef AMP_CUDA_CONVERT_H
#define AMP_CUDA_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* All pointers are device pointers; `stream` is a cudaStream_t (NULL: default stream).
 * Each returns 0, or the cudaError_t of the launch. */
int amp_cuda_f32_to_f16(uint16_t *dst, const float *src, size_t n, void *stream);
int amp_cuda_f16_to_f32(float *dst, const uint16_t *src, size_t n, void *stream);
int amp_cuda_f32_to_bf16(uint16_t *dst, const float *src, size_t n, void *stream);
int amp_cuda_bf16_to_f32(float *dst, const uint16_t *src, size_t n, void *stream);

/* 1 when a CUDA device is usable, else 0 (tests skip on 0). */
int amp_cuda_device_available(void);

#ifdef __cplusplus
}
#endif

#endif
