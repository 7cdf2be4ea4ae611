/*
 * Which cached context a prompt continues, judged by token content as the engines judge it:
 * the prompt is cut into blocks of EMU_BLOCK_TOKENS tokens, each block's hash chains the
 * previous one's (vLLM's block hashes, SGLang's radix tree at page granularity), and the
 * longest run of leading blocks recorded for one context is what the prefix cache can serve.
 *
 * The engine model (engine/) caches freed KV per context key; this table maps content to those
 * keys. A context is recorded each time its KV goes back to the cache (a request finishes, is
 * aborted or retracted), with a new version of its key: blocks recorded under an older version
 * are stale (their tokens were replaced in that key's cache entry), so a GRPO sibling that
 * shares only the prompt matches the prompt, and an append-only multi-turn client matches its
 * whole previous turn. The table holds at most max_blocks blocks and is emptied when it would
 * hold more (the engine's own cache is far smaller; a miss costs only a recomputation).
 *
 * Pure; not thread-safe.
 */
#ifndef EMU_PREFIX_H
#define EMU_PREFIX_H

#include <stddef.h>
#include <stdint.h>

#include "util/intmap.h"

#define EMU_BLOCK_TOKENS 16

struct emu_prefix {
    struct intmap blocks;   /* chained block hash -> key << 24 | version (low 24 bits) */
    struct intmap versions; /* key -> its current version */
    size_t max_blocks;
};

/* An empty table holding at most max_blocks blocks (>= 1). */
void emu_prefix_init(struct emu_prefix *p, size_t max_blocks);
void emu_prefix_free(struct emu_prefix *p);

/* Forgets every context (a cache flush). */
void emu_prefix_clear(struct emu_prefix *p);

/*
 * The key whose current context shares the longest whole-block prefix with ids[0..n), and that
 * prefix's length in tokens in *matched; 0 (and *matched = 0) when no block matches.
 */
uint64_t emu_prefix_match(const struct emu_prefix *p, const uint32_t *ids, size_t n,
                          int64_t *matched);

/* Records ids[0..n) as the context now cached under key (1 <= key < 2^40). */
void emu_prefix_record(struct emu_prefix *p, uint64_t key, const uint32_t *ids, size_t n);

#endif
