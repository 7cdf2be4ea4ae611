/*
 * String-keyed hash map that iterates in insertion order.
 *
 * Presets by name, tool names, per-trajectory state keyed by id: libra looks strings up
 * everywhere, and whatever it prints from a map must come out in the same order on every run
 * and every platform (the simulator and planner are byte-reproducible). So the map keeps its
 * entries in an array in insertion order, CPython-dict style, and hashes only into an index
 * table of entry numbers: open addressing, linear probing, power-of-two size, load <= 3/4,
 * FNV-1a with a final fold. Deletion shifts later probe-chain members back (no tombstones in
 * the index) and leaves a hole in the entry array; holes are compacted once they outnumber
 * the live entries, so every operation is amortised O(1).
 *
 * The hash is not keyed: a process that stores attacker-chosen keys must cap their number.
 * Not thread-safe.
 */
#ifndef UTIL_MAP_H
#define UTIL_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/vec.h"

/* A value: a pointer the caller owns, or a number stored inline. */
union map_value {
    void *ptr;
    int64_t i64;
    double f64;
};

struct map_entry {
    char *key;     /* owned copy; NULL for a deleted entry (a hole) */
    uint64_t hash; /* of key */
    union map_value val;
};

/* A zeroed struct map is an empty map (map_init does just that). */
struct map {
    VEC(struct map_entry) entries; /* insertion order, holes included */
    size_t *index;                 /* slot -> entry number + 1; 0 is an empty slot */
    size_t mask;                   /* index slots - 1 (slots a power of two) */
    size_t live;                   /* entries that are not holes */
};

/* Makes m an empty map. */
void map_init(struct map *m);

/* Frees the keys and tables (not what values point to). m may be NULL; m is left empty. */
void map_free(struct map *m);

/* Number of keys. */
size_t map_size(const struct map *m);

/* Looks key up: returns true and copies its value to *out (out may be NULL) when present. */
bool map_get(const struct map *m, const char *key, union map_value *out);

/*
 * Returns the value slot of key, inserting key (copied) with a zeroed value at the end of the
 * order when absent; *inserted (when non-NULL) says which. The pointer is valid until the next
 * map_slot, map_put or map_del. Counting is `map_slot(m, name, NULL)->i64++`.
 */
union map_value *map_slot(struct map *m, const char *key, bool *inserted);

/*
 * Sets key to val. A new key goes to the end of the order; an existing one keeps its place.
 * Returns true when the key was new.
 */
bool map_put(struct map *m, const char *key, union map_value val);

/*
 * Removes key, copying its value to *old (when non-NULL) so the caller can release it.
 * Returns false when key was absent. Re-inserting a removed key puts it at the end.
 */
bool map_del(struct map *m, const char *key, union map_value *old);

/*
 * Iterates in insertion order: start with *pos = 0; each call that returns true sets *key
 * (owned by the map) and *val (either may be NULL) and advances *pos. The map must not be
 * modified during the iteration.
 *
 *     size_t pos = 0; const char *k; union map_value v;
 *     while (map_next(m, &pos, &k, &v)) ...
 */
bool map_next(const struct map *m, size_t *pos, const char **key, union map_value *val);

#endif
