/* ir/parallel.h: ranges sliced over libgomp's team. Every item is visited once, slices
 * within one row of `align`, no slice under `grain`, one slice on the calling thread where
 * the range is small, one thread is asked for, or the caller is in a parallel region
 * already; and what the team size follows (the thread knob). Skipped where libgomp cannot
 * be opened. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/parallel.h"

static void need_openmp(void) {
    if (!amp_openmp_load()) cr_skip_test("libgomp cannot be opened");
}

enum { MAX_SLICES = 64 };

typedef struct Seen {
    int64_t n;
    atomic_uchar *hits; /* per item */
    atomic_int slices;
    int64_t from[MAX_SLICES], to[MAX_SLICES];
    pthread_t who[MAX_SLICES];
} Seen;

static void note(void *ctx, int64_t from, int64_t to) {
    Seen *s = ctx;
    int k = atomic_fetch_add(&s->slices, 1);
    if (k < MAX_SLICES) s->from[k] = from, s->to[k] = to, s->who[k] = pthread_self();
    for (int64_t i = from; i < to; i++) atomic_fetch_add(&s->hits[i], 1);
}

/* Runs amp_parallel_for over n items; every item exactly once. */
static Seen *run(int64_t n, int64_t grain, int64_t align) {
    Seen *s = calloc(1, sizeof *s);
    s->n = n;
    s->hits = calloc((size_t)(n ? n : 1), sizeof *s->hits);
    amp_parallel_for(n, grain, align, note, s);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(atomic_load(&s->hits[i]), 1, "item %lld seen %d times", (long long)i, (int)atomic_load(&s->hits[i]));
    return s;
}

static void done(Seen *s) {
    free(s->hits);
    free(s);
}

Test(parallel, two_threads_split_the_range_at_align) {
    need_openmp();
    amp_threads_set(2);
    cr_assert_eq(amp_parallel_threads(), 2);
    Seen *s = run(10000, 100, 1024);
    cr_assert_eq(atomic_load(&s->slices), 2);
    for (int k = 0; k < 2; k++) {
        cr_assert(s->to[k] - s->from[k] >= 100);
        cr_assert(s->from[k] % 1024 == 0, "a slice starts at %lld", (long long)s->from[k]);
    }
    cr_assert(!pthread_equal(s->who[0], s->who[1]), "both slices ran on one thread");
    done(s);
    amp_threads_set(0);
}

Test(parallel, more_threads_than_grains_uses_fewer) {
    need_openmp();
    amp_threads_set(8);
    Seen *s = run(250, 100, 1); /* room for two slices of 100 */
    cr_assert_eq(atomic_load(&s->slices), 2);
    done(s);
    amp_threads_set(0);
}

Test(parallel, small_ranges_and_one_thread_stay_on_the_caller) {
    need_openmp();
    amp_threads_set(2);
    Seen *s = run(150, 100, 1); /* under 2 * grain */
    cr_assert_eq(atomic_load(&s->slices), 1);
    cr_assert(pthread_equal(s->who[0], pthread_self()));
    cr_assert_eq(s->from[0], 0);
    cr_assert_eq(s->to[0], 150);
    done(s);
    amp_threads_set(1);
    cr_assert_eq(amp_parallel_threads(), 1);
    s = run(100000, 1, 1);
    cr_assert_eq(atomic_load(&s->slices), 1);
    done(s);
    s = run(0, 1, 1); /* nothing to do: no call */
    cr_assert_eq(atomic_load(&s->slices), 0);
    done(s);
    amp_threads_set(0);
}

/* A body that itself asks for a parallel range runs it on its own thread. */
static void nested(void *ctx, int64_t from, int64_t to) {
    atomic_int *inner_slices = ctx;
    Seen *s = calloc(1, sizeof *s);
    s->hits = calloc(10000, sizeof *s->hits);
    amp_parallel_for(10000, 1, 1, note, s);
    atomic_fetch_add(inner_slices, atomic_load(&s->slices));
    free(s->hits);
    free(s);
    (void)from, (void)to;
}

Test(parallel, inside_a_parallel_region_runs_alone) {
    need_openmp();
    amp_threads_set(2);
    atomic_int inner = 0;
    amp_parallel_for(2, 1, 1, nested, &inner);
    cr_assert_eq(atomic_load(&inner), 2, "each of the 2 outer slices ran its range as one slice");
    amp_threads_set(0);
}
