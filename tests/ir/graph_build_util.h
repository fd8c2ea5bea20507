/* Building graphs tersely with the builder API, for the IR tests (test_verify.c and the
 * type-inference tests): `node(g, "Add", "add", "a,b", "y")` appends y = Add(a, b). */
#ifndef AMP_GRAPH_BUILD_UTIL_H
#define AMP_GRAPH_BUILD_UTIL_H

#include <criterion/criterion.h>
#include <string.h>

#include "ir/ir.h"

/* The value `name` as seen from g: an existing one of g or an enclosing scope, else a
 * new one in g. */
static inline AmpValue *val(AmpGraph *g, const char *name) {
    AmpValue *v = amp_graph_lookup(g, name);
    return v ? v : amp_graph_value(g, name);
}

/* Splits "a,b,,c" into at most 16 names ("" for a left-out slot); returns the count. */
static inline int split(const char *list, char names[16][32]) {
    if (!list || !*list) return 0;
    int n = 0;
    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        cr_assert(n < 16 && len < 32);
        memcpy(names[n], p, len);
        names[n++][len] = '\0';
        if (!e) return n;
        p = e + 1;
    }
}

/* outs = op(ins) in domain `dom`, appended to g; "" in a list leaves a slot out. */
static inline AmpNode *node_d(AmpGraph *g, const char *dom, const char *op, const char *name,
                                      const char *ins, const char *outs) {
    char in[16][32], out[16][32];
    int ni = split(ins, in), no = split(outs, out);
    AmpNode *n = amp_node_new(g, dom, op, name, ni, no);
    cr_assert_not_null(n);
    for (int i = 0; i < ni; i++)
        if (in[i][0]) amp_node_set_input(n, i, val(g, in[i]));
    for (int i = 0; i < no; i++)
        if (out[i][0]) amp_node_set_output(n, i, amp_graph_value(g, out[i]));
    amp_node_append(g, n);
    return n;
}

static inline AmpNode *node(AmpGraph *g, const char *op, const char *name, const char *ins, const char *outs) {
    return node_d(g, "", op, name, ins, outs);
}

#endif
