/* A bump allocator: everything a model holds (nodes, values, names, attribute data)
 * lives in one arena and is freed with it. Nothing is freed piecemeal; a deleted node
 * simply becomes unreachable until the model is freed. */
#ifndef AMP_ARENA_H
#define AMP_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct AmpArenaBlock AmpArenaBlock;

typedef struct AmpArena {
    AmpArenaBlock *head; /* newest block first */
    size_t used_bytes;   /* handed out so far, for reports */
} AmpArena;

void amp_arena_init(AmpArena *a);
void amp_arena_free(AmpArena *a);

/* Zeroed, 16-byte aligned memory; NULL only when the system is out of memory or
 * n * size overflows. */
void *amp_arena_alloc(AmpArena *a, size_t size);
void *amp_arena_calloc(AmpArena *a, size_t n, size_t size);
/* Grows an array allocated from the arena (old contents are copied, old block is left). */
void *amp_arena_grow(AmpArena *a, void *old, size_t old_n, size_t new_n, size_t size);
char *amp_arena_strdup(AmpArena *a, const char *s); /* NULL stays NULL */
void *amp_arena_memdup(AmpArena *a, const void *p, size_t n);

/* Overflow-safe size arithmetic: return 0 on overflow, else 1 and the result. */
int amp_mul_size(size_t a, size_t b, size_t *out);
int amp_add_size(size_t a, size_t b, size_t *out);

#endif
