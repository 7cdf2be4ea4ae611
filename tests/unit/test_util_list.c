/*
 * Tests of the intrusive list (src/util/list.h) against a plain array kept in the same order:
 * random pushes, touches (move to the front) and unlinks of members anywhere, including the
 * only member and both ends; list_entry gets the member back from its node.
 */
#include "testutil.h"

#include <string.h>

#include "util/list.h"
#include "util/rng.h"

#define ITEMS 40

struct item {
    int id;
    struct list_node link; /* not first: list_entry must subtract the offset */
    bool in;
};

/* Walks l both ways and checks it against want[0..n) (front first). */
static void check(const struct list *l, const int *want, int n)
{
    int k = 0;
    for (struct list_node *p = l->front; p; p = p->next, k++) {
        assert_true(k < n);
        assert_int_equal(list_entry(p, struct item, link)->id, want[k]);
        if (k == 0)
            assert_null(p->prev);
        if (p->next)
            assert_ptr_equal(p->next->prev, p);
    }
    assert_int_equal(k, n);
    for (struct list_node *p = l->back; p; p = p->prev)
        assert_int_equal(list_entry(p, struct item, link)->id, want[--k]);
    assert_int_equal(k, 0);
    assert_true((l->front == NULL) == (n == 0));
    assert_true((l->back == NULL) == (n == 0));
}

static void remove_at(int *order, int *n, int id)
{
    for (int i = 0; i < *n; i++)
        if (order[i] == id) {
            memmove(order + i, order + i + 1, (size_t)(*n - i - 1) * sizeof *order);
            (*n)--;
            return;
        }
    fail_msg("id %d not in the reference", id);
}

static void test_matches_a_plain_array(void **state)
{
    struct item items[ITEMS] = {0};
    for (int i = 0; i < ITEMS; i++)
        items[i].id = i;
    struct list l = {0};
    int order[ITEMS] = {0}, n = 0;
    check(&l, order, n);
    struct rng g = rng_keyed(11, 0, 0, 0);
    for (int op = 0; op < 20000; op++) {
        struct item *it = &items[rng_uniform_int(&g, op < 10000 ? ITEMS : 3)];
        if (!it->in) { /* push */
            list_push_front(&l, &it->link);
            memmove(order + 1, order, (size_t)n * sizeof *order);
            order[0] = it->id;
            n++;
            it->in = true;
        } else if (rng_bernoulli(&g, 0.5)) { /* touch */
            list_move_front(&l, &it->link);
            remove_at(order, &n, it->id);
            memmove(order + 1, order, (size_t)n * sizeof *order);
            order[0] = it->id;
            n++;
        } else { /* unlink */
            list_unlink(&l, &it->link);
            assert_null(it->link.prev);
            assert_null(it->link.next);
            remove_at(order, &n, it->id);
            it->in = false;
        }
        check(&l, order, n);
    }
}

static void test_evicting_from_the_back_is_lru_order(void **state)
{
    struct item items[3] = {{.id = 0}, {.id = 1}, {.id = 2}};
    struct list l = {0};
    for (int i = 0; i < 3; i++)
        list_push_front(&l, &items[i].link);
    list_move_front(&l, &items[0].link); /* 0 used again: 1 is now the oldest */
    int want[] = {1, 2, 0};
    for (int i = 0; i < 3; i++) {
        struct item *oldest = list_entry(l.back, struct item, link);
        assert_int_equal(oldest->id, want[i]);
        list_unlink(&l, l.back);
    }
    assert_null(l.front);
    assert_null(l.back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_a_plain_array),
        cmocka_unit_test(test_evicting_from_the_back_is_lru_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
