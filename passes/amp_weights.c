/* Weights of inference graphs stored in 16 bits (DESIGN.md rule 4): a float32
 * initializer that only 16-bit nodes of its own graph read is rewritten in place as
 * float16 (or bfloat16) raw_data under the same name, so the file shrinks and no Cast is
 * needed. One with a value the target type cannot hold (|x| > 65504 for float16, or not
 * finite) stays float32, is reported, and is cast where it is used. Training graphs keep
 * every weight in float32: the optimizer owns the master copy. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp_impl.h"
#include "half.h"

/* Largest finite magnitudes: float16 65504; bfloat16 0x7F7F (0x1.FEp127). Anything
 * beyond would round to infinity or lose its meaning. */
static double max_magnitude(int dt) {
    return dt == AMP_DT_FLOAT16 ? 65504.0 : 3.3895313892515355e38;
}

static bool read_only_by_16(const AmpRun *r, const AmpGraph *g, const AmpValue *v) {
    if (!v->n_uses) return false;
    for (size_t u = 0; u < v->n_uses; u++)
        if (!amp_reads_16(r, g, v->uses[u].node, v->uses[u].slot)) return false;
    return true;
}

static void report(const AmpRun *r, const char *fmt, ...) AMP_PRINTF(2, 3);
static void report(const AmpRun *r, const char *fmt, ...) {
    if (!r->opt->notify) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    r->opt->notify(r->opt->notify_ctx, line);
}

enum { BLOCK = 4096 }; /* floats read at a time: raw_data may be unaligned */

/* Rewrites t's float32 data (bytes b) as a malloc'd 16-bit buffer the model owns. */
static AmpCode convert(AmpRun *r, AmpValue *v, AmpTensor *t, AmpBytes b, size_t n) {
    uint16_t *dst = malloc(n ? n * sizeof *dst : 1);
    if (!dst || !amp_model_own(r->m, dst)) {
        free(dst);
        return amp_fail(r->st, AMP_ERR_INTERNAL, "amp: out of memory converting weight '%s'", v->name);
    }
    float block[BLOCK];
    for (size_t k = 0; k < n; k += BLOCK) {
        size_t m = n - k < BLOCK ? n - k : BLOCK;
        memcpy(block, b.data + k * sizeof(float), m * sizeof(float));
        if (r->dt == AMP_DT_FLOAT16)
            amp_f32_to_f16_n(dst + k, block, m);
        else
            amp_f32_to_bf16_n(dst + k, block, m);
    }
    t->dtype = r->dt;
    t->has |= AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->has &= ~(unsigned)AMP_TENSOR_HAS_LOCATION;
    t->raw.data = (const uint8_t *)dst;
    t->raw.len = n * sizeof *dst;
    t->n_float = 0;
    t->float_data = NULL;
    t->is_external = false;
    t->data_location = 0;
    t->n_external = 0;
    t->external = NULL;
    v->type.dtype = r->dt;
    r->n_weights16++;
    return AMP_OK;
}

/* The largest magnitude in b (n floats); false when one is not finite. */
static bool magnitude(AmpBytes b, size_t n, double *worst) {
    float block[BLOCK];
    *worst = 0;
    for (size_t k = 0; k < n; k += BLOCK) {
        size_t m = n - k < BLOCK ? n - k : BLOCK;
        memcpy(block, b.data + k * sizeof(float), m * sizeof(float));
        for (size_t j = 0; j < m; j++) {
            if (!isfinite(block[j])) return false;
            double a = fabs((double)block[j]);
            if (a > *worst) *worst = a;
        }
    }
    return true;
}

AmpCode amp_weights(AmpRun *r, AmpGraph *g) {
    if (r->training) return AMP_OK;
    double lim = max_magnitude(r->dt);
    for (size_t i = 0; i < g->n_initializers; i++) {
        AmpTensor *t = g->initializers[i];
        AmpValue *v = t->name ? amp_graph_lookup(g, t->name) : NULL;
        if (!v || v->graph != g || v->initializer != t || !amp_is_f32(v) || t->dtype != AMP_DT_FLOAT)
            continue;
        /* Graph inputs with a default can be fed; outputs keep their type. */
        if ((v->flags & (AMP_VALUE_INPUT | AMP_VALUE_OUTPUT)) || !read_only_by_16(r, g, v)) continue;
        AmpBytes b;
        AmpCode rc = amp_tensor_bytes(r->m, t, &b, r->st);
        if (rc) return rc;
        size_t n = (size_t)t->nelem;
        if (b.len < n * sizeof(float)) continue; /* the loader checked; be safe */
        double worst;
        bool finite = magnitude(b, n, &worst);
        if (!finite || worst > lim) {
            r->n_weights_kept++;
            if (finite)
                report(r, "weight '%s' has values outside %s's range (max |x| = %g): kept in float32, cast where "
                          "it is used", v->name, amp_dtype_name(r->dt), worst);
            else
                report(r, "weight '%s' has values that are not finite: kept in float32, cast where it is used",
                       v->name);
            continue;
        }
        if ((rc = convert(r, v, t, b, n))) return rc;
    }
    return AMP_OK;
}
