/*
 * Hash table from 64-bit keys to 64-bit values: request ids to slots, prefix keys to cache
 * entries.
 *
 * Every turn the engine serves costs a few lookups, inserts and deletes by a 64-bit key. The
 * string-keyed util/map.h would spell each key out, hash the text and allocate a copy per
 * insert, about a third of the engine's time per event in bench_engine; this table stores the
 * integers in place: open addressing, linear probing, power-of-two size, load <= 1/2,
 * SplitMix64 hashing, deletion by shifting later probe-chain members back (no tombstones).
 * Iteration order is not needed and not offered. Not thread-safe.
 */
#ifndef ENGINE_TABLE_H
#define ENGINE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct engine_table_slot {
    uint64_t key;
    uint64_t val;
    bool used;
};

/* A zeroed struct is an empty table. */
struct engine_table {
    struct engine_table_slot *slots;
    size_t mask; /* slots - 1, or 0 before the first insert */
    size_t n;    /* keys stored */
};

/* Frees the slots and leaves an empty table; t may be NULL. */
void engine_table_free(struct engine_table *t);

/* Copies key's value to *val and returns true, or returns false when key is absent. */
bool engine_table_get(const struct engine_table *t, uint64_t key, uint64_t *val);

/* Sets key to val, inserting it when absent. Amortised O(1); aborts on OOM. */
void engine_table_put(struct engine_table *t, uint64_t key, uint64_t val);

/* Removes key; returns false when it was absent. */
bool engine_table_del(struct engine_table *t, uint64_t key);

#endif
