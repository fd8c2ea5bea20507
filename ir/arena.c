/* Bump allocator behind every model: big blocks, freed all at once. */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

struct AmpArenaBlock {
    AmpArenaBlock *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

enum { AMP_ARENA_BLOCK = 64 * 1024 };

void amp_arena_init(AmpArena *a) {
    a->head = NULL;
    a->used_bytes = 0;
}

void amp_arena_free(AmpArena *a) {
    AmpArenaBlock *b = a->head;
    while (b) {
        AmpArenaBlock *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
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

void *amp_arena_alloc(AmpArena *a, size_t size) {
    size_t need;
    if (!amp_add_size(size, 15, &need)) return NULL;
    need &= ~(size_t)15;
    if (need == 0) need = 16;
    AmpArenaBlock *b = a->head;
    if (!b || b->cap - b->used < need) {
        /* Large requests get a block of their own, placed behind the current one so
         * the current block's free space is not wasted. */
        size_t cap = need > AMP_ARENA_BLOCK / 4 ? need : AMP_ARENA_BLOCK;
        size_t total;
        if (!amp_add_size(sizeof(AmpArenaBlock), cap, &total)) return NULL;
        AmpArenaBlock *nb = malloc(total);
        if (!nb) return NULL;
        nb->cap = cap;
        nb->used = 0;
        if (b && cap != AMP_ARENA_BLOCK) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += need;
    a->used_bytes += need;
    memset(p, 0, need);
    return p;
}

void *amp_arena_calloc(AmpArena *a, size_t n, size_t size) {
    size_t total;
    if (!amp_mul_size(n, size, &total)) return NULL;
    return amp_arena_alloc(a, total);
}

void *amp_arena_grow(AmpArena *a, void *old, size_t old_n, size_t new_n, size_t size) {
    void *p = amp_arena_calloc(a, new_n, size);
    if (p && old && old_n) memcpy(p, old, (old_n < new_n ? old_n : new_n) * size);
    return p;
}

char *amp_arena_strdup(AmpArena *a, const char *s) {
    if (!s) return NULL;
    return amp_arena_memdup(a, s, strlen(s) + 1);
}

void *amp_arena_memdup(AmpArena *a, const void *p, size_t n) {
    void *q = amp_arena_alloc(a, n);
    if (q && n) memcpy(q, p, n);
    return q;
}
