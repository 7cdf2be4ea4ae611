/*
 * util/heap: the (time, sequence) tie-break pattern of the simulator's event queue, a
 * differential test against a naive linear-scan queue over random push/pop sequences, and a
 * comparator that reads its order from ctx (the greedy schedulers' least-loaded pick).
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "util/heap.h"

/* A simulator-style event: ordered by time, then by the order it was scheduled in. */
struct event {
    double t_s;
    uint64_t seq;
    char payload[5]; /* odd size on purpose: elements are copied bytewise */
};

static int event_cmp(const void *a, const void *b, void *ctx)
{
    const struct event *x = a, *y = b;
    if (x->t_s != y->t_s)
        return x->t_s < y->t_s ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static int event_qsort_cmp(const void *a, const void *b)
{
    return event_cmp(a, b, NULL);
}

static void assert_event_equal(const struct event *x, const struct event *y)
{
    assert_true(x->t_s == y->t_s);
    assert_int_equal(x->seq, y->seq);
    assert_memory_equal(x->payload, y->payload, sizeof x->payload);
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return *s >> 33;
}

/* Many events share a time; they must come out in scheduling order (FIFO), like the sort. */
static void test_time_then_seq(void **state)
{
    enum { N = 20000 };
    static struct event in[N], sorted[N];
    uint64_t s = 7;
    struct heap h;
    heap_init(&h, sizeof(struct event), event_cmp, NULL);
    for (uint64_t i = 0; i < N; i++) {
        in[i] = (struct event){.t_s = (double)(lcg(&s) % 50) * 0.25, .seq = i};
        memcpy(in[i].payload, &i, sizeof in[i].payload);
        heap_push(&h, &in[i]);
    }
    memcpy(sorted, in, sizeof in);
    qsort(sorted, N, sizeof sorted[0], event_qsort_cmp);
    assert_int_equal(heap_size(&h), N);
    for (size_t i = 0; i < N; i++) {
        const struct event *top = heap_peek(&h);
        assert_non_null(top);
        assert_int_equal(top->seq, sorted[i].seq);
        struct event e;
        assert_true(heap_pop(&h, &e));
        assert_event_equal(&e, &sorted[i]);
    }
    assert_null(heap_peek(&h));
    assert_false(heap_pop(&h, NULL));
    heap_free(&h);
}

/* Random interleaving of pushes and pops against a naive queue that scans for its minimum. */
static void test_differential(void **state)
{
    enum { MAX = 512 };
    static struct event naive[MAX];
    size_t n = 0;
    uint64_t s = 11, seq = 0;
    struct heap h;
    heap_init(&h, sizeof(struct event), event_cmp, NULL);
    for (int op = 0; op < 200000; op++) {
        bool push = n == 0 || (n < MAX && lcg(&s) % 16 < 9);
        if (push) {
            naive[n] = (struct event){.t_s = (double)(lcg(&s) % 1000), .seq = seq};
            memcpy(naive[n].payload, &seq, sizeof naive[n].payload);
            seq++;
            heap_push(&h, &naive[n++]);
        } else {
            size_t min = 0;
            for (size_t i = 1; i < n; i++)
                if (event_cmp(&naive[i], &naive[min], NULL) < 0)
                    min = i;
            struct event e;
            assert_true(heap_pop(&h, &e));
            assert_event_equal(&e, &naive[min]);
            naive[min] = naive[--n];
        }
        assert_int_equal(heap_size(&h), n);
        if (op % 50000 == 49999) {
            heap_clear(&h);
            n = 0;
        }
    }
    heap_free(&h);
    heap_free(NULL);
}

/* Elements are instance numbers; ctx holds their loads (a greedy least-loaded pick). */
static int by_load(const void *a, const void *b, void *ctx)
{
    const double *load = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (load[x] != load[y])
        return load[x] < load[y] ? -1 : 1;
    return (x > y) - (x < y);
}

static void test_ctx_comparator(void **state)
{
    double load[6] = {3.0, 1.0, 2.0, 1.0, 0.5, 9.0};
    struct heap h;
    heap_init(&h, sizeof(size_t), by_load, load);
    for (size_t i = 0; i < 6; i++)
        heap_push(&h, &i);
    size_t want[6] = {4, 1, 3, 2, 0, 5}, got;
    for (size_t i = 0; i < 6; i++) {
        assert_true(heap_pop(&h, &got));
        assert_int_equal(got, want[i]);
    }
    heap_free(&h);
}

/* The indexed heap against a scan of a key table: random sets (new ids and re-keys, ties in k1
 * broken by k2) and removes (present or not); the top is always the least key. */
static void test_indexed_against_a_scan(void **state)
{
    (void)state;
    enum { IDS = 300, OPS = 20000 };
    struct {
        bool in;
        double k1;
        int64_t k2;
    } key[IDS] = {{0}};
    struct heap_indexed h;
    heap_indexed_init(&h);
    unsigned r = 7;
    for (int op = 0; op < OPS; op++) {
        r = r * 1103515245u + 12345u;
        uint32_t id = (r >> 8) % IDS;
        if ((r >> 20) % 3 == 0) {
            heap_indexed_remove(&h, id);
            key[id].in = false;
        } else {
            double k1 = (double)((r >> 4) % 50); /* many ties */
            heap_indexed_set(&h, id, k1, op);
            key[id].in = true;
            key[id].k1 = k1;
            key[id].k2 = op;
        }
        int best = -1;
        size_t n = 0;
        for (int i = 0; i < IDS; i++)
            if (key[i].in) {
                n++;
                if (best < 0 || key[i].k1 < key[best].k1 ||
                    (key[i].k1 == key[best].k1 && key[i].k2 < key[best].k2))
                    best = i;
            }
        assert_int_equal(h.n, n);
        const struct heap_entry *top = heap_indexed_top(&h);
        if (best < 0) {
            assert_null(top);
            continue;
        }
        assert_int_equal(top->id, (uint32_t)best);
        assert_true(top->k1 == key[best].k1 && top->k2 == key[best].k2);
    }
    heap_indexed_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_then_seq),
        cmocka_unit_test(test_differential),
        cmocka_unit_test(test_ctx_comparator),
        cmocka_unit_test(test_indexed_against_a_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
