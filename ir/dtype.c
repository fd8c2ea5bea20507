/* Data types: names, sizes, and the canonical byte form of a tensor's elements. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/half.h"
#include "ir/ir.h"

static const struct {
    const char *name;
    unsigned bits;
    bool is_float;
} DTYPES[AMP_DT__COUNT] = {
    [AMP_DT_UNDEFINED] = {"undefined", 0, false},
    [AMP_DT_FLOAT] = {"float", 32, true},
    [AMP_DT_UINT8] = {"uint8", 8, false},
    [AMP_DT_INT8] = {"int8", 8, false},
    [AMP_DT_UINT16] = {"uint16", 16, false},
    [AMP_DT_INT16] = {"int16", 16, false},
    [AMP_DT_INT32] = {"int32", 32, false},
    [AMP_DT_INT64] = {"int64", 64, false},
    [AMP_DT_STRING] = {"string", 0, false},
    [AMP_DT_BOOL] = {"bool", 8, false},
    [AMP_DT_FLOAT16] = {"float16", 16, true},
    [AMP_DT_DOUBLE] = {"double", 64, true},
    [AMP_DT_UINT32] = {"uint32", 32, false},
    [AMP_DT_UINT64] = {"uint64", 64, false},
    [AMP_DT_COMPLEX64] = {"complex64", 64, false},
    [AMP_DT_COMPLEX128] = {"complex128", 128, false},
    [AMP_DT_BFLOAT16] = {"bfloat16", 16, true},
    [AMP_DT_FLOAT8E4M3FN] = {"float8e4m3fn", 8, true},
    [AMP_DT_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 8, true},
    [AMP_DT_FLOAT8E5M2] = {"float8e5m2", 8, true},
    [AMP_DT_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 8, true},
    [AMP_DT_UINT4] = {"uint4", 4, false},
    [AMP_DT_INT4] = {"int4", 4, false},
    [AMP_DT_FLOAT4E2M1] = {"float4e2m1", 4, true},
};

const char *amp_dtype_name(int dt) {
    if (dt >= 0 && dt < AMP_DT__COUNT) return DTYPES[dt].name;
    return "unknown-dtype";
}

int amp_dtype_from_name(const char *name) {
    for (int i = 0; i < AMP_DT__COUNT; i++)
        if (strcmp(DTYPES[i].name, name) == 0) return i;
    return -1;
}

size_t amp_dtype_bits(int dt) {
    if (dt >= 0 && dt < AMP_DT__COUNT) return DTYPES[dt].bits;
    return 0;
}

bool amp_dtype_is_float(int dt) {
    return dt >= 0 && dt < AMP_DT__COUNT && DTYPES[dt].is_float;
}

bool amp_dtype_is_int(int dt) {
    switch (dt) {
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

bool amp_tensor_expected_bytes(int dtype, uint64_t nelem, size_t *out) {
    size_t bits = amp_dtype_bits(dtype);
    if (bits == 0) return false;
    if (bits < 8) {
        uint64_t per = 8 / bits;
        uint64_t n = nelem / per + (nelem % per != 0);
        if (n > SIZE_MAX) return false;
        *out = (size_t)n;
        return true;
    }
    uint64_t bytes = bits / 8;
    if (nelem > UINT64_MAX / bytes || nelem * bytes > SIZE_MAX) return false;
    *out = (size_t)(nelem * bytes);
    return true;
}

bool amp_type_equal(const AmpType *a, const AmpType *b) {
    if (a->kind != b->kind) return false;
    if (a->kind != AMP_TYPE_TENSOR) return true;
    if (a->dtype != b->dtype || a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++) {
        if (a->dims[i].value != b->dims[i].value) return false;
        const char *pa = a->dims[i].param, *pb = b->dims[i].param;
        if ((pa == NULL) != (pb == NULL) || (pa && strcmp(pa, pb) != 0)) return false;
    }
    return true;
}

/* Writes n little-endian elements of `bytes` bytes each from 64-bit values. */
static void put_le(uint8_t *dst, const void *src_vals, size_t n, size_t bytes, int src_kind) {
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (src_kind == 32) v = (uint64_t)(uint32_t)((const int32_t *)src_vals)[i];
        else v = ((const uint64_t *)src_vals)[i];
        for (size_t b = 0; b < bytes; b++) dst[i * bytes + b] = (uint8_t)(v >> (8 * b));
    }
}

void amp_tensor_narrow(const AmpTensor *t, size_t first, size_t n, uint16_t *dst) {
    const uint8_t *src = t->narrow_from + 4 * first;
    if (t->dtype == AMP_DT_BFLOAT16) amp_f32_bytes_to_bf16(dst, src, n);
    else amp_f32_bytes_to_f16(dst, src, n);
}

/* Makes a deferred 16-bit weight's bytes, in memory the model owns. */
static AmpCode narrow_now(AmpModel *m, AmpTensor *t, AmpStatus *st) {
    size_t n = t->raw.len / 2;
    uint16_t *dst = malloc(n ? n * sizeof *dst : 1);
    if (!dst || !amp_model_own(m, dst)) {
        free(dst);
        return amp_fail(st, AMP_ERR_INTERNAL, "tensor '%s': out of memory", t->name ? t->name : "");
    }
    amp_advise_huge(dst, n * sizeof *dst);
    amp_tensor_narrow(t, 0, n, dst);
    t->raw.data = (const uint8_t *)dst;
    t->narrow_from = NULL;
    return AMP_OK;
}

AmpCode amp_tensor_bytes(AmpModel *m, AmpTensor *t, AmpBytes *out, AmpStatus *st) {
    if (t->narrow_from) {
        AmpCode rc = narrow_now(m, t, st);
        if (rc) return rc;
    }
    if ((t->has & AMP_TENSOR_HAS_RAW) || t->is_external) {
        *out = t->raw;
        return AMP_OK;
    }
    size_t need;
    if (!amp_tensor_expected_bytes(t->dtype, t->nelem, &need))
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "tensor '%s': %s data has no byte form",
                        t->name ? t->name : "", amp_dtype_name(t->dtype));
    uint8_t *buf = need ? amp_arena_alloc(&m->arena, need) : NULL;
    if (need && !buf) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
    size_t bits = amp_dtype_bits(t->dtype);
    /* The loader checked that the field holding the data has the right count. */
    switch (t->dtype) {
    case AMP_DT_FLOAT:
    case AMP_DT_COMPLEX64:
        if (need) memcpy(buf, t->float_data, need); /* hosts are little-endian */
        break;
    case AMP_DT_DOUBLE:
    case AMP_DT_COMPLEX128:
        if (need) memcpy(buf, t->double_data, need);
        break;
    case AMP_DT_INT64:
        if (need) memcpy(buf, t->int64_data, need);
        break;
    case AMP_DT_UINT32:
    case AMP_DT_UINT64:
        put_le(buf, t->uint64_data, t->n_uint64, bits / 8, 64);
        break;
    case AMP_DT_UINT4:
    case AMP_DT_INT4:
    case AMP_DT_FLOAT4E2M1:
        /* int32_data holds the packed bytes, one byte (two elements) per entry. */
        for (size_t i = 0; i < need && i < t->n_int32; i++) buf[i] = (uint8_t)t->int32_data[i];
        break;
    default: /* int8/16/32, uint8/16, bool, float16, bfloat16, float8: int32_data */
        put_le(buf, t->int32_data, t->n_int32, bits / 8, 32);
        break;
    }
    out->data = buf;
    out->len = need;
    return AMP_OK;
}
