/* The arena behind every model: memory comes zeroed and 16-byte aligned whatever the
 * sizes and however blocks turn over; a size hint (amp_arena_expect) puts what follows in
 * one block and changes nothing else; the test limit still bites; the prefault helper
 * maps the hinted pages without touching what is written meanwhile; big tables come
 * zeroed and mapped. */
#define _DEFAULT_SOURCE /* mincore, MADV_POPULATE_WRITE */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ir/arena.h"

static bool all_zero(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* Allocates `count` pieces of sizes cycling through `sizes`, checks each is aligned and
 * zeroed, and scribbles over it (so a piece handed out twice would show). */
static void allocate_and_check(AmpArena *a, const size_t *sizes, size_t n_sizes, size_t count) {
    for (size_t k = 0; k < count; k++) {
        size_t n = sizes[k % n_sizes];
        unsigned char *p = amp_arena_alloc(a, n);
        cr_assert_not_null(p, "allocation %zu of %zu bytes failed", k, n);
        cr_assert_eq((uintptr_t)p % 16, 0, "allocation %zu of %zu bytes is not 16-byte aligned", k, n);
        cr_assert(all_zero(p, n), "allocation %zu of %zu bytes is not zeroed", k, n);
        memset(p, 0xA5, n);
    }
}

static const size_t SIZES[] = {1, 7, 16, 24, 100, 4096, 17, 65536, 3, 300000, 40, 2u << 20, 9};

Test(arena, zeroed_and_aligned_across_blocks) {
    AmpArena a;
    amp_arena_init(&a);
    allocate_and_check(&a, SIZES, sizeof SIZES / sizeof SIZES[0], 400);
    cr_assert_gt(a.used_bytes, (size_t)16 << 20);
    amp_arena_free(&a);
    cr_assert_eq(a.used_bytes, 0);
    /* A freed arena is as good as new. */
    allocate_and_check(&a, SIZES, sizeof SIZES / sizeof SIZES[0], 50);
    amp_arena_free(&a);
}

Test(arena, a_hint_puts_what_follows_in_one_block) {
    AmpArena a;
    amp_arena_init(&a);
    (void)amp_arena_alloc(&a, 100); /* a small block first, as a model's header makes */
    const size_t piece = 256 * 1024, n = 16;
    amp_arena_expect(&a, n * piece);
    unsigned char *first = amp_arena_alloc(&a, piece);
    cr_assert_not_null(first);
    for (size_t k = 1; k < n; k++) {
        unsigned char *p = amp_arena_alloc(&a, piece);
        cr_assert_eq(p, first + k * piece, "piece %zu of the hinted %zu bytes is not in the hinted block", k,
                     n * piece);
        cr_assert(all_zero(p, piece));
    }
    /* Past the hint, allocations go on as before. */
    allocate_and_check(&a, SIZES, sizeof SIZES / sizeof SIZES[0], 60);
    amp_arena_free(&a);
}

Test(arena, hints_small_huge_and_repeated_change_nothing_else) {
    AmpArena a;
    amp_arena_init(&a);
    amp_arena_expect(&a, 0);
    amp_arena_expect(&a, 1000);     /* below the threshold: ignored */
    amp_arena_expect(&a, SIZE_MAX); /* capped */
    amp_arena_expect(&a, (size_t)3 << 20);
    amp_arena_expect(&a, (size_t)3 << 20); /* the block made has room: nothing new */
    allocate_and_check(&a, SIZES, sizeof SIZES / sizeof SIZES[0], 100);
    amp_arena_free(&a);
}

Test(arena, the_limit_holds_after_a_hint) {
    AmpArena a;
    amp_arena_init(&a);
    a.limit = 1 << 20;
    amp_arena_expect(&a, (size_t)8 << 20);
    cr_assert_not_null(amp_arena_alloc(&a, 512 * 1024));
    cr_assert_null(amp_arena_alloc(&a, 768 * 1024), "an allocation past the limit succeeded");
    cr_assert_not_null(amp_arena_alloc(&a, 256 * 1024));
    amp_arena_free(&a);
}

/* How many of the pages of [p, p + n) are resident (p page aligned). */
static size_t resident_pages(const void *p, size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), np = (n + page - 1) / page, count = 0;
    unsigned char *vec = malloc(np);
    cr_assert_not_null(vec);
    cr_assert_eq(mincore((void *)p, n, vec), 0);
    for (size_t i = 0; i < np; i++) count += vec[i] & 1;
    free(vec);
    return count;
}

/* Whether this system has MADV_POPULATE_WRITE (Linux 5.14 on). */
static bool can_populate(void) {
#ifdef MADV_POPULATE_WRITE
    size_t len = (size_t)sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    bool ok = madvise(p, len, MADV_POPULATE_WRITE) == 0;
    munmap(p, len);
    return ok;
#else
    return false;
#endif
}

Test(arena, prefault_maps_the_hinted_pages) {
    if (!can_populate()) cr_skip_test("the system has no MADV_POPULATE_WRITE");
    AmpArena a;
    amp_arena_init(&a);
    const size_t hint = (size_t)24 << 20;
    amp_arena_expect(&a, hint);
    unsigned char *base = amp_arena_alloc(&a, 16);
    cr_assert_not_null(base);
    amp_arena_prefault(&a, hint);
    cr_assert_not_null(a.prefault, "no helper thread started");
    /* The helper starts at the huge page after the one allocations come from (which the
     * caller is about to touch), and maps the rest of the hint in well under a second;
     * wait up to 20 s on a loaded host. */
    const uintptr_t huge = (uintptr_t)2 << 20;
    unsigned char *from = (unsigned char *)(((uintptr_t)base + huge) & ~(huge - 1));
    size_t len = hint - (size_t)(from - base) - 4096, want = len / 4096;
    struct timespec pause = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 2000 && resident_pages(from, len) < want; i++) nanosleep(&pause, NULL);
    cr_assert_eq(resident_pages(from, len), want, "the hinted pages were not mapped");
    amp_arena_prefault_stop(&a);
    cr_assert_null(a.prefault);
    amp_arena_prefault_stop(&a); /* again: nothing to do */
    cr_assert(all_zero(from, len), "prefaulted memory is not zero");
    amp_arena_free(&a);
}

Test(arena, writes_beside_the_prefault_stay_and_fresh_memory_is_zero) {
    AmpArena a;
    amp_arena_init(&a);
    const size_t piece = 4096 + 48, n = 8192; /* 32 MiB, crossing pages at odd places */
    amp_arena_expect(&a, n * piece);
    amp_arena_prefault(&a, n * piece);
    unsigned char **ps = malloc(n * sizeof *ps);
    cr_assert_not_null(ps);
    for (size_t k = 0; k < n; k++) {
        ps[k] = amp_arena_alloc(&a, piece);
        cr_assert_not_null(ps[k]);
        cr_assert(all_zero(ps[k], piece), "piece %zu is not zeroed", k);
        memset(ps[k], (int)(k % 251) + 1, piece);
    }
    amp_arena_prefault_stop(&a);
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < piece; i += 509)
            cr_assert_eq(ps[k][i], (unsigned char)(k % 251 + 1), "piece %zu byte %zu changed", k, i);
    free(ps);
    /* Stopping early and freeing with the helper still running are both fine. */
    amp_arena_free(&a);
    amp_arena_expect(&a, (size_t)64 << 20);
    amp_arena_prefault(&a, (size_t)64 << 20);
    amp_arena_free(&a);
    cr_assert_null(a.prefault);
}

Test(arena, big_tables_come_zeroed) {
    const size_t sizes[] = {0, 100, 65535, 65536, 300000, (size_t)2 << 20, (size_t)5 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *t = amp_table_zalloc(sizes[i]), *b = amp_big_zalloc(sizes[i]);
        cr_assert(t && b, "%zu bytes: out of memory", sizes[i]);
        cr_assert(all_zero(t, sizes[i]) && all_zero(b, sizes[i]), "%zu bytes: not zeroed", sizes[i]);
        memset(t, 1, sizes[i]);
        memset(b, 1, sizes[i]);
        amp_big_free(t, sizes[i]);
        amp_big_free(b, sizes[i]);
    }
}
