/*
 * Tests of the engine's prefix cache (src/engine/cache.c): LRU order, eviction from entry
 * tails, replacement, flushing, and a random differential run against a plain array that
 * also covers the queue's compaction.
 */
#include "testutil.h"

#include <string.h>

#include "engine/cache.h"
#include "util/rng.h"

static void test_evicts_oldest_tail_first(void **state)
{
    struct engine_cache c;
    engine_cache_init(&c);
    engine_cache_put(&c, 1, 100);
    engine_cache_put(&c, 2, 50);
    engine_cache_put(&c, 3, 70);
    assert_int_equal(c.tokens, 220);
    engine_cache_fit(&c, 150); /* 70 from key 1 */
    assert_int_equal(engine_cache_tokens(&c, 1), 30);
    engine_cache_fit(&c, 100); /* the rest of key 1, then 20 from key 2 */
    assert_int_equal(engine_cache_tokens(&c, 1), 0);
    assert_int_equal(engine_cache_tokens(&c, 2), 30);
    assert_int_equal(engine_cache_tokens(&c, 3), 70);
    engine_cache_put(&c, 2, 40); /* replaced: now the most recent */
    engine_cache_fit(&c, 60);
    assert_int_equal(engine_cache_tokens(&c, 3), 20);
    assert_int_equal(engine_cache_tokens(&c, 2), 40);
    engine_cache_take(&c, 2);
    engine_cache_take(&c, 99); /* absent: nothing */
    assert_int_equal(c.tokens, 20);
    engine_cache_flush(&c);
    assert_int_equal(c.tokens, 0);
    assert_int_equal(engine_cache_tokens(&c, 3), 0);
    engine_cache_put(&c, 3, 5);
    assert_int_equal(engine_cache_tokens(&c, 3), 5);
    engine_cache_fit(&c, -1);
    assert_int_equal(c.tokens, 0);
    engine_cache_free(&c);
    engine_cache_free(NULL);
}

/* The model: entries oldest first. */
struct plain {
    uint64_t key[4096];
    int64_t tokens[4096];
    int n;
};

static void plain_remove(struct plain *p, int i)
{
    memmove(&p->key[i], &p->key[i + 1], (size_t)(p->n - i - 1) * sizeof p->key[0]);
    memmove(&p->tokens[i], &p->tokens[i + 1], (size_t)(p->n - i - 1) * sizeof p->tokens[0]);
    p->n--;
}

static int plain_find(const struct plain *p, uint64_t key)
{
    for (int i = 0; i < p->n; i++)
        if (p->key[i] == key)
            return i;
    return -1;
}

static void test_matches_a_plain_array(void **state)
{
    static struct plain p;
    struct engine_cache c;
    engine_cache_init(&c);
    struct rng g = rng_keyed(11, 0, 0, 0);
    for (int op = 0; op < 20000; op++) {
        uint64_t key = 1 + rng_uniform_int(&g, 64);
        double u = rng_uniform(&g);
        int i = plain_find(&p, key);
        if (u < 0.5) {
            int64_t t = 1 + (int64_t)rng_uniform_int(&g, 100);
            if (i >= 0)
                plain_remove(&p, i);
            p.key[p.n] = key;
            p.tokens[p.n++] = t;
            engine_cache_put(&c, key, t);
        } else if (u < 0.75) {
            if (i >= 0)
                plain_remove(&p, i);
            engine_cache_take(&c, key);
        } else if (u < 0.999) {
            int64_t total = 0;
            for (int k = 0; k < p.n; k++)
                total += p.tokens[k];
            int64_t limit = (int64_t)rng_uniform_int(&g, (uint64_t)total + 1);
            while (total > limit) {
                int64_t cut = total - limit < p.tokens[0] ? total - limit : p.tokens[0];
                p.tokens[0] -= cut;
                total -= cut;
                if (p.tokens[0] == 0)
                    plain_remove(&p, 0);
            }
            engine_cache_fit(&c, limit);
        } else {
            p.n = 0;
            engine_cache_flush(&c);
        }
        int64_t total = 0;
        for (int k = 0; k < p.n; k++) {
            total += p.tokens[k];
            assert_int_equal(engine_cache_tokens(&c, p.key[k]), p.tokens[k]);
        }
        assert_int_equal(c.tokens, total);
        assert_int_equal(c.serial.n, p.n);
    }
    engine_cache_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_evicts_oldest_tail_first),
        cmocka_unit_test(test_matches_a_plain_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
