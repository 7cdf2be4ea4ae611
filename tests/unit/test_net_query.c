/* Tests of query-string parsing and SSE framing (src/net/query.c). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "net/query.h"

static void test_query_decodes_pairs_in_order(void **state)
{
    const char *q = "mode=abort&&clear_cache=true&x=a%20b+c&flag&=v";
    struct net_kv *kv;
    size_t n;
    assert_int_equal(net_query_parse(q, strlen(q), &kv, &n), 0);
    assert_int_equal(n, 5);
    const char *want[][2] = {
        {"mode", "abort"}, {"clear_cache", "true"}, {"x", "a b c"}, {"flag", ""}, {"", "v"}};
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(kv[i].key, want[i][0]);
        assert_string_equal(kv[i].value, want[i][1]);
    }
    net_kv_free(kv, n);
    assert_int_equal(net_query_parse("", 0, &kv, &n), 0);
    assert_int_equal(n, 0);
    net_kv_free(kv, n);
}

static void test_query_refuses_bad_escapes(void **state)
{
    const char *bad[] = {"a=%zz", "a=%4", "a=%", "k%00=v", "a=%0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct net_kv *kv = (struct net_kv *)1;
        size_t n = 7;
        assert_int_equal(net_query_parse(bad[i], strlen(bad[i]), &kv, &n), -1);
        assert_null(kv);
        assert_int_equal(n, 0);
    }
}

static void test_sse_frames_each_line(void **state)
{
    size_t len;
    char *f = net_sse_frame("{\"a\":1}", 7, &len);
    assert_string_equal(f, "data: {\"a\":1}\n\n");
    assert_int_equal(len, strlen(f));
    free(f);
    f = net_sse_frame("x\ny", 3, &len);
    assert_string_equal(f, "data: x\ndata: y\n\n");
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_decodes_pairs_in_order),
        cmocka_unit_test(test_query_refuses_bad_escapes),
        cmocka_unit_test(test_sse_frames_each_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
