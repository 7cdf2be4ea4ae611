/* Tests of HTTP/1.x head framing (src/net/head.c): the limit on header fields. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

#include "net/head.h"

/* A request head of n fields, ended by its blank line when whole. */
static size_t head_of(char *buf, size_t size, int n, bool whole)
{
    size_t len = (size_t)snprintf(buf, size, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, size - len, "X-%d: y\r\n", i);
    if (whole)
        len += (size_t)snprintf(buf + len, size - len, "\r\n");
    return len;
}

/* Past the limit the head is refused as such, not as malformed: the server says which. */
static void test_fields_past_the_limit_are_many_not_malformed(void **state)
{
    static char buf[8192];
    struct net_head h;
    size_t len = head_of(buf, sizeof buf, NET_HEAD_FIELDS, true);
    assert_int_equal(net_head_parse(buf, len, false, &h), NET_HEAD_OK);
    assert_int_equal(h.n_fields, NET_HEAD_FIELDS);
    len = head_of(buf, sizeof buf, NET_HEAD_FIELDS + 1, false); /* known before the head ends */
    assert_int_equal(net_head_parse(buf, len, false, &h), NET_HEAD_MANY);
    assert_string_equal(NET_HEAD_MANY_TEXT, "more than 100 header fields");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_past_the_limit_are_many_not_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
