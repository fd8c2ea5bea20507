/* Backend selection through the registry (the entries of the backends this build has),
 * the wrappers of the interface's optional slots, and the one upload helper every user of
 * the interface shares (backend.h). The backends themselves live with their kernels; this
 * file names none of their functions. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

/* Every kind users may name, built or not (a kind the build lacks is refused by name). */
static const AmpBackendKindInfo KINDS[] = {
    {AMP_BACKEND_AUTO, "auto", "auto", NULL, false},
    {AMP_BACKEND_CPU, "cpu", "CPU", NULL, false},
    {AMP_BACKEND_CUDA, "cuda", "CUDA", "nvcc was not found when it was configured", true},
    {AMP_BACKEND_SIM, "sim", "the device simulator", NULL, false},
};

const AmpBackendKindInfo *amp_backend_kinds(size_t *n_out) {
    *n_out = sizeof KINDS / sizeof *KINDS;
    return KINDS;
}

static const AmpBackendKindInfo *kind_info(AmpBackendKind kind) {
    for (size_t i = 0; i < sizeof KINDS / sizeof *KINDS; i++)
        if (KINDS[i].kind == kind) return &KINDS[i];
    return NULL;
}

const AmpBackendEntry *amp_backend_find(AmpBackendKind kind) {
    for (const AmpBackendEntry *const *e = amp_backend_registry; *e; e++)
        if ((*e)->kind == kind) return *e;
    return NULL;
}

bool amp_backend_built(AmpBackendKind kind) {
    return amp_backend_find(kind) != NULL;
}

static bool entry_usable(const AmpBackendEntry *e) {
    return e && (!e->usable || e->usable());
}

bool amp_backend_usable(AmpBackendKind kind) {
    return entry_usable(amp_backend_find(kind));
}

AmpBackend *amp_backend_cpu(void) {
    static const AmpBackendSettings defaults = {0}; /* the shared instance has none of its own */
    const AmpBackendEntry *e = amp_backend_find(AMP_BACKEND_CPU);
    AmpBackend *be = NULL;
    AmpStatus quiet = {0};
    if (!e || e->open(&defaults, &be, &quiet)) abort(); /* every build has the CPU, and it always opens */
    return be;
}

/* ---- the optional slots ---------------------------------------------------------------- */

AmpCode amp_backend_memory(AmpBackend *be, AmpBackendMemory *out) {
    *out = (AmpBackendMemory){0};
    return be && be->memory ? be->memory(be, out) : AMP_ERR_UNSUPPORTED;
}

void amp_backend_stats(AmpBackend *be, AmpBackendStats *out) {
    *out = (AmpBackendStats){0};
    if (be && be->stats) be->stats(be, out);
}

double amp_backend_device_ms(AmpBackend *be) {
    return be && be->device_ms ? be->device_ms(be) : -1;
}

/* ---- what runs where ------------------------------------------------------------------- */

bool amp_backend_takes(AmpBackend *be, const AmpModel *m, const AmpNode *n) {
    int buf[64], *dts = amp_backend_in_dtypes(n, buf, 64);
    bool yes = dts && be && be->supports(be, n, amp_model_opset(m, n->domain), dts);
    if (dts != buf) free(dts);
    return yes;
}

bool amp_backend_kind_takes(AmpBackendKind kind, const AmpModel *m, const AmpNode *n) {
    const AmpBackendEntry *e = amp_backend_find(kind);
    if (!e || !e->takes) return false;
    int buf[64], *dts = amp_backend_in_dtypes(n, buf, 64);
    bool yes = dts && e->takes(n, amp_model_opset(m, n->domain), dts);
    if (dts != buf) free(dts);
    return yes;
}

AmpNodePlace amp_backend_place(AmpBackendKind kind, const AmpModel *m, const AmpNode *n) {
    if (amp_backend_kind_takes(kind, m, n)) return AMP_PLACE_DEVICE;
    return amp_backend_takes(amp_backend_cpu(), m, n) ? AMP_PLACE_FALLBACK : AMP_PLACE_NONE;
}

/* ---- selection --------------------------------------------------------------------------- */

int amp_backend_parse(const char *name) {
    if (!name) return -1;
    for (size_t i = 0; i < sizeof KINDS / sizeof *KINDS; i++)
        if (strcmp(name, KINDS[i].name) == 0) return (int)KINDS[i].kind;
    return -1;
}

AmpCode amp_backend_open(AmpBackendKind kind, const AmpBackendSettings *set, AmpBackend **out, AmpStatus *st) {
    static const AmpBackendSettings defaults = {0};
    *out = NULL;
    if (!set) set = &defaults;
    const AmpBackendKindInfo *info = kind_info(kind);
    if (!info) return amp_fail(st, AMP_ERR_USAGE, "unknown backend %d (expected %s)", (int)kind, AMP_BACKEND_NAMES);
    if (kind == AMP_BACKEND_AUTO) {
        for (const AmpBackendEntry *const *e = amp_backend_registry; *e; e++) {
            if (!(*e)->automatic || !entry_usable(*e)) continue;
            AmpStatus quiet = {0};
            if ((*e)->open(set, out, &quiet) == AMP_OK) return AMP_OK;
            *out = NULL;
        }
        *out = amp_backend_cpu(); /* no device, or it would not open: the CPU */
        return AMP_OK;
    }
    const AmpBackendEntry *e = amp_backend_find(kind);
    if (!e)
        return amp_fail(st, AMP_ERR_UNSUPPORTED, "backend '%s': this ampc was built without %s (%s); use 'cpu' or 'auto'",
                        info->name, info->title, info->missing ? info->missing : "not in this build");
    return e->open(set, out, st);
}

void amp_backend_close(AmpBackend *be) {
    if (be && be->destroy) be->destroy(be);
}

AmpCode amp_backend_upload(AmpBackend *be, const void *host, size_t bytes, void **dev, bool *owned, AmpStatus *st) {
    *dev = NULL;
    *owned = false;
    const void *view = be->borrow_host && host ? be->borrow_host(be, host, bytes) : NULL;
    if (view) {
        *dev = (void *)view; /* read only: the interpreter never writes an input or weight */
        return AMP_OK;
    }
    void *p = be->alloc(be, bytes);
    if (!p) return amp_fail(st, AMP_ERR_INTERNAL, "out of device memory for %zu bytes", bytes);
    AmpCode rc = bytes ? be->copy_in(be, p, host, bytes, st) : AMP_OK;
    if (rc) {
        be->free(be, p);
        return rc;
    }
    *dev = p;
    *owned = true;
    return AMP_OK;
}
