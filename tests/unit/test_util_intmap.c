/*
 * Tests of the integer hash table (src/util/intmap.c) against a plain array: random
 * inserts, overwrites and deletions over a small key space (long probe chains, deletions that
 * shift chain members back), including the keys 0 and UINT64_MAX.
 */
#include "testutil.h"

#include "util/intmap.h"
#include "util/rng.h"

#define KEYS 300

static uint64_t key_of(uint64_t i)
{
    return i == 0 ? 0 : i == 1 ? UINT64_MAX : i * 0x9e3779b97f4a7c15u;
}

static void test_matches_a_plain_array(void **state)
{
    struct intmap t = {0};
    uint64_t val[KEYS];
    bool present[KEYS] = {false};
    size_t n = 0;
    uint64_t v;
    assert_false(intmap_get(&t, 5, &v));
    assert_false(intmap_del(&t, 5));
    struct rng g = rng_keyed(5, 0, 0, 0);
    for (int op = 0; op < 200000; op++) {
        uint64_t i = rng_uniform_int(&g, op < 100000 ? KEYS : KEYS / 3);
        if (rng_bernoulli(&g, 0.55)) {
            val[i] = rng_u64(&g);
            n += !present[i];
            present[i] = true;
            intmap_put(&t, key_of(i), val[i]);
        } else {
            assert_int_equal(intmap_del(&t, key_of(i)), present[i]);
            n -= present[i];
            present[i] = false;
        }
        assert_int_equal(t.n, n);
        if (op % 97 == 0)
            for (uint64_t k = 0; k < KEYS; k++) {
                assert_int_equal(intmap_get(&t, key_of(k), &v), present[k]);
                assert_int_equal(intmap_get(&t, key_of(k), NULL), present[k]);
                if (present[k])
                    assert_int_equal(v, val[k]);
            }
    }
    intmap_free(&t);
    intmap_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_a_plain_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
