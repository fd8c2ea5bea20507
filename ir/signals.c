/* The table of temporary files and foreign mappings, and the handlers that read it
 * (signals.h). A handler may run at any instruction of any thread, so the table is
 * chunks of fixed entries that are never freed or moved: an entry is claimed by one atomic
 * compare-and-swap, filled, then published by its state; a handler reads only published
 * entries and calls only async-signal-safe functions (unlink, write, sigaction, raise,
 * _exit), as git's and rsync's cleanup handlers do. */
/* sigaction, SA_SIGINFO and pthread_sigmask are POSIX. */
#define _POSIX_C_SOURCE 200809L
#include "ir/signals.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "ir/fail.h"

enum { ENTRY_FREE, ENTRY_BUSY, ENTRY_TEMP, ENTRY_MAP };

struct AmpSigEntry {
    atomic_int state;
    const char *name; /* the temporary file's path; the mapped file's name */
    uintptr_t start;  /* a mapping: [start, start + len) */
    size_t len;
};

enum { CHUNK_ENTRIES = 64 };

typedef struct Chunk {
    AmpSigEntry e[CHUNK_ENTRIES];
    _Atomic(struct Chunk *) next; /* allocated once, never freed: a handler may be reading it */
} Chunk;

static Chunk first;
static const char *prog_name = "ampc";

static const int TERMINATING[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
enum { N_TERMINATING = sizeof TERMINATING / sizeof TERMINATING[0] };

static AmpSigEntry *claim(void) {
    for (Chunk *c = &first; c;) {
        for (int i = 0; i < CHUNK_ENTRIES; i++) {
            int expect = ENTRY_FREE;
            if (atomic_compare_exchange_strong(&c->e[i].state, &expect, ENTRY_BUSY)) return &c->e[i];
        }
        Chunk *next = atomic_load(&c->next);
        if (!next) {
            Chunk *fresh = calloc(1, sizeof *fresh);
            if (!fresh) return NULL;
            if (atomic_compare_exchange_strong(&c->next, &next, fresh)) next = fresh;
            else free(fresh); /* another thread linked one: go on in it */
        }
        c = next;
    }
    return NULL;
}

AmpSigEntry *amp_sig_temp(const char *path) {
    AmpSigEntry *e = path ? claim() : NULL;
    if (!e) return NULL;
    e->name = path;
    e->start = 0;
    e->len = 0;
    atomic_store(&e->state, ENTRY_TEMP);
    return e;
}

AmpSigEntry *amp_sig_mapping(const void *data, size_t len, const char *name) {
    AmpSigEntry *e = data && len ? claim() : NULL;
    if (!e) return NULL;
    e->name = name ? name : "";
    e->start = (uintptr_t)data;
    e->len = len;
    atomic_store(&e->state, ENTRY_MAP);
    return e;
}

void amp_sig_forget(AmpSigEntry *e) {
    if (e) atomic_store(&e->state, ENTRY_FREE);
}

static void terminating_set(sigset_t *set) {
    sigemptyset(set);
    for (int i = 0; i < N_TERMINATING; i++) sigaddset(set, TERMINATING[i]);
}

void amp_sig_hold(sigset_t *old) {
    sigset_t set;
    terminating_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

void amp_sig_release(const sigset_t *old) {
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* ---- the handlers: async-signal-safe from here on ---------------------------------- */

static void remove_temps(void) {
    for (Chunk *c = &first; c; c = atomic_load(&c->next))
        for (int i = 0; i < CHUNK_ENTRIES; i++)
            if (atomic_load(&c->e[i].state) == ENTRY_TEMP) unlink(c->e[i].name);
}

static const AmpSigEntry *mapping_at(uintptr_t addr) {
    for (Chunk *c = &first; c; c = atomic_load(&c->next))
        for (int i = 0; i < CHUNK_ENTRIES; i++) {
            const AmpSigEntry *e = &c->e[i];
            if (atomic_load(&e->state) == ENTRY_MAP && addr >= e->start && addr - e->start < e->len) return e;
        }
    return NULL;
}

static void put(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    while (n) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0 && errno != EINTR) return;
        if (w > 0) s += w, n -= (size_t)w;
    }
}

/* The default action of sig, taken now: the process ends as it would have without us. */
static void die_of(int sig) {
    struct sigaction sa = {0};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    raise(sig);
}

static void on_terminate(int sig) {
    int saved = errno;
    remove_temps();
    die_of(sig);
    errno = saved; /* reached only if the default action is to go on */
}

static void on_bus(int sig, siginfo_t *si, void *uctx) {
    (void)uctx;
    int saved = errno;
    /* A fault (si_code > 0), not a kill(2), at an address in a file this process reads. */
    const AmpSigEntry *e = si && si->si_code > 0 ? mapping_at((uintptr_t)si->si_addr) : NULL;
    remove_temps();
    if (e) {
        put(prog_name);
        put(": ");
        put(e->name);
        put(": " AMP_SIG_CUT_SHORT "\n");
        _exit(AMP_ERR_INPUT);
    }
    die_of(sig);
    errno = saved;
}

void amp_sig_install(const char *prog) {
    if (prog) prog_name = prog;
    struct sigaction sa = {0}, old;
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_terminate;
    /* One call a signal (ampc's start-up is short, and each costs): set, and put an
     * ignored one back. */
    for (int i = 0; i < N_TERMINATING; i++)
        if (sigaction(TERMINATING[i], &sa, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
            sigaction(TERMINATING[i], &old, NULL);
    sa.sa_flags = SA_SIGINFO;
    sa.sa_sigaction = on_bus;
    sigaction(SIGBUS, &sa, NULL);
}
