/* A bump allocator: everything a model holds (nodes, values, names, attribute data)
 * lives in one arena and is freed with it. Nothing is freed piecemeal; a deleted node
 * simply becomes unreachable until the model is freed. */
#ifndef AMP_ARENA_H
#define AMP_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct AmpArenaBlock AmpArenaBlock;
typedef struct AmpPrefault AmpPrefault;

typedef struct AmpArena {
    AmpArenaBlock *head; /* newest block first */
    size_t used_bytes;   /* handed out so far, for reports */
    size_t next_block;   /* size of the next regular block: doubles up to a cap */
    size_t limit;        /* 0: none; else allocations past this many bytes fail (tests use
                            it to make an edit run out of memory) */
    AmpPrefault *prefault; /* amp_arena_prefault's helper thread while it runs, else NULL */
} AmpArena;

void amp_arena_init(AmpArena *a);
void amp_arena_free(AmpArena *a);

/* Zeroed, 16-byte aligned memory; NULL only when the system is out of memory or
 * n * size overflows. (Blocks come zeroed from the system and no byte is handed out
 * twice, so zeroing costs nothing.) */
void *amp_arena_alloc(AmpArena *a, size_t size);
void *amp_arena_calloc(AmpArena *a, size_t n, size_t size);
/* The same, not zeroed: for memory the caller fills at once. */
void *amp_arena_alloc_raw(AmpArena *a, size_t size);
/* A hint that about `bytes` more will be allocated soon (a loader that has counted the
 * nodes): from 1 MiB on, the next block is one mapping that big, on huge pages where the
 * system offers them, which costs a few page faults instead of one per 4 KiB. Pages are
 * only taken as they are touched, so an overestimate costs address space, not memory. */
void amp_arena_expect(AmpArena *a, size_t bytes);
/* Has a helper thread fault in (MADV_POPULATE_WRITE) the next `bytes` of the current
 * block while the caller goes on allocating and filling: zeroing pages is a fifth of a
 * big model's load on some systems, and this puts it on another core. It starts at the
 * huge page after the one allocations come from (the caller is about to touch that one),
 * and only when at least 1 MiB lies beyond. The pages' contents are not touched, so the
 * caller's writes meanwhile are safe; mappings the caller makes meanwhile wait for the
 * helper's current 2 MiB step. Stopped (and joined) by amp_arena_prefault_stop or
 * amp_arena_free; does nothing where the system lacks the call or the thread cannot start. `bytes` is taken as a good
 * estimate of what will be used (an overestimate costs memory). */
void amp_arena_prefault(AmpArena *a, size_t bytes);
/* Stops the helper (it stops between 2 MiB steps) and waits for it; safe to repeat. */
void amp_arena_prefault_stop(AmpArena *a);
/* Moves every block of `from` into `a` (a keeps allocating from its current block);
 * `from` is left empty. For an arena filled by another thread, once that thread is done. */
void amp_arena_adopt(AmpArena *a, AmpArena *from);
/* Grows an array allocated from the arena (old contents are copied, old block is left). */
void *amp_arena_grow(AmpArena *a, void *old, size_t old_n, size_t new_n, size_t size);
char *amp_arena_strdup(AmpArena *a, const char *s); /* NULL stays NULL */
char *amp_arena_strndup(AmpArena *a, const char *s, size_t n); /* n bytes and a NUL */
void *amp_arena_memdup(AmpArena *a, const void *p, size_t n);

/* Zeroed memory for a big table outside any arena (on huge pages where the system offers
 * them, when it is big); NULL when out of memory. Freed with the same size. */
void *amp_big_zalloc(size_t size);
/* The same for a table that is read and written all over at once (a hash table, an
 * array indexed by value id): its pages are mapped writable up front. A page first read
 * maps the shared zero page, and the write that follows faults again (with a TLB flush
 * on every core the process runs on): two faults, not one. */
void *amp_table_zalloc(size_t size);
/* Frees what either gave, with the size asked for. */
void amp_big_free(void *p, size_t size);
/* A hint: the pages of [p, p + len) (memory of this process's own, writable) are mapped
 * written-in now, in one call rather than a page fault each as they are reached. */
void amp_populate(void *p, size_t len);
/* A hint that the malloc'd buffer p (size bytes, about to be filled) be backed by huge
 * pages where the system offers them: a big weight converted to 16 bits then costs a few
 * hundred page faults instead of a quarter million. Changes nothing else. */
void amp_advise_huge(void *p, size_t size);

/* memcpy for the short strings the IR is made of: compilers may expand a memcpy of
 * unknown size into `rep movs`, whose start-up cost dwarfs a copy of a dozen bytes. */
static inline void amp_copy(void *dst, const void *src, size_t n) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (n > 32) {
        memcpy(d, s, n);
    } else if (n >= 16) {
        unsigned char a[16], b[16];
        memcpy(a, s, 16);
        memcpy(b, s + n - 16, 16);
        memcpy(d, a, 16);
        memcpy(d + n - 16, b, 16);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else {
        for (size_t i = 0; i < n; i++) d[i] = s[i];
    }
}

/* Overflow-safe size arithmetic: return 0 on overflow, else 1 and the result. */
int amp_mul_size(size_t a, size_t b, size_t *out);
int amp_add_size(size_t a, size_t b, size_t *out);

#endif
