/* oneDNN's matmul primitive under the CPU backend's matrix products (see dnnl.h); the
 * convolutions are dnnl_conv.c's.
 *
 * The library is opened with dlopen (the soname, then the file CMake found), its C API
 * reached through function pointers typed after dnnl.h's own declarations. One engine
 * for the process; per thread a stream and a scratchpad (the primitives are made with
 * a user scratchpad, so that any number of threads may run the same primitive). */
#include "kernels/cpu/dnnl.h"

#include <stdlib.h>

#include "ir/ir.h"

#ifndef AMPC_HAVE_DNNL

bool amp_dnnl_enabled(void) {
    return false;
}

bool amp_dnnl_matmul(const AmpDnnlMatmul *p, const void *a, const void *b, const void *bias, void *dst) {
    (void)p, (void)a, (void)b, (void)bias, (void)dst;
    return false;
}

bool amp_dnnl_wins(int dtype, int64_t m, int64_t n, int64_t k) {
    (void)dtype, (void)m, (void)n, (void)k;
    return false;
}

#else

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ir/parallel.h"
#include "kernels/cpu/dnnl_impl.h"

#ifndef AMPC_DNNL_SONAME
#define AMPC_DNNL_SONAME "libdnnl.so.2"
#endif
#ifndef AMPC_DNNL_PATH
#define AMPC_DNNL_PATH AMPC_DNNL_SONAME
#endif

#define AMP_DNNL_DEF(f) __typeof__(f) *p_##f;
AMP_DNNL_FNS(AMP_DNNL_DEF)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool loaded; /* the library opened with every function, and the engine made */
dnnl_engine_t amp_dnnl_engine;
static pthread_key_t tls_key; /* the calling thread's AmpDnnlTls */

static void tls_free(void *v) {
    AmpDnnlTls *t = v;
    if (t->stream) p_dnnl_stream_destroy(t->stream);
    free(t->scratch);
    free(t->ws);
    free(t);
}

/* dlsym returns void *; POSIX guarantees its bytes are a function pointer (blas.c). */
static bool sym(void *lib, const char *name, void *fn_out, size_t fn_size) {
    void *p = dlsym(lib, name);
    if (p && fn_size == sizeof p) memcpy(fn_out, &p, sizeof p);
    return p != NULL;
}

static void load_once(void) {
    if (amp_dnnl_set_off_asked()) return; /* AMP_DNNL=0, handed down by a session (ir/threads.c) */
    amp_openmp_load(); /* libgomp first, with its threads' wait chosen (ir/parallel.h) */
    const char *tried[] = {AMPC_DNNL_SONAME, AMPC_DNNL_PATH};
    void *lib = NULL;
    for (size_t i = 0; i < 2 && !lib; i++) lib = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) return; /* OpenBLAS does it all, as before oneDNN */
    bool ok = true;
#define AMP_DNNL_SYM(f) ok = ok && sym(lib, #f, &p_##f, sizeof p_##f);
    AMP_DNNL_FNS(AMP_DNNL_SYM)
    if (!ok || p_dnnl_engine_create(&amp_dnnl_engine, dnnl_cpu, 0) != dnnl_success) return;
    if (pthread_key_create(&tls_key, tls_free) != 0) return;
    loaded = true; /* the library stays loaded for the life of the process */
}

bool amp_dnnl_enabled(void) {
    pthread_once(&once, load_once);
    return loaded;
}

/* The CPU backend's knob is a session's threads option, --threads, else AMP_THREADS
 * (amp_threads_requested); libdnnl's OpenMP is the libgomp ir/parallel.c opened. */
int amp_dnnl_threads_now(void) {
    return amp_parallel_threads();
}

AmpDnnlTls *amp_dnnl_tls(void) {
    AmpDnnlTls *t = pthread_getspecific(tls_key);
    if (t) return t;
    t = calloc(1, sizeof *t);
    if (!t) return NULL;
    if (p_dnnl_stream_create(&t->stream, amp_dnnl_engine, dnnl_stream_default_flags) != dnnl_success ||
        pthread_setspecific(tls_key, t) != 0) {
        tls_free(t);
        return NULL;
    }
    return t;
}

/* ---- primitives, cached by problem ------------------------------------------------ */

/* The cache key: the problem, every padding byte zero, and the thread count. */
typedef struct Key {
    AmpDnnlMatmul p;
    int threads;
} Key;

typedef struct Entry {
    Key key;
    uint64_t hash;
    struct Entry *next;
    bool ok; /* false: oneDNN has no primitive for it (remembered, not retried) */
    dnnl_primitive_t prim;
    dnnl_memory_desc_t src, wei, dst, bias, scratch;
    size_t scratch_bytes;
} Entry;

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static Entry *buckets[AMP_DNNL_BUCKETS];
static int n_entries;

static uint64_t hash_key(const Key *k) {
    const unsigned char *b = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* A row-major (dims..., rows, cols) tensor, or (dims..., cols, rows) stored transposed. */
static bool md_init(dnnl_memory_desc_t *md, int nb, const int64_t *batch, int64_t rows, int64_t cols, bool trans,
                    int dt) {
    dnnl_dims_t dims, strides;
    int nd = nb + 2;
    for (int i = 0; i < nb; i++) dims[i] = batch[i];
    dims[nb] = rows, dims[nb + 1] = cols;
    strides[nb] = trans ? 1 : cols;
    strides[nb + 1] = trans ? rows : 1;
    int64_t s = rows * cols;
    for (int i = nb - 1; i >= 0; i--) {
        strides[i] = s;
        s *= batch[i];
    }
    return p_dnnl_memory_desc_init_by_strides(md, nd, dims, amp_dnnl_dt(dt), strides) == dnnl_success;
}

/* Makes e's primitive for e->key (e->ok false where oneDNN has none). */
static void make(Entry *e) {
    const AmpDnnlMatmul *p = &e->key.p;
    int64_t ob[AMP_DNNL_MAX_BATCH];
    for (int i = 0; i < p->nb; i++) ob[i] = p->batch_a[i] > p->batch_b[i] ? p->batch_a[i] : p->batch_b[i];
    memset(&e->bias, 0, sizeof e->bias);
    if (!md_init(&e->src, p->nb, p->batch_a, p->m, p->k, p->ta, p->dt_ab) ||
        !md_init(&e->wei, p->nb, p->batch_b, p->k, p->n, p->tb, p->dt_ab) ||
        !md_init(&e->dst, p->nb, ob, p->m, p->n, false, p->dt_dst) ||
        (p->bias && !md_init(&e->bias, 0, NULL, 1, p->n, false, p->dt_ab)))
        return;
    dnnl_matmul_desc_t desc;
    if (p_dnnl_matmul_desc_init(&desc, &e->src, &e->wei, p->bias ? &e->bias : NULL, &e->dst) != dnnl_success)
        return;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool ok = p_dnnl_primitive_attr_create(&attr) == dnnl_success &&
              p_dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
              (p->alpha == 1.0f ||
               p_dnnl_primitive_attr_set_output_scales(attr, 1, 0, &p->alpha) == dnnl_success);
    if (ok && p->accumulate)
        ok = p_dnnl_post_ops_create(&po) == dnnl_success && p_dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success &&
             p_dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && p_dnnl_primitive_desc_create(&pd, &desc, attr, amp_dnnl_engine, NULL) == dnnl_success;
    /* oneDNN's reference implementation (its fallback for what no optimized kernel takes)
     * is many times slower than OpenBLAS: OpenBLAS then does it. */
    const char *impl = NULL;
    ok = ok && p_dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
         strncmp(impl, "ref", 3) != 0;
    if (ok) {
        const dnnl_memory_desc_t *s = p_dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (s) e->scratch = *s;
        else memset(&e->scratch, 0, sizeof e->scratch);
        e->scratch_bytes = s ? p_dnnl_memory_desc_get_size(s) : 0;
        ok = p_dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    }
    if (pd) p_dnnl_primitive_desc_destroy(pd);
    if (po) p_dnnl_post_ops_destroy(po);
    if (attr) p_dnnl_primitive_attr_destroy(attr);
    e->ok = ok;
}

/* The cached entry for k, made if new; NULL when out of memory. An entry past the
 * cache's size is the caller's to free (*own set). */
static Entry *lookup(const Key *k, bool *own) {
    uint64_t h = hash_key(k);
    *own = false;
    pthread_mutex_lock(&cache_mu);
    Entry *e = buckets[h % AMP_DNNL_BUCKETS];
    while (e && (e->hash != h || memcmp(&e->key, k, sizeof *k) != 0)) e = e->next;
    if (e) {
        pthread_mutex_unlock(&cache_mu);
        return e;
    }
    /* Made under the lock: a second thread asking for the same problem waits for it. */
    e = calloc(1, sizeof *e);
    if (e) {
        e->key = *k;
        e->hash = h;
        make(e);
        if (n_entries < AMP_DNNL_MAX_ENTRIES) {
            e->next = buckets[h % AMP_DNNL_BUCKETS];
            buckets[h % AMP_DNNL_BUCKETS] = e;
            n_entries++;
        } else {
            *own = true;
        }
    }
    pthread_mutex_unlock(&cache_mu);
    return e;
}

static bool run(const Entry *e, const void *a, const void *b, const void *bias, void *dst) {
    AmpDnnlTls *t = amp_dnnl_tls();
    if (!t) return false;
    if (e->scratch_bytes > t->cap) {
        void *s = malloc(e->scratch_bytes);
        if (!s) return false;
        free(t->scratch);
        t->scratch = s;
        t->cap = e->scratch_bytes;
    }
    dnnl_memory_t mem[5] = {NULL};
    dnnl_exec_arg_t args[5];
    int n = 0;
    bool ok = true;
#define AMP_DNNL_ARG(ARG, MD, PTR)                                                                                 \
    if (ok) {                                                                                                      \
        ok = p_dnnl_memory_create(&mem[n], &(MD), amp_dnnl_engine, (void *)(PTR)) == dnnl_success;                 \
        args[n] = (dnnl_exec_arg_t){ARG, mem[n]};                                                                  \
        n += ok;                                                                                                   \
    }
    AMP_DNNL_ARG(DNNL_ARG_SRC, e->src, a)
    AMP_DNNL_ARG(DNNL_ARG_WEIGHTS, e->wei, b)
    AMP_DNNL_ARG(DNNL_ARG_DST, e->dst, dst)
    if (e->key.p.bias) AMP_DNNL_ARG(DNNL_ARG_BIAS, e->bias, bias)
    if (e->scratch_bytes) AMP_DNNL_ARG(DNNL_ARG_SCRATCHPAD, e->scratch, t->scratch)
#undef AMP_DNNL_ARG
    ok = ok && p_dnnl_primitive_execute(e->prim, t->stream, n, args) == dnnl_success &&
         p_dnnl_stream_wait(t->stream) == dnnl_success;
    for (int i = 0; i < n; i++) p_dnnl_memory_destroy(mem[i]);
    return ok;
}

bool amp_dnnl_matmul(const AmpDnnlMatmul *p, const void *a, const void *b, const void *bias, void *dst) {
    if (!amp_dnnl_enabled() || p->nb < 0 || p->nb > AMP_DNNL_MAX_BATCH || (p->bias && (p->nb || p->alpha != 1.0f)))
        return false;
    Key k;
    memset(&k, 0, sizeof k); /* padding bytes are part of the key */
    k.p.dt_ab = p->dt_ab;
    k.p.dt_dst = p->dt_dst;
    k.p.nb = p->nb;
    for (int i = 0; i < p->nb; i++) k.p.batch_a[i] = p->batch_a[i], k.p.batch_b[i] = p->batch_b[i];
    k.p.m = p->m, k.p.n = p->n, k.p.k = p->k;
    k.p.ta = p->ta, k.p.tb = p->tb;
    k.p.alpha = p->alpha;
    k.p.bias = p->bias;
    k.p.accumulate = p->accumulate;
    k.threads = amp_dnnl_threads_now();
    bool own;
    Entry *e = lookup(&k, &own);
    bool ok = e && e->ok && run(e, a, b, bias, dst);
    if (own) {
        if (e->prim) p_dnnl_primitive_destroy(e->prim);
        free(e);
    }
    return ok;
}

/* Where OpenBLAS still wins (measured one thread, on the project's AMD EPYC with
 * avx512_bf16; docs/speed.md): a oneDNN call costs about 2 us whatever its size (memory
 * objects, the stream), so small products stay on OpenBLAS. Float32: oneDNN from 2^17
 * multiply-adds (64^3: 1.35x OpenBLAS's speed, 48^3: 0.88x) with n >= 16 (256x4x1024:
 * 0.60x). Bfloat16, against widening both inputs and sgemm: from 2^16 (48^3: 2.1x,
 * 32^3: 0.8x). */
bool amp_dnnl_wins(int dtype, int64_t m, int64_t n, int64_t k) {
    double macs = (double)m * (double)n * (double)k;
    if (dtype == AMP_DT_BFLOAT16) return macs >= 65536.0;
    return macs >= 131072.0 && n >= 16;
}

#endif
