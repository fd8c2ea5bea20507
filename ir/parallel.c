/* The CPU's threads for ampc's own kernels (parallel.h): libgomp's entry points, opened at
 * run time, and ranges split over its team. */
#include "ir/parallel.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* The OpenMP runtime Debian's libdnnl is built against, and how long its threads spin at
 * a barrier before they sleep. libgomp's default (no OMP_WAIT_POLICY: 300000 spins,
 * milliseconds) suits a program that stays in parallel regions; an ampc step alternates
 * parallel convolutions and GEMMs with kernels on one thread, and a worker spinning
 * through those holds a core that OpenBLAS's pool, the next region or another process
 * wants: the 2-thread bf16 ResNet-18 step ran 65 ms against FP32's 26 (docs/speed.md,
 * "Threads"). 10000 spins (tens of microseconds) keep the barrier fast between back-to-back
 * primitives and let the worker sleep through the rest. */
#define AMPC_GOMP_SONAME "libgomp.so.1"
#define AMPC_GOMP_SPINCOUNT "10000"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void (*p_gomp_parallel)(void (*)(void *), void *, unsigned, unsigned);
static int (*p_omp_get_thread_num)(void);
static int (*p_omp_get_num_threads)(void);
static int (*p_omp_get_max_threads)(void);
static void (*p_omp_set_num_threads)(int);
static int (*p_omp_in_parallel)(void);
static bool loaded;

/* dlsym returns void *; POSIX guarantees its bytes are a function pointer. */
static bool sym(void *lib, const char *name, void *fn_out, size_t fn_size) {
    void *p = dlsym(lib, name);
    if (p && fn_size == sizeof p) memcpy(fn_out, &p, sizeof p);
    return p != NULL;
}

/* libgomp reads its settings once, when it is loaded: set just before, only where the user
 * chose neither variable and no libgomp is in the process yet (a host program's OpenMP,
 * e.g. PyTorch's, is left as its owner made it). */
static void spin_briefly(void) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    void *gomp = dlopen(AMPC_GOMP_SONAME, RTLD_LAZY | RTLD_NOLOAD);
    if (gomp) {
        dlclose(gomp); /* already loaded: its settings were read */
        return;
    }
    setenv("GOMP_SPINCOUNT", AMPC_GOMP_SPINCOUNT, 0);
}

static void load_once(void) {
    spin_briefly();
    void *lib = dlopen(AMPC_GOMP_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return; /* every range on the calling thread */
    loaded = sym(lib, "GOMP_parallel", &p_gomp_parallel, sizeof p_gomp_parallel) &&
             sym(lib, "omp_get_thread_num", &p_omp_get_thread_num, sizeof p_omp_get_thread_num) &&
             sym(lib, "omp_get_num_threads", &p_omp_get_num_threads, sizeof p_omp_get_num_threads) &&
             sym(lib, "omp_get_max_threads", &p_omp_get_max_threads, sizeof p_omp_get_max_threads) &&
             sym(lib, "omp_set_num_threads", &p_omp_set_num_threads, sizeof p_omp_set_num_threads) &&
             sym(lib, "omp_in_parallel", &p_omp_in_parallel, sizeof p_omp_in_parallel);
    /* the library stays loaded for the life of the process, as libdnnl's does */
}

bool amp_openmp_load(void) {
    pthread_once(&once, load_once);
    return loaded;
}

int amp_parallel_threads(void) {
    if (!amp_openmp_load()) return 1;
    int t;
    if (amp_threads_requested(&t)) p_omp_set_num_threads(t);
    int n = p_omp_get_max_threads();
    return n < 1 ? 1 : n;
}

typedef struct Job {
    int64_t n, align;
    AmpRangeFn body;
    void *ctx;
} Job;

/* On each thread of the team: its slice, the items split as evenly as `align` allows. */
static void slice(void *arg) {
    const Job *j = arg;
    int64_t t = p_omp_get_thread_num(), nt = p_omp_get_num_threads();
    int64_t units = (j->n + j->align - 1) / j->align; /* the last unit may be short */
    int64_t b = units * t / nt * j->align, e = units * (t + 1) / nt * j->align;
    if (e > j->n) e = j->n;
    if (b < e) j->body(j->ctx, b, e);
}

void amp_parallel_for(int64_t n, int64_t grain, int64_t align, AmpRangeFn body, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (align < 1) align = 1;
    int nt = n >= 2 * grain ? amp_parallel_threads() : 1;
    if (nt > 1 && p_omp_in_parallel()) nt = 1;
    if ((int64_t)nt > n / grain) nt = (int)(n / grain);
    if (nt <= 1) {
        body(ctx, 0, n);
        return;
    }
    Job j = {.n = n, .align = align, .body = body, .ctx = ctx};
    p_gomp_parallel(slice, &j, (unsigned)nt, 0);
}
