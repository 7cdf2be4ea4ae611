/* Content-addressed prefix matching (emu/prefix.h). */
#include "emu/prefix.h"

#include "util/rng.h"

#define VERSION_BITS 24
#define VERSION_MASK ((1ull << VERSION_BITS) - 1)

void emu_prefix_init(struct emu_prefix *p, size_t max_blocks)
{
    *p = (struct emu_prefix){.max_blocks = max_blocks};
}

void emu_prefix_free(struct emu_prefix *p)
{
    intmap_free(&p->blocks);
    intmap_free(&p->versions);
}

void emu_prefix_clear(struct emu_prefix *p)
{
    emu_prefix_free(p);
}

/* The hash of block b chained to the hash of the blocks before it. */
static uint64_t chain(uint64_t prev, const uint32_t *block)
{
    uint64_t keys[EMU_BLOCK_TOKENS + 1];
    keys[0] = prev;
    for (int i = 0; i < EMU_BLOCK_TOKENS; i++)
        keys[i + 1] = block[i];
    return rng_hash(0x5eedb10c, keys, EMU_BLOCK_TOKENS + 1) | 1; /* never 0 */
}

uint64_t emu_prefix_match(const struct emu_prefix *p, const uint32_t *ids, size_t n,
                          int64_t *matched)
{
    uint64_t key = 0, h = 0;
    size_t blocks = 0;
    for (size_t b = 0; (b + 1) * EMU_BLOCK_TOKENS <= n; b++) {
        h = chain(h, ids + b * EMU_BLOCK_TOKENS);
        uint64_t v, version;
        if (!intmap_get(&p->blocks, h, &v))
            break;
        uint64_t k = v >> VERSION_BITS;
        if ((key && k != key) || !intmap_get(&p->versions, k, &version) ||
            (v & VERSION_MASK) != version)
            break;
        key = k;
        blocks = b + 1;
    }
    *matched = (int64_t)(blocks * EMU_BLOCK_TOKENS);
    return key;
}

void emu_prefix_record(struct emu_prefix *p, uint64_t key, const uint32_t *ids, size_t n)
{
    size_t blocks = n / EMU_BLOCK_TOKENS;
    if (p->blocks.n + blocks > p->max_blocks)
        emu_prefix_clear(p);
    uint64_t version = 0;
    intmap_get(&p->versions, key, &version);
    version = (version + 1) & VERSION_MASK;
    intmap_put(&p->versions, key, version);
    uint64_t h = 0;
    for (size_t b = 0; b < blocks; b++) {
        h = chain(h, ids + b * EMU_BLOCK_TOKENS);
        intmap_put(&p->blocks, h, key << VERSION_BITS | version);
    }
}
