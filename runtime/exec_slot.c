/* What every part of the graph interpreter shares, calling none of them (exec_impl.h):
 * slots and the bytes live in them, device buffers of the executor's backend, and the
 * run's clock. */
#include <string.h>
#include <time.h>

#include "runtime/exec_impl.h"
#include "passes/options.h"

/* ---- slots --------------------------------------------------------------------------- */

void amp_exec_slot_clear(AmpExec *e, Slot *s) {
    if (s->kind == SLOT_EMPTY) return;
    e->live = e->live > s->live_bytes ? e->live - s->live_bytes : 0;
    if (s->kind == SLOT_OWNED || s->kind == SLOT_UPLOAD) e->be->free(e->be, s->buf.data);
    s->kind = SLOT_EMPTY;
    s->live_bytes = 0;
    s->buf.data = NULL;
}

void amp_exec_count_live(AmpExec *e, Slot *s, size_t bytes) {
    s->live_bytes = bytes;
    e->live += bytes;
    if (e->live > e->peak) e->peak = e->live;
}

Slot *amp_exec_find_slot(AmpExec *e, const AmpValue *v) {
    for (; e; e = e->parent)
        if (v->graph == e->g) return v->id < e->n_values ? &e->slots[v->id] : NULL;
    return NULL;
}

/* ---- device buffers ------------------------------------------------------------------- */

AmpCode amp_exec_alloc_like(const AmpExec *e, const AmpBuf *like, AmpBuf *dst, AmpStatus *st) {
    *dst = *like;
    size_t bytes = amp_buf_bytes(like);
    if (!(dst->data = e->be->alloc(e->be, bytes)))
        return amp_fail(st, AMP_ERR_INTERNAL, "out of device memory for %zu bytes", bytes);
    return AMP_OK;
}

AmpCode amp_exec_copy_buf(const AmpExec *e, const AmpBuf *src, AmpBuf *dst, AmpStatus *st) {
    AmpCode rc = amp_exec_alloc_like(e, src, dst, st);
    size_t bytes = amp_buf_bytes(src);
    if (!rc && bytes) rc = e->be->copy(e->be, dst->data, src->data, bytes, st);
    if (rc) amp_exec_buf_free(e, dst);
    return rc;
}

void amp_exec_buf_free(const AmpExec *e, AmpBuf *b) {
    if (b->data) e->be->free(e->be, b->data);
    b->data = NULL;
}

void amp_exec_take_output(AmpExec *e, AmpNode *n, int k, AmpBuf *b) {
    AmpValue *v = k < n->n_outputs ? n->outputs[k] : NULL;
    if (!v) {
        amp_exec_buf_free(e, b);
        return;
    }
    Slot *s = amp_exec_find_slot(e, v);
    amp_exec_slot_clear(e, s);
    s->buf = *b;
    s->kind = SLOT_OWNED;
    amp_exec_count_live(e, s, amp_buf_bytes(b));
}

/* ---- the clock ------------------------------------------------------------------------ */

double amp_exec_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

AmpCode amp_exec_check_deadline(const AmpExec *e, AmpStatus *st) {
    const double *d = e->opt.deadline;
    if (!d || *d <= 0 || amp_exec_clock() <= *d) return AMP_OK;
    return amp_fail(st, AMP_ERR_UNSUPPORTED, "the run took longer than its time limit (%s)",
                    AMP_OPT_SAY("timeout", NULL));
}
