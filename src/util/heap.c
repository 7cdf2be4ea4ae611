/*
 * Array-backed binary heap; see heap.h for why. Sifting moves a hole rather than swapping,
 * so each level costs one element copy; the moving element waits in a scratch slot.
 */
#include "util/heap.h"

#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

static char *at(const struct heap *h, size_t i)
{
    return h->data + i * h->elem_bytes;
}

static char *scratch(const struct heap *h)
{
    return at(h, h->cap);
}

void heap_init(struct heap *h, size_t elem_bytes, heap_cmp_fn cmp, void *ctx)
{
    *h = (struct heap){.elem_bytes = elem_bytes, .cmp = cmp, .ctx = ctx};
}

void heap_free(struct heap *h)
{
    if (!h)
        return;
    free(h->data);
    h->data = NULL;
    h->n = h->cap = 0;
}

/* Places the scratch element in the hole at i, moving larger ancestors down. */
static void sift_up(struct heap *h, size_t i)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->cmp(at(h, parent), scratch(h), h->ctx) <= 0)
            break;
        memcpy(at(h, i), at(h, parent), h->elem_bytes);
        i = parent;
    }
    memcpy(at(h, i), scratch(h), h->elem_bytes);
}

/*
 * Fills the hole at the root after a pop: the hole sinks to a leaf along the smaller children
 * (one comparison per level), then the scratch element (the old last one) rises from there.
 * The old last element usually belongs near the bottom, so this needs about half the
 * comparisons of sifting it down from the root (Floyd; libstdc++'s __adjust_heap).
 */
static void refill_root(struct heap *h)
{
    size_t i = 0;
    for (size_t child = 1; child < h->n; child = 2 * i + 1) {
        if (child + 1 < h->n && h->cmp(at(h, child + 1), at(h, child), h->ctx) < 0)
            child++;
        memcpy(at(h, i), at(h, child), h->elem_bytes);
        i = child;
    }
    sift_up(h, i);
}

void heap_push(struct heap *h, const void *elem)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 16;
        h->data = xreallocarray(h->data, h->cap + 1, h->elem_bytes);
    }
    memcpy(scratch(h), elem, h->elem_bytes);
    sift_up(h, h->n++);
}

bool heap_pop(struct heap *h, void *out)
{
    if (h->n == 0)
        return false;
    if (out)
        memcpy(out, at(h, 0), h->elem_bytes);
    h->n--;
    if (h->n > 0) {
        memcpy(scratch(h), at(h, h->n), h->elem_bytes);
        refill_root(h);
    }
    return true;
}

const void *heap_peek(const struct heap *h)
{
    return h->n ? h->data : NULL;
}

size_t heap_size(const struct heap *h)
{
    return h->n;
}

void heap_clear(struct heap *h)
{
    h->n = 0;
}
