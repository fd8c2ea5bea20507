/* IR -> ONNX. Builds a protobuf-c message tree that points into the model (no copies of
 * tensor data), starting each message from its `rest` blob so unmodelled and unknown
 * fields come back as they were, then streams it to a temporary file that is renamed
 * over the output only once everything is written. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "ir.h"
#include "onnx.pb-c.h"
#include "proto.h"

/* protobuf's hard limit for one message. */
#define AMP_PROTO_MAX ((size_t)INT32_MAX)

typedef struct SaveCtx {
    AmpModel *m;
    AmpArena a; /* the output message tree */
    ProtobufCMessage **unpacked; /* rest blobs unpacked by protobuf-c, freed at the end */
    size_t n_unpacked, cap_unpacked;
    bool external;            /* move tensor data to the data file */
    size_t external_min;      /* ...when at least this big */
    FILE *data_file;          /* open while writing external data */
    const char *data_name;    /* its name relative to the model */
    uint64_t data_off;
    bool failed;              /* a write or allocation failed */
    AmpStatus *st;
} SaveCtx;

static void *alloc(SaveCtx *c, size_t n) {
    void *p = amp_arena_alloc(&c->a, n);
    if (!p) c->failed = true;
    return p;
}

static void *alloc_n(SaveCtx *c, size_t n, size_t size) {
    if (!n) return NULL;
    void *p = amp_arena_calloc(&c->a, n, size);
    if (!p) c->failed = true;
    return p;
}

/* A fresh message of type `desc`, holding the fields of `rest`. The returned struct is
 * a shallow copy owned by the save arena; the unpacked original is freed at the end. */
static void *from_rest(SaveCtx *c, const ProtobufCMessageDescriptor *desc, AmpBytes rest) {
    void *msg = alloc(c, desc->sizeof_message);
    if (!msg) return NULL;
    if (!rest.len) {
        protobuf_c_message_init(desc, msg);
        return msg;
    }
    ProtobufCMessage *u = protobuf_c_message_unpack(desc, NULL, rest.len, rest.data);
    if (!u) {
        /* Only possible if the arena was corrupted: the blob was packed by us. */
        c->failed = true;
        protobuf_c_message_init(desc, msg);
        return msg;
    }
    if (c->n_unpacked == c->cap_unpacked) {
        size_t cap = c->cap_unpacked ? c->cap_unpacked * 2 : 64;
        ProtobufCMessage **p = realloc(c->unpacked, cap * sizeof *p);
        if (!p) {
            protobuf_c_message_free_unpacked(u, NULL);
            c->failed = true;
            protobuf_c_message_init(desc, msg);
            return msg;
        }
        c->unpacked = p;
        c->cap_unpacked = cap;
    }
    c->unpacked[c->n_unpacked++] = u;
    memcpy(msg, u, desc->sizeof_message);
    return msg;
}

static char *str(const char *s) {
    return (char *)s; /* protobuf-c wants char*; it never writes through it when packing */
}

static Onnx__StringStringEntryProto **save_pairs(SaveCtx *c, const AmpStrPair *p, size_t n) {
    Onnx__StringStringEntryProto **out = alloc_n(c, n, sizeof *out);
    for (size_t i = 0; out && i < n; i++) {
        out[i] = alloc(c, sizeof **out);
        if (!out[i]) return out;
        onnx__string_string_entry_proto__init(out[i]);
        out[i]->key = str(p[i].key);
        out[i]->value = str(p[i].value);
    }
    return out;
}

/* ---- tensors --------------------------------------------------------------------- */

static Onnx__StringStringEntryProto *pair(SaveCtx *c, const char *k, const char *v) {
    Onnx__StringStringEntryProto *e = alloc(c, sizeof *e);
    if (!e) return NULL;
    onnx__string_string_entry_proto__init(e);
    e->key = str(k);
    e->value = str(v);
    return e;
}

static char *fmt_u64(SaveCtx *c, uint64_t v) {
    char *s = alloc(c, 24);
    if (s) snprintf(s, 24, "%llu", (unsigned long long)v);
    return s;
}

/* Appends bytes to the external data file at a 64-byte aligned offset. */
static bool write_external(SaveCtx *c, Onnx__TensorProto *tp, AmpBytes bytes) {
    static const uint8_t zeros[64];
    size_t pad = (size_t)((64 - c->data_off % 64) % 64);
    if (pad && fwrite(zeros, 1, pad, c->data_file) != pad) return false;
    c->data_off += pad;
    if (bytes.len && fwrite(bytes.data, 1, bytes.len, c->data_file) != bytes.len) return false;
    tp->n_external_data = 3;
    tp->external_data = alloc_n(c, 3, sizeof *tp->external_data);
    if (!tp->external_data) return false;
    tp->external_data[0] = pair(c, "location", c->data_name);
    tp->external_data[1] = pair(c, "offset", fmt_u64(c, c->data_off));
    tp->external_data[2] = pair(c, "length", fmt_u64(c, bytes.len));
    tp->has_data_location = 1;
    tp->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    c->data_off += bytes.len;
    return true;
}

static Onnx__TensorProto *save_tensor(SaveCtx *c, AmpTensor *t) {
    Onnx__TensorProto *tp = from_rest(c, &onnx__tensor_proto__descriptor, t->rest);
    if (!tp) return NULL;
    tp->n_dims = t->ndims;
    tp->dims = t->dims;
    tp->has_data_type = (t->has & AMP_TENSOR_HAS_DTYPE) != 0;
    tp->data_type = t->dtype;
    tp->name = str(t->name);
    tp->doc_string = str(t->doc_string);

    size_t canon = 0;
    bool movable = t->dtype != AMP_DT_STRING && amp_tensor_expected_bytes(t->dtype, t->nelem, &canon);
    if (c->external && movable && canon >= c->external_min && canon > 0) {
        AmpBytes bytes;
        if (amp_tensor_bytes(c->m, t, &bytes, c->st) || !write_external(c, tp, bytes)) {
            c->failed = true;
            return tp;
        }
        return tp;
    }
    if (t->is_external) {
        /* External on load, inline now. */
        tp->has_raw_data = 1;
        tp->raw_data.len = t->raw.len;
        tp->raw_data.data = (uint8_t *)t->raw.data;
        return tp;
    }
    tp->n_float_data = t->n_float, tp->float_data = t->float_data;
    tp->n_int32_data = t->n_int32, tp->int32_data = t->int32_data;
    tp->n_int64_data = t->n_int64, tp->int64_data = t->int64_data;
    tp->n_double_data = t->n_double, tp->double_data = t->double_data;
    tp->n_uint64_data = t->n_uint64, tp->uint64_data = t->uint64_data;
    if (t->n_string) {
        tp->n_string_data = t->n_string;
        tp->string_data = alloc_n(c, t->n_string, sizeof *tp->string_data);
        for (size_t i = 0; tp->string_data && i < t->n_string; i++) {
            tp->string_data[i].len = t->string_data[i].len;
            tp->string_data[i].data = (uint8_t *)t->string_data[i].data;
        }
    }
    if (t->has & AMP_TENSOR_HAS_RAW) {
        tp->has_raw_data = 1;
        tp->raw_data.len = t->raw.len;
        tp->raw_data.data = (uint8_t *)t->raw.data;
    }
    tp->has_data_location = (t->has & AMP_TENSOR_HAS_LOCATION) != 0;
    tp->data_location = t->data_location;
    tp->n_external_data = t->n_external;
    tp->external_data = save_pairs(c, t->external, t->n_external);
    return tp;
}

/* ---- types and value infos ------------------------------------------------------- */

static Onnx__TypeProto *build_type(SaveCtx *c, const AmpType *t, const Onnx__TypeProto *old) {
    if (t->kind == AMP_TYPE_NONE) return NULL;
    if (t->kind == AMP_TYPE_OTHER) return (Onnx__TypeProto *)old;
    Onnx__TypeProto *tp = alloc(c, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = alloc(c, sizeof *tt);
    if (!tp || !tt) return NULL;
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    if (old) tp->denotation = old->denotation;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = t->dtype != AMP_DT_UNDEFINED;
    tt->elem_type = t->dtype;
    if (t->rank < 0) return tp;
    Onnx__TensorShapeProto *sh = alloc(c, sizeof *sh);
    if (!sh) return tp;
    onnx__tensor_shape_proto__init(sh);
    tt->shape = sh;
    sh->n_dim = (size_t)t->rank;
    sh->dim = alloc_n(c, sh->n_dim, sizeof *sh->dim);
    for (int i = 0; sh->dim && i < t->rank; i++) {
        Onnx__TensorShapeProto__Dimension *d = alloc(c, sizeof *d);
        if (!d) return tp;
        onnx__tensor_shape_proto__dimension__init(d);
        if (t->dims[i].value >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = t->dims[i].value;
        } else if (t->dims[i].param) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = str(t->dims[i].param);
        }
        sh->dim[i] = d;
    }
    return tp;
}

static Onnx__ValueInfoProto **save_vis(SaveCtx *c, const AmpValueInfoList *l) {
    Onnx__ValueInfoProto **out = alloc_n(c, l->n, sizeof *out);
    for (size_t i = 0; out && i < l->n; i++) {
        const AmpValueInfo *e = &l->items[i];
        Onnx__ValueInfoProto *vp = from_rest(c, &onnx__value_info_proto__descriptor, e->orig);
        if (!vp) return out;
        vp->name = str(e->value->name);
        if (!e->orig.len || !amp_type_equal(&e->value->type, &e->loaded))
            vp->type = build_type(c, &e->value->type, vp->type);
        out[i] = vp;
    }
    return out;
}

/* ---- nodes and graphs ------------------------------------------------------------ */

static Onnx__GraphProto *save_graph(SaveCtx *c, AmpGraph *g);

static Onnx__AttributeProto *save_attr(SaveCtx *c, AmpAttr *at) {
    Onnx__AttributeProto *ap = from_rest(c, &onnx__attribute_proto__descriptor, at->rest);
    if (!ap) return NULL;
    ap->name = str(at->name);
    ap->ref_attr_name = str(at->ref_attr_name);
    ap->doc_string = str(at->doc_string);
    ap->has_type = (at->has & AMP_ATTR_HAS_TYPE) != 0;
    ap->type = (Onnx__AttributeProto__AttributeType)at->type;
    ap->has_f = (at->has & AMP_ATTR_HAS_F) != 0;
    ap->f = at->f;
    ap->has_i = (at->has & AMP_ATTR_HAS_I) != 0;
    ap->i = at->i;
    ap->has_s = (at->has & AMP_ATTR_HAS_S) != 0;
    ap->s.len = at->s.len;
    ap->s.data = (uint8_t *)at->s.data;
    if (at->t) ap->t = save_tensor(c, at->t);
    if (at->g) ap->g = save_graph(c, at->g);
    ap->n_floats = at->n_floats, ap->floats = at->floats;
    ap->n_ints = at->n_ints, ap->ints = at->ints;
    if (at->n_strings) {
        ap->n_strings = at->n_strings;
        ap->strings = alloc_n(c, at->n_strings, sizeof *ap->strings);
        for (size_t i = 0; ap->strings && i < at->n_strings; i++) {
            ap->strings[i].len = at->strings[i].len;
            ap->strings[i].data = (uint8_t *)at->strings[i].data;
        }
    }
    if (at->n_tensors) {
        ap->n_tensors = at->n_tensors;
        ap->tensors = alloc_n(c, at->n_tensors, sizeof *ap->tensors);
        for (size_t i = 0; ap->tensors && i < at->n_tensors; i++) ap->tensors[i] = save_tensor(c, at->tensors[i]);
    }
    if (at->n_graphs) {
        ap->n_graphs = at->n_graphs;
        ap->graphs = alloc_n(c, at->n_graphs, sizeof *ap->graphs);
        for (size_t i = 0; ap->graphs && i < at->n_graphs; i++) ap->graphs[i] = save_graph(c, at->graphs[i]);
    }
    return ap;
}

static char **save_names(SaveCtx *c, AmpValue **vals, int n) {
    char **out = alloc_n(c, (size_t)n, sizeof *out);
    for (int i = 0; out && i < n; i++) out[i] = str(vals[i] ? vals[i]->name : "");
    return out;
}

static Onnx__NodeProto *save_node(SaveCtx *c, AmpNode *n) {
    Onnx__NodeProto *np = from_rest(c, &onnx__node_proto__descriptor, n->rest);
    if (!np) return NULL;
    np->n_input = (size_t)n->n_inputs;
    np->input = save_names(c, n->inputs, n->n_inputs);
    np->n_output = (size_t)n->n_outputs;
    np->output = save_names(c, n->outputs, n->n_outputs);
    np->name = str(n->name);
    np->op_type = str(n->op_type);
    np->domain = str(n->domain);
    np->doc_string = str(n->doc_string);
    np->n_attribute = n->n_attrs;
    np->attribute = alloc_n(c, n->n_attrs, sizeof *np->attribute);
    for (size_t i = 0; np->attribute && i < n->n_attrs; i++) np->attribute[i] = save_attr(c, &n->attrs[i]);
    return np;
}

static Onnx__GraphProto *save_graph(SaveCtx *c, AmpGraph *g) {
    Onnx__GraphProto *gp = from_rest(c, &onnx__graph_proto__descriptor, g->rest);
    if (!gp) return NULL;
    gp->name = str(g->name);
    gp->doc_string = str(g->doc_string);
    gp->n_node = g->n_nodes;
    gp->node = alloc_n(c, g->n_nodes, sizeof *gp->node);
    size_t i = 0;
    for (AmpNode *n = g->first; gp->node && n; n = n->next) gp->node[i++] = save_node(c, n);
    gp->n_initializer = g->n_initializers;
    gp->initializer = alloc_n(c, g->n_initializers, sizeof *gp->initializer);
    for (i = 0; gp->initializer && i < g->n_initializers; i++)
        gp->initializer[i] = save_tensor(c, g->initializers[i]);
    gp->n_input = g->inputs.n;
    gp->input = save_vis(c, &g->inputs);
    gp->n_output = g->outputs.n;
    gp->output = save_vis(c, &g->outputs);
    gp->n_value_info = g->value_info.n;
    gp->value_info = save_vis(c, &g->value_info);
    return gp;
}

static Onnx__ModelProto *save_model(SaveCtx *c) {
    AmpModel *m = c->m;
    Onnx__ModelProto *mp = from_rest(c, &onnx__model_proto__descriptor, m->rest);
    if (!mp) return NULL;
    mp->has_ir_version = (m->has & AMP_MODEL_HAS_IR_VERSION) != 0;
    mp->ir_version = m->ir_version;
    mp->has_model_version = (m->has & AMP_MODEL_HAS_MODEL_VERSION) != 0;
    mp->model_version = m->model_version;
    mp->producer_name = str(m->producer_name);
    mp->producer_version = str(m->producer_version);
    mp->domain = str(m->domain);
    mp->doc_string = str(m->doc_string);
    mp->n_opset_import = m->n_opsets;
    mp->opset_import = alloc_n(c, m->n_opsets, sizeof *mp->opset_import);
    for (size_t i = 0; mp->opset_import && i < m->n_opsets; i++) {
        Onnx__OperatorSetIdProto *op = alloc(c, sizeof *op);
        if (!op) break;
        onnx__operator_set_id_proto__init(op);
        op->domain = str(m->opsets[i].domain);
        op->has_version = m->opsets[i].has_version;
        op->version = m->opsets[i].version;
        mp->opset_import[i] = op;
    }
    mp->n_metadata_props = m->n_metadata;
    mp->metadata_props = save_pairs(c, m->metadata, m->n_metadata);
    mp->n_functions = m->n_functions;
    mp->functions = alloc_n(c, m->n_functions, sizeof *mp->functions);
    for (size_t i = 0; mp->functions && i < m->n_functions; i++)
        mp->functions[i] = from_rest(c, &onnx__function_proto__descriptor, m->functions[i].packed);
    mp->graph = save_graph(c, m->graph);
    mp->n_training_info = m->n_training;
    mp->training_info = alloc_n(c, m->n_training, sizeof *mp->training_info);
    for (size_t i = 0; mp->training_info && i < m->n_training; i++) {
        AmpTrainingInfo *ti = &m->training[i];
        Onnx__TrainingInfoProto *tp = from_rest(c, &onnx__training_info_proto__descriptor, ti->rest);
        if (!tp) break;
        if (ti->initialization) tp->initialization = save_graph(c, ti->initialization);
        if (ti->algorithm) tp->algorithm = save_graph(c, ti->algorithm);
        tp->n_initialization_binding = ti->n_init_bindings;
        tp->initialization_binding = save_pairs(c, ti->init_bindings, ti->n_init_bindings);
        tp->n_update_binding = ti->n_update_bindings;
        tp->update_binding = save_pairs(c, ti->update_bindings, ti->n_update_bindings);
        mp->training_info[i] = tp;
    }
    return mp;
}

static void ctx_free(SaveCtx *c) {
    for (size_t i = 0; i < c->n_unpacked; i++) protobuf_c_message_free_unpacked(c->unpacked[i], NULL);
    free(c->unpacked);
    amp_arena_free(&c->a);
}

/* ---- sizing ---------------------------------------------------------------------- */

static AmpCode sum_tensor_bytes(AmpGraph *g, void *ctx, AmpStatus *st) {
    (void)st;
    uint64_t *sum = ctx;
    size_t b;
    for (size_t i = 0; i < g->n_initializers; i++)
        if (amp_tensor_expected_bytes(g->initializers[i]->dtype, g->initializers[i]->nelem, &b)) *sum += b;
    for (AmpNode *n = g->first; n; n = n->next)
        for (size_t i = 0; i < n->n_attrs; i++)
            if (n->attrs[i].t && amp_tensor_expected_bytes(n->attrs[i].t->dtype, n->attrs[i].t->nelem, &b))
                *sum += b;
    return AMP_OK;
}

/* Leaves room for the graph structure below protobuf's 2 GB limit. */
static bool needs_external(AmpModel *m) {
    uint64_t sum = 0;
    amp_model_walk(m, sum_tensor_bytes, &sum, NULL);
    return sum > AMP_PROTO_MAX - (UINT64_C(64) << 20);
}

/* ---- output ---------------------------------------------------------------------- */

/* protobuf-c hands over each field separately (millions of small pieces for a big
 * graph): they are gathered here and written in large blocks. */
enum { FILE_BUFFER_BYTES = 1 << 16 };

typedef struct FileBuffer {
    ProtobufCBuffer base;
    FILE *f;
    bool failed;
    size_t used;
    uint8_t *buf; /* FILE_BUFFER_BYTES */
} FileBuffer;

static void file_flush(FileBuffer *fb) {
    if (!fb->failed && fb->used && fwrite(fb->buf, 1, fb->used, fb->f) != fb->used) fb->failed = true;
    fb->used = 0;
}

static void file_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
    FileBuffer *fb = (FileBuffer *)b;
    if (fb->failed || !len) return;
    if (fb->used + len > FILE_BUFFER_BYTES) file_flush(fb);
    if (len >= FILE_BUFFER_BYTES) {
        if (fwrite(data, 1, len, fb->f) != len) fb->failed = true;
        return;
    }
    memcpy(fb->buf + fb->used, data, len);
    fb->used += len;
}

/* A new file beside `path` (so the final rename stays on one filesystem), created
 * O_EXCL with mode 0666 so the umask applies as it would to a plain fopen. */
static FILE *open_temp(const char *path, char **tmp_out, AmpStatus *st) {
    static unsigned long counter;
    size_t n = strlen(path) + 48;
    char *tmp = malloc(n);
    if (!tmp) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory"), NULL;
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(tmp, n, "%s.tmp.%ld.%lu", path, (long)getpid(), counter++);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        amp_fail(st, AMP_ERR_INPUT, "%s: cannot create a file there: %s", path, strerror(errno));
        free(tmp);
        return NULL;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        free(tmp);
        amp_fail(st, AMP_ERR_INTERNAL, "%s: fdopen failed", path);
        return NULL;
    }
    *tmp_out = tmp;
    return f;
}

/* Flushes, syncs and closes; false (errno set) on any failure. */
static bool close_synced(FILE *f) {
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    return fclose(f) == 0 && ok;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

AmpCode amp_model_save_file(AmpModel *m, const char *path, const AmpSaveOptions *opt, AmpStatus *st) {
    AmpSaveOptions dflt = {AMP_SAVE_EXTERNAL_AUTO, 1024};
    if (!opt) opt = &dflt;
    SaveCtx c = {0};
    amp_arena_init(&c.a);
    c.m = m;
    c.st = st;
    c.external = opt->external == AMP_SAVE_EXTERNAL_ALWAYS ||
                 (opt->external == AMP_SAVE_EXTERNAL_AUTO && needs_external(m));
    c.external_min = opt->external_min_bytes;

    char *tmp = NULL, *data_tmp = NULL, *data_path = NULL;
    FILE *f = NULL;
    AmpCode rc = AMP_OK;
    if (c.external) {
        size_t n = strlen(path) + 6;
        data_path = malloc(n);
        if (!data_path) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
            goto out;
        }
        snprintf(data_path, n, "%s.data", path);
        c.data_name = base_name(data_path);
        if (!(c.data_file = open_temp(data_path, &data_tmp, st))) {
            rc = st ? st->code : AMP_ERR_INTERNAL;
            goto out;
        }
    }
    Onnx__ModelProto *mp = save_model(&c);
    if (c.failed || !mp) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "%s: building the output failed (out of memory or I/O error)", path);
        goto out;
    }
    size_t size = onnx__model_proto__get_packed_size(mp);
    if (size > AMP_PROTO_MAX) {
        rc = amp_fail(st, AMP_ERR_UNSUPPORTED,
                      "%s: the model is %zu bytes, over protobuf's 2 GB limit; save with external data", path,
                      size);
        goto out;
    }
    if (!(f = open_temp(path, &tmp, st))) {
        rc = st ? st->code : AMP_ERR_INTERNAL;
        goto out;
    }
    FileBuffer fb = {{file_append}, f, false, 0, malloc(FILE_BUFFER_BYTES)};
    if (!fb.buf) fb.failed = true;
    else onnx__model_proto__pack_to_buffer(mp, &fb.base);
    file_flush(&fb);
    free(fb.buf);
    bool ok = !fb.failed;
    ok = close_synced(f) && ok;
    f = NULL;
    if (ok && c.data_file) {
        ok = close_synced(c.data_file);
        c.data_file = NULL;
        if (ok && c.data_off == 0) {
            /* Nothing was big enough to move out: no data file. */
            unlink(data_tmp);
        } else if (ok) {
            ok = rename(data_tmp, data_path) == 0;
        }
        if (ok) {
            free(data_tmp);
            data_tmp = NULL;
        }
    }
    if (!ok || rename(tmp, path) != 0) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "%s: writing failed: %s", path, strerror(errno));
        goto out;
    }
    free(tmp);
    tmp = NULL;
out:
    if (f) fclose(f);
    if (tmp) unlink(tmp), free(tmp);
    if (c.data_file) fclose(c.data_file);
    if (data_tmp) unlink(data_tmp), free(data_tmp);
    free(data_path);
    ctx_free(&c);
    return rc;
}

AmpCode amp_model_save_bytes(AmpModel *m, uint8_t **out, size_t *len, AmpStatus *st) {
    *out = NULL;
    *len = 0;
    SaveCtx c = {0};
    amp_arena_init(&c.a);
    c.m = m;
    c.st = st;
    AmpCode rc = AMP_OK;
    Onnx__ModelProto *mp = save_model(&c);
    if (c.failed || !mp) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "building the output failed (out of memory)");
    } else {
        size_t size = onnx__model_proto__get_packed_size(mp);
        if (size > AMP_PROTO_MAX) {
            rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "the model is %zu bytes, over protobuf's 2 GB limit", size);
        } else if (!(*out = malloc(size ? size : 1))) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        } else {
            *len = onnx__model_proto__pack(mp, *out);
        }
    }
    ctx_free(&c);
    return rc;
}

AmpCode amp_tensor_save_bytes(AmpModel *m, AmpTensor *t, uint8_t **out, size_t *len, AmpStatus *st) {
    *out = NULL;
    *len = 0;
    SaveCtx c = {0};
    amp_arena_init(&c.a);
    c.m = m;
    c.st = st;
    AmpCode rc = AMP_OK;
    Onnx__TensorProto *tp = save_tensor(&c, t);
    if (c.failed || !tp) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "tensor '%s': building the output failed (out of memory)",
                      t->name ? t->name : "");
    } else {
        size_t size = onnx__tensor_proto__get_packed_size(tp);
        if (size > AMP_PROTO_MAX) {
            rc = amp_fail(st, AMP_ERR_UNSUPPORTED, "tensor '%s' is %zu bytes, over protobuf's 2 GB limit",
                          t->name ? t->name : "", size);
        } else if (!(*out = malloc(size ? size : 1))) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        } else {
            *len = onnx__tensor_proto__pack(tp, *out);
        }
    }
    ctx_free(&c);
    return rc;
}
