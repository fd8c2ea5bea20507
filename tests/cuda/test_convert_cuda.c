/* CUDA conversion kernels against the CPU reference (ir/half.c), bit for bit, over all
 * 65536 16-bit patterns and a sweep of float32 values. Skips without a GPU. */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/convert.h"
#include "ir/half.h"

#define N_SWEEP (1u << 20)

static void need_gpu(void) {
    if (!amp_cuda_device_available()) cr_skip_test("no CUDA device");
}

static float *sweep(void) {
    float *x = malloc(N_SWEEP * sizeof *x);
    for (uint32_t i = 0; i < N_SWEEP; i++) {
        uint32_t u = i * 4099u; /* strided over all exponents, both signs */
        memcpy(&x[i], &u, sizeof u);
    }
    return x;
}

/* The launchers take an 8-wide vector path over 16-byte-aligned arrays and a scalar path
 * for the tail and for unaligned pointers; each check runs three layouts so that both
 * paths are compared with the CPU: aligned whole, aligned with a tail of 5 (n % 8 == 3),
 * and one element in (both pointers unaligned). */
static const struct { size_t offset, trim; } layouts[] = {{0, 0}, {0, 5}, {1, 0}};

static void check_down(int (*gpu)(uint16_t *, const float *, size_t, void *), uint16_t (*cpu)(float)) {
    float *x = sweep(), *dx;
    uint16_t *dy, *y = malloc(N_SWEEP * sizeof *y);
    cr_assert_eq(cudaMalloc((void **)&dx, N_SWEEP * sizeof *dx), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dy, N_SWEEP * sizeof *dy), cudaSuccess);
    cudaMemcpy(dx, x, N_SWEEP * sizeof *dx, cudaMemcpyHostToDevice);
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        size_t off = layouts[l].offset, n = N_SWEEP - off - layouts[l].trim;
        cudaMemset(dy, 0xff, N_SWEEP * sizeof *dy);
        cr_assert_eq(gpu(dy + off, dx + off, n, NULL), 0);
        cr_assert_eq(cudaMemcpy(y, dy, N_SWEEP * sizeof *y, cudaMemcpyDeviceToHost), cudaSuccess);
        for (uint32_t i = 0; i < N_SWEEP; i++) {
            if (i < off || i >= off + n) { /* outside the range: untouched */
                cr_assert_eq(y[i], 0xffff, "layout %zu: element %u written", l, i);
                continue;
            }
            if (isnan(x[i])) continue; /* NaN payloads may differ; NaN-ness is checked in check_up */
            cr_assert_eq(y[i], cpu(x[i]), "layout %zu: x=%a", l, (double)x[i]);
        }
    }
    cudaFree(dx), cudaFree(dy), free(x), free(y);
}

static void check_up(int (*gpu)(float *, const uint16_t *, size_t, void *), float (*cpu)(uint16_t)) {
    uint16_t *h = malloc(65536 * sizeof *h), *dh;
    float *f = malloc(65536 * sizeof *f), *df;
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    cr_assert_eq(cudaMalloc((void **)&dh, 65536 * sizeof *dh), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&df, 65536 * sizeof *df), cudaSuccess);
    cudaMemcpy(dh, h, 65536 * sizeof *dh, cudaMemcpyHostToDevice);
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        size_t off = layouts[l].offset, n = 65536 - off - layouts[l].trim;
        cudaMemset(df, 0xff, 65536 * sizeof *df);
        cr_assert_eq(gpu(df + off, dh + off, n, NULL), 0);
        cr_assert_eq(cudaMemcpy(f, df, 65536 * sizeof *f, cudaMemcpyDeviceToHost), cudaSuccess);
        for (uint32_t i = 0; i < 65536; i++) {
            uint32_t bits;
            memcpy(&bits, &f[i], sizeof bits);
            if (i < off || i >= off + n) {
                cr_assert_eq(bits, 0xffffffffu, "layout %zu: element %u written", l, i);
                continue;
            }
            float want = cpu((uint16_t)i);
            if (isnan(want)) cr_assert(isnan(f[i]), "layout %zu: pattern %04x", l, i);
            else cr_assert_eq(memcmp(&f[i], &want, sizeof want), 0, "layout %zu: pattern %04x", l, i);
        }
    }
    cudaFree(dh), cudaFree(df), free(h), free(f);
}

Test(cuda_convert, f32_to_f16) { need_gpu(); check_down(amp_cuda_f32_to_f16, amp_f32_to_f16); }
Test(cuda_convert, f32_to_bf16) { need_gpu(); check_down(amp_cuda_f32_to_bf16, amp_f32_to_bf16); }
Test(cuda_convert, f16_to_f32) { need_gpu(); check_up(amp_cuda_f16_to_f32, amp_f16_to_f32); }
Test(cuda_convert, bf16_to_f32) { need_gpu(); check_up(amp_cuda_bf16_to_f32, amp_bf16_to_f32); }
