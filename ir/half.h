/* 16-bit floats: conversions between float32 and IEEE float16 / bfloat16 with
 * round-to-nearest-even, exact for every one of the 65536 bit patterns (subnormals,
 * infinities, NaN kept as NaN). Used by passes (storing weights in 16 bits) and the
 * CPU kernels (16-bit storage, fp32 compute). */
#ifndef AMP_HALF_H
#define AMP_HALF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

float amp_f16_to_f32(uint16_t h);
uint16_t amp_f32_to_f16(float f);
float amp_bf16_to_f32(uint16_t h);
uint16_t amp_f32_to_bf16(float f);

void amp_f32_to_f16_n(uint16_t *dst, const float *src, size_t n);
void amp_f16_to_f32_n(float *dst, const uint16_t *src, size_t n);
void amp_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n);
void amp_bf16_to_f32_n(float *dst, const uint16_t *src, size_t n);
/* The same conversions by the portable scalar loops, which the four above use on CPUs
 * without AVX-512 (F, BW, VL) and must match bit for bit on the others (the tests). */
void amp_f32_to_f16_n_scalar(uint16_t *dst, const float *src, size_t n);
void amp_f16_to_f32_n_scalar(float *dst, const uint16_t *src, size_t n);
void amp_f32_to_bf16_n_scalar(uint16_t *dst, const float *src, size_t n);
void amp_bf16_to_f32_n_scalar(float *dst, const uint16_t *src, size_t n);
/* Whether the n-element conversions run the AVX-512 loops on this CPU. */
bool amp_half_have_avx512(void);

/* n float32 values read from src as ONNX stores them (little-endian, any alignment)
 * converted into dst, in one pass that also finds the largest magnitude among them: the
 * result, as float32 bits (>= 0x7f800000: an inf or a NaN was among them). */
uint32_t amp_f32_bytes_to_f16(uint16_t *dst, const void *src, size_t n);
uint32_t amp_f32_bytes_to_bf16(uint16_t *dst, const void *src, size_t n);
/* The largest magnitude among n float32 values at src (as above), without converting. */
uint32_t amp_f32_bytes_max(const void *src, size_t n);

#endif
