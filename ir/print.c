/* The text dump of a model, for --dump-after, --print and test expectations: a header,
 * then each graph's inputs, initializers (no data), one line per node and outputs, with
 * subgraphs indented under their node, then training info. File order everywhere, no
 * pointers or ids, so the output is stable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* Lists longer than this are cut ("... (N total)"); small constant tensors show data. */
enum { MAX_LIST = 16, MAX_TENSOR_DATA = 8 };

static void indent(FILE *f, int level) {
    for (int i = 0; i < level; i++) fputs("  ", f);
}

/* Shortest %g form that reads back as the same number, so 0.1f prints as 0.1. */
static void fmt_float(char *buf, size_t len, double x, bool single) {
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, x);
        if (single ? strtof(buf, NULL) == (float)x : strtod(buf, NULL) == x) break;
    }
}

static void put_float(FILE *f, double x, bool single) {
    char buf[40];
    fmt_float(buf, sizeof buf, x, single);
    fputs(buf, f);
}

static void put_quoted(FILE *f, const uint8_t *s, size_t len) {
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        uint8_t ch = s[i];
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch < 0x20 || ch == 0x7f) fprintf(f, "\\x%02x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void put_cstr_quoted(FILE *f, const char *s) {
    put_quoted(f, (const uint8_t *)(s ? s : ""), s ? strlen(s) : 0);
}

/* float[N,3,224,224]; float[] is a scalar, float[*] an unknown rank, ? an unknown dim. */
static void put_type(FILE *f, const AmpType *t) {
    if (t->kind == AMP_TYPE_NONE) {
        fputc('?', f);
        return;
    }
    if (t->kind == AMP_TYPE_OTHER) {
        fputs("opaque", f);
        return;
    }
    fputs(t->dtype == AMP_DT_UNDEFINED ? "?" : amp_dtype_name(t->dtype), f);
    if (t->rank < 0) {
        fputs("[*]", f);
        return;
    }
    fputc('[', f);
    for (int i = 0; i < t->rank; i++) {
        if (i) fputc(',', f);
        const AmpDim *d = &t->dims[i];
        if (d->param && *d->param) fputs(d->param, f);
        else if (d->value >= 0) fprintf(f, "%lld", (long long)d->value);
        else fputc('?', f);
    }
    fputc(']', f);
}

/* name, or name: type (`sep` is ": " for declarations, ":" on node lines). */
static void put_value(FILE *f, const AmpValue *v, const char *sep) {
    if (!v) {
        fputs("\"\"", f);
        return;
    }
    fputs(v->name, f);
    if (v->type.kind == AMP_TYPE_NONE) return;
    fputs(sep, f);
    put_type(f, &v->type);
}

static void put_dims(FILE *f, const AmpTensor *t) {
    fputc('[', f);
    for (size_t i = 0; i < t->ndims; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    fputc(']', f);
}

/* Element i of a small tensor as text, for the common dtypes; false when the data is
 * not at hand (external, or a dtype not shown). Raw data is little-endian. */
static bool elem_text(const AmpTensor *t, size_t i, char *buf, size_t len) {
    bool raw = (t->has & AMP_TENSOR_HAS_RAW) && !t->is_external;
    size_t bytes = amp_dtype_bits(t->dtype) / 8;
    uint64_t u = 0;
    if (raw) {
        if (!bytes || (i + 1) * bytes > t->raw.len || !t->raw.data) return false;
        for (size_t b = 0; b < bytes; b++) u |= (uint64_t)t->raw.data[i * bytes + b] << (8 * b);
    }
    switch (t->dtype) {
    case AMP_DT_FLOAT: {
        float x;
        uint32_t w = (uint32_t)u;
        if (raw) memcpy(&x, &w, sizeof x);
        else if (i < t->n_float) x = t->float_data[i];
        else return false;
        fmt_float(buf, len, x, true);
        return true;
    }
    case AMP_DT_DOUBLE: {
        double x;
        if (raw) memcpy(&x, &u, sizeof x);
        else if (i < t->n_double) x = t->double_data[i];
        else return false;
        fmt_float(buf, len, x, false);
        return true;
    }
    case AMP_DT_INT64:
        if (!raw && i >= t->n_int64) return false;
        snprintf(buf, len, "%lld", raw ? (long long)(int64_t)u : (long long)t->int64_data[i]);
        return true;
    case AMP_DT_INT32:
    case AMP_DT_INT16:
    case AMP_DT_INT8: {
        if (!raw && i >= t->n_int32) return false;
        int64_t x = t->n_int32 > i && !raw ? t->int32_data[i] : 0;
        if (raw) { /* sign-extend the low `bytes` bytes */
            uint64_t sign = (uint64_t)1 << (8 * bytes - 1);
            x = (int64_t)((u ^ sign) - sign);
        }
        snprintf(buf, len, "%lld", (long long)x);
        return true;
    }
    case AMP_DT_UINT8:
    case AMP_DT_UINT16:
    case AMP_DT_BOOL:
        if (!raw && i >= t->n_int32) return false;
        snprintf(buf, len, "%llu",
                 raw ? (unsigned long long)u : (unsigned long long)(uint32_t)t->int32_data[i]);
        return true;
    default: return false;
    }
}

/* float[2,3], or float[3]{1, 2, 3} when small enough to show. */
static void put_tensor(FILE *f, const AmpTensor *t) {
    fputs(amp_dtype_name(t->dtype), f);
    put_dims(f, t);
    if (t->is_external || t->data_location == 1) {
        fputs(" external", f);
        return;
    }
    if (t->nelem > MAX_TENSOR_DATA) return;
    char text[MAX_TENSOR_DATA][40];
    for (size_t i = 0; i < t->nelem; i++)
        if (!elem_text(t, i, text[i], sizeof text[i])) return; /* all or nothing */
    fputc('{', f);
    for (size_t i = 0; i < t->nelem; i++) fprintf(f, "%s%s", i ? ", " : "", text[i]);
    fputc('}', f);
}

static void put_graph_ref(FILE *f, const AmpGraph *g) {
    fputs("graph", f);
    if (g && g->name && *g->name) fprintf(f, " '%s'", g->name);
}

static void put_attr_value(FILE *f, const AmpAttr *a) {
    if (a->ref_attr_name && *a->ref_attr_name) {
        fprintf(f, "@%s", a->ref_attr_name);
        return;
    }
    size_t n = 0;
    switch (a->type) {
    case AMP_ATTR_FLOAT: put_float(f, a->f, true); return;
    case AMP_ATTR_INT: fprintf(f, "%lld", (long long)a->i); return;
    case AMP_ATTR_STRING: put_quoted(f, a->s.data, a->s.len); return;
    case AMP_ATTR_TENSOR:
        if (a->t) put_tensor(f, a->t);
        else fputs("<no tensor>", f);
        return;
    case AMP_ATTR_GRAPH: put_graph_ref(f, a->g); return;
    case AMP_ATTR_FLOATS: n = a->n_floats; break;
    case AMP_ATTR_INTS: n = a->n_ints; break;
    case AMP_ATTR_STRINGS: n = a->n_strings; break;
    case AMP_ATTR_TENSORS: n = a->n_tensors; break;
    case AMP_ATTR_GRAPHS: n = a->n_graphs; break;
    case AMP_ATTR_SPARSE_TENSOR: fputs("<sparse tensor>", f); return;
    case AMP_ATTR_SPARSE_TENSORS: fputs("<sparse tensors>", f); return;
    case AMP_ATTR_TYPE_PROTO: fputs("<type>", f); return;
    case AMP_ATTR_TYPE_PROTOS: fputs("<types>", f); return;
    default: fprintf(f, "<type %d>", a->type); return;
    }
    fputc('[', f);
    for (size_t i = 0; i < n && i < MAX_LIST; i++) {
        if (i) fputs(", ", f);
        switch (a->type) {
        case AMP_ATTR_FLOATS: put_float(f, a->floats[i], true); break;
        case AMP_ATTR_INTS: fprintf(f, "%lld", (long long)a->ints[i]); break;
        case AMP_ATTR_STRINGS: put_quoted(f, a->strings[i].data, a->strings[i].len); break;
        case AMP_ATTR_TENSORS:
            if (a->tensors[i]) put_tensor(f, a->tensors[i]);
            break;
        default: put_graph_ref(f, a->graphs[i]); break;
        }
    }
    if (n > MAX_LIST) fprintf(f, ", ... (%zu total)", n);
    fputc(']', f);
}

static void print_graph(FILE *f, const AmpGraph *g, int level);

/* y:float[1,10] = Gemm(x, w, b) {alpha=1, transB=1}  # name, then its subgraphs. */
static void print_node(FILE *f, const AmpNode *n, int level) {
    indent(f, level);
    for (int i = 0; i < n->n_outputs; i++) {
        if (i) fputs(", ", f);
        put_value(f, n->outputs[i], ":");
    }
    if (n->n_outputs) fputs(" = ", f);
    if (!amp_domain_is_default(n->domain)) fprintf(f, "%s::", n->domain);
    fprintf(f, "%s(", n->op_type ? n->op_type : "?");
    for (int i = 0; i < n->n_inputs; i++) {
        if (i) fputs(", ", f);
        fputs(n->inputs[i] ? n->inputs[i]->name : "\"\"", f);
    }
    fputc(')', f);
    if (n->n_attrs) {
        fputs(" {", f);
        for (size_t i = 0; i < n->n_attrs; i++) {
            if (i) fputs(", ", f);
            fprintf(f, "%s=", n->attrs[i].name ? n->attrs[i].name : "?");
            put_attr_value(f, &n->attrs[i]);
        }
        fputc('}', f);
    }
    if (n->name && *n->name) fprintf(f, "  # %s", n->name);
    fputc('\n', f);
    for (size_t i = 0; i < n->n_attrs; i++) {
        const AmpAttr *a = &n->attrs[i];
        if (a->type == AMP_ATTR_GRAPH && a->g) {
            indent(f, level + 1);
            fprintf(f, "%s: ", a->name ? a->name : "?");
            print_graph(f, a->g, level + 1);
        }
        for (size_t k = 0; a->type == AMP_ATTR_GRAPHS && k < a->n_graphs; k++) {
            indent(f, level + 1);
            fprintf(f, "%s[%zu]: ", a->name ? a->name : "?", k);
            print_graph(f, a->graphs[k], level + 1);
        }
    }
}

/* Prints "graph 'name' {" (the caller has indented), the body, and "}". */
static void print_graph(FILE *f, const AmpGraph *g, int level) {
    put_graph_ref(f, g);
    fputs(" {\n", f);
    if (!g) {
        indent(f, level);
        fputs("}\n", f);
        return;
    }
    for (size_t i = 0; i < g->inputs.n; i++) {
        indent(f, level + 1);
        fputs("input ", f);
        put_value(f, g->inputs.items[i].value, ": ");
        fputc('\n', f);
    }
    for (size_t i = 0; i < g->n_initializers; i++) {
        const AmpTensor *t = g->initializers[i];
        indent(f, level + 1);
        fprintf(f, "init %s: %s", t->name ? t->name : "?", amp_dtype_name(t->dtype));
        put_dims(f, t);
        if (t->is_external || t->data_location == 1) fputs(" external", f);
        fputc('\n', f);
    }
    for (const AmpNode *n = g->first; n; n = n->next) print_node(f, n, level + 1);
    for (size_t i = 0; i < g->outputs.n; i++) {
        indent(f, level + 1);
        fputs("output ", f);
        put_value(f, g->outputs.items[i].value, ": ");
        fputc('\n', f);
    }
    indent(f, level);
    fputs("}\n", f);
}

static void print_bindings(FILE *f, const char *what, const AmpStrPair *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  %s %s <- %s\n", what, b[i].key ? b[i].key : "", b[i].value ? b[i].value : "");
}

void amp_print_model(FILE *f, const AmpModel *m) {
    fputs("model", f);
    if (m->has & AMP_MODEL_HAS_IR_VERSION) fprintf(f, " ir_version=%lld", (long long)m->ir_version);
    if (m->has & AMP_MODEL_HAS_MODEL_VERSION)
        fprintf(f, " model_version=%lld", (long long)m->model_version);
    if (m->producer_name && *m->producer_name) {
        fputs(" producer=", f);
        put_cstr_quoted(f, m->producer_name);
        if (m->producer_version && *m->producer_version) {
            fputc(' ', f);
            put_cstr_quoted(f, m->producer_version);
        }
    }
    if (m->domain && *m->domain) fprintf(f, " domain=%s", m->domain);
    fputc('\n', f);
    for (size_t i = 0; i < m->n_opsets; i++) {
        const char *d = m->opsets[i].domain;
        fprintf(f, "opset %s %lld\n", d && *d ? d : "ai.onnx", (long long)m->opsets[i].version);
    }
    for (size_t i = 0; i < m->n_metadata; i++) {
        fprintf(f, "metadata %s = ", m->metadata[i].key ? m->metadata[i].key : "");
        put_cstr_quoted(f, m->metadata[i].value);
        fputc('\n', f);
    }
    for (size_t i = 0; i < m->n_functions; i++)
        fprintf(f, "function %s::%s (kept packed)\n",
                m->functions[i].domain && *m->functions[i].domain ? m->functions[i].domain
                                                                   : "ai.onnx",
                m->functions[i].name ? m->functions[i].name : "?");
    print_graph(f, m->graph, 0);
    for (size_t i = 0; i < m->n_training; i++) {
        const AmpTrainingInfo *ti = &m->training[i];
        fprintf(f, "training_info[%zu] {\n", i);
        if (ti->initialization) {
            fputs("  initialization: ", f);
            print_graph(f, ti->initialization, 1);
        }
        if (ti->algorithm) {
            fputs("  algorithm: ", f);
            print_graph(f, ti->algorithm, 1);
        }
        print_bindings(f, "initialization_binding", ti->init_bindings, ti->n_init_bindings);
        print_bindings(f, "update_binding", ti->update_bindings, ti->n_update_bindings);
        fputs("}\n", f);
    }
}
