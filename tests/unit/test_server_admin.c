/* Tests of what the gateway reads of its admin calls (src/server/admin.c). */
#include "testutil.h"

#include <string.h>

#include "server/admin.h"

static int body(const char *text, struct gw_worker_spec *s, char *err)
{
    return gw_worker_body_parse(text, strlen(text), s, err, 256);
}

static void test_a_worker_body_names_url_and_tp(void **state)
{
    struct gw_worker_spec s;
    char err[256];
    assert_int_equal(body("{\"url\": \"http://10.0.0.2:30000/\", \"tp\": 4, "
                          "\"worker_type\": \"regular\"}",
                          &s, err),
                     0);
    assert_string_equal(s.url, "http://10.0.0.2:30000");
    assert_int_equal(s.tp, 4);
    assert_int_equal(body("{\"url\": \"http://h:1\"}", &s, err), 0);
    assert_int_equal(s.tp, 0); /* asked of the engine */
}

static void test_a_bad_worker_body_says_what_is_wrong(void **state)
{
    struct gw_worker_spec s;
    char err[256];
    static const struct {
        const char *body, *says;
    } cases[] = {
        {"{\"tp\": 1}", "url: missing"},
        {"{\"url\": \"https://h:1\"}", "url: expected http://"},
        {"{\"url\": \"http://h:1?x=1\"}", "'?'"},
        {"{\"url\": \"http://h:1\", \"tp\": 3}", "tp: expected 1, 2, 4 or 8"},
        {"{\"url\": \"http://h:1\", \"priority\": 5}", "unknown member 'priority'"},
        {"{\"url\": \"http://h:1\", \"worker_type\": \"prefill\"}", "worker_type"},
        {"{\"url\": \"http://a:1\", \"url\": \"http://b:1\"}", "body:"},
        {"[1]", "expected an object"},
        {"{\"url\": ", "body:"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        assert_int_equal(body(cases[i].body, &s, err), -1);
        assert_non_null(strstr(err, cases[i].says));
    }
}

static void test_the_query_form_and_tp_text(void **state)
{
    struct gw_worker_spec s;
    char err[256];
    assert_int_equal(gw_worker_query_parse("http://h:2//", "2", NULL, &s, err, sizeof err), 0);
    assert_string_equal(s.url, "http://h:2");
    assert_int_equal(s.tp, 2);
    assert_int_equal(gw_worker_query_parse(NULL, NULL, NULL, &s, err, sizeof err), -1);
    assert_int_equal(gw_worker_query_parse("http://h:2", "2x", NULL, &s, err, sizeof err), -1);
    assert_int_equal(gw_worker_query_parse("http://h:2", "16", NULL, &s, err, sizeof err), -1);
    assert_int_equal(gw_worker_query_parse("http://", NULL, NULL, &s, err, sizeof err), -1);
    /* a scheme is case-insensitive (RFC 3986 §3.1): kept in one spelling, as URLs compare */
    assert_int_equal(gw_worker_query_parse("HTTP://h:2/", NULL, NULL, &s, err, sizeof err), 0);
    assert_string_equal(s.url, "http://h:2");
    /* worker_type as in the body: regular only, never ignored */
    assert_int_equal(gw_worker_query_parse("http://h:2", NULL, "regular", &s, err, sizeof err), 0);
    assert_int_equal(gw_worker_query_parse("http://h:2", NULL, "prefill", &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "worker_type: only \"regular\""));
}

static void test_an_engine_is_named_by_id_or_url(void **state)
{
    int64_t id;
    char url[GW_URL_MAX], err[256], action[GW_ACTION_MAX];
    assert_int_equal(gw_engine_ref_parse("12", &id, url, err, sizeof err), 0);
    assert_int_equal(id, 12);
    assert_string_equal(url, "");
    assert_int_equal(gw_engine_ref_parse("http://h:1/", &id, url, err, sizeof err), 0);
    assert_int_equal(id, -1);
    assert_string_equal(url, "http://h:1");
    assert_int_equal(gw_engine_ref_parse("Http://h:1", &id, url, err, sizeof err), 0);
    assert_string_equal(url, "http://h:1");
    assert_int_equal(gw_engine_ref_parse("-1", &id, url, err, sizeof err), -1);
    assert_int_equal(gw_engine_action_parse("3/drain", &id, action, err, sizeof err), 0);
    assert_int_equal(id, 3);
    assert_string_equal(action, "drain");
    assert_int_equal(gw_engine_action_parse("3", &id, action, err, sizeof err), -1);
    assert_int_equal(gw_engine_action_parse("x/drain", &id, action, err, sizeof err), -1);
    assert_int_equal(gw_engine_action_parse("3/Drain", &id, action, err, sizeof err), -1);
    assert_int_equal(gw_engine_action_parse("3/", &id, action, err, sizeof err), -1);
}

static int mode(const char *text, bool *shadow, char *err)
{
    return gw_mode_body_parse(text, strlen(text), "cmlfq", shadow, err, 256);
}

static void test_the_mode_is_shadow_or_the_policy(void **state)
{
    bool shadow = false;
    char err[256];
    assert_int_equal(mode("{\"mode\": \"shadow\"}", &shadow, err), 0);
    assert_true(shadow);
    assert_int_equal(mode("{\"mode\": \"cmlfq\"}", &shadow, err), 0);
    assert_false(shadow);
    assert_int_equal(mode("{\"mode\": \"oracle\"}", &shadow, err), -1);
    assert_non_null(strstr(err, "\"shadow\" or \"cmlfq\""));
    assert_int_equal(mode("{\"mode\": \"shadow\", \"policy\": \"x\"}", &shadow, err), -1);
    assert_non_null(strstr(err, "unknown member 'policy'"));
    assert_int_equal(mode("{}", &shadow, err), -1);
    assert_string_equal(err, "mode: missing (expected \"shadow\" or \"cmlfq\")");
    assert_int_equal(mode("[\"shadow\"]", &shadow, err), -1);
    assert_int_equal(mode("{\"mode\": ", &shadow, err), -1);
    assert_non_null(strstr(err, "body:"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_worker_body_names_url_and_tp),
        cmocka_unit_test(test_a_bad_worker_body_says_what_is_wrong),
        cmocka_unit_test(test_the_query_form_and_tp_text),
        cmocka_unit_test(test_an_engine_is_named_by_id_or_url),
        cmocka_unit_test(test_the_mode_is_shadow_or_the_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
