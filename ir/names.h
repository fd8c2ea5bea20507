/* Private to ir/: name look-ups by (bytes, length, hash), for the loader, whose names are
 * spans of the file (not NUL-terminated) and whose every name is hashed once. Names are
 * compared as C strings would be: the span must hold no NUL (the loader cuts there). */
#ifndef AMP_NAMES_H
#define AMP_NAMES_H

#include <string.h>

#include "ir/ir.h"

/* A name's hash (inline: the loader hashes every name it reads). */
static inline uint64_t amp_name_hash(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (len * 0xBF58476D1CE4E5B9ull), w;
    /* Names are short: whole words, then the last 8 bytes (overlapping), or for fewer
     * than 8 bytes two overlapping 4-byte reads or three bytes: no loop over bytes. */
    if (len >= 8) {
        size_t n = len;
        for (; n > 8; p += 8, n -= 8) {
            memcpy(&w, p, 8);
            h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
            h ^= h >> 31;
        }
        memcpy(&w, s + len - 8, 8);
    } else if (len >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + len - 4, 4);
        w = (uint64_t)a << 32 | b;
    } else if (len) {
        w = (uint64_t)p[0] << 16 | (uint64_t)p[len >> 1] << 8 | p[len - 1];
    } else {
        w = 0;
    }
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
}

/* Whether the len bytes at a and b are equal: names are short, so words compared inline
 * (overlapping at the end) rather than a call to memcmp. */
static inline bool amp_bytes_eq(const char *a, const char *b, size_t len) {
    if (len >= 8 && len <= 16) {
        uint64_t x0, x1, y0, y1;
        memcpy(&x0, a, 8), memcpy(&y0, b, 8);
        memcpy(&x1, a + len - 8, 8), memcpy(&y1, b + len - 8, 8);
        return ((x0 ^ y0) | (x1 ^ y1)) == 0;
    }
    if (len >= 4 && len < 8) {
        uint32_t x0, x1, y0, y1;
        memcpy(&x0, a, 4), memcpy(&y0, b, 4);
        memcpy(&x1, a + len - 4, 4), memcpy(&y1, b + len - 4, 4);
        return ((x0 ^ y0) | (x1 ^ y1)) == 0;
    }
    return memcmp(a, b, len) == 0;
}

/* Whether v is named by the len bytes at name. */
static inline bool amp_value_named(const AmpValue *v, const char *name, size_t len) {
    return v->name_len == len && amp_bytes_eq(v->name, name, len);
}
/* Like amp_graph_lookup / amp_graph_value, with the hash given. */
AmpValue *amp_graph_lookup_h(const AmpGraph *g, const char *name, size_t len, uint64_t h);
AmpValue *amp_graph_value_h(AmpGraph *g, const char *name, size_t len, uint64_t h);
/* A hint that a name with hash h is about to be looked up or added in g's scope. */
void amp_graph_prefetch_hash(const AmpGraph *g, uint64_t h);
/* Room for n more values in g's scope (name map and value table); false when out of
 * memory. Only saves the growing: nothing depends on it. */
bool amp_graph_reserve_values(AmpGraph *g, size_t n);

#endif
