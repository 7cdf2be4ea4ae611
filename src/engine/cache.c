/* LRU prefix cache of one engine; see cache.h for the model. */
#include "engine/cache.h"

#include <string.h>

void engine_cache_init(struct engine_cache *c)
{
    memset(c, 0, sizeof *c);
}

void engine_cache_free(struct engine_cache *c)
{
    if (!c)
        return;
    vec_free(&c->q);
    intmap_free(&c->serial);
}

static struct engine_cache_entry *find(const struct engine_cache *c, uint64_t key)
{
    uint64_t serial;
    if (!intmap_get(&c->serial, key, &serial))
        return NULL;
    return &c->q.v[serial - c->base];
}

int64_t engine_cache_tokens(const struct engine_cache *c, uint64_t key)
{
    const struct engine_cache_entry *en = find(c, key);
    return en ? en->tokens : 0;
}

void engine_cache_take(struct engine_cache *c, uint64_t key)
{
    struct engine_cache_entry *en = find(c, key);
    if (!en)
        return;
    c->tokens -= en->tokens;
    en->tokens = 0;
    intmap_del(&c->serial, key);
}

/* Drops the holes at the head, and moves the live entries to the front of the array once the
 * dead prefix is longer than what is left (amortised O(1) per entry). */
static void trim(struct engine_cache *c)
{
    while (c->head < c->q.n && c->q.v[c->head].tokens == 0)
        c->head++;
    if (c->head == c->q.n) {
        c->base += c->q.n;
        c->q.n = c->head = 0;
    } else if (c->head > c->q.n - c->head) {
        memmove(c->q.v, c->q.v + c->head, (c->q.n - c->head) * sizeof *c->q.v);
        c->q.n -= c->head;
        c->base += c->head;
        c->head = 0;
    }
}

void engine_cache_put(struct engine_cache *c, uint64_t key, int64_t tokens)
{
    engine_cache_take(c, key);
    intmap_put(&c->serial, key, c->base + c->q.n);
    vec_push(&c->q, ((struct engine_cache_entry){.key = key, .tokens = tokens}));
    c->tokens += tokens;
    trim(c);
}

void engine_cache_fit(struct engine_cache *c, int64_t limit)
{
    if (limit < 0)
        limit = 0;
    while (c->tokens > limit) {
        trim(c);
        struct engine_cache_entry *en = &c->q.v[c->head];
        int64_t cut = c->tokens - limit < en->tokens ? c->tokens - limit : en->tokens;
        if (cut == en->tokens) {
            engine_cache_take(c, en->key);
        } else {
            en->tokens -= cut;
            c->tokens -= cut;
        }
    }
    trim(c);
}

void engine_cache_flush(struct engine_cache *c)
{
    intmap_free(&c->serial);
    c->base += c->q.n;
    c->q.n = c->head = 0;
    c->tokens = 0;
}
