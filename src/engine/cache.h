/*
 * The prefix cache of one engine: KV that finished, aborted or preempted sequences left in
 * free memory, kept per context key so that a trajectory's next turn on the same instance
 * prefills only its new suffix.
 *
 * vLLM and SGLang keep freed KV blocks until an allocation needs them, evicting the least
 * recently freed first and, within one freed sequence, its last blocks first (vLLM frees a
 * sequence's blocks in reverse order). So the cache holds at most the free KV, an entry shrinks
 * from its tail under pressure, and a hit takes the entry back into use. Entries are never
 * touched while cached (a hit removes them), so least recently used is least recently
 * inserted and a queue suffices. Token granular: block rounding is ignored (docs/engine.md).
 */
#ifndef ENGINE_CACHE_H
#define ENGINE_CACHE_H

#include <stdint.h>

#include "util/intmap.h"
#include "util/vec.h"

struct engine_cache_entry {
    uint64_t key;
    int64_t tokens; /* 0: removed (a hole until it reaches the head) */
};

struct engine_cache {
    VEC(struct engine_cache_entry) q; /* oldest first; q.v[head] is the next to evict */
    size_t head;                      /* entries before it are gone */
    uint64_t base;                    /* serial number of q.v[0] */
    struct intmap serial;             /* key -> serial number of its live entry */
    int64_t tokens;                   /* Σ tokens of live entries */
};

/* Makes c empty. */
void engine_cache_init(struct engine_cache *c);

/* Frees c's storage; c may be NULL. */
void engine_cache_free(struct engine_cache *c);

/* Tokens cached under key (0 when none). */
int64_t engine_cache_tokens(const struct engine_cache *c, uint64_t key);

/* Removes key's entry (a hit takes its KV back into use, a stale one is dropped). */
void engine_cache_take(struct engine_cache *c, uint64_t key);

/* Caches tokens (> 0) under key as the most recent entry, replacing key's older entry. */
void engine_cache_put(struct engine_cache *c, uint64_t key, int64_t tokens);

/* Evicts from the least recent entries' tails until at most limit tokens remain. */
void engine_cache_fit(struct engine_cache *c, int64_t limit);

/* Drops every entry. */
void engine_cache_flush(struct engine_cache *c);

#endif
