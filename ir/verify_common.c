/* What the verifier's three files share (verify.c walks the model, verify_op.c checks a
 * node against its op's rules, verify_train.c training_info's names and bindings): its
 * messages, which name the graph and the node, and the duplicate-name search. Calls
 * nothing of the verifier back. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/verify_impl.h"

/* ---- messages (built only on the error path) ------------------------------------- */

static const char *ATTR_TYPE_NAMES[] = {
    "UNDEFINED", "FLOAT",   "INT",     "STRING",        "TENSOR",         "GRAPH",
    "FLOATS",    "INTS",    "STRINGS", "TENSORS",       "GRAPHS",         "SPARSE_TENSOR",
    "SPARSE_TENSORS",       "TYPE_PROTO",               "TYPE_PROTOS"};
static_assert(sizeof ATTR_TYPE_NAMES / sizeof ATTR_TYPE_NAMES[0] == AMP_VERIFY_N_ATTR_TYPES,
              "a name per AmpAttrType");

const char *amp_verify_attr_type_name(int t) {
    return t >= 0 && t < AMP_VERIFY_N_ATTR_TYPES ? ATTR_TYPE_NAMES[t] : "invalid";
}

static const char *str_or(const char *s, const char *dflt) {
    return s && *s ? s : dflt;
}

/* A name for a graph in messages: its own name, else where it hangs ("main",
 * "<owner node>.<attribute>", "training_info[i].algorithm"). */
void amp_verify_graph_label(const AmpModel *m, const AmpGraph *g, char *buf, size_t len) {
    if (g->name && *g->name) {
        snprintf(buf, len, "%s", g->name);
        return;
    }
    if (g == m->graph) {
        snprintf(buf, len, "main");
        return;
    }
    for (size_t i = 0; i < m->n_training; i++) {
        if (m->training[i].algorithm == g) {
            snprintf(buf, len, "training_info[%zu].algorithm", i);
            return;
        }
        if (m->training[i].initialization == g) {
            snprintf(buf, len, "training_info[%zu].initialization", i);
            return;
        }
    }
    if (g->owner) {
        const AmpNode *o = g->owner;
        const char *attr = "?";
        for (size_t i = 0; i < o->n_attrs; i++) {
            const AmpAttr *a = &o->attrs[i];
            bool here = a->g == g;
            for (size_t k = 0; !here && k < a->n_graphs; k++) here = a->graphs[k] == g;
            if (here) attr = str_or(a->name, "?");
        }
        snprintf(buf, len, "%s.%s", str_or(o->name, str_or(o->op_type, "?")), attr);
        return;
    }
    snprintf(buf, len, "(unnamed)");
}

void amp_verify_node_label(const AmpNode *n, char *buf, size_t len) {
    const char *dom = amp_domain_is_default(n->domain) ? NULL : n->domain;
    if (n->name && *n->name)
        snprintf(buf, len, "node '%s' (%s%s%s)", n->name, dom ? dom : "", dom ? ":" : "",
                 str_or(n->op_type, "?"));
    else
        snprintf(buf, len, "node #%lu (%s%s%s)", (unsigned long)n->id, dom ? dom : "",
                 dom ? ":" : "", str_or(n->op_type, "?"));
}

bool amp_verify_shape_holds(const AmpType *ty, const AmpTensor *t) {
    if (ty->kind != AMP_TYPE_TENSOR || ty->rank < 0) return true;
    if (ty->rank != (int)t->ndims) return false;
    for (int d = 0; d < ty->rank; d++)
        if (ty->dims[d].value >= 0 && ty->dims[d].value != t->dims[d]) return false;
    return true;
}

void amp_verify_dims_text(const AmpDim *dims, int rank, const int64_t *values, char *buf, size_t len) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i <= rank && k + 1 < len; i++) {
        int w;
        if (i == rank) w = snprintf(buf + k, len - k, "]");
        else if (!dims) w = snprintf(buf + k, len - k, "%s%lld", i ? "," : "[", (long long)values[i]);
        else if (dims[i].value >= 0) w = snprintf(buf + k, len - k, "%s%lld", i ? "," : "[", (long long)dims[i].value);
        else w = snprintf(buf + k, len - k, "%s%s", i ? "," : "[", dims[i].param ? dims[i].param : "?");
        if (w < 0) break;
        k += (size_t)w;
    }
    if (rank == 0 && len > 2) snprintf(buf, len, "[]");
}

AmpCode amp_verify_fail(Ctx *c, AmpCode code, const AmpGraph *g, const AmpNode *n, const char *fmt, ...) {
    char gl[256], nl[320], msg[700];
    amp_verify_graph_label(c->m, g, gl, sizeof gl);
    if (n) amp_verify_node_label(n, nl, sizeof nl);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return amp_fail(c->st, code, "graph '%s': %s%s%s", gl, n ? nl : "", n ? ": " : "", msg);
}

/* ---- names ----------------------------------------------------------------------- */

int amp_verify_cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first name that occurs twice in names[0..n), or NULL. Sorts a copy when n is
 * large so a node with many attributes stays n log n. */
const char *amp_verify_find_duplicate(const char **names, size_t n, bool *oom) {
    *oom = false;
    if (n <= 16) {
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (strcmp(names[i], names[j]) == 0) return names[i];
        return NULL;
    }
    const char **s = malloc(n * sizeof *s);
    if (!s) {
        *oom = true;
        return NULL;
    }
    memcpy(s, names, n * sizeof *s);
    qsort(s, n, sizeof *s, amp_verify_cmp_str);
    const char *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(s[i - 1], s[i]) == 0) dup = s[i];
    free(s);
    return dup;
}
