/* The cast engine and Cast's attribute, every backend's (ops/cast_engine.h). */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "ir/half.h"
#include "ir/parallel.h"
#include "ops/cast_engine.h"
#include "ops/kernel_out.h"

/* ---- the cast engine ------------------------------------------------------------------ */

bool amp_sh_convertible(int dt) {
    switch (dt) {
    case AMP_DT_FLOAT:
    case AMP_DT_DOUBLE:
    case AMP_DT_FLOAT16:
    case AMP_DT_BFLOAT16:
    case AMP_DT_BOOL:
    case AMP_DT_INT8:
    case AMP_DT_INT16:
    case AMP_DT_INT32:
    case AMP_DT_INT64:
    case AMP_DT_UINT8:
    case AMP_DT_UINT16:
    case AMP_DT_UINT32:
    case AMP_DT_UINT64: return true;
    default: return false;
    }
}

AmpCastVal amp_cast_load(int dt, const void *p, uint64_t i) {
    AmpCastVal v = {AMP_CV_FLOAT, 0, 0, 0};
    switch (dt) {
    case AMP_DT_FLOAT: v.f = ((const float *)p)[i]; break;
    case AMP_DT_DOUBLE: v.f = ((const double *)p)[i]; break;
    case AMP_DT_FLOAT16: v.f = amp_f16_to_f32(((const uint16_t *)p)[i]); break;
    case AMP_DT_BFLOAT16: v.f = amp_bf16_to_f32(((const uint16_t *)p)[i]); break;
    case AMP_DT_INT8: v.kind = AMP_CV_INT, v.i = ((const int8_t *)p)[i]; break;
    case AMP_DT_INT16: v.kind = AMP_CV_INT, v.i = ((const int16_t *)p)[i]; break;
    case AMP_DT_INT32: v.kind = AMP_CV_INT, v.i = ((const int32_t *)p)[i]; break;
    case AMP_DT_INT64: v.kind = AMP_CV_INT, v.i = ((const int64_t *)p)[i]; break;
    case AMP_DT_UINT8: v.kind = AMP_CV_UINT, v.u = ((const uint8_t *)p)[i]; break;
    case AMP_DT_BOOL: v.kind = AMP_CV_UINT, v.u = ((const uint8_t *)p)[i] != 0; break;
    case AMP_DT_UINT16: v.kind = AMP_CV_UINT, v.u = ((const uint16_t *)p)[i]; break;
    case AMP_DT_UINT32: v.kind = AMP_CV_UINT, v.u = ((const uint32_t *)p)[i]; break;
    case AMP_DT_UINT64: v.kind = AMP_CV_UINT, v.u = ((const uint64_t *)p)[i]; break;
    default: break;
    }
    return v;
}

/* d rounded to float with round-to-odd: a later rounding of the result to fewer than 24
 * bits (float16, bfloat16) then equals rounding d directly. */
static float to_odd_float(double d) {
    float f = (float)d;
    if (isnan(d) || isinf(d) || (double)f == d) return f;
    if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f); /* truncate toward zero */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bits |= 1;
    memcpy(&f, &bits, sizeof f);
    return f;
}

double amp_cast_as_double(const AmpCastVal *v) {
    return v->kind == AMP_CV_FLOAT ? v->f : v->kind == AMP_CV_INT ? (double)v->i : (double)v->u;
}

/* The integer a value becomes: floats truncate toward zero (NaN -> 0, saturating at
 * the 64-bit limits); the caller narrows it modulo 2^bits like numpy's astype. */
static uint64_t as_bits64(const AmpCastVal *v) {
    if (v->kind == AMP_CV_INT) return (uint64_t)v->i;
    if (v->kind == AMP_CV_UINT) return v->u;
    double t = trunc(v->f);
    if (isnan(t)) return 0;
    if (t >= 18446744073709551616.0) return UINT64_MAX;
    if (t >= 9223372036854775808.0) return (uint64_t)t;
    if (t < -9223372036854775808.0) return (uint64_t)INT64_MIN;
    return (uint64_t)(int64_t)t;
}

void amp_cast_store(int dt, void *p, uint64_t i, const AmpCastVal *v) {
    switch (dt) {
    case AMP_DT_FLOAT:
        ((float *)p)[i] = v->kind == AMP_CV_FLOAT ? (float)v->f : v->kind == AMP_CV_INT ? (float)v->i : (float)v->u;
        break;
    case AMP_DT_DOUBLE: ((double *)p)[i] = amp_cast_as_double(v); break;
    case AMP_DT_FLOAT16: ((uint16_t *)p)[i] = amp_f32_to_f16(to_odd_float(amp_cast_as_double(v))); break;
    case AMP_DT_BFLOAT16: ((uint16_t *)p)[i] = amp_f32_to_bf16(to_odd_float(amp_cast_as_double(v))); break;
    case AMP_DT_BOOL:
        ((uint8_t *)p)[i] = v->kind == AMP_CV_FLOAT ? v->f != 0 : v->kind == AMP_CV_INT ? v->i != 0 : v->u != 0;
        break;
    case AMP_DT_INT8: ((int8_t *)p)[i] = (int8_t)as_bits64(v); break;
    case AMP_DT_INT16: ((int16_t *)p)[i] = (int16_t)as_bits64(v); break;
    case AMP_DT_INT32: ((int32_t *)p)[i] = (int32_t)as_bits64(v); break;
    case AMP_DT_INT64: ((int64_t *)p)[i] = (int64_t)as_bits64(v); break;
    case AMP_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)as_bits64(v); break;
    case AMP_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)as_bits64(v); break;
    case AMP_DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)as_bits64(v); break;
    case AMP_DT_UINT64: ((uint64_t *)p)[i] = as_bits64(v); break;
    default: break;
    }
}

/* float32 <-> float16 / bfloat16: the conversions ir/half.h makes in bulk. */
static bool float_pair(int sdt, int ddt) {
    return (sdt == AMP_DT_FLOAT && (ddt == AMP_DT_FLOAT16 || ddt == AMP_DT_BFLOAT16)) ||
           (ddt == AMP_DT_FLOAT && (sdt == AMP_DT_FLOAT16 || sdt == AMP_DT_BFLOAT16));
}

typedef struct BulkJob {
    const void *src;
    int sdt;
    void *dst;
    int ddt;
} BulkJob;

/* Elements [from, to) of one of those conversions: element by element, so the same bits
 * however the range is cut. */
static void bulk_slice(void *ctx, int64_t from, int64_t to) {
    const BulkJob *j = ctx;
    size_t n = (size_t)(to - from);
    if (j->sdt == AMP_DT_FLOAT) {
        const float *s = (const float *)j->src + from;
        uint16_t *d = (uint16_t *)j->dst + from;
        if (j->ddt == AMP_DT_FLOAT16) amp_f32_to_f16_n(d, s, n);
        else amp_f32_to_bf16_n(d, s, n);
    } else {
        const uint16_t *s = (const uint16_t *)j->src + from;
        float *d = (float *)j->dst + from;
        if (j->sdt == AMP_DT_FLOAT16) amp_f16_to_f32_n(d, s, n);
        else amp_bf16_to_f32_n(d, s, n);
    }
}

AmpCode amp_sh_convert(AmpKernelCtx *k, const void *src, int sdt, void *dst, int ddt, uint64_t n) {
    if (!amp_sh_convertible(sdt)) return amp_kernel_bad_dtype(k, sdt);
    if (!amp_sh_convertible(ddt)) return amp_kernel_bad_dtype(k, ddt);
    if (n == 0) return AMP_OK;
    if (sdt == ddt) {
        memcpy(dst, src, (size_t)n * (amp_dtype_bits(sdt) / 8));
        return AMP_OK;
    }
    /* The common float paths in bulk, sliced over the CPU's threads. */
    if (float_pair(sdt, ddt)) {
        BulkJob j = {.src = src, .sdt = sdt, .dst = dst, .ddt = ddt};
        amp_parallel_for((int64_t)n, 1 << 15, 1024, bulk_slice, &j);
    } else
        for (uint64_t i = 0; i < n; i++) {
            AmpCastVal v = amp_cast_load(sdt, src, i);
            amp_cast_store(ddt, dst, i, &v);
        }
    return AMP_OK;
}

/* ---- Cast's attribute, parsed once at prepare ------------------------------------------ */

AmpCode amp_cast_prepare(const AmpNode *n, int64_t opset, void **attrs, AmpStatus *st) {
    (void)opset;
    const AmpAttr *a = amp_node_attr(n, "to");
    if (!a) return amp_node_fail(n, st, AMP_ERR_INPUT, "no 'to' attribute");
    CastAttrs c;
    if (a->type == AMP_ATTR_STRING) { /* Cast-1: a TensorProto type name ("FLOAT") */
        char name[32] = "";
        size_t len = a->s.len < sizeof name - 1 ? a->s.len : sizeof name - 1;
        for (size_t i = 0; i < len; i++) name[i] = (char)tolower(a->s.data[i]);
        name[len] = '\0';
        c.to = amp_dtype_from_name(name);
        if (c.to < 0) return amp_node_fail(n, st, AMP_ERR_INPUT, "unknown type '%s'", name);
    } else {
        if (a->i <= AMP_DT_UNDEFINED || a->i >= AMP_DT__COUNT)
            return amp_node_fail(n, st, AMP_ERR_INPUT, "'to' is %lld, not a data type", (long long)a->i);
        c.to = (int)a->i;
    }
    return amp_prep_out(&c, sizeof c, attrs, st);
}
