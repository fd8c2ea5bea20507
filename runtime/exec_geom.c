/* The prepared geometry of each node (AmpKernelCtx.geom): made by the op's geometry
 * function (ops/geom.h, handed over by the backend's prepare_node as
 * AmpBackendKernel.geom) just before the node's launch, and kept for its next launches
 * while its inputs and placed outputs keep their dtypes and shapes. The shapes are dynamic,
 * so "once" is once per shape signature; the key is read at the launch, so a node sized
 * only when reached (a late shape), a fused node or a body's node (its own executor) is
 * keyed as every other. */
#include <stdlib.h>
#include <string.h>

#include "runtime/exec_impl.h"

/* One input's or output's dtype and shape; rank -1: absent (an input left out, an output
 * not placed). */
struct AmpGeomKey {
    int dtype, rank;
    int64_t dims[AMP_MAX_RANK];
};

static void key_of(const AmpBuf *b, AmpGeomKey *key) {
    memset(key, 0, sizeof *key);
    key->rank = -1;
    if (!b) return;
    key->dtype = b->dtype;
    key->rank = b->rank;
    memcpy(key->dims, b->dims, (size_t)b->rank * sizeof *b->dims);
}

/* k's inputs, then its outputs, as keys. */
static const AmpBuf *key_buf(const AmpKernelCtx *k, int j) {
    if (j < k->n_in) return k->in[j];
    return k->out && k->out[j - k->n_in].data ? &k->out[j - k->n_in] : NULL;
}

static bool key_same(const AmpExecGeom *g, const AmpKernelCtx *k) {
    if (!g->valid || g->n_key != k->n_in + k->n_out) return false;
    for (int j = 0; j < g->n_key; j++) {
        AmpGeomKey now;
        key_of(key_buf(k, j), &now);
        if (memcmp(&now, &g->key[j], sizeof now) != 0) return false;
    }
    return true;
}

AmpCode amp_exec_node_geom(AmpExec *e, size_t i, AmpKernelCtx *k, AmpStatus *st) {
    const AmpBackendKernel *kern = &e->kernels[i];
    AmpExecGeom *g = &e->geoms[i];
    if (!kern->geom) return AMP_OK;
    if (!key_same(g, k)) {
        int n = k->n_in + k->n_out;
        g->valid = false;
        if (!g->data && !(g->data = calloc(1, kern->geom_size ? kern->geom_size : 1)))
            return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
        if (n > g->n_key) {
            AmpGeomKey *key = realloc(g->key, (size_t)n * sizeof *key);
            if (!key) return amp_fail(st, AMP_ERR_INTERNAL, "out of memory");
            g->key = key;
        }
        g->made = true;
        k->attrs = kern->attrs;
        AmpCode rc = kern->geom(k, g->data, &g->made);
        if (rc) return rc;
        for (int j = 0; j < n; j++) key_of(key_buf(k, j), &g->key[j]);
        g->n_key = n;
        g->valid = true;
        e->n_geoms++;
    }
    k->geom = g->made ? g->data : NULL;
    return AMP_OK;
}

void amp_exec_geom_free(AmpExec *e) {
    for (size_t i = 0; e->geoms && i < e->n_geoms_cap; i++) free(e->geoms[i].data), free(e->geoms[i].key);
    free(e->geoms);
    e->geoms = NULL;
}
