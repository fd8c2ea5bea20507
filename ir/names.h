/* Private to ir/: name look-ups by (bytes, length, hash), for the loader, whose names are
 * spans of the file (not NUL-terminated) and whose every name is hashed once. Names are
 * compared as C strings would be: the span must hold no NUL (the loader cuts there). */
#ifndef AMP_NAMES_H
#define AMP_NAMES_H

#include <string.h>

#include "ir.h"

uint64_t amp_name_hash(const char *s, size_t len);

/* Whether v is named by the len bytes at name: names are short, so words compared
 * inline (overlapping at the end) rather than a call to memcmp. */
static inline bool amp_value_named(const AmpValue *v, const char *name, size_t len) {
    if (v->name_len != len) return false;
    const char *a = v->name;
    if (len >= 8 && len <= 16) {
        uint64_t x0, x1, y0, y1;
        memcpy(&x0, a, 8), memcpy(&y0, name, 8);
        memcpy(&x1, a + len - 8, 8), memcpy(&y1, name + len - 8, 8);
        return ((x0 ^ y0) | (x1 ^ y1)) == 0;
    }
    if (len >= 4 && len < 8) {
        uint32_t x0, x1, y0, y1;
        memcpy(&x0, a, 4), memcpy(&y0, name, 4);
        memcpy(&x1, a + len - 4, 4), memcpy(&y1, name + len - 4, 4);
        return ((x0 ^ y0) | (x1 ^ y1)) == 0;
    }
    return memcmp(a, name, len) == 0;
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
