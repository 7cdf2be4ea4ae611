/* Integer-keyed hash table; see intmap.h for why it is not util/map.h. */
#include "util/intmap.h"

#include <stdlib.h>

#include "util/alloc.h"
#include "util/rng.h"

static size_t home(const struct intmap *t, uint64_t key)
{
    return (size_t)rng_mix64(key) & t->mask;
}

/* The slot holding key (not 0), or the empty slot where it would go. The table must have
 * slots. */
static size_t probe(const struct intmap *t, uint64_t key)
{
    size_t i = home(t, key);
    while (t->slots[i].key != 0 && t->slots[i].key != key)
        i = (i + 1) & t->mask;
    return i;
}

void intmap_free(struct intmap *t)
{
    if (!t)
        return;
    free(t->slots);
    *t = (struct intmap){0};
}

bool intmap_get(const struct intmap *t, uint64_t key, uint64_t *val)
{
    const uint64_t *found = NULL;
    if (key == 0) {
        if (t->has_zero)
            found = &t->zero_val;
    } else if (t->slots) {
        const struct intmap_slot *s = &t->slots[probe(t, key)];
        if (s->key != 0)
            found = &s->val;
    }
    if (found && val)
        *val = *found;
    return found != NULL;
}

/* Doubles the slots (16 at first) and reinserts every key. */
static void grow(struct intmap *t)
{
    struct intmap old = *t;
    size_t count = old.slots ? 2 * (old.mask + 1) : 16;
    t->slots = xcalloc(count, sizeof *t->slots);
    t->mask = count - 1;
    for (size_t i = 0; old.slots && i <= old.mask; i++)
        if (old.slots[i].key != 0)
            t->slots[probe(t, old.slots[i].key)] = old.slots[i];
    free(old.slots);
}

void intmap_put(struct intmap *t, uint64_t key, uint64_t val)
{
    if (key == 0) {
        t->n += !t->has_zero;
        t->has_zero = true;
        t->zero_val = val;
        return;
    }
    if (!t->slots || 2 * (t->n + 1) > t->mask + 1)
        grow(t);
    struct intmap_slot *s = &t->slots[probe(t, key)];
    t->n += s->key == 0;
    *s = (struct intmap_slot){.key = key, .val = val};
}

bool intmap_del(struct intmap *t, uint64_t key)
{
    if (key == 0) {
        bool had = t->has_zero;
        t->n -= had;
        t->has_zero = false;
        return had;
    }
    if (!t->slots)
        return false;
    size_t hole = probe(t, key);
    if (t->slots[hole].key == 0)
        return false;
    /* shift back each later member of the chain whose home is not between hole and it */
    for (size_t j = (hole + 1) & t->mask; t->slots[j].key != 0; j = (j + 1) & t->mask) {
        size_t h = home(t, t->slots[j].key);
        if (((j - h) & t->mask) >= ((j - hole) & t->mask)) {
            t->slots[hole] = t->slots[j];
            hole = j;
        }
    }
    t->slots[hole].key = 0;
    t->n--;
    return true;
}
