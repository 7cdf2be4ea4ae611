/*
 * util/workers: every index of a loop is called exactly once whatever the thread count, a pool
 * runs many loops in a row, loops nest (each inner loop finishes before its caller's call
 * returns), and the NULL pool is the serial loop.
 */
#include "testutil.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "util/workers.h"

#define N 1000
#define INNER 7

struct counts {
    atomic_int calls[N];
    atomic_int inner[N][INNER];
    struct workers *w; /* for nested loops */
};

static void count(void *arg, size_t i)
{
    struct counts *c = arg;
    atomic_fetch_add(&c->calls[i], 1);
}

static void check_each_once(struct counts *c, size_t n)
{
    for (size_t i = 0; i < N; i++)
        assert_int_equal(atomic_load(&c->calls[i]), i < n ? 1 : 0);
}

static void test_each_index_once(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 4; threads++) {
        struct workers *w = workers_new(threads);
        assert_int_equal(workers_threads(w), threads);
        for (size_t n = 0; n <= N; n += N / 4 + 1) { /* many loops on one pool */
            struct counts *c = calloc(1, sizeof *c);
            workers_for(w, n, count, c);
            check_each_once(c, n);
            free(c);
        }
        workers_free(w);
    }
    struct counts *c = calloc(1, sizeof *c);
    workers_for(NULL, N, count, c);
    check_each_once(c, N);
    assert_int_equal(workers_threads(NULL), 1);
    free(c);
    workers_free(NULL);
}

struct inner_arg {
    struct counts *c;
    size_t outer;
};

static void inner(void *arg, size_t j)
{
    struct inner_arg *a = arg;
    atomic_fetch_add(&a->c->inner[a->outer][j], 1);
}

static void outer(void *arg, size_t i)
{
    struct counts *c = arg;
    struct inner_arg a = {c, i};
    workers_for(c->w, INNER, inner, &a);
    for (size_t j = 0; j < INNER; j++) /* the inner loop is complete when it returns */
        assert_int_equal(atomic_load(&c->inner[i][j]), 1);
    atomic_fetch_add(&c->calls[i], 1);
}

static void test_nested_loops(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 3; threads++) {
        struct counts *c = calloc(1, sizeof *c);
        c->w = workers_new(threads);
        workers_for(c->w, 200, outer, c);
        check_each_once(c, 200);
        workers_free(c->w);
        free(c);
    }
    assert_true(workers_cpus() >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_index_once),
        cmocka_unit_test(test_nested_loops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
