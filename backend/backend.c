/* Backend selection by name and choice, and the one upload helper every user of the
 * interface shares (backend.h). The backends themselves live with their kernels. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"

#ifdef AMPC_HAVE_CUDA /* the CUDA backend's functions are kernels/cuda/backend_cuda.c's */
bool amp_backend_cuda_built(void) {
    return true;
}
double amp_backend_device_ms(AmpBackend *be) {
    return be && strcmp(be->name, "cuda") == 0 ? amp_backend_cuda_device_ms(be) : -1;
}
#else
void amp_backend_cuda_allow_tf32(AmpBackend *be, bool on) {
    (void)be, (void)on;
}
double amp_backend_device_ms(AmpBackend *be) {
    (void)be;
    return -1;
}
bool amp_backend_cuda_built(void) {
    return false;
}
bool amp_backend_cuda_usable(void) {
    return false;
}
AmpCode amp_backend_cuda_open(AmpBackend **out, AmpStatus *st) {
    *out = NULL;
    return amp_fail(st, AMP_ERR_UNSUPPORTED,
                    "backend 'cuda': this ampc was built without CUDA (nvcc was not found when it was "
                    "configured); use 'cpu' or 'auto'");
}
size_t amp_backend_cuda_syncs(const AmpBackend *be) {
    (void)be;
    return 0;
}
bool amp_backend_cuda_takes(const AmpModel *m, const AmpNode *n) {
    (void)m, (void)n;
    return false;
}
AmpCode amp_backend_cuda_memory(const AmpBackend *be, size_t *used, size_t *total) {
    (void)be;
    *used = *total = 0;
    return AMP_ERR_UNSUPPORTED;
}
#endif

bool amp_backend_takes(AmpBackend *be, const AmpModel *m, const AmpNode *n) {
    int buf[64], *dts = amp_backend_in_dtypes(n, buf, 64);
    bool yes = dts && be && be->supports(be, n, amp_model_opset(m, n->domain), dts);
    if (dts != buf) free(dts);
    return yes;
}

AmpNodePlace amp_backend_cuda_place(const AmpModel *m, const AmpNode *n) {
    if (amp_backend_cuda_takes(m, n)) return AMP_PLACE_DEVICE;
    return amp_backend_takes(amp_backend_cpu(), m, n) ? AMP_PLACE_FALLBACK : AMP_PLACE_NONE;
}

int amp_backend_parse(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "auto") == 0) return AMP_BACKEND_CHOICE_AUTO;
    if (strcmp(name, "cpu") == 0) return AMP_BACKEND_CHOICE_CPU;
    if (strcmp(name, "cuda") == 0) return AMP_BACKEND_CHOICE_CUDA;
    if (strcmp(name, "sim") == 0) return AMP_BACKEND_CHOICE_SIM;
    return -1;
}

AmpCode amp_backend_open(int choice, AmpBackend **out, AmpStatus *st) {
    *out = NULL;
    switch (choice) {
    case AMP_BACKEND_CHOICE_AUTO:
#ifdef AMPC_HAVE_CUDA
        if (amp_backend_cuda_usable()) {
            AmpStatus quiet = {0};
            if (amp_backend_cuda_open(out, &quiet) == AMP_OK) return AMP_OK;
        }
#endif
        *out = amp_backend_cpu(); /* no device, or it would not open: the CPU */
        return AMP_OK;
    case AMP_BACKEND_CHOICE_CPU: *out = amp_backend_cpu(); return AMP_OK;
    case AMP_BACKEND_CHOICE_SIM: return amp_backend_sim_open(out, st);
    case AMP_BACKEND_CHOICE_CUDA: return amp_backend_cuda_open(out, st);
    default: return amp_fail(st, AMP_ERR_USAGE, "unknown backend %d (expected cpu, cuda, auto or sim)", choice);
    }
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
