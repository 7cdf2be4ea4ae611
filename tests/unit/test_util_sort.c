/*
 * util/sort: the radix sort against qsort on (key, index) with ties broken by index — random
 * keys of few distinct values (ties), of one value (every pass skipped), of the full 64-bit
 * range, and the empty and one-element cases — and the order-preserving key of doubles.
 */
#include "testutil.h"

#include <math.h>
#include <stdlib.h>

#include "util/rng.h"
#include "util/sort.h"

static int by_key_then_index(const void *a, const void *b)
{
    const struct sort_pair *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Sorts n random keys drawn by mode (0: 5 values, 1: one value, 2: any 64 bits, 3: small) both
 * ways and compares. */
static void check(struct rng *g, size_t n, int mode)
{
    struct sort_pair *v = malloc((3 * n + 1) * sizeof *v), *want = v + n, *tmp = v + 2 * n;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_u64(g);
        uint64_t key = mode == 0 ? r % 5 << 40 : mode == 1 ? 42 : mode == 2 ? r : r % 1000;
        v[i] = want[i] = (struct sort_pair){key, (uint32_t)i};
    }
    qsort(want, n, sizeof *want, by_key_then_index);
    sort_pairs(v, n, tmp);
    for (size_t i = 0; i < n; i++)
        if (v[i].key != want[i].key || v[i].index != want[i].index)
            fail_msg("n %zu, mode %d: position %zu holds (%llu, %u), want (%llu, %u)", n, mode, i,
                     (unsigned long long)v[i].key, v[i].index, (unsigned long long)want[i].key,
                     want[i].index);
    free(v);
}

static void test_matches_qsort(void **state)
{
    (void)state;
    struct rng g = rng_keyed(5, 0x736f7274, 0, 0);
    const size_t sizes[] = {0, 1, 2, 3, 17, 256, 2560, 10007};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int mode = 0; mode < 4; mode++)
            check(&g, sizes[s], mode);
}

static void test_double_keys_keep_order(void **state)
{
    (void)state;
    const double x[] = {-INFINITY, -1e300,   -3e9,    -1.0, -0.5, -4.9e-324,
                        0.0,       4.9e-324, 1e-300,  0.5,  1.0,  1.0 + 1e-16 * 2,
                        3e9,       1e300,    INFINITY};
    for (size_t i = 0; i + 1 < sizeof x / sizeof *x; i++)
        assert_true(sort_key_double(x[i]) < sort_key_double(x[i + 1]));
    assert_true(sort_key_double(-0.0) == sort_key_double(0.0));
    /* descending by the complement */
    assert_true(~sort_key_double(2.0) < ~sort_key_double(1.0));
    assert_true(~sort_key_double(-1.0) < ~sort_key_double(-2.0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_qsort),
        cmocka_unit_test(test_double_keys_keep_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
