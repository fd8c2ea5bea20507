/* Range's length, one meaning for the shape function (ir/infer_elem.c) and the kernels
 * (kernels/cpu/tensor.c; in ir/ because the shape function is):
 * max(ceil((limit - start) / delta), 0) elements. Integers count exactly, in unsigned
 * arithmetic, so no start/limit pair overflows (Range(INT64_MAX - 2, INT64_MAX, 1) is 2
 * elements; in double it was 0); floats as the spec writes it. */
#ifndef AMP_IR_RANGE_H
#define AMP_IR_RANGE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* The count for signed integers; delta must not be 0. */
static inline uint64_t amp_range_count_signed(int64_t start, int64_t limit, int64_t delta) {
    uint64_t s = (uint64_t)start, l = (uint64_t)limit, d = (uint64_t)delta;
    if (delta < 0) return limit >= start ? 0 : (s - l - 1) / (0 - d) + 1;
    return limit <= start ? 0 : (l - s - 1) / d + 1;
}

/* The count for unsigned integers; delta must not be 0. */
static inline uint64_t amp_range_count_unsigned(uint64_t start, uint64_t limit, uint64_t delta) {
    return limit <= start ? 0 : (limit - start - 1) / delta + 1;
}

/* The count for floats (finite, delta non-zero), or -1 when it is 9e15 or more. */
static inline int64_t amp_range_count_float(double start, double limit, double delta) {
    double c = ceil((limit - start) / delta);
    if (!(c < 9.0e15)) return -1;
    return c > 0 ? (int64_t)c : 0;
}

#endif
