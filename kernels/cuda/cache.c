/* The CUDA backend's per-session caches (cuda_impl.h): cuBLASLt plans and cuDNN
 * algorithms keyed by the shape they were made for. A session sees few distinct shapes, so
 * the entries are a list searched in order, newest first. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_impl.h"

typedef struct Entry {
    int family;
    size_t key_len;
    void *key;
    void *value;
    void (*free_value)(void *);
    struct Entry *next;
} Entry;

struct AmpCudaCache {
    Entry *head;
};

void *amp_cuda_cache_get(AmpCudaCtx *c, int family, const void *key, size_t key_len) {
    for (Entry *e = c->cache ? c->cache->head : NULL; e; e = e->next)
        if (e->family == family && e->key_len == key_len && memcmp(e->key, key, key_len) == 0) return e->value;
    return NULL;
}

bool amp_cuda_cache_put(AmpCudaCtx *c, int family, const void *key, size_t key_len, void *value,
                        void (*free_value)(void *)) {
    if (!c->cache && !(c->cache = calloc(1, sizeof *c->cache))) return false;
    Entry *e = malloc(sizeof *e);
    void *k = malloc(key_len ? key_len : 1);
    if (!e || !k) {
        free(e);
        free(k);
        return false;
    }
    memcpy(k, key, key_len);
    *e = (Entry){.family = family, .key_len = key_len, .key = k, .value = value, .free_value = free_value,
                 .next = c->cache->head};
    c->cache->head = e;
    return true;
}

void amp_cuda_cache_free(struct AmpCudaCache *cache) {
    if (!cache) return;
    for (Entry *e = cache->head, *next; e; e = next) {
        next = e->next;
        if (e->free_value) e->free_value(e->value);
        free(e->key);
        free(e);
    }
    free(cache);
}
