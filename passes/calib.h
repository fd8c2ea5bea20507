/* Measured value ranges (`ampc calibrate`, read by the amp pass with --calibration and
 * AMP_CALIBRATION): the statistics file, its reader and writer, and the advice on
 * gradients that underflow (passes/amp_calib.c). The format is docs/calibration.md's:
 *
 *   ampc-calibration 1
 *   runs N                  inference runs or training steps recorded
 *   loss_scale S            training: the scale gradients were recorded at (1: inference)
 *   value MAX SUB ZERO NONFINITE COUNT NAME     a float value of the forward
 *   grad  MAX SUB ZERO NONFINITE COUNT NAME     a backward value (scaled by S in the AMP graph)
 *   reduce LENGTH NODE      the reduction length of a MatMul/Gemm/Conv/Reduce* node
 *
 * MAX is the largest finite |x| of the FP32 graph (unscaled); SUB and ZERO are the shares
 * of its non-zero elements whose |x| (times S for grad) lies below float16's smallest
 * normal (2^-14) and below half its smallest subnormal (2^-25, rounds to zero); NONFINITE
 * counts NaN and inf elements, COUNT every element seen. Names run to the end of the line;
 * lines starting with '#' are comments. Version 2 (`ampc-calibration 2`, written when a
 * name holds a control character, a leading blank or a backslash) escapes its names:
 * \n \r \t \\ \xHH. */
#ifndef AMP_CALIB_H
#define AMP_CALIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "passes/pass.h"
#include "ir/fail.h"

#define AMP_CALIB_F16_MIN_NORMAL 6.103515625e-05 /* 2^-14 */
#define AMP_CALIB_F16_ZERO 2.98023223876953125e-08 /* 2^-25: below it float16 rounds to 0 */
/* The default of --calib-max-activation: 65504 / 16 (see docs/calibration.md). */
#define AMP_CALIB_DEFAULT_MAX 4096.0
/* The default of --calib-min-activation: float16's smallest normal. A value whose largest
 * |x| is below it is subnormal throughout and keeps fewer than 10 bits even at its largest
 * element (error relative to its own scale above float16's 2^-11). */
#define AMP_CALIB_DEFAULT_MIN AMP_CALIB_F16_MIN_NORMAL

typedef struct AmpCalibValue {
    char *name;
    double max_abs;
    double sub_share, zero_share;
    uint64_t nonfinite, count;
    bool grad;
} AmpCalibValue;

typedef struct AmpCalibReduce {
    char *node;
    int64_t length;
} AmpCalibReduce;

typedef struct AmpCalibStats {
    uint64_t runs;
    double loss_scale; /* 1 for inference */
    AmpCalibValue *v;
    size_t n_v;
    AmpCalibReduce *r;
    size_t n_r;
    size_t *index, cap_index; /* open addressing over v by name: entry i + 1, 0 empty */
} AmpCalibStats;

/* Reads a statistics file; errors (AMP_ERR_INPUT) name the file and line. */
AmpCode amp_calib_read(const char *path, AmpCalibStats **out, AmpStatus *st);
/* Writes s in the format above; false when the writing failed. */
bool amp_calib_write(const AmpCalibStats *s, FILE *f);
/* The statistics of value `name`, or NULL (needs amp_calib_index after building by hand). */
const AmpCalibValue *amp_calib_find(const AmpCalibStats *s, const char *name);
AmpCode amp_calib_index(AmpCalibStats *s, AmpStatus *st);
void amp_calib_free(AmpCalibStats *s);

/* One line per backward value of which more than 1% of the non-zero elements would round
 * to zero in float16 at the recorded loss scale, worst first (at most `max_lines`), then
 * one line of advice: the initial scale that keeps the largest gradient below float16's
 * largest value with a margin, or --keep-fp32 for the nodes of m (may be NULL) that make
 * them. Returns how many values underflow. */
size_t amp_calib_underflow(const AmpCalibStats *s, const AmpModel *m, size_t max_lines, AmpNotifyFn fn, void *ctx);

#endif
