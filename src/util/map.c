/* Insertion-ordered string map over a linear-probing index; see map.h for why. */
#include "util/map.h"

#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

/* FNV-1a, then the high half folded down: the index uses the low bits, and FNV-1a's low bit
 * k depends only on bits 0..k of each byte. */
static uint64_t hash_key(const char *key)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3u;
    return h ^ (h >> 32);
}

/* Slots for count keys at load <= 3/4: a power of two, at least 8. */
static size_t slots_for(size_t count)
{
    size_t slots = 8;
    while (slots / 4 * 3 < count)
        slots *= 2;
    return slots;
}

/*
 * Returns the index slot holding key, or the empty slot where it would go; *found says which.
 * The index must exist.
 */
static size_t probe(const struct map *m, const char *key, uint64_t hash, bool *found)
{
    size_t i = hash & m->mask;
    for (; m->index[i]; i = (i + 1) & m->mask) {
        const struct map_entry *e = &m->entries.v[m->index[i] - 1];
        if (e->hash == hash && strcmp(e->key, key) == 0) {
            *found = true;
            return i;
        }
    }
    *found = false;
    return i;
}

/* Drops the holes from the entry array and rebuilds an index of slots slots. */
static void rebuild(struct map *m, size_t slots)
{
    size_t live = 0;
    for (size_t e = 0; e < m->entries.n; e++)
        if (m->entries.v[e].key)
            m->entries.v[live++] = m->entries.v[e];
    m->entries.n = live;
    free(m->index);
    m->index = xcalloc(slots, sizeof *m->index);
    m->mask = slots - 1;
    for (size_t e = 0; e < live; e++) {
        size_t i = m->entries.v[e].hash & m->mask;
        while (m->index[i])
            i = (i + 1) & m->mask;
        m->index[i] = e + 1;
    }
}

void map_init(struct map *m)
{
    memset(m, 0, sizeof *m);
}

void map_free(struct map *m)
{
    if (!m)
        return;
    for (size_t e = 0; e < m->entries.n; e++)
        free(m->entries.v[e].key);
    vec_free(&m->entries);
    free(m->index);
    map_init(m);
}

size_t map_size(const struct map *m)
{
    return m->live;
}

bool map_get(const struct map *m, const char *key, union map_value *out)
{
    if (!m->index)
        return false;
    bool found;
    size_t i = probe(m, key, hash_key(key), &found);
    if (found && out)
        *out = m->entries.v[m->index[i] - 1].val;
    return found;
}

union map_value *map_slot(struct map *m, const char *key, bool *inserted)
{
    uint64_t hash = hash_key(key);
    bool found = false;
    size_t i = 0;
    if (m->index)
        i = probe(m, key, hash, &found);
    if (inserted)
        *inserted = !found;
    if (found)
        return &m->entries.v[m->index[i] - 1].val;
    if (!m->index || (m->live + 1) > (m->mask + 1) / 4 * 3) {
        rebuild(m, slots_for(m->live + 1));
        i = probe(m, key, hash, &found);
    }
    vec_push(&m->entries, ((struct map_entry){xstrdup(key), hash, {0}}));
    m->index[i] = m->entries.n;
    m->live++;
    return &m->entries.v[m->entries.n - 1].val;
}

bool map_put(struct map *m, const char *key, union map_value val)
{
    bool inserted;
    *map_slot(m, key, &inserted) = val;
    return inserted;
}

bool map_del(struct map *m, const char *key, union map_value *old)
{
    bool found = false;
    size_t i = m->index ? probe(m, key, hash_key(key), &found) : 0;
    if (!found)
        return false;
    struct map_entry *e = &m->entries.v[m->index[i] - 1];
    if (old)
        *old = e->val;
    free(e->key);
    e->key = NULL;
    m->live--;
    /* Backward shift: pull later members of the probe chain into the gap when the gap lies
     * between their home slot and their slot, so every key stays reachable from its home. */
    for (size_t j = (i + 1) & m->mask; m->index[j]; j = (j + 1) & m->mask) {
        size_t home = m->entries.v[m->index[j] - 1].hash & m->mask;
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->index[i] = m->index[j];
            i = j;
        }
    }
    m->index[i] = 0;
    if (m->entries.n - m->live > m->live)
        rebuild(m, slots_for(m->live));
    return true;
}

bool map_next(const struct map *m, size_t *pos, const char **key, union map_value *val)
{
    while (*pos < m->entries.n && !m->entries.v[*pos].key)
        (*pos)++;
    if (*pos >= m->entries.n)
        return false;
    const struct map_entry *e = &m->entries.v[(*pos)++];
    if (key)
        *key = e->key;
    if (val)
        *val = e->val;
    return true;
}
