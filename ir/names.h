/* Private to ir/: name look-ups by (bytes, length, hash), for the loader, whose names are
 * spans of the file (not NUL-terminated) and whose every name is hashed once. Names are
 * compared as C strings would be: the span must hold no NUL (the loader cuts there). */
#ifndef AMP_NAMES_H
#define AMP_NAMES_H

#include "ir.h"

uint64_t amp_name_hash(const char *s, size_t len);
/* Like amp_graph_lookup / amp_graph_value, with the hash given. */
AmpValue *amp_graph_lookup_h(const AmpGraph *g, const char *name, size_t len, uint64_t h);
AmpValue *amp_graph_value_h(AmpGraph *g, const char *name, size_t len, uint64_t h);
/* A hint that a name with hash h is about to be looked up or added in g's scope. */
void amp_graph_prefetch_hash(const AmpGraph *g, uint64_t h);
/* Room for n more values in g's scope (name map and value table); false when out of
 * memory. Only saves the growing: nothing depends on it. */
bool amp_graph_reserve_values(AmpGraph *g, size_t n);

#endif
