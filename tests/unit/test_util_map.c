/*
 * util/map: hand cases, then a differential test against a naive insertion-ordered list over
 * random put/get/del sequences (small key spaces, so deletes, re-inserts and long probe
 * chains are common), checking lookups and the iteration order after every step.
 */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "util/map.h"

/* The keys of m, in iteration order, are exactly want[0..n). */
static void assert_order(const struct map *m, const char *const *want, size_t n)
{
    size_t pos = 0, i = 0;
    const char *k;
    while (i < n && map_next(m, &pos, &k, NULL))
        assert_string_equal(k, want[i++]);
    assert_int_equal(i, n);
    assert_int_equal(map_size(m), n);
}

static void test_basic(void **state)
{
    struct map m = {0}; /* a zeroed map is valid */
    union map_value v;
    assert_false(map_get(&m, "a", &v));
    assert_false(map_del(&m, "a", NULL));
    assert_true(map_put(&m, "b", (union map_value){.i64 = 2}));
    assert_true(map_put(&m, "a", (union map_value){.i64 = 1}));
    assert_true(map_put(&m, "", (union map_value){.i64 = 0}));
    assert_false(map_put(&m, "b", (union map_value){.i64 = 20})); /* keeps its place */
    assert_int_equal(map_size(&m), 3);
    assert_true(map_get(&m, "b", &v));
    assert_int_equal(v.i64, 20);
    assert_true(map_get(&m, "", NULL));

    assert_order(&m, (const char *[]){"b", "a", ""}, 3);

    assert_true(map_del(&m, "b", &v));
    assert_int_equal(v.i64, 20);
    assert_false(map_get(&m, "b", NULL));
    map_put(&m, "b", (union map_value){.i64 = 3}); /* re-inserted: now last */
    assert_order(&m, (const char *[]){"a", "", "b"}, 3);
    map_free(&m);
    map_free(NULL);
}

/* The map owns copies of its keys; pointer values are stored, not owned. */
static void test_keys_copied_and_slot_counts(void **state)
{
    struct map m;
    map_init(&m);
    char key[32];
    static const char *tools[] = {"python", "search", "python", "bash", "python", "search"};
    for (size_t t = 0; t < 6; t++) {
        snprintf(key, sizeof key, "%s", tools[t]);
        map_slot(&m, key, NULL)->i64++;
        memset(key, 'x', sizeof key - 1); /* the map must not keep our buffer */
    }
    union map_value v;
    assert_true(map_get(&m, "python", &v));
    assert_int_equal(v.i64, 3);
    assert_true(map_get(&m, "search", &v));
    assert_int_equal(v.i64, 2);
    bool inserted = false;
    map_slot(&m, "bash", &inserted);
    assert_false(inserted);
    map_slot(&m, "grep", &inserted)->ptr = &m;
    assert_true(inserted);
    assert_true(map_get(&m, "grep", &v));
    assert_ptr_equal(v.ptr, &m);
    map_free(&m);
}

/* ---- differential test against a naive ordered list ----------------------------------------- */

enum { NAIVE_MAX = 1024 };

struct naive {
    char keys[NAIVE_MAX][24];
    int64_t vals[NAIVE_MAX];
    size_t n;
};

static long naive_find(const struct naive *nv, const char *key)
{
    for (size_t i = 0; i < nv->n; i++)
        if (strcmp(nv->keys[i], key) == 0)
            return (long)i;
    return -1;
}

static void naive_put(struct naive *nv, const char *key, int64_t val)
{
    long i = naive_find(nv, key);
    if (i < 0) {
        i = (long)nv->n++;
        snprintf(nv->keys[i], sizeof nv->keys[i], "%s", key);
    }
    nv->vals[i] = val;
}

static void naive_del(struct naive *nv, long i)
{
    memmove(nv->keys[i], nv->keys[i + 1], (nv->n - (size_t)i - 1) * sizeof nv->keys[0]);
    memmove(&nv->vals[i], &nv->vals[i + 1], (nv->n - (size_t)i - 1) * sizeof nv->vals[0]);
    nv->n--;
}

static void assert_same(const struct map *m, const struct naive *nv)
{
    assert_int_equal(map_size(m), nv->n);
    size_t pos = 0, i = 0;
    const char *k;
    union map_value v;
    while (map_next(m, &pos, &k, &v)) {
        assert_true(i < nv->n);
        assert_string_equal(k, nv->keys[i]);
        assert_int_equal(v.i64, nv->vals[i]);
        i++;
    }
    assert_int_equal(i, nv->n);
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

static void run_differential(size_t key_space, size_t ops, uint64_t seed)
{
    static struct naive nv;
    nv.n = 0;
    struct map m = {0};
    char key[24];
    for (size_t op = 0; op < ops; op++) {
        snprintf(key, sizeof key, "k%llu", (unsigned long long)(lcg(&seed) % key_space));
        long at = naive_find(&nv, key);
        union map_value v;
        switch (lcg(&seed) % 3) {
        case 0:
            assert_int_equal(map_put(&m, key, (union map_value){.i64 = (int64_t)op}), at < 0);
            naive_put(&nv, key, (int64_t)op);
            break;
        case 1:
            assert_int_equal(map_get(&m, key, &v), at >= 0);
            if (at >= 0)
                assert_int_equal(v.i64, nv.vals[at]);
            break;
        default:
            assert_int_equal(map_del(&m, key, &v), at >= 0);
            if (at >= 0) {
                assert_int_equal(v.i64, nv.vals[at]);
                naive_del(&nv, at);
            }
        }
        assert_same(&m, &nv);
    }
    map_free(&m);
}

static void test_differential(void **state)
{
    run_differential(5, 2000, 1);
    run_differential(60, 20000, 2);
    run_differential(NAIVE_MAX, 20000, 3);
}

/* Grow to many keys, delete all but a few (shrinking), and look everything up again. */
static void test_grow_and_shrink(void **state)
{
    struct map m = {0};
    char key[32];
    for (int i = 0; i < 50000; i++) {
        snprintf(key, sizeof key, "trajectory-%d", i);
        map_put(&m, key, (union map_value){.i64 = i});
    }
    for (int i = 0; i < 50000; i++) {
        if (i % 1000 == 7)
            continue;
        snprintf(key, sizeof key, "trajectory-%d", i);
        assert_true(map_del(&m, key, NULL));
    }
    assert_int_equal(map_size(&m), 50);
    assert_true(m.mask + 1 <= 128); /* the index shrank with the entries */
    for (int i = 0; i < 50000; i++) {
        snprintf(key, sizeof key, "trajectory-%d", i);
        union map_value v;
        assert_int_equal(map_get(&m, key, &v), i % 1000 == 7);
    }
    size_t pos = 0, n = 0;
    union map_value v;
    while (map_next(&m, &pos, NULL, &v))
        assert_int_equal(v.i64, 1000 * (int64_t)n++ + 7);
    map_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_keys_copied_and_slot_counts),
        cmocka_unit_test(test_differential),
        cmocka_unit_test(test_grow_and_shrink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
