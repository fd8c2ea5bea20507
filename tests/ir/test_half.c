/* float16 / bfloat16 conversions: exhaustive over all 65536 bit patterns, against the
 * compiler's own _Float16 (where it has one) for a sweep of float32 values, and the bulk
 * (vectorized) conversions against the scalar ones. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

Test(half, f16_every_pattern_round_trips) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = amp_f16_to_f32((uint16_t)h);
        bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
        cr_assert_eq(isnan(f) != 0, nan, "pattern %04x", h);
        if (nan) {
            cr_assert(isnan(amp_f16_to_f32(amp_f32_to_f16(f))), "NaN %04x stays NaN", h);
            continue;
        }
        cr_assert_eq(amp_f32_to_f16(f), h, "pattern %04x -> %a -> %04x", h, (double)f, amp_f32_to_f16(f));
    }
}

Test(half, f16_known_values) {
    cr_assert_eq(amp_f32_to_f16(1.0f), 0x3c00);
    cr_assert_eq(amp_f32_to_f16(-2.0f), 0xc000);
    cr_assert_eq(amp_f32_to_f16(65504.0f), 0x7bff);
    cr_assert_eq(amp_f32_to_f16(65520.0f), 0x7c00, "rounds up to inf at the midpoint");
    cr_assert_eq(amp_f32_to_f16(65519.99f), 0x7bff);
    cr_assert_eq(amp_f32_to_f16(1e-8f), 0x0000, "underflows to zero");
    cr_assert_eq(amp_f32_to_f16(ldexpf(1.0f, -24)), 0x0001, "smallest subnormal");
    cr_assert_eq(amp_f32_to_f16(ldexpf(1.0f, -25)), 0x0000, "half of it ties to even (0)");
    cr_assert_eq(amp_f32_to_f16(ldexpf(3.0f, -25)), 0x0002, "1.5 units ties to even (2)");
    cr_assert_eq(amp_f32_to_f16(-0.0f), 0x8000);
    cr_assert_eq(amp_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00, "tie to even, down");
    cr_assert_eq(amp_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02, "tie to even, up");
    cr_assert_eq(amp_f16_to_f32(0x7c00), INFINITY);
}

#ifdef __FLT16_MAX__
Test(half, f16_matches_compiler_float16) {
    /* Every 2^8-th float32 pattern, both signs: covers all exponents and rounding cases. */
    for (uint64_t u = 0; u <= 0xffffffffull; u += 251) {
        float f = from_bits((uint32_t)u);
        if (isnan(f)) continue;
        _Float16 r = (_Float16)f;
        uint16_t want;
        memcpy(&want, &r, sizeof want);
        cr_assert_eq(amp_f32_to_f16(f), want, "%08llx", (unsigned long long)u);
    }
}
#endif

Test(half, bf16_every_pattern_round_trips) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = amp_bf16_to_f32((uint16_t)h);
        cr_assert_eq(bits(f), h << 16);
        if (isnan(f)) {
            cr_assert(isnan(amp_bf16_to_f32(amp_f32_to_bf16(f))));
            continue;
        }
        cr_assert_eq(amp_f32_to_bf16(f), h, "pattern %04x", h);
    }
}

Test(half, bf16_rounds_to_nearest_even) {
    cr_assert_eq(amp_f32_to_bf16(from_bits(0x3f808000u)), 0x3f80, "tie, even stays");
    cr_assert_eq(amp_f32_to_bf16(from_bits(0x3f818000u)), 0x3f82, "tie, odd rounds up");
    cr_assert_eq(amp_f32_to_bf16(from_bits(0x3f808001u)), 0x3f81, "above the tie");
    cr_assert_eq(amp_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80, "FLT_MAX rounds to inf");
    cr_assert(isnan(amp_bf16_to_f32(amp_f32_to_bf16(from_bits(0x7f800001u)))), "signalling NaN stays NaN");
}

/* The bulk conversions (vectorized in optimized builds, by F16C where the CPU has it) give
 * what the scalar ones give, read float32 from unaligned bytes, and report the largest
 * magnitude they met, as bits (as amp_f32_bytes_max does). */
Test(half, bulk_conversions_match_the_scalar_ones) {
    enum { STRIDE = 4099 };
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                       0x7f800001u, 0xffbfe001u, 0x477fe000u, 0x477ff000u, 0x477fefffu,
                                       0x38800000u, 0x387fffffu, 0x33800000u, 0x33000000u, 0x33c00000u,
                                       0x00000001u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x3c000000u};
    size_t n_special = sizeof special / sizeof special[0];
    size_t n = n_special + (size_t)(0xffffffffull / STRIDE) + 1;
    uint32_t *src = malloc(n * sizeof *src);
    uint8_t *bytes = malloc(n * sizeof *src + 1);
    float *fsrc = malloc(n * sizeof *fsrc);
    uint16_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    cr_assert(src && bytes && fsrc && a && b);
    size_t k = 0;
    for (; k < n_special; k++) src[k] = special[k];
    for (uint64_t u = 0; u <= 0xffffffffull; u += STRIDE) src[k++] = (uint32_t)u;
    cr_assert_eq(k, n);
    memcpy(bytes + 1, src, n * sizeof *src); /* unaligned, as raw_data may be */
    memcpy(fsrc, src, n * sizeof *src);

    for (int bf = 0; bf < 2; bf++) {
        /* The largest magnitude: of a few finite values, then of everything (NaNs too). */
        static const uint32_t finite[] = {0x3f808000u, 0xc77fe000u, 0x00000001u};
        uint8_t fb[sizeof finite + 3];
        memcpy(fb + 3, finite, sizeof finite);
        uint32_t got = bf ? amp_f32_bytes_to_bf16(b, fb + 3, 3) : amp_f32_bytes_to_f16(b, fb + 3, 3);
        cr_assert_eq(got, 0x477fe000u, "largest magnitude %08x", got);
        uint32_t want = 0;
        for (size_t i = 0; i < n; i++)
            if ((src[i] & 0x7fffffffu) > want) want = src[i] & 0x7fffffffu;
        got = bf ? amp_f32_bytes_to_bf16(b, bytes + 1, n) : amp_f32_bytes_to_f16(b, bytes + 1, n);
        cr_assert_eq(got, want, "largest magnitude %08x, want %08x", got, want);
        cr_assert_eq(amp_f32_bytes_max(bytes + 1, n), want, "amp_f32_bytes_max");
        cr_assert_eq(amp_f32_bytes_max(fb + 3, 3), 0x477fe000u, "amp_f32_bytes_max of a few");
        if (bf)
            amp_f32_to_bf16_n(a, fsrc, n);
        else
            amp_f32_to_f16_n(a, fsrc, n);
        for (size_t i = 0; i < n; i++) {
            float f = from_bits(src[i]);
            uint16_t s = bf ? amp_f32_to_bf16(f) : amp_f32_to_f16(f);
            cr_assert_eq(a[i], s, "%s_n: %08x -> %04x, scalar %04x", bf ? "bf16" : "f16", src[i], a[i], s);
            cr_assert_eq(b[i], s, "%s bytes: %08x -> %04x, scalar %04x", bf ? "bf16" : "f16", src[i], b[i], s);
        }
    }
    free(src);
    free(fsrc);
    free(bytes);
    free(a);
    free(b);
}
