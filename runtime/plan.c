/* The memory planner (plan.h): largest buffers first, each at the lowest offset where it
 * fits beside the already placed buffers whose live intervals overlap its own (found
 * through a segment tree over time, below). Simple, within a few percent of the max-live
 * bound on the graphs we run, and O(n log n) on a chain. */
#include "runtime/plan.h"

#include <stdbool.h>
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

/* ---- the placed items by live interval: a segment tree over time -----------------------
 * An item is stored at the O(log T) nodes that cover its interval exactly; a query for
 * [a, b] visits the nodes whose range meets [a, b] and whose subtree holds an item, and
 * reports each item once (a stamp per item). So finding the placed items that overlap one
 * costs O(log T + what it reports x log T), not a scan of everything placed before: a
 * chain of a million nodes plans in about a second (it took minutes). */
typedef struct Entry {
    uint32_t item;
    int32_t next;
} Entry;

typedef struct Tree {
    size_t leaves;   /* a power of two >= the time steps */
    int32_t *head;   /* per node: its first entry, -1 when none */
    uint32_t *count; /* per node: entries in its subtree */
    Entry *pool;
    size_t n_pool, cap_pool;
    uint32_t *stamp; /* per item: the query that last reported it */
    uint32_t query;
    uint32_t *stack;
} Tree;

static bool tree_add(Tree *t, size_t node, uint32_t item) {
    if (t->n_pool == t->cap_pool) {
        size_t cap = t->cap_pool ? 2 * t->cap_pool : 1024;
        Entry *p = realloc(t->pool, cap * sizeof *p);
        if (!p) return false;
        t->pool = p;
        t->cap_pool = cap;
    }
    t->pool[t->n_pool] = (Entry){item, t->head[node]};
    t->head[node] = (int32_t)t->n_pool++;
    for (size_t v = node; v >= 1; v /= 2) t->count[v]++;
    return true;
}

/* Stores item at the canonical nodes of [lo, hi] (time steps, inclusive; bottom-up walk). */
static bool tree_insert(Tree *t, size_t lo, size_t hi, uint32_t item) {
    size_t l = lo + t->leaves, r = hi + t->leaves + 1;
    for (; l < r; l /= 2, r /= 2) {
        if ((l & 1) && !tree_add(t, l++, item)) return false;
        if ((r & 1) && !tree_add(t, --r, item)) return false;
    }
    return true;
}

/* Calls back each stored item whose interval meets [lo, hi], once. */
static size_t tree_query(Tree *t, size_t lo, size_t hi, uint32_t *out) {
    size_t n = 0, top = 0;
    t->query++;
    t->stack[top++] = 1;
    while (top) {
        size_t v = t->stack[--top];
        if (!t->count[v]) continue;
        /* v's range of leaves: [first, first + width) */
        size_t depth = 0;
        for (size_t x = v; x > 1; x /= 2) depth++;
        size_t width = t->leaves >> depth, first = (v - ((size_t)1 << depth)) * width;
        if (first > hi || first + width - 1 < lo) continue;
        for (int32_t e = t->head[v]; e >= 0; e = t->pool[e].next) {
            uint32_t it = t->pool[e].item;
            if (t->stamp[it] != t->query) {
                t->stamp[it] = t->query;
                out[n++] = it;
            }
        }
        if (v < t->leaves) {
            t->stack[top++] = 2 * v;
            t->stack[top++] = 2 * v + 1;
        }
    }
    return n;
}

static void tree_free(Tree *t) {
    free(t->head), free(t->count), free(t->pool), free(t->stamp), free(t->stack);
}

AmpCode amp_plan_offsets(AmpPlanItem *items, size_t n, size_t align, size_t *arena_bytes, AmpStatus *st) {
    *arena_bytes = 0;
    if (!align) align = 64;
    if (align & (align - 1)) return amp_fail(st, AMP_ERR_INTERNAL, "planner: alignment %zu is no power of two", align);
    if (!n) return AMP_OK;
    if (n > UINT32_MAX - 1) return amp_fail(st, AMP_ERR_INTERNAL, "planner: %zu buffers are too many", n);
    Key *keys = malloc(n * sizeof *keys);
    uint32_t *near = malloc(n * sizeof *near); /* a query's answer: placed items that overlap */
    Span *spans = malloc(n * sizeof *spans);
    size_t *rsize = malloc(n * sizeof *rsize); /* sizes rounded up to `align`, by item */
    Tree t = {0};
    AmpCode rc = AMP_OK;
    if (!keys || !near || !spans || !rsize) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "planner: out of memory");
        goto done;
    }
    int ovf = 0, t0 = items[0].first, t1 = items[0].last;
    for (size_t i = 0; i < n; i++) {
        if (items[i].last < items[i].first) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "planner: item %zu ends (%d) before it starts (%d)", i,
                          items[i].last, items[i].first);
            goto done;
        }
        if (items[i].first < t0) t0 = items[i].first;
        if (items[i].last > t1) t1 = items[i].last;
        rsize[i] = round_up(items[i].size, align, &ovf);
        keys[i] = (Key){rsize[i], items[i].first, i};
        items[i].offset = 0;
    }
    if (ovf) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "planner: a buffer size overflows");
        goto done;
    }
    size_t steps = (size_t)((int64_t)t1 - t0) + 1;
    t.leaves = 1;
    while (t.leaves < steps) t.leaves *= 2;
    t.head = malloc(2 * t.leaves * sizeof *t.head);
    t.count = calloc(2 * t.leaves, sizeof *t.count);
    t.stamp = calloc(n, sizeof *t.stamp);
    t.stack = malloc(2 * t.leaves * sizeof *t.stack);
    if (!t.head || !t.count || !t.stamp || !t.stack) {
        rc = amp_fail(st, AMP_ERR_INTERNAL, "planner: out of memory");
        goto done;
    }
    for (size_t v = 0; v < 2 * t.leaves; v++) t.head[v] = -1;
    qsort(keys, n, sizeof *keys, cmp_key);
    size_t end = 0;
    for (size_t k = 0; k < n; k++) {
        size_t size = keys[k].size;
        AmpPlanItem *it = &items[keys[k].index];
        if (!size) continue;
        size_t lo = (size_t)((int64_t)it->first - t0), hi = (size_t)((int64_t)it->last - t0);
        /* The byte ranges of placed items live at the same time as this one. */
        size_t ns = tree_query(&t, lo, hi, near);
        for (size_t j = 0; j < ns; j++) spans[j] = (Span){items[near[j]].offset, items[near[j]].offset + rsize[near[j]]};
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
        if (!tree_insert(&t, lo, hi, (uint32_t)keys[k].index)) {
            rc = amp_fail(st, AMP_ERR_INTERNAL, "planner: out of memory");
            goto done;
        }
    }
    *arena_bytes = end;
done:
    free(keys), free(near), free(spans), free(rsize);
    tree_free(&t);
    return rc;
}

typedef struct Event {
    int64_t t;    /* the step at which the size is added (first) or taken away (last + 1) */
    size_t size;
    int add;
} Event;

static int cmp_event(const void *pa, const void *pb) {
    const Event *a = pa, *b = pb;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return a->add - b->add; /* at one step, what ends goes before what starts */
}

size_t amp_plan_max_live(const AmpPlanItem *items, size_t n, size_t align) {
    if (!align) align = 64;
    Event *ev = malloc((2 * n + 1) * sizeof *ev);
    if (!ev) return SIZE_MAX;
    int ovf = 0;
    for (size_t i = 0; i < n; i++) {
        size_t sz = round_up(items[i].size, align, &ovf);
        ev[2 * i] = (Event){items[i].first, sz, 1};
        ev[2 * i + 1] = (Event){(int64_t)items[i].last + 1, sz, 0};
    }
    qsort(ev, 2 * n, sizeof *ev, cmp_event);
    size_t live = 0, best = 0;
    for (size_t k = 0; k < 2 * n; k++) {
        live = ev[k].add ? live + ev[k].size : live - ev[k].size;
        if (live > best) best = live;
    }
    free(ev);
    return best;
}
