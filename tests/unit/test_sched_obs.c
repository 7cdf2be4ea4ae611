/* Tests of observations (src/sched/obs.c): size classes, status rules, state keys. */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "sched/obs.h"

static struct sched_tool_return ret(const char *tool)
{
    return (struct sched_tool_return){.tool = tool,
                                      .payload_tokens = -1,
                                      .payload_chars = -1,
                                      .status = SCHED_STATUS_UNSET,
                                      .reward = NAN,
                                      .correct = -1};
}

static void test_defaults_per_workload(void **state)
{
    struct sched_obs_config c;
    sched_obs_defaults(&c, NULL, NULL);
    assert_int_equal(c.small_max_tokens, 500);
    assert_int_equal(c.large_above_tokens, 5000);
    assert_int_equal(c.n_rules, 0);
    sched_obs_defaults(&c, "r2e-gym", "qwen3-14b");
    assert_int_equal(c.small_max_tokens, 1000);
    assert_int_equal(c.large_above_tokens, 12000);
    assert_int_equal(c.n_rules, 1);
    assert_string_equal(c.rules[0].tool, "validator");
    assert_int_equal(c.rules[0].rule, SCHED_RULE_REWARD);
    sched_obs_defaults(&c, "dapo-math-verl", "qwen3-4b");
    assert_int_equal(c.small_max_tokens, 400);
    assert_int_equal(c.large_above_tokens, 1600);
    assert_int_equal(c.rules[0].rule, SCHED_RULE_CORRECT);
    sched_obs_defaults(&c, "dapo-math", NULL); /* the reference run: 4B */
    assert_int_equal(c.large_above_tokens, 1600);
    sched_obs_defaults(&c, "r2e-gym", NULL); /* the reference run: 14B */
    assert_int_equal(c.large_above_tokens, 12000);
    sched_obs_defaults(&c, "search-r1", "qwen3-14b");
    assert_int_equal(c.small_max_tokens, 500);
    assert_int_equal(c.rules[0].rule, SCHED_RULE_RAISED);
    assert_true(c.chars_per_token == 4.0);
}

static void test_size_classes_and_units(void **state)
{
    struct sched_obs_config c;
    sched_obs_defaults(&c, NULL, NULL);
    assert_int_equal(sched_size_class(&c, -1), SCHED_SMALL);
    assert_int_equal(sched_size_class(&c, 500), SCHED_SMALL);
    assert_int_equal(sched_size_class(&c, 501), SCHED_MEDIUM);
    assert_int_equal(sched_size_class(&c, 5000), SCHED_MEDIUM);
    assert_int_equal(sched_size_class(&c, 5001), SCHED_LARGE);

    struct sched_obs o;
    struct sched_tool_return r = ret("bash");
    r.payload_chars = 2001; /* 2001 / 4 rounds up to 501 tokens: medium */
    sched_obs_classify(&c, &r, &o);
    assert_int_equal(o.payload_tokens, 501);
    assert_int_equal(o.size, SCHED_MEDIUM);
    r.payload_tokens = 10; /* tokens win over characters */
    sched_obs_classify(&c, &r, &o);
    assert_int_equal(o.size, SCHED_SMALL);
    c.chars_per_token = 2.0;
    r = ret("bash");
    r.text = "abcdefgh";
    r.text_len = 8; /* no sizes given: the text's length at 2 chars per token */
    sched_obs_classify(&c, &r, &o);
    assert_int_equal(o.payload_tokens, 4);
}

static void test_status_precedence(void **state)
{
    struct sched_obs_config c;
    sched_obs_defaults(&c, "r2e-gym", "qwen3-14b");
    struct sched_obs o;
    struct sched_tool_return r = ret("validator");
    r.text = "Traceback (most recent call last)";
    r.text_len = strlen(r.text);
    r.reward = 0.7;
    r.status = SCHED_TIMEOUT; /* explicit beats everything */
    sched_obs_classify(&c, &r, &o);
    assert_int_equal(o.status, SCHED_TIMEOUT);
    assert_int_equal(o.status_from, SCHED_FROM_EXPLICIT);
    r.status = SCHED_STATUS_UNSET; /* then the workload rule on the reward */
    sched_obs_classify(&c, &r, &o);
    assert_int_equal(o.status, SCHED_SUCCESS);
    assert_int_equal(o.status_from, SCHED_FROM_RULE);
    r.reward = 0.49;
    sched_obs_classify(&c, &r, &o);
    assert_int_equal(o.status, SCHED_FAILURE);
    r.reward = NAN; /* then text, labelled */
    sched_obs_classify(&c, &r, &o);
    assert_int_equal(o.status, SCHED_FAILURE);
    assert_int_equal(o.status_from, SCHED_FROM_TEXT);
    r.text = NULL; /* nothing: success, labelled as assumed */
    sched_obs_classify(&c, &r, &o);
    assert_int_equal(o.status, SCHED_SUCCESS);
    assert_int_equal(o.status_from, SCHED_FROM_NONE);

    sched_obs_defaults(&c, "dapo-math", "qwen3-4b");
    r = ret("validator");
    r.correct = 0;
    sched_obs_classify(&c, &r, &o);
    assert_int_equal(o.status, SCHED_FAILURE);
    assert_int_equal(o.status_from, SCHED_FROM_RULE);
}

static void test_text_rules(void **state)
{
    const char *fail = "ValueError: bad";
    assert_int_equal(sched_status_from_text(fail, strlen(fail), false), SCHED_FAILURE);
    assert_int_equal(sched_status_from_text("EXCEPTION", 9, false), SCHED_FAILURE);
    assert_int_equal(sched_status_from_text("all good", 8, false), SCHED_SUCCESS);
    const char *to = "Traceback ... TimeoutError";
    assert_int_equal(sched_status_from_text(to, strlen(to), false), SCHED_TIMEOUT);
    assert_int_equal(sched_status_from_text("request timed out", 17, false), SCHED_TIMEOUT);
    /* search results mentioning "error" are a success under the search rule */
    const char *res = "Error bars in physics are...";
    assert_int_equal(sched_status_from_text(res, strlen(res), true), SCHED_SUCCESS);
    assert_int_equal(sched_status_from_text(res, strlen(res), false), SCHED_FAILURE);
    assert_int_equal(sched_status_from_text("Traceback", 9, true), SCHED_FAILURE);
    /* the length bounds the scan: "error" past len is not seen */
    assert_int_equal(sched_status_from_text("ok error", 3, false), SCHED_SUCCESS);
    assert_int_equal(sched_status_from_text("erro", 4, false), SCHED_SUCCESS);

    struct sched_obs_config c;
    sched_obs_defaults(&c, "search-r1", NULL);
    struct sched_tool_return r = ret("search");
    r.text = res;
    r.text_len = strlen(res);
    struct sched_obs o;
    sched_obs_classify(&c, &r, &o);
    assert_int_equal(o.status, SCHED_SUCCESS);
    assert_int_equal(o.status_from, SCHED_FROM_TEXT);
}

static void test_state_keys(void **state)
{
    struct sched_obs_config c;
    sched_obs_defaults(&c, NULL, NULL);
    struct sched_obs o[3];
    struct sched_tool_return r = ret("bash");
    r.payload_tokens = 6000;
    r.status = SCHED_FAILURE;
    sched_obs_classify(&c, &r, &o[0]);
    r = ret("a:b|c");
    r.payload_tokens = 10;
    r.status = SCHED_SUCCESS;
    sched_obs_classify(&c, &r, &o[1]);
    assert_string_equal(o[1].tool, "a_b_c");
    r = ret(NULL);
    r.status = SCHED_OTHER;
    sched_obs_classify(&c, &r, &o[2]);

    char key[SCHED_STATE_KEY_MAX], key2[SCHED_STATE_KEY_MAX];
    sched_state_key(&c, o, 1, key, sizeof key);
    assert_string_equal(key, "bash:large:failure");
    sched_state_key(&c, o, 3, key, sizeof key);
    assert_string_equal(key, "a_b_c:small:success|bash:large:failure|unknown:small:other");
    struct sched_obs rev[3] = {o[2], o[0], o[1]}; /* a multiset: order does not matter */
    sched_state_key(&c, rev, 3, key2, sizeof key2);
    assert_string_equal(key, key2);
    char small[10];
    assert_int_equal(sched_state_key(&c, o, 3, small, sizeof small), 9);
    assert_string_equal(small, "a_b_c:sma");
    c.depth_only = true;
    sched_state_key(&c, o, 3, key, sizeof key);
    assert_string_equal(key, "*");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_per_workload),
        cmocka_unit_test(test_size_classes_and_units),
        cmocka_unit_test(test_status_precedence),
        cmocka_unit_test(test_text_rules),
        cmocka_unit_test(test_state_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
