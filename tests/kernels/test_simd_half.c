/* The n-element 16-bit conversions the CPU kernels store and load through (ir/half.c):
 * the AVX-512 loops (when this CPU has them) against the portable scalar ones, bit for
 * bit: every 16-bit pattern, a sweep of float32 patterns with NaNs (quiet, signalling,
 * payloads), infinities, subnormals and rounding ties, at lengths 0, 1, 15, 16, 17 and
 * 1000 and unaligned starts (the masked tails). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"

static const size_t lengths[] = {0, 1, 15, 16, 17, 1000};

/* Float32 bit patterns that test the rounding: specials, subnormals, ties at both
 * widths' rounding points, overflow edges. */
static const uint32_t specials[] = {
    0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu, 0x00800000u, /* zero, subnormal */
    0x7f800000u, 0xff800000u,                                                                   /* inf */
    0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7f80ffffu, 0x7fffffffu,
    0xffffffffu, 0x7f810000u, 0x7fa00001u, /* NaNs: quiet, signalling, payloads in either half */
    0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x3f807fffu, 0xbf808000u, 0xbf818000u, /* bf16 ties */
    0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0xff7fffffu,                           /* bf16 overflow */
    0x00008000u, 0x00018000u, 0x80008000u, /* bf16 ties among subnormals */
    0x3f801000u, 0x3f803000u, 0x3f800fffu, /* f16 ties */
    0x477fe000u, 0x477fefffu, 0x477ff000u, 0x47800000u, 0xc77ff000u, /* 65504, ~65519, 65520, 65536 */
    0x33000000u, 0x33000001u, 0x33c00000u, 0x387fc000u, 0x387fe000u, 0x38800000u, /* f16 subnormal edge */
};

static uint32_t rng_state = 12345u;
static uint32_t next_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* n float32 patterns: the specials, then a sweep over all 2^32 with a prime stride, then
 * random ones. */
static uint32_t *f32_patterns(size_t n) {
    uint32_t *u = malloc(n * sizeof *u);
    cr_assert(u);
    size_t ns = sizeof specials / sizeof specials[0];
    for (size_t i = 0; i < n; i++) {
        if (i < ns) u[i] = specials[i];
        else if (i < n / 2) u[i] = (uint32_t)(i * 4093u);
        else u[i] = next_u32();
    }
    return u;
}

typedef void (*Narrow)(uint16_t *, const float *, size_t);
typedef void (*Widen)(float *, const uint16_t *, size_t);

static void check_narrow(Narrow vec, Narrow ref, const char *what) {
    size_t n = (size_t)1 << 21;
    uint32_t *u = f32_patterns(n + 1);
    uint16_t *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
    cr_assert(a && b);
    vec(a, (const float *)u, n);
    ref(b, (const float *)u, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(a[i], b[i], "%s of %08x: vector %04x, scalar %04x", what, u[i], a[i], b[i]);
    /* short lengths and unaligned starts: nothing written past the end */
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
        for (size_t off = 0; off < 3; off++) {
            size_t m = lengths[l];
            memset(a, 0xab, (m + 8) * sizeof *a);
            memset(b, 0xab, (m + 8) * sizeof *b);
            vec(a + off, (const float *)u + off, m);
            ref(b + off, (const float *)u + off, m);
            cr_assert(!memcmp(a, b, (m + 8) * sizeof *a), "%s: length %zu at offset %zu", what, m, off);
        }
    free(u), free(a), free(b);
}

static void check_widen(Widen vec, Widen ref, const char *what) {
    size_t n = 65536;
    uint16_t *h = malloc((n + 8) * sizeof *h);
    uint32_t *a = malloc((n + 8) * sizeof *a), *b = malloc((n + 8) * sizeof *b);
    cr_assert(h && a && b);
    for (size_t i = 0; i < n + 8; i++) h[i] = (uint16_t)(i * 40503u); /* every pattern, shuffled */
    vec((float *)a, h, n);
    ref((float *)b, h, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(a[i], b[i], "%s of %04x: vector %08x, scalar %08x", what, h[i], a[i], b[i]);
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
        for (size_t off = 0; off < 3; off++) {
            size_t m = lengths[l];
            memset(a, 0xab, (m + 8) * sizeof *a);
            memset(b, 0xab, (m + 8) * sizeof *b);
            vec((float *)a + off, h + off, m);
            ref((float *)b + off, h + off, m);
            cr_assert(!memcmp(a, b, (m + 8) * sizeof *a), "%s: length %zu at offset %zu", what, m, off);
        }
    free(h), free(a), free(b);
}

Test(simd_half, reports_the_path) {
    cr_log_info("AVX-512 conversions: %s", amp_half_have_avx512() ? "yes" : "no (scalar against scalar)");
}

Test(simd_half, f32_to_bf16_matches_scalar) {
    check_narrow(amp_f32_to_bf16_n, amp_f32_to_bf16_n_scalar, "f32->bf16");
}

Test(simd_half, f32_to_f16_matches_scalar) {
    check_narrow(amp_f32_to_f16_n, amp_f32_to_f16_n_scalar, "f32->f16");
}

Test(simd_half, bf16_to_f32_matches_scalar) {
    check_widen(amp_bf16_to_f32_n, amp_bf16_to_f32_n_scalar, "bf16->f32");
}

Test(simd_half, f16_to_f32_matches_scalar) {
    check_widen(amp_f16_to_f32_n, amp_f16_to_f32_n_scalar, "f16->f32");
}

/* The one-element conversions agree with the n-element ones on the specials. */
Test(simd_half, single_matches_bulk) {
    size_t ns = sizeof specials / sizeof specials[0];
    uint16_t b[64], f[64];
    amp_f32_to_bf16_n(b, (const float *)specials, ns);
    amp_f32_to_f16_n(f, (const float *)specials, ns);
    for (size_t i = 0; i < ns; i++) {
        float x;
        memcpy(&x, &specials[i], sizeof x);
        cr_assert_eq(b[i], amp_f32_to_bf16(x), "bf16 of %08x", specials[i]);
        cr_assert_eq(f[i], amp_f32_to_f16(x), "f16 of %08x", specials[i]);
    }
}
