/* Bump allocator behind every model: blocks that grow from 64 KiB to 8 MiB, each mapped
 * zeroed from the system (small ones written-in at once, big ones on huge pages where the
 * system offers them, so a model costs few page faults), freed all at once. */
/* MADV_HUGEPAGE and MAP_ANONYMOUS are not POSIX. */
#define _DEFAULT_SOURCE
#include "ir/arena.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A block's header lives apart from its memory, so making a block touches none of its
 * pages: a big one is left whole to amp_arena_prefault's helper. */
struct AmpArenaBlock {
    AmpArenaBlock *next;
    size_t cap, used;
    unsigned char *data; /* 16-byte aligned: the start of the mapping */
    size_t mapped;       /* length of the mapping */
};

enum { AMP_ARENA_FIRST = 64 * 1024, AMP_ARENA_MAX = 8 * 1024 * 1024 };
/* Blocks of this many bytes or more are mapped directly, 2 MiB aligned. */
#define AMP_ARENA_MAP_MIN ((size_t)2 << 20)
#define AMP_HUGE ((size_t)2 << 20)
/* Small blocks are whole pages of this size (a multiple of the system's). */
#define AMP_PAGE ((size_t)4096)
/* amp_arena_expect: smaller hints change nothing (a huge page costs about as much to
 * zero as faulting in 1 MiB of small pages); bigger ones are capped at 4 GiB (1 GiB
 * where size_t has 32 bits). */
#define AMP_ARENA_EXPECT_MIN ((size_t)1 << 20)
#define AMP_ARENA_EXPECT_MAX ((size_t)1 << 30 << (sizeof(size_t) > 4 ? 2 : 0))

void amp_arena_init(AmpArena *a) {
    a->head = NULL;
    a->used_bytes = 0;
    a->next_block = AMP_ARENA_FIRST;
    a->limit = 0;
    a->prefault = NULL;
}

static void block_free(AmpArenaBlock *b) {
    munmap(b->data, b->mapped);
    free(b);
}

void amp_arena_free(AmpArena *a) {
    amp_arena_prefault_stop(a);
    AmpArenaBlock *b = a->head;
    while (b) {
        AmpArenaBlock *next = b->next;
        block_free(b);
        b = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
    a->next_block = AMP_ARENA_FIRST;
}

void amp_arena_adopt(AmpArena *a, AmpArena *from) {
    amp_arena_prefault_stop(from);
    AmpArenaBlock *first = from->head;
    if (first) {
        AmpArenaBlock *last = first;
        while (last->next) last = last->next;
        if (a->head) {
            last->next = a->head->next;
            a->head->next = first;
        } else {
            a->head = first;
        }
    }
    a->used_bytes += from->used_bytes;
    from->head = NULL;
    from->used_bytes = 0;
}

/* size rounded up to whole huge pages; false on overflow. */
static bool huge_len(size_t size, size_t *len) {
    if (!amp_add_size(size, AMP_HUGE - 1, len)) return false;
    *len &= ~(AMP_HUGE - 1);
    return true;
}

/* size rounded up to whole small pages, mapped zeroed (`touch`: every page mapped
 * writable now, in one call); NULL on overflow or failure. */
static void *map_pages(size_t size, bool touch, size_t *len) {
    if (!amp_add_size(size, AMP_PAGE - 1, len)) return NULL;
    *len &= ~(AMP_PAGE - 1);
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_POPULATE
    if (touch) flags |= MAP_POPULATE;
#endif
    void *p = mmap(NULL, *len, PROT_READ | PROT_WRITE, flags, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* len (whole huge pages) zeroed bytes mapped 2 MiB aligned, so every page can be huge. */
static void *map_huge(size_t len) {
    size_t map;
    if (!amp_add_size(len, AMP_HUGE, &map)) return NULL;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_NORESERVE
    flags |= MAP_NORESERVE; /* pages are taken as they are touched */
#endif
    uint8_t *p = mmap(NULL, map, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uint8_t *start = (uint8_t *)(((uintptr_t)p + AMP_HUGE - 1) & ~(uintptr_t)(AMP_HUGE - 1));
    if (start > p) munmap(p, (size_t)(start - p));
    if (start + len < p + map) munmap(start + len, (size_t)(p + map - (start + len)));
#ifdef MADV_HUGEPAGE
    madvise(start, len, MADV_HUGEPAGE);
#endif
    return start;
}

/* Big tables are mappings of their own from this size on (below it, calloc). */
#define AMP_BIG_MAP_MIN ((size_t)64 << 10)

/* Zeroed memory of its own mapping: huge pages from 2 MiB on; `touch`: every page mapped
 * writable now, in one call, rather than a fault per page later. */
static void *big_map(size_t size, bool touch) {
    size_t len;
    if (size < AMP_BIG_MAP_MIN) return calloc(1, size ? size : 1);
    if (size < AMP_ARENA_MAP_MIN) return map_pages(size, touch, &len);
    uint8_t *p = huge_len(size, &len) ? map_huge(len) : NULL;
    if (p && touch) amp_populate(p, len);
    return p;
}

void *amp_big_zalloc(size_t size) {
    return big_map(size, false);
}

void *amp_table_zalloc(size_t size) {
    return big_map(size, true);
}

void amp_advise_huge(void *p, size_t size) {
#ifdef MADV_HUGEPAGE
    uintptr_t start = ((uintptr_t)p + AMP_HUGE - 1) & ~(uintptr_t)(AMP_HUGE - 1);
    uintptr_t end = ((uintptr_t)p + size) & ~(uintptr_t)(AMP_HUGE - 1);
    if (size >= 2 * AMP_HUGE && end > start) madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)p, (void)size;
#endif
}

void amp_populate(void *p, size_t len) {
#ifdef MADV_POPULATE_WRITE
    uintptr_t start = (uintptr_t)p & ~(uintptr_t)(AMP_PAGE - 1), end = (uintptr_t)p + len;
    if (len) madvise((void *)start, end - start, MADV_POPULATE_WRITE); /* a hint: faults do it otherwise */
#else
    (void)p, (void)len;
#endif
}

void amp_big_free(void *p, size_t size) {
    size_t len;
    if (!p) return;
    if (size < AMP_BIG_MAP_MIN) free(p);
    else if (size < AMP_ARENA_MAP_MIN) munmap(p, (size + AMP_PAGE - 1) & ~(AMP_PAGE - 1));
    else if (huge_len(size, &len)) munmap(p, len);
}

/* A zeroed block with room for at least cap bytes: always a mapping of its own, zeroed
 * by the system. Small blocks are mapped written-in at once (one call, not a fault per
 * 4 KiB: at 1k nodes, 261 -> 117 page faults and 6-10% of the conversion's CPU); a bump
 * allocator fills its blocks in order, so only the newest block's tail can go unused.
 * Big ones are faulted on huge pages as they are touched, or by amp_arena_prefault's
 * helper. */
static AmpArenaBlock *block_new(size_t cap) {
    size_t len;
    unsigned char *p;
    if (cap < AMP_ARENA_MAP_MIN) p = map_pages(cap, true, &len);
    else p = huge_len(cap, &len) ? map_huge(len) : NULL;
    if (!p) return NULL;
    AmpArenaBlock *b = malloc(sizeof *b);
    if (!b) {
        munmap(p, len);
        return NULL;
    }
    *b = (AmpArenaBlock){NULL, len, 0, p, len};
    return b;
}

void amp_arena_expect(AmpArena *a, size_t bytes) {
    if (bytes < AMP_ARENA_EXPECT_MIN) return;
    if (bytes > AMP_ARENA_EXPECT_MAX) bytes = AMP_ARENA_EXPECT_MAX;
    AmpArenaBlock *b = a->head;
    if (b && b->cap - b->used >= bytes) return;
    /* At least AMP_ARENA_MAP_MIN, so the block is mapped on huge pages; pages are taken
     * as they are touched, so the unused tail costs nothing. */
    AmpArenaBlock *nb = block_new(bytes < AMP_ARENA_MAP_MIN ? AMP_ARENA_MAP_MIN : bytes);
    if (!nb) return; /* only a hint: allocations find their own blocks */
    nb->next = b;
    a->head = nb;
}

/* ---- prefaulting ------------------------------------------------------------------ */

struct AmpPrefault {
    pthread_t thread;
    uint8_t *start; /* page aligned */
    size_t len;
    atomic_bool stop;
};

/* One huge page per call: the helper looks at `stop` this often. */
#define AMP_PREFAULT_STEP AMP_HUGE
/* Smaller ranges (after the page skipped) are not worth a thread. */
#define AMP_PREFAULT_MIN ((size_t)1 << 20)

static void *prefault_run(void *arg) {
    AmpPrefault *pf = arg;
#ifdef MADV_POPULATE_WRITE
    for (size_t off = 0; off < pf->len && !atomic_load_explicit(&pf->stop, memory_order_relaxed);
         off += AMP_PREFAULT_STEP) {
        size_t n = pf->len - off < AMP_PREFAULT_STEP ? pf->len - off : AMP_PREFAULT_STEP;
        if (madvise(pf->start + off, n, MADV_POPULATE_WRITE) != 0) break; /* older system: give up */
    }
#endif
    return NULL;
}

void amp_arena_prefault(AmpArena *a, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    AmpArenaBlock *b = a->head;
    if (a->prefault || !b) return;
    size_t room = b->cap - b->used;
    if (bytes > room) bytes = room;
    /* The caller is about to touch the (huge) page it allocates from: the helper starts
     * at the next one. Were both to fault the same huge page at once, each would zero
     * 2 MiB and one would throw its copy away. */
    uintptr_t at = (uintptr_t)(b->data + b->used);
    uintptr_t from = (at + AMP_HUGE) & ~(uintptr_t)(AMP_HUGE - 1);
    uintptr_t to = (at + bytes) & ~(uintptr_t)(AMP_PAGE - 1);
    if (to <= from || to - from < AMP_PREFAULT_MIN) return;
    AmpPrefault *pf = malloc(sizeof *pf);
    if (!pf) return;
    pf->start = (uint8_t *)from;
    pf->len = (size_t)(to - from);
    atomic_init(&pf->stop, false);
    /* A small stack: the helper only makes system calls. */
    pthread_attr_t attr;
    bool ok = pthread_attr_init(&attr) == 0;
    if (ok) {
        pthread_attr_setstacksize(&attr, 64 * 1024); /* refused below the minimum: default */
        ok = pthread_create(&pf->thread, &attr, prefault_run, pf) == 0;
        pthread_attr_destroy(&attr);
    }
    if (ok) a->prefault = pf;
    else free(pf);
#else
    (void)a, (void)bytes;
#endif
}

void amp_arena_prefault_stop(AmpArena *a) {
    AmpPrefault *pf = a->prefault;
    if (!pf) return;
    atomic_store(&pf->stop, true);
    pthread_join(pf->thread, NULL);
    free(pf);
    a->prefault = NULL;
}

int amp_mul_size(size_t a, size_t b, size_t *out) {
    if (b && a > SIZE_MAX / b) return 0;
    *out = a * b;
    return 1;
}

int amp_add_size(size_t a, size_t b, size_t *out) {
    if (a > SIZE_MAX - b) return 0;
    *out = a + b;
    return 1;
}

void *amp_arena_alloc_raw(AmpArena *a, size_t size) {
    size_t need;
    if (!amp_add_size(size, 15, &need)) return NULL;
    need &= ~(size_t)15;
    if (need == 0) need = 16;
    if (a->limit && (need > a->limit || a->used_bytes > a->limit - need)) return NULL;
    AmpArenaBlock *b = a->head;
    if (!b || b->cap - b->used < need) {
        /* Large requests get a block of their own, placed behind the current one so
         * the current block's free space is not wasted. */
        if (!a->next_block) a->next_block = AMP_ARENA_FIRST;
        bool own = need > a->next_block / 4;
        AmpArenaBlock *nb = block_new(own ? need : a->next_block);
        if (!nb) return NULL;
        if (b && own) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
            if (a->next_block < AMP_ARENA_MAX) a->next_block *= 2;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += need;
    a->used_bytes += need;
    return p;
}

void *amp_arena_alloc(AmpArena *a, size_t size) {
    return amp_arena_alloc_raw(a, size); /* fresh memory is zero: see arena.h */
}

void *amp_arena_calloc(AmpArena *a, size_t n, size_t size) {
    size_t total;
    if (!amp_mul_size(n, size, &total)) return NULL;
    return amp_arena_alloc(a, total);
}

void *amp_arena_grow(AmpArena *a, void *old, size_t old_n, size_t new_n, size_t size) {
    size_t total, keep = old_n < new_n ? old_n : new_n;
    if (!amp_mul_size(new_n, size, &total)) return NULL;
    uint8_t *p = amp_arena_alloc_raw(a, total); /* zero: see arena.h */
    if (p && old && keep) memcpy(p, old, keep * size);
    return p;
}

char *amp_arena_strdup(AmpArena *a, const char *s) {
    if (!s) return NULL;
    return amp_arena_memdup(a, s, strlen(s) + 1);
}

char *amp_arena_strndup(AmpArena *a, const char *s, size_t n) {
    size_t total;
    if (!amp_add_size(n, 1, &total)) return NULL;
    char *q = amp_arena_alloc_raw(a, total);
    if (!q) return NULL;
    amp_copy(q, s, n);
    q[n] = '\0';
    return q;
}

void *amp_arena_memdup(AmpArena *a, const void *p, size_t n) {
    void *q = amp_arena_alloc_raw(a, n);
    if (q && n) memcpy(q, p, n);
    return q;
}
