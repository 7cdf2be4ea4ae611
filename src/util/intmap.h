/*
 * Hash table from 64-bit keys to 64-bit values (the engine maps request ids to slots and
 * prefix keys to cache entries with it).
 *
 * Hot paths keyed by integers cannot afford util/map.h: it spells each key out as text,
 * hashes it and allocates a copy per insert — about a third of the engine's time per event in
 * bench_engine. This table stores the integers in place: open addressing, linear probing,
 * power-of-two size, load <= 1/2, SplitMix64 hashing, deletion by shifting later probe-chain
 * members back (no tombstones). A slot is the key and the value alone (16 bytes: the tables
 * are large and looked up at random, so a lookup's cost is its cache miss): key 0 marks an
 * empty slot, and the key 0 itself is kept beside the slots. Iteration order is not needed and
 * not offered. Not thread-safe.
 */
#ifndef UTIL_INTMAP_H
#define UTIL_INTMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct intmap_slot {
    uint64_t key; /* 0: empty */
    uint64_t val;
};

/* A zeroed struct is an empty table. */
struct intmap {
    struct intmap_slot *slots;
    size_t mask;   /* slots - 1, or 0 before the first insert */
    size_t n;      /* keys stored */
    bool has_zero; /* the key 0 is stored, with zero_val */
    uint64_t zero_val;
};

/* Frees the slots and leaves an empty table; t may be NULL. */
void intmap_free(struct intmap *t);

/* Copies key's value to *val (val may be NULL) and returns true, or returns false when key is
 * absent. */
bool intmap_get(const struct intmap *t, uint64_t key, uint64_t *val);

/* Sets key to val, inserting it when absent. Amortised O(1); aborts on OOM. */
void intmap_put(struct intmap *t, uint64_t key, uint64_t val);

/* Removes key; returns false when it was absent. */
bool intmap_del(struct intmap *t, uint64_t key);

#endif
