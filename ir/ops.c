/* The op table built from ops.def: per-op info, lookup by (domain, name) through a
 * small hash table (called once per node, so it must stay O(1)), class names, and the
 * expected attribute types (ops.def's ATTRS column) for the verifier. */
#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

/* Not ir/ir.h: the graph code (ir.c) looks ops up here, so the table names nothing of
 * it; infer_impl.h and kernel.h are here for the prototypes of what the table holds. */
#include "ir/infer_impl.h"
#include "ir/kernel.h"
#include "ir/ops.h"

#define ANY AMP_OPSET_ANY
#define NONE AMP_OPSET_NONE
#define OPSETS(fp16, bf16) fp16, bf16
#define INPUTS(min, max) min, max
#define OUTPUTS(min, max) min, max

const AmpOpInfo amp_op_table[] = {
    [AMP_OP_UNKNOWN] = {"", "", AMP_CLASS_NEVER, AMP_CLASS_NEVER, AMP_OPSET_ANY, AMP_OPSET_ANY,
                        AMP_SLOTS_NONE, 0, -1, 0, -1, NULL,
                        "not in the op table: kept as it is, types from the model"},
#define AMP_OP(id, domain, name, fp16_class, bf16_class, opsets, inputs, outputs, float_inputs, \
               infer, attrs, doc)                                                              \
    [AMP_OP_##id] = {domain, name, AMP_CLASS_##fp16_class, AMP_CLASS_##bf16_class, opsets,    \
                     float_inputs, inputs, outputs, infer, doc},
#include "ir/ops.def"
#undef AMP_OP
};
#undef OUTPUTS
#undef INPUTS
#undef OPSETS
#undef NONE
#undef ANY
static_assert(sizeof amp_op_table / sizeof amp_op_table[0] == AMP_OP__COUNT, "ops.def and AmpOpId disagree");

const char *amp_op_class_name(AmpOpClass c) {
    switch (c) {
    case AMP_CLASS_NEVER: return "never";
    case AMP_CLASS_ALLOW: return "allow";
    case AMP_CLASS_INFER: return "infer";
    case AMP_CLASS_CLEAR: return "clear";
    case AMP_CLASS_DENY: return "deny";
    }
    return "unknown-class";
}

#define AMP_OP(id, ...)
#define AMP_SHAPE_FROM_DATA(id, why) [AMP_OP_##id] = true,
static const bool SHAPE_FROM_DATA[AMP_OP__COUNT] = {
#include "ir/ops.def"
};
#undef AMP_SHAPE_FROM_DATA
#undef AMP_OP

bool amp_op_shape_from_data(AmpOpId op) {
    return (unsigned)op < AMP_OP__COUNT && SHAPE_FROM_DATA[op];
}

/* ir/kernel.h: the optimizers whose CPU and CUDA kernels read AmpKernelCtx.gate. */
bool amp_kernel_takes_gate(AmpOpId op) {
    return op == AMP_OP_Adam || op == AMP_OP_Momentum || op == AMP_OP_Adagrad;
}

/* ---- lookup: open addressing over FNV-1a of (domain, name) ----------------------
 * The table is filled once, on first use; an atomic state makes that safe when
 * several threads open models at the same time. */

#define LOOKUP_SLOTS 512 /* power of two, at least twice the number of ops */
static_assert(LOOKUP_SLOTS >= 2 * AMP_OP__COUNT, "grow LOOKUP_SLOTS");

static uint16_t lookup_slots[LOOKUP_SLOTS]; /* AmpOpId, 0 = empty */
static atomic_int lookup_state;             /* 0 empty, 1 filling, 2 ready */

static const char *norm_domain(const char *d) {
    return amp_domain_is_default(d) ? "" : d;
}

static uint32_t hash_op(const char *domain, const char *name) {
    uint32_t h = 2166136261u;
    for (const char *s = domain; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    h = (h ^ 0xffu) * 16777619u; /* separator: ("a","bc") and ("ab","c") differ */
    for (const char *s = name; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void lookup_fill(void) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&lookup_state, &expected, 1)) {
        for (int id = 1; id < AMP_OP__COUNT; id++) {
            uint32_t i = hash_op(amp_op_table[id].domain, amp_op_table[id].name) & (LOOKUP_SLOTS - 1);
            while (lookup_slots[i]) i = (i + 1) & (LOOKUP_SLOTS - 1);
            lookup_slots[i] = (uint16_t)id;
        }
        atomic_store(&lookup_state, 2);
        return;
    }
    while (atomic_load(&lookup_state) != 2) {
        /* another thread is filling a 512-entry table: a few microseconds */
    }
}

AmpOpId amp_op_lookup(const char *domain, const char *name) {
    if (!name) return AMP_OP_UNKNOWN;
    if (atomic_load_explicit(&lookup_state, memory_order_acquire) != 2) lookup_fill();
    domain = norm_domain(domain);
    uint32_t i = hash_op(domain, name) & (LOOKUP_SLOTS - 1);
    for (uint16_t id; (id = lookup_slots[i]); i = (i + 1) & (LOOKUP_SLOTS - 1))
        if (strcmp(amp_op_table[id].name, name) == 0 && strcmp(amp_op_table[id].domain, domain) == 0)
            return (AmpOpId)id;
    return AMP_OP_UNKNOWN;
}

/* ---- attribute types and versions (ops.def's ATTRS column) ------------------------ */

typedef struct AttrSpec {
    const char *name;
    int type;          /* AmpAttrType */
    int since, until;  /* the opsets [since, until) of the op that have it; 0: no bound */
} AttrSpec;

/* One NULL-terminated array per op (an op without attributes has only the NULL). */
#define A(name, type) {name, AMP_ATTR_##type, 0, 0},
#define AV(name, type, since, until) {name, AMP_ATTR_##type, since, until},
#define ATTRS(...) __VA_ARGS__
#define AMP_OP(id, domain, name, fp16_class, bf16_class, opsets, inputs, outputs, float_inputs, \
               infer, attrs, doc)                                                              \
    static const AttrSpec attrs_##id[] = {attrs{NULL, 0, 0, 0}};
#include "ir/ops.def"
#undef AMP_OP

#define AMP_OP(id, ...) [AMP_OP_##id] = attrs_##id,
static const AttrSpec *const OP_ATTRS[AMP_OP__COUNT] = {
#include "ir/ops.def"
};
#undef AMP_OP
#undef ATTRS
#undef AV
#undef A

int amp_op_attr_type(AmpOpId id, const char *attr_name, int64_t version, int *since, int *until) {
    if ((int)id <= 0 || id >= AMP_OP__COUNT || !attr_name || !OP_ATTRS[id]) return AMP_OP_ATTR_ANY;
    const AttrSpec *other = NULL;
    int any_version = -2; /* version <= 0: the rows' one type, or -1 when they differ */
    for (const AttrSpec *a = OP_ATTRS[id]; a->name; a++) {
        if (a->name[0] != attr_name[0] || strcmp(a->name, attr_name) != 0) continue;
        if (version <= 0) any_version = any_version == -2 || any_version == a->type ? a->type : AMP_OP_ATTR_ANY;
        else if ((!a->since || version >= a->since) && (!a->until || version < a->until)) return a->type;
        else if (!other) other = a;
    }
    if (any_version != -2) return any_version;
    if (other) {
        /* The range named is the widest of the attribute's rows (Cast's `to` has two). */
        int lo = other->since, hi = other->until;
        for (const AttrSpec *a = other; a->name; a++)
            if (strcmp(a->name, attr_name) == 0) {
                if (a->since < lo) lo = a->since;
                if (!a->until || (hi && a->until > hi)) hi = a->until;
            }
        if (since) *since = lo;
        if (until) *until = hi;
        return AMP_OP_ATTR_OTHER;
    }
    /* The lists of ai.onnx and its training domain are complete (tests/ir/test_verify_hostile.py). */
    const char *dom = amp_op_table[id].domain;
    return !*dom || strcmp(dom, "ai.onnx.preview.training") == 0 ? AMP_OP_ATTR_UNKNOWN : AMP_OP_ATTR_ANY;
}
