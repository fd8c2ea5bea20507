/* The protobuf wire format, private to ir/: a field reader for the loader (load*.c) and
 * a growable output buffer with field writers for the saver (save*.c). Nothing here
 * allocates per field; every length is checked against the end of the input. Hosts are
 * little-endian (as everywhere in ampc): fixed-width fields are copied as they are. */
#ifndef AMP_WIRE_H
#define AMP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ir/arena.h"

struct AmpTensor;

enum { AMP_WT_VARINT = 0, AMP_WT_I64 = 1, AMP_WT_LEN = 2, AMP_WT_I32 = 5 };

/* protobuf's largest field number */
#define AMP_WIRE_MAX_FIELD 0x1FFFFFFFu

/* ---- reading --------------------------------------------------------------------- */

typedef struct AmpWireField {
    uint32_t num;        /* field number */
    unsigned wt;         /* wire type */
    uint64_t v;          /* VARINT, I64 and I32 values */
    const uint8_t *data; /* LEN: the payload, len bytes */
    size_t len;
    const uint8_t *start; /* the whole record, key included: [start, end) */
    const uint8_t *end;
} AmpWireField;

/* A varint of at most 10 bytes; false when it runs past `end` or is longer. */
static inline bool amp_wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    const uint8_t *q = *p;
    if (q < end && *q < 0x80) {
        *out = *q;
        *p = q + 1;
        return true;
    }
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64 && q < end; shift += 7) {
        uint8_t b = *q++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *out = v;
            *p = q;
            return true;
        }
    }
    return false;
}

/* The next field of [*p, end): 1 and *f, 0 at the end, -1 when malformed (a key longer
 * than protobuf-c reads, field number 0, a group or unknown wire type, a value or payload
 * running past `end`). */
static inline int amp_wire_next(const uint8_t **p, const uint8_t *end, AmpWireField *f) {
    const uint8_t *q = *p;
    if (q >= end) return 0;
    f->start = q;
    uint64_t key;
    if (!amp_wire_varint(&q, end, &key) || q - f->start > 5) return -1;
    uint64_t num = key >> 3;
    if (num == 0 || num > AMP_WIRE_MAX_FIELD) return -1;
    f->num = (uint32_t)num;
    f->wt = (unsigned)(key & 7);
    f->v = 0;
    f->data = NULL;
    f->len = 0;
    switch (f->wt) {
    case AMP_WT_VARINT:
        if (!amp_wire_varint(&q, end, &f->v)) return -1;
        break;
    case AMP_WT_I64:
        if (end - q < 8) return -1;
        memcpy(&f->v, q, 8);
        q += 8;
        break;
    case AMP_WT_I32: {
        uint32_t w;
        if (end - q < 4) return -1;
        memcpy(&w, q, 4);
        f->v = w;
        q += 4;
        break;
    }
    case AMP_WT_LEN: {
        uint64_t len;
        if (!amp_wire_varint(&q, end, &len) || len > (uint64_t)(end - q)) return -1;
        f->data = q;
        f->len = (size_t)len;
        q += len;
        break;
    }
    default: return -1;
    }
    f->end = q;
    *p = q;
    return 1;
}

/* The index of the first NUL among the 8 bytes of w (little-endian), or 8. */
static inline unsigned amp_wire_nul8(uint64_t w) {
    uint64_t z = (w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull;
    if (!z) return 8;
#if defined(__GNUC__)
    return (unsigned)__builtin_ctzll(z) >> 3;
#else
    unsigned i = 0;
    while (!(z & 0x80)) z >>= 8, i++;
    return i;
#endif
}

/* A string as protobuf-c reads it: a C string, so it ends at the first NUL. Names are
 * short: eight bytes at a time (the last word overlapping), no call. */
static inline size_t amp_wire_cstrlen(const uint8_t *d, size_t len) {
    if (len > 64) {
        const void *nul = memchr(d, 0, len);
        return nul ? (size_t)((const uint8_t *)nul - d) : len;
    }
    if (len < 8) {
        for (size_t i = 0; i < len; i++)
            if (!d[i]) return i;
        return len;
    }
    uint64_t w;
    size_t i = 0;
    for (; i + 8 < len; i += 8) {
        memcpy(&w, d + i, 8);
        unsigned k = amp_wire_nul8(w);
        if (k < 8) return i + k;
    }
    memcpy(&w, d + len - 8, 8); /* bytes before i are not NUL: the first NUL here is the first */
    unsigned k = amp_wire_nul8(w);
    return k < 8 ? len - 8 + k : len;
}

static inline size_t amp_wire_strlen(const AmpWireField *f) {
    return amp_wire_cstrlen(f->data, f->len);
}

/* ---- writing --------------------------------------------------------------------- */

/* Bytes that belong at buffer offset `at` but stay where they are (big tensor data):
 * they are written out from there, never copied into the buffer. */
typedef struct AmpWGap {
    size_t at;
    const uint8_t *data;
    size_t len;
    const struct AmpTensor *narrow; /* not NULL: the bytes are this deferred 16-bit weight's
                                     * (AmpTensor.narrow_from), made as they are written */
} AmpWGap;

typedef struct AmpWBuf {
    uint8_t *data; /* malloc'd */
    size_t len, cap;
    AmpWGap *gaps; /* malloc'd, in order of `at` */
    size_t n_gaps, cap_gaps, gap_bytes;
    size_t max;  /* the most bytes (gaps included) it may hold */
    size_t first_cap; /* the first allocation's size, when not reserved (0: 64 KiB) */
    bool reserve; /* take `max` bytes of address space at once (pages come as touched) */
    bool populate; /* not reserved: a mapping of twice what is asked, whose pages are mapped
                    * written-in as the buffer grows (one call each step, not a page fault
                    * per 4 KiB as the encoding reaches them) */
    size_t mapped; /* how many bytes `data` maps when reserved or populated */
    uint16_t *chunk; /* malloc'd when a deferred weight is written: AMP_WBUF_CHUNK elements */
    bool failed; /* a write did not fit: out of memory, or `over` */
    bool over;   /* ... because it would have passed `max` */
} AmpWBuf;

/* Data at least this big is left where it is (a gap), not copied. */
enum { AMP_WBUF_GAP_MIN = 4096 };
/* Deferred weights are converted this many elements at a time into `chunk`, which stays
 * in the cache while it is written. */
enum { AMP_WBUF_CHUNK = 1 << 16 };

void amp_wbuf_free(AmpWBuf *b);
/* len bytes at d belong here; they must stay valid until the buffer is written. */
void amp_wbuf_gap(AmpWBuf *b, const void *d, size_t len);
/* The raw.len bytes of deferred 16-bit weight t belong here, made when written. */
void amp_wbuf_gap_narrow(AmpWBuf *b, const struct AmpTensor *t);

/* Grows the buffer for n more bytes; false (and `failed`) when it cannot. */
bool amp_wbuf_grow(AmpWBuf *b, size_t n);

static inline bool amp_wbuf_room(AmpWBuf *b, size_t n) {
    return b->cap - b->len >= n || amp_wbuf_grow(b, n);
}

static inline size_t amp_varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

/* Unchecked: the caller made room (10 bytes per varint). */
static inline void amp_wbuf_varint_(AmpWBuf *b, uint64_t v) {
    uint8_t *p = b->data + b->len;
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    b->len = (size_t)(p - b->data);
}

static inline void amp_wbuf_bytes_(AmpWBuf *b, const void *d, size_t n) {
    amp_copy(b->data + b->len, d, n);
    b->len += n;
}

static inline void amp_put_varint(AmpWBuf *b, uint32_t num, uint64_t v) {
    if (!amp_wbuf_room(b, 20)) return;
    amp_wbuf_varint_(b, (uint64_t)num << 3 | AMP_WT_VARINT);
    amp_wbuf_varint_(b, v);
}

/* int32 and enum fields: negative values take ten bytes, sign-extended. */
static inline void amp_put_int32(AmpWBuf *b, uint32_t num, int32_t v) {
    amp_put_varint(b, num, (uint64_t)(int64_t)v);
}

static inline void amp_put_fixed32(AmpWBuf *b, uint32_t num, const void *v4) {
    if (!amp_wbuf_room(b, 14)) return;
    amp_wbuf_varint_(b, (uint64_t)num << 3 | AMP_WT_I32);
    amp_wbuf_bytes_(b, v4, 4);
}

static inline void amp_put_bytes(AmpWBuf *b, uint32_t num, const void *d, size_t n) {
    if (n >= AMP_WBUF_GAP_MIN) {
        if (!amp_wbuf_room(b, 20)) return;
        amp_wbuf_varint_(b, (uint64_t)num << 3 | AMP_WT_LEN);
        amp_wbuf_varint_(b, n);
        amp_wbuf_gap(b, d, n);
        return;
    }
    if (!amp_wbuf_room(b, 20 + n)) return;
    amp_wbuf_varint_(b, (uint64_t)num << 3 | AMP_WT_LEN);
    amp_wbuf_varint_(b, n);
    amp_wbuf_bytes_(b, d, n);
}

/* A string field; NULL is an absent field. */
static inline void amp_put_str(AmpWBuf *b, uint32_t num, const char *s) {
    if (s) amp_put_bytes(b, num, s, strlen(s));
}

static inline void amp_put_raw(AmpWBuf *b, const void *d, size_t n) {
    if (n >= AMP_WBUF_GAP_MIN) amp_wbuf_gap(b, d, n);
    else if (amp_wbuf_room(b, n)) amp_wbuf_bytes_(b, d, n);
}

/* A sub-message: amp_msg_begin writes the key and leaves one byte for the length;
 * amp_msg_end writes the length once the content is there, moving the content when the
 * length needs more than one byte. Returns where the content starts. */
static inline size_t amp_msg_begin(AmpWBuf *b, uint32_t num) {
    if (!amp_wbuf_room(b, 6)) return b->len;
    amp_wbuf_varint_(b, (uint64_t)num << 3 | AMP_WT_LEN);
    b->data[b->len++] = 0;
    return b->len;
}

void amp_msg_end_long(AmpWBuf *b, size_t start);

static inline void amp_msg_end(AmpWBuf *b, size_t start) {
    if (b->failed) return;
    size_t n = b->len - start;
    if (n < 0x80 && (!b->n_gaps || b->gaps[b->n_gaps - 1].at < start)) b->data[start - 1] = (uint8_t)n;
    else amp_msg_end_long(b, start);
}

#endif
