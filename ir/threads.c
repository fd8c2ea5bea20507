/* How many threads one job may use (ir.h: amp_threads), and the CPU backend's process-wide
 * knobs, set by whoever read their variables through the options table: its threads
 * (amp_threads_set, amp_threads_requested) and whether it may use oneDNN (amp_dnnl_set_off). */
/* sched_getaffinity and CPU_COUNT are GNU. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#include "ir/ir.h"

/* By default a load uses no more than this (a cap chosen, not measured: no machine with
 * more CPUs has timed the load yet). */
enum { AMP_THREADS_MAX = 8 };
/* The knob holds at most this many. */
enum { AMP_THREADS_ASKED_MAX = 64 };

static atomic_int set_threads; /* amp_threads_set's count; 0: none */

void amp_threads_set(int n) {
    atomic_store(&set_threads, n < 0 ? 0 : n > AMP_THREADS_ASKED_MAX ? AMP_THREADS_ASKED_MAX : n);
}

bool amp_threads_requested(int *n) {
    int t = atomic_load(&set_threads);
    if (t > 0) *n = t;
    return t > 0;
}

static atomic_bool dnnl_off;

void amp_dnnl_set_off(void) {
    atomic_store(&dnnl_off, true);
}

bool amp_dnnl_set_off_asked(void) {
    return atomic_load(&dnnl_off);
}

int amp_cpus_available(void) {
    long n = 0;
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
    if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1 << 20 ? 1 << 20 : (int)n;
}

int amp_threads(void) {
    int t;
    if (amp_threads_requested(&t)) return t;
    int n = amp_cpus_available();
    return n > AMP_THREADS_MAX ? AMP_THREADS_MAX : n;
}
