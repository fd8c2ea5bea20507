/* Communicators (backend/comm.h): the one-rank identity, and the loader of the MPI plugin,
 * opened with dlopen as kernels/cpu/blas.c opens OpenBLAS, so that the binary starts
 * without libmpi and only an MPI job loads it. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/comm.h"

static AmpCode single_sum(AmpComm *c, float *buf, size_t n, AmpStatus *st) {
    (void)c, (void)buf, (void)n, (void)st;
    return AMP_OK;
}

static AmpCode single_bcast(AmpComm *c, void *buf, size_t bytes, int root, AmpStatus *st) {
    (void)c, (void)buf, (void)bytes, (void)root, (void)st;
    return AMP_OK;
}

static AmpCode single_gather(AmpComm *c, const void *mine, size_t bytes, void *all, AmpStatus *st) {
    (void)c, (void)st;
    if (bytes) memmove(all, mine, bytes);
    return AMP_OK;
}

static AmpCode single_barrier(AmpComm *c, AmpStatus *st) {
    (void)c, (void)st;
    return AMP_OK;
}

static void single_abort(AmpComm *c, int code, const char *msg) {
    (void)c;
    if (msg) fprintf(stderr, "%s\n", msg);
    exit(code);
}

AmpComm *amp_comm_single(void) {
    AmpComm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    *c = (AmpComm){.name = "single",
                   .rank = 0,
                   .size = 1,
                   .allreduce_sum_f32 = single_sum,
                   .broadcast = single_bcast,
                   .allgather = single_gather,
                   .barrier = single_barrier,
                   .abort = single_abort};
    return c;
}

static long env_long(const char *(*env)(const char *), const char *name, long dflt) {
    const char *v = env(name);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end ? dflt : x;
}

bool amp_comm_launched(const char *(*env)(const char *name)) {
    long ompi = env_long(env, "OMPI_COMM_WORLD_SIZE", -1), pmi = env_long(env, "PMI_SIZE", -1);
    if (ompi >= 0 || pmi >= 0) return ompi > 1 || pmi > 1;
    return env("PMIX_RANK") != NULL;
}

/* The process-wide MPI communicator (MPI is initialised once per process). */
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static AmpComm mpi_comm;
static bool mpi_open;

/* The folder of the file holding `addr` (the executable: /proc/self/exe; the library: dladdr). */
static bool folder_of(const char *file, char *out, size_t len) {
    const char *slash = file ? strrchr(file, '/') : NULL;
    if (!slash || (size_t)(slash - file) + sizeof AMP_COMM_PLUGIN_FILE + 1 > len) return false;
    snprintf(out, len, "%.*s/%s", (int)(slash - file), file, AMP_COMM_PLUGIN_FILE);
    return true;
}

static void *open_plugin(const char *plugin, char *tried, size_t tried_len) {
    char paths[3][PATH_MAX + 32];
    size_t n = 0;
    if (plugin && *plugin) snprintf(paths[n++], sizeof paths[0], "%s", plugin);
    else {
        char exe[PATH_MAX] = "";
        ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (k > 0) {
            exe[k] = '\0';
            n += folder_of(exe, paths[n], sizeof paths[0]);
        }
        Dl_info info;
        if (dladdr((void *)amp_comm_open_mpi, &info) && info.dli_fname && strcmp(info.dli_fname, exe) != 0)
            n += folder_of(info.dli_fname, paths[n], sizeof paths[0]);
        snprintf(paths[n++], sizeof paths[0], "%s", AMP_COMM_PLUGIN_FILE);
    }
    tried[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        /* RTLD_GLOBAL: Open MPI opens components of its own that look for libmpi's symbols
         * in the global scope. */
        void *lib = dlopen(paths[i], RTLD_NOW | RTLD_GLOBAL);
        if (lib) return lib;
        size_t l = strlen(tried);
        if (snprintf(tried + l, tried_len - l, "%s%s (%s)", i ? "; " : "", paths[i], dlerror()) < 0) break;
    }
    return NULL;
}

AmpCode amp_comm_open_mpi(const char *plugin, double timeout, AmpComm **out, AmpStatus *st) {
    *out = NULL;
    pthread_mutex_lock(&mpi_lock);
    AmpCode rc = AMP_OK;
    if (!mpi_open) {
        char tried[2048];
        void *lib = open_plugin(plugin, tried, sizeof tried);
        void *sym = lib ? dlsym(lib, AMP_COMM_PLUGIN_ENTRY) : NULL;
        AmpCommPluginOpen open_fn;
        /* dlsym returns void *; POSIX guarantees the function pointer survives the trip. */
        memcpy(&open_fn, &sym, sizeof open_fn);
        if (!lib) {
            st->code = AMP_ERR_UNSUPPORTED;
            snprintf(st->msg, sizeof st->msg,
                     "data parallel: the MPI plugin " AMP_COMM_PLUGIN_FILE " did not open (tried %.800s): build "
                     "ampc with MPI (libopenmpi-dev) or set AMP_MPI_PLUGIN to its path", tried);
            rc = st->code;
        } else if (!sym) {
            st->code = AMP_ERR_UNSUPPORTED;
            snprintf(st->msg, sizeof st->msg, "data parallel: the MPI plugin has no %s", AMP_COMM_PLUGIN_ENTRY);
            rc = st->code;
        } else if (!(rc = open_fn(AMP_COMM_ABI, timeout, &mpi_comm, st))) {
            mpi_open = true;
        }
    }
    if (!rc) *out = &mpi_comm;
    pthread_mutex_unlock(&mpi_lock);
    return rc;
}

void amp_comm_close(AmpComm *c) {
    if (c && c != &mpi_comm) free(c);
}

uint64_t amp_hash_bytes(uint64_t h, const void *bytes, size_t n) {
    const unsigned char *p = bytes;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}
