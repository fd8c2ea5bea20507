/* The AMP pass's four op lists as the user edits them: op names from the CLI (--allow ...)
 * and the AMP_ALLOWLIST_ADD ... AMP_DENYLIST_REMOVE variables (options.c reads them for
 * both), the check that no op is added to two lists, and the class of every op
 * after the edits and the level (TensorFlow's TF_AUTO_MIXED_PRECISION_GRAPH_REWRITE_LEVEL). */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

static const char *const LEVEL_NAMES[] = {"default", "tensor-cores-only", "treat-infer-as-deny",
                                          "unsafe-force-all", "norms-16"};

int amp_level_parse(const char *s) {
    for (size_t i = 0; s && i < sizeof LEVEL_NAMES / sizeof *LEVEL_NAMES; i++)
        if (strcmp(s, LEVEL_NAMES[i]) == 0) return (int)i;
    return -1;
}

const char *amp_level_name(AmpLevel l) {
    return (unsigned)l < sizeof LEVEL_NAMES / sizeof *LEVEL_NAMES ? LEVEL_NAMES[l] : "?";
}

AmpOpId amp_op_find_name(const char *name) {
    const char *colon = strchr(name, ':');
    if (colon) {
        char dom[128];
        size_t n = (size_t)(colon - name);
        if (n >= sizeof dom) return AMP_OP_UNKNOWN;
        memcpy(dom, name, n);
        dom[n] = '\0';
        return amp_op_lookup(dom, colon + 1);
    }
    static const char *const domains[] = {"", "com.microsoft", "ai.onnx.preview.training"};
    for (size_t i = 0; i < sizeof domains / sizeof *domains; i++) {
        AmpOpId id = amp_op_lookup(domains[i], name);
        if (id != AMP_OP_UNKNOWN) return id;
    }
    return AMP_OP_UNKNOWN;
}

AmpCode amp_list_edits_parse(const char *what, const char *s, AmpOpClass list, bool remove,
                             AmpListEdit **edits, size_t *n, AmpStatus *st) {
    if (!s || !*s) return AMP_OK;
    char unknown[600] = "";
    size_t n_unknown = 0;
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        size_t len = strcspn(p, ",");
        while (len && p[len - 1] == ' ') len--;
        if (!len) break;
        char name[256];
        if (len >= sizeof name)
            return amp_fail(st, AMP_ERR_USAGE, "%s: op name too long: '%.40s...'", what, p);
        memcpy(name, p, len);
        name[len] = '\0';
        p += len;
        while (*p && *p != ',') p++;
        AmpOpId op = amp_op_find_name(name);
        if (op == AMP_OP_UNKNOWN) {
            size_t u = strlen(unknown);
            if (u < sizeof unknown - 80)
                snprintf(unknown + u, sizeof unknown - u, "%s'%s'", n_unknown ? ", " : "", name);
            n_unknown++;
            continue;
        }
        AmpListEdit *e = realloc(*edits, (*n + 1) * sizeof *e);
        if (!e) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        *edits = e;
        e[(*n)++] = (AmpListEdit){op, list, remove};
    }
    if (n_unknown)
        return amp_fail(st, AMP_ERR_USAGE,
                        "%s: unknown op%s %s (names are ONNX op types, e.g. MatMul or "
                        "com.microsoft:FusedGemm)",
                        what, n_unknown > 1 ? "s" : "", unknown);
    return AMP_OK;
}

static const char *op_label(AmpOpId op, char *buf, size_t len) {
    const AmpOpInfo *info = amp_op_info(op);
    if (info->domain && *info->domain)
        snprintf(buf, len, "%s:%s", info->domain, info->name);
    else
        snprintf(buf, len, "%s", info->name);
    return buf;
}

/* Quadratic in the number of edits, which are a handful typed by a person. */
AmpCode amp_list_edits_check(const AmpListEdit *e, size_t n, AmpStatus *st) {
    for (size_t i = 0; i < n; i++) {
        if (e[i].remove) continue;
        for (size_t j = i + 1; j < n; j++) {
            if (e[j].remove || e[j].op != e[i].op || e[j].list == e[i].list) continue;
            char name[200];
            return amp_fail(st, AMP_ERR_USAGE,
                            "op '%s' is added to two lists, %s and %s: give each op one list",
                            op_label(e[i].op, name, sizeof name), amp_op_class_name(e[i].list),
                            amp_op_class_name(e[j].list));
        }
    }
    return AMP_OK;
}

AmpCode amp_op_classes(int precision, const AmpListEdit *e, size_t n, AmpLevel level,
                       AmpOpClass *cls, AmpStatus *st) {
    AmpCode rc = amp_list_edits_check(e, n, st);
    if (rc) return rc;
    bool bf16 = precision == AMP_DT_BFLOAT16;
    for (int op = 0; op < AMP_OP__COUNT; op++) {
        const AmpOpInfo *info = amp_op_info((AmpOpId)op);
        cls[op] = op == AMP_OP_UNKNOWN ? AMP_CLASS_NEVER : bf16 ? info->bf16_class : info->fp16_class;
    }
    if (level == AMP_LEVEL_NORMS_16) cls[AMP_OP_LayerNormalization] = AMP_CLASS_INFER; /* edits still win */
    /* Additions move an op out of its default list; removals leave it in none. */
    for (size_t i = 0; i < n; i++)
        if (!e[i].remove && e[i].op > AMP_OP_UNKNOWN && e[i].op < AMP_OP__COUNT) cls[e[i].op] = e[i].list;
    for (size_t i = 0; i < n; i++)
        if (e[i].remove && e[i].op > AMP_OP_UNKNOWN && e[i].op < AMP_OP__COUNT && cls[e[i].op] == e[i].list)
            cls[e[i].op] = AMP_CLASS_NEVER;
    for (int op = 0; op < AMP_OP__COUNT; op++) {
        AmpOpClass c = cls[op];
        switch (level) {
        case AMP_LEVEL_TENSOR_CORES_ONLY:
            if (c == AMP_CLASS_INFER || c == AMP_CLASS_CLEAR) cls[op] = AMP_CLASS_NEVER;
            break;
        case AMP_LEVEL_TREAT_INFER_AS_DENY:
            if (c == AMP_CLASS_INFER) cls[op] = AMP_CLASS_DENY;
            break;
        case AMP_LEVEL_UNSAFE_FORCE_ALL:
            if (c != AMP_CLASS_NEVER) cls[op] = AMP_CLASS_ALLOW;
            break;
        default: break;
        }
    }
    return AMP_OK;
}
