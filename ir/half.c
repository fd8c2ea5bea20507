/* float16 / bfloat16 <-> float32 by bit manipulation (no hardware half type needed). */
#include "half.h"

#include <string.h>

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float amp_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* inf / NaN: keep the payload's top bits, force quiet NaN */
        return bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) {
        if (!man) return bits_f32(sign);
        /* Subnormal: value = man * 2^-24, exact in float32. */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* float32 bits -> float16 bits, round to nearest even, without branches so that loops
 * over it vectorize (checked against a branchy reference on all 2^32 inputs). Every case
 * is computed and the right one selected by |x|:
 * - normal results: rebias the exponent and round the 13 dropped bits (adding 0xfff plus
 *   the lowest kept bit rounds halfway cases to even; a carry may round up to inf);
 * - below 2^-14 (subnormal or zero results): |x| + 0.5f, whose float32 rounding is exactly
 *   the float16 subnormal rounding, then the bits of 0.5f taken off;
 * - 65536 and up: inf; NaN stays NaN, quiet, with the top of its payload. */
static uint16_t f16_of_bits(uint32_t x) {
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13; /* 0xc8000000: (15 - 127) << 23 */
    uint32_t sub = f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u;
    uint32_t big = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u;
    uint32_t r = a < 0x38800000u ? sub : normal; /* 0x38800000: 2^-14 */
    r = a >= 0x47800000u ? big : r;              /* 0x47800000: 2^16 */
    return (uint16_t)(r | sign);
}

uint16_t amp_f32_to_f16(float f) {
    return f16_of_bits(f32_bits(f));
}

float amp_bf16_to_f32(uint16_t h) {
    return bits_f32((uint32_t)h << 16);
}

/* float32 bits -> bfloat16 bits, round to nearest even; NaN stays NaN, quiet. */
static uint16_t bf16_of_bits(uint32_t u) {
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded);
}

uint16_t amp_f32_to_bf16(float f) {
    return bf16_of_bits(f32_bits(f));
}

void amp_f32_to_f16_n(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = f16_of_bits(f32_bits(src[i]));
}

void amp_f16_to_f32_n(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = amp_f16_to_f32(src[i]);
}

void amp_f32_to_bf16_n(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bf16_of_bits(f32_bits(src[i]));
}

/* The float32 bits at p, which may be unaligned (hosts are little-endian, as ONNX's raw
 * data is). */
static uint32_t load_bits(const uint8_t *p) {
    uint32_t u;
    memcpy(&u, p, sizeof u);
    return u;
}

uint32_t amp_f32_bytes_to_f16(uint16_t *dst, const void *src, size_t n) {
    const uint8_t *p = src;
    uint32_t most = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = load_bits(p + 4 * i), a = u & 0x7fffffffu;
        most = a > most ? a : most;
        dst[i] = f16_of_bits(u);
    }
    return most;
}

uint32_t amp_f32_bytes_to_bf16(uint16_t *dst, const void *src, size_t n) {
    const uint8_t *p = src;
    uint32_t most = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = load_bits(p + 4 * i), a = u & 0x7fffffffu;
        most = a > most ? a : most;
        dst[i] = bf16_of_bits(u);
    }
    return most;
}

void amp_bf16_to_f32_n(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = amp_bf16_to_f32(src[i]);
}
