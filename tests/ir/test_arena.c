/* The arena behind every model: memory comes zeroed and 16-byte aligned whatever the
 * sizes and however blocks turn over; a size hint (amp_arena_expect) puts what follows in
 * one block and changes nothing else; the test limit still bites. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <string.h>

#include "arena.h"

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
