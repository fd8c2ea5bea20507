/* The adapters of the opset upgrade (opset_impl.h): one row per ai.onnx op and opset at
 * which the op's signature or meaning changed (ONNX's Changelog.md); every other version
 * bump of the ops up to AMP_OPSET_UPGRADE_MAX only adds types or attributes whose
 * defaults keep the old meaning. Attributes that became inputs become initializers. */
#include <float.h>
#include <string.h>

#include "passes/opset_impl.h"

#define OOM(err) (*(err) = AMP_ERR_INTERNAL, "out of memory")

static AmpAttr *attr(AmpNode *n, const char *name) {
    for (size_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].name && strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

static void drop_attr(AmpNode *n, const char *name) {
    for (size_t i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].name && strcmp(n->attrs[i].name, name) == 0) {
            memmove(&n->attrs[i], &n->attrs[i + 1], (n->n_attrs - i - 1) * sizeof *n->attrs);
            n->n_attrs--;
            return;
        }
}

static bool set_int(AmpNode *n, const char *name, int64_t v) {
    AmpAttr *a = attr(n, name);
    if (!a && !(a = amp_node_add_attr(n, name, AMP_ATTR_INT))) return false;
    a->type = AMP_ATTR_INT;
    a->has = AMP_ATTR_HAS_TYPE | AMP_ATTR_HAS_I;
    a->i = v;
    return true;
}

static bool set_string(AmpNode *n, const char *name, const char *s) {
    AmpAttr *a = attr(n, name);
    if (!a && !(a = amp_node_add_attr(n, name, AMP_ATTR_STRING))) return false;
    char *copy = amp_arena_strdup(&n->graph->model->arena, s);
    if (!copy) return false;
    a->type = AMP_ATTR_STRING;
    a->has = AMP_ATTR_HAS_TYPE | AMP_ATTR_HAS_S;
    a->s = (AmpBytes){(const uint8_t *)copy, strlen(copy)};
    return true;
}

static bool string_is(const AmpAttr *a, const char *s) {
    return a && a->s.len == strlen(s) && memcmp(a->s.data, s, a->s.len) == 0;
}

/* A new initializer of n's graph named from n: `count` elements of `dtype` (int64 or
 * float32) from `data`, a 1-D tensor, or a scalar when `scalar`. */
static AmpValue *constant(AmpNode *n, const char *what, int dtype, const void *data, size_t count, bool scalar) {
    AmpGraph *g = n->graph;
    AmpArena *a = &g->model->arena;
    char base[160];
    snprintf(base, sizeof base, "%s_%s", n->name && *n->name ? n->name : n->op_type, what);
    AmpValue *v = amp_graph_new_value(g, base);
    AmpTensor *t = amp_arena_alloc(a, sizeof *t);
    size_t esize = dtype == AMP_DT_INT64 ? 8 : 4;
    uint8_t *b = amp_arena_alloc(a, count * esize + 1);
    int64_t *dims = amp_arena_alloc(a, sizeof *dims);
    AmpDim *tdims = amp_arena_alloc(a, sizeof *tdims);
    if (!v || !t || !b || !dims || !tdims) return NULL;
    if (count) memcpy(b, data, count * esize);
    t->dtype = dtype;
    t->has = AMP_TENSOR_HAS_DTYPE | AMP_TENSOR_HAS_RAW;
    t->ndims = scalar ? 0 : 1;
    dims[0] = (int64_t)count;
    t->dims = scalar ? NULL : dims;
    t->nelem = count;
    t->raw = (AmpBytes){b, count * esize};
    v->type = (AmpType){AMP_TYPE_TENSOR, dtype, scalar ? 0 : 1, scalar ? NULL : tdims};
    tdims->value = (int64_t)count;
    return amp_graph_add_initializer(g, v, t) ? NULL : v;
}

static AmpValue *ints_input(AmpNode *n, const AmpAttr *a, const char *what) {
    return constant(n, what, AMP_DT_INT64, a->ints, a->n_ints, false);
}

static AmpValue *float_scalar(AmpNode *n, const char *what, float f) {
    return constant(n, what, AMP_DT_FLOAT, &f, 1, true);
}

/* n rebuilt as `op_type` with `n_inputs` input slots (its inputs first, the rest empty)
 * and its attributes but those named in `drop` (NULL-terminated); n is deleted. */
static AmpNode *rebuild(AmpNode *n, const char *op_type, int n_inputs, const char *const *drop) {
    AmpNode *r = amp_node_new(n->graph, n->domain, op_type, n->name, n_inputs, n->n_outputs);
    AmpAttr *attrs = r && n->n_attrs ? amp_arena_calloc(&n->graph->model->arena, n->n_attrs, sizeof *attrs) : NULL;
    if (!r || (n->n_attrs && !attrs)) return NULL;
    for (size_t i = 0; i < n->n_attrs; i++) {
        bool keep = true;
        for (const char *const *d = drop; d && *d && keep; d++) keep = strcmp(n->attrs[i].name, *d) != 0;
        if (keep) attrs[r->n_attrs++] = n->attrs[i];
    }
    r->attrs = attrs;
    r->doc_string = n->doc_string;
    r->rest = n->rest;
    r->origin = n->origin;
    for (int i = 0; i < n_inputs && i < n->n_inputs; i++)
        if (n->inputs[i] && amp_node_set_input(r, i, n->inputs[i])) return NULL;
    AmpValue **outs = n->outputs;
    amp_node_insert_before(n, r);
    amp_node_delete(n); /* clears its outputs' producer: set below */
    for (int i = 0; i < r->n_outputs; i++) amp_node_set_output(r, i, outs[i]);
    return r;
}

/* ---- attributes that became inputs ------------------------------------------------- */

/* `name` (ints) into input `slot`, for ReduceSum-13, Reduce*-18, Squeeze and Unsqueeze-13,
 * Split-13 (`split`), Slice-10 (starts, ends, axes). */
static const char *ints_to_inputs(AmpNode *n, bool apply, AmpCode *err, const char *const *names, int n_names,
                                  bool required) {
    int last = -1;
    for (int k = 0; k < n_names; k++) {
        AmpAttr *a = attr(n, names[k]);
        if (a && a->type != AMP_ATTR_INTS) return "an attribute that should be ints is not";
        if (a) last = k;
    }
    if (last < 0) return required ? "a required attribute is missing" : NULL;
    if (n->n_inputs > 1) return "already has the inputs of the newer form";
    if (!apply) return NULL;
    AmpValue *vals[4] = {NULL};
    for (int k = 0; k <= last; k++) {
        AmpAttr *a = attr(n, names[k]);
        if (a && !(vals[k] = ints_input(n, a, names[k]))) return OOM(err);
    }
    AmpNode *r = rebuild(n, n->op_type, 1 + last + 1, names);
    if (!r) return OOM(err);
    for (int k = 0; k <= last; k++)
        if (vals[k] && amp_node_set_input(r, 1 + k, vals[k])) return OOM(err);
    return NULL;
}

static const char *axes_to_input(AmpNode *n, bool apply, AmpCode *err) {
    static const char *const names[] = {"axes", NULL};
    return ints_to_inputs(n, apply, err, names, 1, strcmp(n->op_type, "Unsqueeze") == 0);
}

static const char *split_13(AmpNode *n, bool apply, AmpCode *err) {
    static const char *const names[] = {"split", NULL};
    return ints_to_inputs(n, apply, err, names, 1, false);
}

static const char *slice_10(AmpNode *n, bool apply, AmpCode *err) {
    static const char *const names[] = {"starts", "ends", "axes", NULL};
    if (!attr(n, "starts") || !attr(n, "ends")) return "starts or ends missing";
    return ints_to_inputs(n, apply, err, names, 3, true);
}

/* Split-18 needs the count of outputs when no `split` input gives the sizes. */
static const char *split_18(AmpNode *n, bool apply, AmpCode *err) {
    if ((n->n_inputs > 1 && n->inputs[1]) || attr(n, "split")) return NULL;
    if (apply && !set_int(n, "num_outputs", n->n_outputs)) return OOM(err);
    return NULL;
}

static const char *topk_10(AmpNode *n, bool apply, AmpCode *err) {
    AmpAttr *k = attr(n, "k");
    if (!k || k->type != AMP_ATTR_INT) return "no k attribute";
    if (!apply) return NULL;
    int64_t kv = k->i;
    AmpValue *v = constant(n, "k", AMP_DT_INT64, &kv, 1, false);
    static const char *const drop[] = {"k", NULL};
    AmpNode *r = v ? rebuild(n, n->op_type, 2, drop) : NULL;
    if (!r || amp_node_set_input(r, 1, v)) return OOM(err);
    return NULL;
}

static bool f32_input(const AmpNode *n) {
    const AmpValue *x = n->n_inputs ? n->inputs[0] : NULL;
    return x && x->type.kind == AMP_TYPE_TENSOR && x->type.dtype == AMP_DT_FLOAT;
}

static const char *pad_11(AmpNode *n, bool apply, AmpCode *err) {
    AmpAttr *pads = attr(n, "pads"), *value = attr(n, "value");
    if (!pads || pads->type != AMP_ATTR_INTS) return "no pads attribute";
    bool has_value = value && value->f != 0;
    if (has_value && !f32_input(n)) return "a constant value for data that is not float32";
    if (!apply) return NULL;
    AmpValue *p = ints_input(n, pads, "pads"), *c = has_value ? float_scalar(n, "value", value->f) : NULL;
    static const char *const drop[] = {"pads", "value", NULL};
    AmpNode *r = p && (c || !has_value) ? rebuild(n, n->op_type, has_value ? 3 : 2, drop) : NULL;
    if (!r || amp_node_set_input(r, 1, p) || (c && amp_node_set_input(r, 2, c))) return OOM(err);
    return NULL;
}

static const char *clip_11(AmpNode *n, bool apply, AmpCode *err) {
    AmpAttr *lo = attr(n, "min"), *hi = attr(n, "max");
    if (!lo && !hi) return NULL;
    if (!f32_input(n)) return "min or max for data that is not float32";
    if (!apply) return NULL;
    AmpValue *l = lo ? float_scalar(n, "min", lo->f) : NULL, *h = hi ? float_scalar(n, "max", hi->f) : NULL;
    static const char *const drop[] = {"min", "max", NULL};
    AmpNode *r = (l || !lo) && (h || !hi) ? rebuild(n, n->op_type, hi ? 3 : 2, drop) : NULL;
    if (!r || (l && amp_node_set_input(r, 1, l)) || (h && amp_node_set_input(r, 2, h))) return OOM(err);
    return NULL;
}

static bool output_read(const AmpNode *n, int i) {
    const AmpValue *v = i < n->n_outputs ? n->outputs[i] : NULL;
    return v && (v->n_uses || (v->flags & AMP_VALUE_OUTPUT));
}

/* Dropout-10's mask is bool (it was of the data's type): an unread mask's declared type
 * becomes bool. */
static const char *dropout_10(AmpNode *n, bool apply, AmpCode *err) {
    (void)err;
    if (output_read(n, 1)) return "its mask output is read, and the mask's type changes";
    AmpValue *mask = n->n_outputs > 1 ? n->outputs[1] : NULL;
    if (apply && mask && mask->type.kind == AMP_TYPE_TENSOR) mask->type.dtype = AMP_DT_BOOL;
    return NULL;
}

static const char *dropout_12(AmpNode *n, bool apply, AmpCode *err) {
    AmpAttr *ratio = attr(n, "ratio");
    if (!ratio || !apply) return NULL;
    AmpValue *v = float_scalar(n, "ratio", ratio->f);
    static const char *const drop[] = {"ratio", NULL};
    AmpNode *r = v ? rebuild(n, n->op_type, 2, drop) : NULL;
    if (!r || amp_node_set_input(r, 1, v)) return OOM(err);
    return NULL;
}

static const char *batchnorm_9(AmpNode *n, bool apply, AmpCode *err) {
    (void)err;
    AmpAttr *s = attr(n, "spatial");
    if (s && s->i != 1) return "spatial=0 has no later form";
    if (s && apply) drop_attr(n, "spatial");
    return NULL;
}

/* BatchNormalization-14 says training by an attribute, not by its outputs' count. */
static const char *batchnorm_14(AmpNode *n, bool apply, AmpCode *err) {
    (void)apply, (void)err;
    for (int i = 1; i < n->n_outputs; i++)
        if (n->outputs[i]) return "it has training outputs";
    return NULL;
}

/* ---- Softmax, LogSoftmax, Hardmax: from 13 on the op works along one axis ---------- */

/* Before 13 the input was coerced to 2-D at `axis` (default 1) and the op ran along the
 * second dim: along the last axis that is the same; otherwise Flatten, the op along
 * axis -1, and a Reshape back to the input's shape. */
static const char *softmax_13(AmpNode *n, bool apply, AmpCode *err) {
    const AmpValue *x = n->n_inputs ? n->inputs[0] : NULL;
    if (!x || x->type.kind != AMP_TYPE_TENSOR || x->type.rank < 1) return "its input's rank is unknown";
    int rank = x->type.rank;
    int64_t axis = amp_node_attr_int(n, "axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return "its axis is out of range";
    if (!apply) return NULL;
    if (!set_int(n, "axis", -1)) return OOM(err);
    if (axis == rank - 1) return NULL;
    AmpGraph *g = n->graph;
    AmpValue *in = n->inputs[0], *out = n->outputs[0];
    char base[160];
    snprintf(base, sizeof base, "%s_", n->name && *n->name ? n->name : n->op_type);
    size_t len = strlen(base);
    AmpValue *shape = NULL, *flat = NULL, *y2 = NULL;
    AmpNode *sh = NULL, *fl = NULL, *re = NULL;
    snprintf(base + len, sizeof base - len, "shape");
    if ((shape = amp_graph_new_value(g, base))) sh = amp_node_new(g, "", "Shape", base, 1, 1);
    snprintf(base + len, sizeof base - len, "flat");
    if ((flat = amp_graph_new_value(g, base))) fl = amp_node_new(g, "", "Flatten", base, 1, 1);
    snprintf(base + len, sizeof base - len, "2d");
    if ((y2 = amp_graph_new_value(g, base))) re = amp_node_new(g, "", "Reshape", base, 2, 1);
    if (!sh || !fl || !re || amp_node_set_input(sh, 0, in) || amp_node_set_input(fl, 0, in) ||
        !set_int(fl, "axis", axis) || amp_node_set_input(n, 0, flat) || amp_node_set_input(re, 0, y2) ||
        amp_node_set_input(re, 1, shape))
        return OOM(err);
    amp_node_set_output(sh, 0, shape);
    amp_node_set_output(fl, 0, flat);
    amp_node_set_output(n, 0, y2);
    amp_node_set_output(re, 0, out);
    amp_node_insert_before(n, sh);
    amp_node_insert_before(n, fl);
    amp_node_insert_after(n, re);
    return NULL;
}

/* ---- Resize, Upsample ------------------------------------------------------------- */

/* Resize-10 and Upsample (nearest: floor of the asymmetric source coordinate) as a
 * Resize-11 with an empty roi; `scales` is the scales value. */
static const char *to_resize_11(AmpNode *n, AmpValue *scales, AmpCode *err) {
    const char *mode = amp_node_attr_string(n, "mode", "nearest");
    float none = 0;
    AmpValue *roi = constant(n, "roi", AMP_DT_FLOAT, &none, 0, false);
    static const char *const drop[] = {"scales", NULL};
    AmpNode *r = roi && scales ? rebuild(n, "Resize", 3, drop) : NULL;
    if (!r || amp_node_set_input(r, 1, roi) || amp_node_set_input(r, 2, scales) ||
        !set_string(r, "coordinate_transformation_mode", "asymmetric") ||
        (strcmp(mode, "nearest") == 0 && !set_string(r, "nearest_mode", "floor")))
        return OOM(err);
    return NULL;
}

static bool mode_ok(const AmpNode *n) {
    const char *mode = amp_node_attr_string(n, "mode", "nearest");
    return strcmp(mode, "nearest") == 0 || strcmp(mode, "linear") == 0;
}

/* Upsample is deprecated from 10 on: a Resize does the same. */
static const char *upsample_11(AmpNode *n, bool apply, AmpCode *err) {
    AmpAttr *s = attr(n, "scales");
    if (!mode_ok(n)) return "its mode has no Resize equivalent";
    if (!s && (n->n_inputs < 2 || !n->inputs[1])) return "no scales";
    if (s && s->type != AMP_ATTR_FLOATS) return "scales is not floats";
    if (!apply) return NULL;
    AmpValue *scales = s ? constant(n, "scales", AMP_DT_FLOAT, s->floats, s->n_floats, false) : n->inputs[1];
    return to_resize_11(n, scales, err);
}

/* Resize-10 rounded a nearest source coordinate down when upsampling; only upsampling
 * by a constant scale is adapted. */
static const char *resize_11(AmpNode *n, bool apply, AmpCode *err) {
    if (n->n_inputs != 2 || !n->inputs[1]) return "not of Resize-10's form";
    if (!mode_ok(n)) return "its mode has no Resize-11 equivalent";
    AmpValue *s = n->inputs[1];
    if (strcmp(amp_node_attr_string(n, "mode", "nearest"), "nearest") == 0) {
        AmpBytes b;
        AmpStatus st = {AMP_OK, ""};
        if (!s->initializer || s->initializer->dtype != AMP_DT_FLOAT ||
            amp_tensor_bytes(n->graph->model, s->initializer, &b, &st))
            return "nearest with scales that are not a float32 initializer";
        for (size_t i = 0; i + 4 <= b.len; i += 4) {
            float f;
            memcpy(&f, b.data + i, 4);
            if (f < 1) return "nearest downsampling (rounded as Resize-11 cannot say)";
        }
    }
    return apply ? to_resize_11(n, s, err) : NULL;
}

static const char *resize_13(AmpNode *n, bool apply, AmpCode *err) {
    (void)apply, (void)err;
    return string_is(attr(n, "coordinate_transformation_mode"), "tf_half_pixel_for_nn")
               ? "coordinate_transformation_mode tf_half_pixel_for_nn is gone from Resize-13"
               : NULL;
}

/* ---- renamed ops and changed defaults ---------------------------------------------- */

static const char *scatter_11(AmpNode *n, bool apply, AmpCode *err) {
    if (apply && !rebuild(n, "ScatterElements", n->n_inputs, NULL)) return OOM(err);
    return NULL;
}

static const char *roialign_16(AmpNode *n, bool apply, AmpCode *err) {
    if (apply && !attr(n, "coordinate_transformation_mode") &&
        !set_string(n, "coordinate_transformation_mode", "output_half_pixel"))
        return OOM(err);
    return NULL;
}

static const char *gridsample_20(AmpNode *n, bool apply, AmpCode *err) {
    const char *mode = amp_node_attr_string(n, "mode", "bilinear");
    const char *to = strcmp(mode, "bilinear") == 0 ? "linear" : strcmp(mode, "bicubic") == 0 ? "cubic" : NULL;
    if (apply && to && !set_string(n, "mode", to)) return OOM(err);
    return NULL;
}

static const AmpOpsetStep STEPS[] = {
    {"Scan", 9, NULL},
    {"BatchNormalization", 9, batchnorm_9},
    {"Slice", 10, slice_10},
    {"TopK", 10, topk_10},
    {"Dropout", 10, dropout_10},
    /* The experimental ops, gone from opset 10 on. */
    {"ATen", 10, NULL},
    {"Affine", 10, NULL},
    {"Crop", 10, NULL},
    {"DynamicSlice", 10, NULL},
    {"GRUUnit", 10, NULL},
    {"GivenTensorFill", 10, NULL},
    {"ImageScaler", 10, NULL},
    {"ParametricSoftplus", 10, NULL},
    {"Scale", 10, NULL},
    {"ScaledTanh", 10, NULL},
    {"Clip", 11, clip_11},
    {"Pad", 11, pad_11},
    {"Resize", 11, resize_11},
    {"Scatter", 11, scatter_11},
    {"Upsample", 11, upsample_11},
    {"Dropout", 12, dropout_12},
    {"Hardmax", 13, softmax_13},
    {"LogSoftmax", 13, softmax_13},
    {"ReduceSum", 13, axes_to_input},
    {"Resize", 13, resize_13},
    {"Softmax", 13, softmax_13},
    {"Split", 13, split_13},
    {"Squeeze", 13, axes_to_input},
    {"Unsqueeze", 13, axes_to_input},
    {"BatchNormalization", 14, batchnorm_14},
    {"RoiAlign", 16, roialign_16},
    {"ReduceL1", 18, axes_to_input},
    {"ReduceL2", 18, axes_to_input},
    {"ReduceLogSum", 18, axes_to_input},
    {"ReduceLogSumExp", 18, axes_to_input},
    {"ReduceMax", 18, axes_to_input},
    {"ReduceMean", 18, axes_to_input},
    {"ReduceMin", 18, axes_to_input},
    {"ReduceProd", 18, axes_to_input},
    {"ReduceSumSquare", 18, axes_to_input},
    {"Split", 18, split_18},
    {"DFT", 20, NULL},
    {"GridSample", 20, gridsample_20},
    {"GroupNormalization", 21, NULL}, /* scale and bias per channel, no longer per group */
};

const AmpOpsetStep *amp_opset_steps(size_t *n) {
    *n = sizeof STEPS / sizeof *STEPS;
    return STEPS;
}
