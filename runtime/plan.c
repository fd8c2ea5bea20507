/* The memory planner (plan.h): largest buffers first, each at the lowest offset where it
 * fits beside the already placed buffers whose live intervals overlap its own. Simple
 * and within a few percent of the max-live bound on the graphs we run. */
#include "runtime/plan.h"

#include <stdint.h>
#include <stdlib.h>

static size_t round_up(size_t x, size_t a, int *ovf) {
    if (x > SIZE_MAX - (a - 1)) {
        *ovf = 1;
        return 0;
    }
    return (x + a - 1) & ~(a - 1);
}

/* qsort has no context argument: sort pairs (size, first, index) instead. */
typedef struct Key {
    size_t size;
    int first;
    size_t index;
} Key;

static int cmp_key(const void *pa, const void *pb) {
    const Key *a = pa, *b = pb;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

typedef struct Span {
    size_t lo, hi; /* [lo, hi) */
} Span;

static int cmp_span(const void *pa, const void *pb) {
    const Span *a = pa, *b = pb;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

AmpCode amp_plan_offsets(AmpPlanItem *items, size_t n, size_t align, size_t *arena_bytes, AmpStatus *st) {
    *arena_bytes = 0;
    if (!align) align = 64;
    if (align & (align - 1)) return amp_fail(st, AMP_ERR_INTERNAL, "planner: alignment %zu is no power of two", align);
    if (!n) return AMP_OK;
    Key *keys = malloc(n * sizeof *keys);
    size_t *placed = malloc(n * sizeof *placed);
    Span *spans = malloc(n * sizeof *spans);
    size_t *rsize = malloc(n * sizeof *rsize); /* sizes rounded up to `align`, by item */
    AmpCode rc = AMP_OK;
    if (!keys || !placed || !spans || !rsize) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "planner: out of memory");
        goto done;
    }
    int ovf = 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i].last < items[i].first) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "planner: item %zu ends (%d) before it starts (%d)", i,
                          items[i].last, items[i].first);
            goto done;
        }
        rsize[i] = round_up(items[i].size, align, &ovf);
        keys[i] = (Key){rsize[i], items[i].first, i};
        items[i].offset = 0;
    }
    if (ovf) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "planner: a buffer size overflows");
        goto done;
    }
    qsort(keys, n, sizeof *keys, cmp_key);
    size_t n_placed = 0, end = 0;
    for (size_t k = 0; k < n; k++) {
        size_t size = keys[k].size;
        AmpPlanItem *it = &items[keys[k].index];
        if (!size) continue;
        /* The byte ranges of placed items live at the same time as this one. */
        size_t ns = 0;
        for (size_t j = 0; j < n_placed; j++) {
            const AmpPlanItem *o = &items[placed[j]];
            if (o->first <= it->last && it->first <= o->last)
                spans[ns++] = (Span){o->offset, o->offset + rsize[placed[j]]};
        }
        qsort(spans, ns, sizeof *spans, cmp_span);
        size_t off = 0;
        for (size_t j = 0; j < ns; j++) {
            if (spans[j].lo >= off && spans[j].lo - off >= size) break; /* fits in the gap before it */
            if (spans[j].hi > off) off = spans[j].hi;
        }
        if (off > SIZE_MAX - size) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "planner: the arena size overflows");
            goto done;
        }
        it->offset = off;
        if (off + size > end) end = off + size;
        placed[n_placed++] = keys[k].index;
    }
    *arena_bytes = end;
done:
    free(keys), free(placed), free(spans), free(rsize);
    return rc;
}

size_t amp_plan_max_live(const AmpPlanItem *items, size_t n, size_t align) {
    if (!align) align = 64;
    int lo = 0, hi = -1;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || items[i].first < lo) lo = items[i].first;
        if (items[i].last > hi) hi = items[i].last;
    }
    size_t best = 0;
    for (int t = lo; t <= hi; t++) {
        size_t live = 0;
        int ovf = 0;
        for (size_t i = 0; i < n; i++)
            if (items[i].first <= t && t <= items[i].last) live += round_up(items[i].size, align, &ovf);
        if (live > best) best = live;
    }
    return best;
}
