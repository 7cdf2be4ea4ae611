/* util/vec: push and reserve keep contents and grow geometrically; free empties. */
#include "testutil.h"

#include <string.h>

#include "util/vec.h"

struct pair {
    int id;
    double t_s;
};

typedef VEC(struct pair) pair_vec;
typedef VEC(int) int_vec;

static void test_push_keeps_contents(void **state)
{
    pair_vec v = {0};
    for (int i = 0; i < 10000; i++)
        vec_push(&v, ((struct pair){i, i * 0.5}));
    assert_int_equal(v.n, 10000);
    assert_true(v.cap >= v.n);
    for (int i = 0; i < 10000; i++) {
        assert_int_equal(v.v[i].id, i);
        assert_true(v.v[i].t_s == i * 0.5);
    }
    vec_free(&v);
    assert_null(v.v);
    assert_int_equal(v.n, 0);
    assert_int_equal(v.cap, 0);
}

/* Geometric growth: pushing n elements reallocates O(log n) times. */
static void test_growth_is_geometric(void **state)
{
    int_vec v = {0};
    size_t grows = 0, cap = 0;
    for (int i = 0; i < 100000; i++) {
        vec_push(&v, i);
        if (v.cap != cap) {
            grows++;
            cap = v.cap;
        }
    }
    assert_true(grows <= 20);
    vec_free(&v);
}

static void test_reserve(void **state)
{
    int_vec v = {0};
    vec_reserve(&v, 1000);
    assert_true(v.cap >= 1000);
    int *before = v.v;
    for (int i = 0; i < 1000; i++)
        vec_push(&v, i);
    assert_ptr_equal(v.v, before); /* no reallocation within the reserved capacity */
    vec_reserve(&v, 10);           /* shrinking requests are no-ops */
    assert_true(v.cap >= 1000);
    assert_int_equal(v.v[999], 999);
    vec_free(&v);
    vec_free(&v); /* freeing an empty vector is fine */
}

/* The pushed expression is evaluated exactly once. */
static void test_push_evaluates_once(void **state)
{
    int_vec v = {0};
    int k = 0;
    for (int i = 0; i < 100; i++)
        vec_push(&v, k++);
    assert_int_equal(k, 100);
    assert_int_equal(v.v[99], 99);
    vec_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_keeps_contents),
        cmocka_unit_test(test_growth_is_geometric),
        cmocka_unit_test(test_reserve),
        cmocka_unit_test(test_push_evaluates_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
