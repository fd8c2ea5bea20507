/* oneDNN's convolution primitives under the CPU backend's Conv, ConvTranspose and the
 * convolution gradients (see dnnl.h): forward, backward data and backward weights, made
 * per problem and cached, the caller's plain tensors reordered into the layouts the
 * primitive chose where they differ, constant weights packed once (AmpKernelPack). The
 * library, the engine and each thread's stream and buffers are dnnl.c's (dnnl_impl.h). */
#include "kernels/cpu/dnnl.h"

#include <stdlib.h>

#ifndef AMPC_HAVE_DNNL

bool amp_dnnl_conv(const AmpDnnlConv *p, const AmpDnnlConvIO *io) {
    (void)p, (void)io;
    return false;
}

#else

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/dnnl_impl.h"

/* ---- convolutions ------------------------------------------------------------------ */

/* One argument of a convolution primitive: the caller's plain tensor (user) and the
 * layout the primitive chose (prim, format_tag any); where they differ a reorder copies
 * it in (an input) or out (an output) through the thread's workspace. */
typedef struct ConvArg {
    int arg;     /* DNNL_ARG_* */
    bool out;    /* an output of the primitive */
    int io;      /* which AmpDnnlConvIO pointer: CIO_* */
    dnnl_memory_desc_t user, prim;
    dnnl_primitive_t reorder; /* NULL: the primitive reads or writes the user's buffer */
    size_t bytes, offset;     /* the reordered copy's size and place in the workspace */
    dnnl_memory_desc_t rscratch; /* the reorder's scratchpad */
    size_t rscratch_bytes;
} ConvArg;

enum { CIO_SRC, CIO_WEI, CIO_BIAS, CIO_DIFF_DST, CIO_DST, CIO_DIFF_SRC, CIO_DIFF_WEI, CIO_DIFF_BIAS };

typedef struct ConvKey {
    AmpDnnlConv p;
    int threads;
} ConvKey;

typedef struct ConvEntry {
    ConvKey key;
    uint64_t hash;
    struct ConvEntry *next;
    bool ok;
    dnnl_primitive_t prim;
    int nargs;
    ConvArg a[4];
    dnnl_memory_desc_t scratch; /* the primitive's scratchpad */
    size_t scratch_bytes, scratch_max; /* its size; the largest of its and the reorders' */
    size_t ws_bytes;
    /* key.p.sum: the summand's layout (sum_user), and where it is not the one the
     * primitive's dst is read in, the reorder of AmpDnnlConvIO.sum_src into that, with its
     * scratchpad */
    dnnl_memory_desc_t sum_user;
    dnnl_primitive_t sum_reorder;
    dnnl_memory_desc_t sum_rscratch;
    size_t sum_rscratch_bytes;
} ConvEntry;

static pthread_mutex_t conv_mu = PTHREAD_MUTEX_INITIALIZER;
static ConvEntry *conv_buckets[AMP_DNNL_BUCKETS];
static int n_conv_entries;

static uint64_t hash_bytes(const void *k, size_t n) {
    const unsigned char *b = k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* A plain (row-major) tensor of nd dims; tag any where `any`. */
static bool md_plain(dnnl_memory_desc_t *md, int nd, const int64_t *d, int dt, bool any) {
    dnnl_dims_t dims;
    for (int i = 0; i < nd; i++) dims[i] = d[i];
    if (any) return p_dnnl_memory_desc_init_by_tag(md, nd, dims, amp_dnnl_dt(dt), dnnl_format_tag_any) == dnnl_success;
    dnnl_dims_t strides;
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) strides[i] = s, s *= d[i];
    return p_dnnl_memory_desc_init_by_strides(md, nd, dims, amp_dnnl_dt(dt), strides) == dnnl_success;
}

/* Dims d (nd of them) stored with the first two axes swapped: (d1, d0, d2...). */
static bool md_swapped(dnnl_memory_desc_t *md, int nd, const int64_t *d, int dt) {
    dnnl_dims_t dims, strides;
    int64_t s = 1;
    for (int i = nd - 1; i >= 2; i--) dims[i] = d[i], strides[i] = s, s *= d[i];
    dims[0] = d[0], dims[1] = d[1];
    strides[0] = s, strides[1] = s * d[0];
    return p_dnnl_memory_desc_init_by_strides(md, nd, dims, amp_dnnl_dt(dt), strides) == dnnl_success;
}

/* (n, c, sp...); the user's of a swapped problem (n and c swapped in memory) */
static bool md_act(dnnl_memory_desc_t *md, const AmpDnnlConv *p, int64_t c, const int64_t *sp, int dt, bool any) {
    int64_t d[2 + AMP_DNNL_MAX_SPATIAL] = {p->n, c};
    for (int i = 0; i < p->nsp; i++) d[2 + i] = sp[i];
    if (p->swapped && !any) return md_swapped(md, 2 + p->nsp, d, dt);
    return md_plain(md, 2 + p->nsp, d, dt, any);
}

/* (n, c, sp...) stored channels-last (AmpDnnlConv.src_nhwc) */
static bool md_nhwc(dnnl_memory_desc_t *md, const AmpDnnlConv *p, int64_t c, const int64_t *sp, int dt) {
    static const dnnl_format_tag_t tag[AMP_DNNL_MAX_SPATIAL] = {dnnl_nwc, dnnl_nhwc, dnnl_ndhwc};
    dnnl_dims_t dims = {p->n, c};
    for (int i = 0; i < p->nsp; i++) dims[2 + i] = sp[i];
    return p_dnnl_memory_desc_init_by_tag(md, 2 + p->nsp, dims, amp_dnnl_dt(dt), tag[p->nsp - 1]) == dnnl_success;
}

/* The weights, logically oneDNN's ([g,] o, i, k...) with o the output's channels: a
 * convolution's ONNX (oc, ic / g, k...) is that layout; ConvTranspose's (ic, oc / g,
 * k...) swaps o and i within each group (strides). */
static bool md_wei(dnnl_memory_desc_t *md, const AmpDnnlConv *p, int dt, bool any) {
    bool deconv = p->kind == AMP_DNNL_DECONV_FWD;
    int64_t g = p->group, og = p->oc / g, ig = p->ic / g, K = 1;
    for (int i = 0; i < p->nsp; i++) K *= p->kern[i];
    int gd = g > 1, nd = gd + 2 + p->nsp;
    dnnl_dims_t dims, strides;
    if (gd) dims[0] = g, strides[0] = og * ig * K;
    dims[gd] = og, dims[gd + 1] = ig;
    strides[gd] = deconv ? K : ig * K;
    strides[gd + 1] = deconv ? og * K : K;
    int64_t s = 1;
    for (int i = p->nsp - 1; i >= 0; i--) dims[gd + 2 + i] = p->kern[i], strides[gd + 2 + i] = s, s *= p->kern[i];
    if (any) return p_dnnl_memory_desc_init_by_tag(md, nd, dims, amp_dnnl_dt(dt), dnnl_format_tag_any) == dnnl_success;
    if (p->swapped) return !gd && md_swapped(md, nd, dims, dt); /* (ic, oc, k...) in memory */
    return p_dnnl_memory_desc_init_by_strides(md, nd, dims, amp_dnnl_dt(dt), strides) == dnnl_success;
}

static const char *impl_of(const_dnnl_primitive_desc_t pd) {
    const char *impl = NULL;
    return p_dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success ? impl : NULL;
}

/* Adds argument (arg, user md, io) to e, with the primitive's md for it queried from pd
 * (what), and the reorder between them where they differ. */
static bool conv_arg(ConvEntry *e, const_dnnl_primitive_desc_t pd, dnnl_query_t what, int arg, int io, bool out,
                     const dnnl_memory_desc_t *user) {
    const dnnl_memory_desc_t *pm = p_dnnl_primitive_desc_query_md(pd, what, 0);
    if (!pm) return false;
    ConvArg *a = &e->a[e->nargs++];
    a->arg = arg, a->io = io, a->out = out;
    a->user = *user, a->prim = *pm;
    if (p_dnnl_memory_desc_equal(user, pm)) return true;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    bool ok = p_dnnl_primitive_attr_create(&attr) == dnnl_success &&
              p_dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
              p_dnnl_reorder_primitive_desc_create(&rpd, out ? pm : user, amp_dnnl_engine, out ? user : pm,
                                                   amp_dnnl_engine, attr) == dnnl_success;
    if (ok) {
        const dnnl_memory_desc_t *s = p_dnnl_primitive_desc_query_md(rpd, dnnl_query_scratchpad_md, 0);
        a->rscratch_bytes = s ? p_dnnl_memory_desc_get_size(s) : 0;
        if (s) a->rscratch = *s;
        if (a->rscratch_bytes > e->scratch_max) e->scratch_max = a->rscratch_bytes;
        ok = p_dnnl_primitive_create(&a->reorder, rpd) == dnnl_success;
    }
    if (rpd) p_dnnl_primitive_desc_destroy(rpd);
    if (attr) p_dnnl_primitive_attr_destroy(attr);
    a->bytes = (p_dnnl_memory_desc_get_size(pm) + 63) & ~(size_t)63;
    a->offset = e->ws_bytes;
    e->ws_bytes += a->bytes;
    return ok;
}

/* A bias (the primitive's weights md 1), which must be the user's plain vector. */
static bool conv_arg_plain(ConvEntry *e, const_dnnl_primitive_desc_t pd, dnnl_query_t what, int arg, int io, bool out,
                           const dnnl_memory_desc_t *user) {
    const dnnl_memory_desc_t *bm = p_dnnl_primitive_desc_query_md(pd, what, 1);
    if (!bm || !p_dnnl_memory_desc_equal(bm, user)) return false;
    ConvArg *a = &e->a[e->nargs++];
    memset(a, 0, sizeof *a);
    a->arg = arg, a->io = io, a->out = out, a->user = a->prim = *user;
    return true;
}

static void conv_entry_free(ConvEntry *e) {
    if (e->prim) p_dnnl_primitive_destroy(e->prim);
    if (e->sum_reorder) p_dnnl_primitive_destroy(e->sum_reorder);
    for (int i = 0; i < e->nargs; i++)
        if (e->a[i].reorder) p_dnnl_primitive_destroy(e->a[i].reorder);
    free(e);
}

/* p's post-ops (sum, then relu) set on attr. */
static bool conv_post_ops(dnnl_primitive_attr_t attr, const AmpDnnlConv *p) {
    dnnl_post_ops_t po = NULL;
    bool ok = p_dnnl_post_ops_create(&po) == dnnl_success &&
              (!p->sum || p_dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success) &&
              (!p->relu || p_dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) == dnnl_success) &&
              p_dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    if (po) p_dnnl_post_ops_destroy(po);
    return ok;
}

/* The sum post-op reads dst: the summand, in its own layout (e->sum_user: channels-last or
 * ONNX's, sum_nhwc), goes into the dst the primitive reads, reordered where the layouts
 * differ (e->sum_reorder: into the primitive's layout where dst is reordered out of it,
 * else into the user's dst), copied where they are one. */
static bool conv_sum_reorder(ConvEntry *e, const AmpDnnlConv *p, const int64_t *sp, int dt) {
    const ConvArg *d = NULL;
    for (int i = 0; i < e->nargs; i++)
        if (e->a[i].io == CIO_DST) d = &e->a[i];
    if (!d) return false;
    if (p->sum_nhwc ? !md_nhwc(&e->sum_user, p, p->oc, sp, dt) : !md_act(&e->sum_user, p, p->oc, sp, dt, false))
        return false;
    if (!d->reorder && p->sum_nhwc == p->dst_nhwc) return true; /* one layout: a copy */
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    bool ok = p_dnnl_primitive_attr_create(&attr) == dnnl_success &&
              p_dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
              p_dnnl_reorder_primitive_desc_create(&rpd, &e->sum_user, amp_dnnl_engine,
                                                   d->reorder ? &d->prim : &d->user, amp_dnnl_engine,
                                                   attr) == dnnl_success;
    const dnnl_memory_desc_t *s = ok ? p_dnnl_primitive_desc_query_md(rpd, dnnl_query_scratchpad_md, 0) : NULL;
    if (s) e->sum_rscratch = *s;
    e->sum_rscratch_bytes = s ? p_dnnl_memory_desc_get_size(s) : 0;
    if (e->sum_rscratch_bytes > e->scratch_max) e->scratch_max = e->sum_rscratch_bytes;
    ok = ok && p_dnnl_primitive_create(&e->sum_reorder, rpd) == dnnl_success;
    if (rpd) p_dnnl_primitive_desc_destroy(rpd);
    if (attr) p_dnnl_primitive_attr_destroy(attr);
    return ok;
}

/* Makes e's primitive and reorders for e->key (e->ok false where oneDNN has none, or
 * only its reference implementation). */
static void conv_make(ConvEntry *e) {
    const AmpDnnlConv *p = &e->key.p;
    dnnl_dims_t strides, dil, pl, pr;
    for (int i = 0; i < p->nsp; i++)
        strides[i] = p->stride[i], dil[i] = p->dil[i] - 1, pl[i] = p->pad0[i], pr[i] = p->pad1[i];
    bool fwd = p->kind == AMP_DNNL_CONV_FWD || p->kind == AMP_DNNL_DECONV_FWD;
    /* the primitive's descriptors, any layout; the users' plain ones */
    dnnl_memory_desc_t src, wei, dst, bias, usrc, uwei, udst, ubias;
    int dt_src = p->kind == AMP_DNNL_CONV_BWD_DATA ? p->dt_out : p->dt;
    int dt_wei = p->kind == AMP_DNNL_CONV_BWD_WEIGHTS ? p->dt_out : p->dt;
    int dt_dst = fwd ? p->dt_out : p->dt;
    int64_t bdim = p->oc;
    bool has_bias = p->bias && (fwd || p->kind == AMP_DNNL_CONV_BWD_WEIGHTS);
    int dt_bias = fwd ? p->dt : p->dt_out;
    const int64_t *sp_src = p->in, *sp_dst = p->out;
    if (!md_act(&src, p, p->ic, sp_src, dt_src, true) || !md_act(&usrc, p, p->ic, sp_src, dt_src, false) ||
        !md_act(&dst, p, p->oc, sp_dst, dt_dst, true) || !md_act(&udst, p, p->oc, sp_dst, dt_dst, false) ||
        !md_wei(&wei, p, dt_wei, true) || !md_wei(&uwei, p, dt_wei, false) ||
        (has_bias && (!md_plain(&bias, 1, &bdim, dt_bias, false) || !md_plain(&ubias, 1, &bdim, dt_bias, false))))
        return;
    if (!has_bias) memset(&bias, 0, sizeof bias);
    /* channels-last activations: the primitive reads or writes the user's bytes as they are */
    if (p->src_nhwc && !(md_nhwc(&src, p, p->ic, sp_src, dt_src) && md_nhwc(&usrc, p, p->ic, sp_src, dt_src))) return;
    if (p->dst_nhwc && !(md_nhwc(&dst, p, p->oc, sp_dst, dt_dst) && md_nhwc(&udst, p, p->oc, sp_dst, dt_dst))) return;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL, hint = NULL;
    bool ok = p_dnnl_primitive_attr_create(&attr) == dnnl_success &&
              p_dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
              (!(p->sum || p->relu) || conv_post_ops(attr, p));
    if (ok && p->kind == AMP_DNNL_DECONV_FWD) {
        dnnl_deconvolution_desc_t d;
        ok = p_dnnl_dilated_deconvolution_forward_desc_init(&d, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                            &src, &wei, has_bias ? &bias : NULL, &dst, strides, dil,
                                                            pl, pr) == dnnl_success &&
             p_dnnl_primitive_desc_create(&pd, &d, attr, amp_dnnl_engine, NULL) == dnnl_success;
    } else if (ok) {
        dnnl_convolution_desc_t d, fd;
        ok = p_dnnl_dilated_convolution_forward_desc_init(
                 &fd, fwd ? dnnl_forward_inference : dnnl_forward_training, dnnl_convolution_direct, &src, &wei,
                 has_bias ? &bias : NULL, &dst, strides, dil, pl, pr) == dnnl_success;
        if (ok && fwd) {
            ok = p_dnnl_primitive_desc_create(&pd, &fd, attr, amp_dnnl_engine, NULL) == dnnl_success;
        } else if (ok) {
            ok = p_dnnl_primitive_desc_create(&hint, &fd, NULL, amp_dnnl_engine, NULL) == dnnl_success;
            if (ok && p->kind == AMP_DNNL_CONV_BWD_DATA)
                ok = p_dnnl_dilated_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &src, &wei, &dst,
                                                                        strides, dil, pl, pr) == dnnl_success;
            else if (ok)
                ok = p_dnnl_dilated_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &src, &wei,
                                                                           has_bias ? &bias : NULL, &dst, strides,
                                                                           dil, pl, pr) == dnnl_success;
            ok = ok && p_dnnl_primitive_desc_create(&pd, &d, attr, amp_dnnl_engine, hint) == dnnl_success;
        }
    }
    const char *impl = ok ? impl_of(pd) : NULL;
    ok = ok && impl && strncmp(impl, "ref", 3) != 0;
    if (ok) {
        const dnnl_memory_desc_t *s = p_dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (s) e->scratch = *s;
        e->scratch_bytes = s ? p_dnnl_memory_desc_get_size(s) : 0;
        if (e->scratch_bytes > e->scratch_max) e->scratch_max = e->scratch_bytes;
    }
    if (ok && fwd) {
        ok = conv_arg(e, pd, dnnl_query_src_md, DNNL_ARG_SRC, CIO_SRC, false, &usrc) &&
             conv_arg(e, pd, dnnl_query_weights_md, DNNL_ARG_WEIGHTS, CIO_WEI, false, &uwei) &&
             conv_arg(e, pd, dnnl_query_dst_md, DNNL_ARG_DST, CIO_DST, true, &udst);
        /* the bias (weights md 1), plain as given */
        if (ok && has_bias) ok = conv_arg_plain(e, pd, dnnl_query_weights_md, DNNL_ARG_BIAS, CIO_BIAS, false, &ubias);
        if (ok && p->sum) ok = conv_sum_reorder(e, p, sp_dst, dt_dst);
    } else if (ok && p->kind == AMP_DNNL_CONV_BWD_DATA) {
        ok = conv_arg(e, pd, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, CIO_DIFF_DST, false, &udst) &&
             conv_arg(e, pd, dnnl_query_weights_md, DNNL_ARG_WEIGHTS, CIO_WEI, false, &uwei) &&
             conv_arg(e, pd, dnnl_query_diff_src_md, DNNL_ARG_DIFF_SRC, CIO_DIFF_SRC, true, &usrc);
    } else if (ok) {
        ok = conv_arg(e, pd, dnnl_query_src_md, DNNL_ARG_SRC, CIO_SRC, false, &usrc) &&
             conv_arg(e, pd, dnnl_query_diff_dst_md, DNNL_ARG_DIFF_DST, CIO_DIFF_DST, false, &udst) &&
             conv_arg(e, pd, dnnl_query_diff_weights_md, DNNL_ARG_DIFF_WEIGHTS, CIO_DIFF_WEI, true, &uwei);
        if (ok && has_bias)
            ok = conv_arg_plain(e, pd, dnnl_query_diff_weights_md, DNNL_ARG_DIFF_BIAS, CIO_DIFF_BIAS, true, &ubias);
    }
    ok = ok && p_dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    if (pd) p_dnnl_primitive_desc_destroy(pd);
    if (hint) p_dnnl_primitive_desc_destroy(hint);
    if (attr) p_dnnl_primitive_attr_destroy(attr);
    e->ok = ok;
}


static ConvEntry *conv_lookup(const ConvKey *k, bool *own) {
    uint64_t h = hash_bytes(k, sizeof *k);
    *own = false;
    pthread_mutex_lock(&conv_mu);
    ConvEntry *e = conv_buckets[h % AMP_DNNL_BUCKETS];
    while (e && (e->hash != h || memcmp(&e->key, k, sizeof *k) != 0)) e = e->next;
    if (e) {
        pthread_mutex_unlock(&conv_mu);
        return e;
    }
    e = calloc(1, sizeof *e);
    if (e) {
        e->key = *k;
        e->hash = h;
        conv_make(e);
        if (n_conv_entries < AMP_DNNL_MAX_ENTRIES) {
            e->next = conv_buckets[h % AMP_DNNL_BUCKETS];
            conv_buckets[h % AMP_DNNL_BUCKETS] = e;
            n_conv_entries++;
        } else {
            *own = true;
        }
    }
    pthread_mutex_unlock(&conv_mu);
    return e;
}

/* Runs prim with its n args and the thread's scratchpad (md sm of sbytes, if any). */
static bool exec(AmpDnnlTls *t, dnnl_primitive_t prim, int n, const dnnl_exec_arg_t *args, const dnnl_memory_desc_t *sm,
                 size_t sbytes) {
    dnnl_exec_arg_t a[6];
    memcpy(a, args, (size_t)n * sizeof *a);
    dnnl_memory_t s = NULL;
    if (sbytes) {
        if (p_dnnl_memory_create(&s, sm, amp_dnnl_engine, t->scratch) != dnnl_success) return false;
        a[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, s};
    }
    bool ok = p_dnnl_primitive_execute(prim, t->stream, n, a) == dnnl_success;
    if (s) p_dnnl_memory_destroy(s);
    return ok;
}

/* Constant weights in the primitive's layout (AmpDnnlConvIO.wei_pack): md, reordered
 * from the user's bytes at `user`. */
typedef struct WeiPack {
    dnnl_memory_desc_t md;
    const void *user;
    void *buf;
} WeiPack;

static void wei_pack_free(void *p) {
    WeiPack *w = p;
    free(w->buf);
    free(w);
}

/* The packed weights for argument a from `user` in pack: kept from an earlier call, or
 * reordered now (*fresh) into a new buffer; NULL where they cannot be kept (no memory). */
static WeiPack *wei_pack_get(AmpKernelPack *pack, const ConvArg *a, const void *user, bool *fresh) {
    WeiPack *w = pack->free_fn == wei_pack_free ? pack->data : NULL;
    *fresh = false;
    if (w && w->user == user && p_dnnl_memory_desc_equal(&w->md, &a->prim)) return w;
    amp_kernel_pack_clear(pack);
    if (!(w = calloc(1, sizeof *w)) || !(w->buf = aligned_alloc(64, a->bytes))) {
        free(w);
        return NULL;
    }
    w->md = a->prim, w->user = user;
    pack->data = w, pack->free_fn = wei_pack_free;
    *fresh = true;
    return w;
}

/* The sum post-op's summand into the dst the primitive reads it from (argument a, its
 * memory pm where reordered): reordered into the primitive's layout, or copied into the
 * user's dst where the primitive writes that (nothing to copy where they are one). */
static bool conv_sum_in(AmpDnnlTls *t, const ConvEntry *e, const ConvArg *a, dnnl_memory_t pm,
                        const AmpDnnlConvIO *io) {
    if (!io->sum_src) return false;
    if (!e->sum_reorder) {
        if (io->sum_src != io->dst) memcpy(io->dst, io->sum_src, p_dnnl_memory_desc_get_size(&a->user));
        return true;
    }
    dnnl_memory_t z = NULL, to = NULL; /* to: the user's dst, where the primitive writes it */
    bool ok = p_dnnl_memory_create(&z, &e->sum_user, amp_dnnl_engine, (void *)io->sum_src) == dnnl_success;
    ok = ok && (a->reorder || p_dnnl_memory_create(&to, &a->user, amp_dnnl_engine, io->dst) == dnnl_success);
    ok = ok && exec(t, e->sum_reorder, 2, (dnnl_exec_arg_t[]){{DNNL_ARG_FROM, z}, {DNNL_ARG_TO, a->reorder ? pm : to}},
                    &e->sum_rscratch, e->sum_rscratch_bytes);
    if (z) p_dnnl_memory_destroy(z);
    if (to) p_dnnl_memory_destroy(to);
    return ok;
}

static bool conv_run(const ConvEntry *e, const AmpDnnlConvIO *io) {
    AmpDnnlTls *t = amp_dnnl_tls();
    if (!t) return false;
    if (e->scratch_max > t->cap) {
        void *s = malloc(e->scratch_max);
        if (!s) return false;
        free(t->scratch);
        t->scratch = s;
        t->cap = e->scratch_max;
    }
    if (e->ws_bytes > t->ws_cap) {
        void *w = aligned_alloc(64, e->ws_bytes);
        if (!w) return false;
        free(t->ws);
        t->ws = w;
        t->ws_cap = e->ws_bytes;
    }
    void *user[8] = {(void *)io->src, (void *)io->wei, (void *)io->bias, (void *)io->diff_dst,
                     io->dst,         io->diff_src,    io->diff_wei,     io->diff_bias};
    dnnl_memory_t um[4] = {NULL}, pm[4] = {NULL};
    dnnl_exec_arg_t args[4], r[2];
    bool ok = true, packed_now = false;
    int n = 0;
    for (; n < e->nargs && ok; n++) {
        const ConvArg *a = &e->a[n];
        ok = user[a->io] && p_dnnl_memory_create(&um[n], &a->user, amp_dnnl_engine, user[a->io]) == dnnl_success;
        bool fresh = true;
        WeiPack *w = ok && a->reorder && a->io == CIO_WEI && io->wei_pack ? wei_pack_get(io->wei_pack, a, user[a->io], &fresh)
                                                                           : NULL;
        if (ok && a->reorder)
            ok = p_dnnl_memory_create(&pm[n], &a->prim, amp_dnnl_engine, w ? w->buf : (char *)t->ws + a->offset) ==
                 dnnl_success;
        if (ok) args[n] = (dnnl_exec_arg_t){a->arg, a->reorder ? pm[n] : um[n]};
        packed_now = packed_now || (w && fresh);
        if (ok && a->reorder && !a->out && fresh) {
            r[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, um[n]};
            r[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, pm[n]};
            ok = exec(t, a->reorder, 2, r, &a->rscratch, a->rscratch_bytes);
        }
    }
    for (int i = 0; i < e->nargs && ok && e->key.p.sum; i++)
        if (e->a[i].io == CIO_DST) ok = conv_sum_in(t, e, &e->a[i], pm[i], io);
    ok = ok && exec(t, e->prim, e->nargs, args, &e->scratch, e->scratch_bytes);
    for (int i = 0; i < e->nargs && ok; i++) {
        const ConvArg *a = &e->a[i];
        if (!a->reorder || !a->out) continue;
        r[0] = (dnnl_exec_arg_t){DNNL_ARG_FROM, pm[i]};
        r[1] = (dnnl_exec_arg_t){DNNL_ARG_TO, um[i]};
        ok = exec(t, a->reorder, 2, r, &a->rscratch, a->rscratch_bytes);
    }
    ok = ok && p_dnnl_stream_wait(t->stream) == dnnl_success;
    if (!ok && packed_now) amp_kernel_pack_clear(io->wei_pack); /* never keep a half-made pack */
    for (int i = 0; i < n; i++) {
        if (um[i]) p_dnnl_memory_destroy(um[i]);
        if (pm[i]) p_dnnl_memory_destroy(pm[i]);
    }
    return ok;
}

bool amp_dnnl_conv(const AmpDnnlConv *p, const AmpDnnlConvIO *io) {
    if (p->nsp < 1 || p->nsp > AMP_DNNL_MAX_SPATIAL || p->group < 1 || p->ic % p->group || p->oc % p->group ||
        (p->dt != AMP_DT_FLOAT && p->dt != AMP_DT_BFLOAT16) ||
        (p->dt_out != AMP_DT_FLOAT && p->dt_out != AMP_DT_BFLOAT16) || !amp_dnnl_enabled())
        return false;
    ConvKey k;
    memset(&k, 0, sizeof k); /* padding bytes are part of the key */
    k.p.kind = p->kind, k.p.dt = p->dt, k.p.dt_out = p->dt_out, k.p.nsp = p->nsp;
    k.p.n = p->n, k.p.ic = p->ic, k.p.oc = p->oc, k.p.group = p->group;
    for (int i = 0; i < p->nsp; i++) {
        k.p.in[i] = p->in[i], k.p.kern[i] = p->kern[i], k.p.out[i] = p->out[i];
        k.p.stride[i] = p->stride[i], k.p.dil[i] = p->dil[i], k.p.pad0[i] = p->pad0[i], k.p.pad1[i] = p->pad1[i];
    }
    k.p.bias = p->bias;
    k.p.sum = p->sum && p->kind == AMP_DNNL_CONV_FWD;
    k.p.relu = p->relu && p->kind == AMP_DNNL_CONV_FWD;
    k.p.src_nhwc = p->src_nhwc && p->kind == AMP_DNNL_CONV_FWD;
    k.p.dst_nhwc = p->dst_nhwc && p->kind == AMP_DNNL_CONV_FWD;
    k.p.sum_nhwc = p->sum_nhwc && k.p.sum;
    bool post = p->sum || p->relu || p->src_nhwc || p->dst_nhwc || p->sum_nhwc;
    if (post && (p->kind != AMP_DNNL_CONV_FWD || p->sum_nhwc != k.p.sum_nhwc)) return false;
    k.p.swapped = p->swapped && p->kind == AMP_DNNL_CONV_BWD_WEIGHTS && p->group == 1;
    if (p->swapped && !k.p.swapped) return false;
    k.threads = amp_dnnl_threads_now();
    bool own;
    ConvEntry *e = conv_lookup(&k, &own);
    bool ok = e && e->ok && conv_run(e, io);
    if (own) conv_entry_free(e);
    return ok;
}

#endif
