/* Tests of what the gateway reads of a request (src/server/request.c). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "server/request.h"

static const struct gw_parse_config config = {.rid_identity = false, .prompt_tokens = 4};

struct headers {
    const char *routing_key, *session;
};

static const char *header(void *ctx, const char *name)
{
    const struct headers *h = ctx;
    if (strcmp(name, "X-SMG-Routing-Key") == 0)
        return h->routing_key;
    return strcmp(name, "X-Session-ID") == 0 ? h->session : NULL;
}

static int parse(enum gw_api api, const char *body, const struct headers *h,
                 const struct gw_parse_config *c, struct gw_request *r, char *err)
{
    return gw_request_parse(api, body, strlen(body), header, (void *)h, c, r, err, 256);
}

static void test_identity_follows_the_order_of_precedence(void **state)
{
    struct gw_request r;
    char err[256];
    struct headers h = {"slime-7", "sess-1"};
    struct gw_parse_config rid = {.rid_identity = true, .prompt_tokens = 4};
    const char *all = "{\"input_ids\": [1], \"rid\": \"r\", \"program_id\": \"p\", "
                      "\"trajectory_id\": {\"a\": 1}, \"libra\": {\"trajectory\": 42}}";
    assert_int_equal(parse(GW_SGLANG_GENERATE, all, &h, &rid, &r, err), 0);
    assert_int_equal(r.id_source, GW_ID_LIBRA);
    assert_string_equal(r.id, "libra:42");
    const char *no_libra = "{\"input_ids\": [1], \"rid\": \"r\", \"program_id\": \"p\", "
                           "\"trajectory_id\": {\"a\": 1}}";
    assert_int_equal(parse(GW_SGLANG_GENERATE, no_libra, &h, &rid, &r, err), 0);
    assert_string_equal(r.id, "trajectory_id:{\"a\": 1}");
    const char *program = "{\"input_ids\": [1], \"rid\": \"r\", \"program_id\": \"p\"}";
    assert_int_equal(parse(GW_SGLANG_GENERATE, program, &h, &rid, &r, err), 0);
    assert_string_equal(r.id, "routing_key:slime-7"); /* the header outranks program_id */
    struct headers none = {NULL, NULL}, session = {NULL, "sess-1"};
    assert_int_equal(parse(GW_SGLANG_GENERATE, program, &none, &rid, &r, err), 0);
    assert_string_equal(r.id, "program_id:p");
    const char *rid_only = "{\"input_ids\": [1], \"rid\": \"r\"}";
    assert_int_equal(parse(GW_SGLANG_GENERATE, rid_only, &session, &rid, &r, err), 0);
    assert_string_equal(r.id, "session:sess-1");
    assert_int_equal(parse(GW_SGLANG_GENERATE, rid_only, &none, &rid, &r, err), 0);
    assert_string_equal(r.id, "rid:r");
    assert_int_equal(parse(GW_SGLANG_GENERATE, rid_only, &none, &config, &r, err), 0);
    assert_int_equal(r.id_source, GW_ID_NONE); /* rid names a trajectory only when asked */
    assert_string_equal(r.id, "");
}

static void test_counts_budget_and_stream(void **state)
{
    struct gw_request r;
    char err[256];
    struct headers h = {0};
    assert_int_equal(parse(GW_SGLANG_GENERATE,
                           "{\"input_ids\": [5, 6, 7], \"sampling_params\": "
                           "{\"max_new_tokens\": 9}, \"stream\": true}",
                           &h, &config, &r, err),
                     0);
    assert_int_equal(r.prompt_tokens, 3);
    assert_int_equal(r.max_new_tokens, 9);
    assert_true(r.stream);
    assert_false(r.has_libra);
    assert_int_equal(parse(GW_VLLM_GENERATE,
                           "{\"token_ids\": [1, 2], \"sampling_params\": {\"max_tokens\": 4}}", &h,
                           &config, &r, err),
                     0);
    assert_int_equal(r.prompt_tokens, 2);
    assert_int_equal(r.max_new_tokens, 4);
    assert_int_equal(parse(GW_COMPLETIONS, "{\"prompt\": [1, 2, 3, 4, 5], \"max_tokens\": 1}", &h,
                           &config, &r, err),
                     0);
    assert_int_equal(r.prompt_tokens, 5);
    /* chat: four bytes of the messages' JSON per token */
    const char *chat = "{\"messages\": [{\"role\": \"user\", \"content\": \"0123456789abcdef\"}],"
                       " \"max_completion_tokens\": 3}";
    assert_int_equal(parse(GW_CHAT, chat, &h, &config, &r, err), 0);
    assert_int_equal(r.prompt_tokens, (int64_t)strlen("[{\"role\": \"user\", \"content\": "
                                                      "\"0123456789abcdef\"}]") /
                                          4);
    assert_int_equal(r.max_new_tokens, 3);
}

static void test_the_prompt_key_is_the_first_tokens_or_libras(void **state)
{
    struct gw_request a, b, c;
    char err[256];
    struct headers h = {0};
    /* config.prompt_tokens is 4: siblings agree on those, later tokens do not matter */
    assert_int_equal(
        parse(GW_SGLANG_GENERATE, "{\"input_ids\": [1, 2, 3, 4, 5]}", &h, &config, &a, err), 0);
    assert_int_equal(
        parse(GW_SGLANG_GENERATE, "{\"input_ids\": [1,2,3,4,99,98]}", &h, &config, &b, err), 0);
    assert_int_equal(
        parse(GW_SGLANG_GENERATE, "{\"input_ids\": [1, 2, 34, 5]}", &h, &config, &c, err), 0);
    assert_true(a.prompt == b.prompt);
    assert_true(a.prompt != c.prompt);                           /* "3, 4" is not "34" */
    assert_true(a.prompt <= INT64_MAX && c.prompt <= INT64_MAX); /* a trace's prompt_id */
    assert_false(a.has_prompt);
    assert_int_equal(parse(GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"libra\": {\"prompt\": 77}}",
                           &h, &config, &a, err),
                     0);
    assert_true(a.has_prompt);
    assert_true(a.prompt == 77);
    /* the id rule: SkyRL's "<prompt>-<sample>" */
    struct gw_parse_config by_id = {.prompt_tokens = 4, .prompt_sep = '-'};
    assert_int_equal(parse(GW_COMPLETIONS, "{\"prompt\": [1], \"trajectory_id\": \"17-3\"}", &h,
                           &by_id, &a, err),
                     0);
    assert_int_equal(parse(GW_COMPLETIONS, "{\"prompt\": [2], \"trajectory_id\": \"17-4\"}", &h,
                           &by_id, &b, err),
                     0);
    assert_int_equal(parse(GW_COMPLETIONS, "{\"prompt\": [1], \"trajectory_id\": \"18-3\"}", &h,
                           &by_id, &c, err),
                     0);
    assert_true(a.has_prompt && a.prompt == b.prompt && a.prompt != c.prompt);
    assert_int_equal(parse(GW_COMPLETIONS, "{\"prompt\": [1], \"trajectory_id\": \"nosep\"}", &h,
                           &by_id, &a, err),
                     0);
    assert_false(a.has_prompt); /* no separator: the tokens' hash */
    by_id.prompt_sep = ':';     /* the separator of the source's tag is not the id's */
    assert_int_equal(
        parse(GW_COMPLETIONS, "{\"prompt\": [1], \"trajectory_id\": \"17\"}", &h, &by_id, &a, err),
        0);
    assert_false(a.has_prompt);
    assert_int_equal(parse(GW_COMPLETIONS, "{\"prompt\": [1], \"trajectory_id\": \"17:3\"}", &h,
                           &by_id, &a, err),
                     0);
    assert_int_equal(parse(GW_COMPLETIONS, "{\"prompt\": [2], \"trajectory_id\": \"17:4\"}", &h,
                           &by_id, &b, err),
                     0);
    assert_true(a.has_prompt && a.prompt == b.prompt);
}

static void test_libras_member_is_cut_and_its_events_read(void **state)
{
    struct gw_request r;
    char err[256];
    struct headers h = {0};
    const char *body =
        "  {\"input_ids\": [1, 2], \"libra\": {\"trajectory\": \"t\", \"resume\": true, "
        "\"events\": [{\"kind\": \"tool_return\", \"tool\": \"bash\", \"status\": "
        "\"timeout\", \"payload_tokens\": 812, \"exec_s\": 3.5}, {\"kind\": \"finish\", "
        "\"status\": \"aborted\", \"reward\": -1}]}, \"rid\": \"x\"} ";
    assert_int_equal(parse(GW_SGLANG_GENERATE, body, &h, &config, &r, err), 0);
    assert_true(r.has_libra && r.resume);
    char out[512];
    size_t n = r.cut.head_len, len = strlen(body);
    memcpy(out, body, n);
    memcpy(out + n, body + r.cut.tail_off, len - r.cut.tail_off);
    out[n + len - r.cut.tail_off] = '\0';
    assert_string_equal(out, "  {\"input_ids\": [1, 2], \"rid\": \"x\"} ");
    assert_int_equal(r.n_events, 2);
    assert_int_equal(r.events[0].kind, GW_EVENT_TOOL_RETURN);
    assert_string_equal(r.events[0].tool, "bash");
    assert_int_equal(r.events[0].status, SCHED_TIMEOUT);
    assert_int_equal(r.events[0].payload_tokens, 812);
    assert_true(r.events[0].exec_s == 3.5);
    assert_int_equal(r.events[1].kind, GW_EVENT_FINISH);
    assert_int_equal(r.events[1].finish, TRACE_FINISH_ABORTED);
    assert_true(r.events[1].has_reward && r.events[1].reward == -1);
}

static void test_errors_name_the_field(void **state)
{
    struct gw_request r;
    char err[256];
    struct headers h = {0};
    const struct {
        enum gw_api api;
        const char *body, *want;
    } cases[] = {
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1,", "body:17"},
        {GW_SGLANG_GENERATE, "[1]", "body:"},
        {GW_SGLANG_GENERATE, "{\"sampling_params\": {}}", "input_ids: missing"},
        {GW_CHAT, "{\"model\": \"m\"}", "messages: missing"},
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"libra\": []}", "libra: expected an object"},
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"libra\": {\"events\": [{\"kind\": 1}]}}",
         "libra.events.0.kind"},
        {GW_SGLANG_GENERATE,
         "{\"input_ids\": [1], \"libra\": {\"events\": [{\"kind\": \"tool_return\", "
         "\"payload_tokens\": -3}]}}",
         "libra.events.0.payload_tokens"},
        /* past what a trace holds: the capture, the state and the sums over a trajectory */
        {GW_SGLANG_GENERATE,
         "{\"input_ids\": [1], \"libra\": {\"events\": [{\"kind\": \"tool_return\", "
         "\"payload_tokens\": 1099511627777}]}}",
         "libra.events.0.payload_tokens: expected an integer from 0 to 2^40"},
        {GW_SGLANG_GENERATE,
         "{\"input_ids\": [1], \"libra\": {\"events\": [{\"kind\": \"tool_return\", "
         "\"exec_s\": 1e13}]}}",
         "libra.events.0.exec_s: expected seconds from 0 to 1125899906"},
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"libra\": {\"resume\": 1}}", "libra.resume"},
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"libra\": {\"prompt\": -2}}", "libra.prompt"},
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"stream\": \"yes\"}", "stream"},
        /* a name is a string or an integer (libra.trajectory [1] once made "libra:[1]") */
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"libra\": {\"trajectory\": [1]}}",
         "libra.trajectory: expected a string or an integer"},
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"libra\": {\"trajectory\": 1e300}}",
         "libra.trajectory: expected a string or an integer"},
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"libra\": {\"trajectory\": true}}",
         "libra.trajectory: expected a string or an integer"},
        /* docs/serve.md "Identity": 5 once made "trajectory_id:5" */
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"trajectory_id\": 5}",
         "trajectory_id: expected a string or an object"},
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"trajectory_id\": [1, 2]}",
         "trajectory_id: expected a string or an object"},
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"program_id\": 7.5}",
         "program_id: expected a string"},
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"program_id\": {\"a\": 1}}",
         "program_id: expected a string"},
        /* outranked, it is still a client's mistake */
        {GW_SGLANG_GENERATE,
         "{\"input_ids\": [1], \"libra\": {\"trajectory\": \"t\"}, \"program_id\": true}",
         "program_id: expected a string"},
        /* no path could name it */
        {GW_SGLANG_GENERATE, "{\"input_ids\": [1], \"trajectory_id\": \"a\\u0000b\"}",
         "trajectory_id: expected an identity of at most 4096 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        assert_int_equal(parse(cases[i].api, cases[i].body, &h, &config, &r, err), -1);
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: '%s' does not say '%s'", i, err, cases[i].want);
    }
}

static void test_the_events_call_takes_a_list_or_one(void **state)
{
    struct gw_event ev[GW_EVENTS_MAX];
    size_t n;
    char err[256];
    const char *list = "{\"events\": [{\"kind\": \"tool_return\"}, {\"kind\": \"finish\"}]}";
    assert_int_equal(gw_events_parse(list, strlen(list), ev, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(ev[0].status, SCHED_STATUS_UNSET);
    assert_int_equal(ev[0].payload_tokens, -1);
    assert_int_equal(ev[1].finish, TRACE_FINISH_COMPLETED);
    const char *one = "{\"kind\": \"finish\", \"status\": \"filtered\"}";
    assert_int_equal(gw_events_parse(one, strlen(one), ev, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ev[0].finish, TRACE_FINISH_FILTERED);
    const char *bad = "{\"kind\": \"finish\", \"status\": \"done\"}";
    assert_int_equal(gw_events_parse(bad, strlen(bad), ev, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "event.status"));
}

static void test_a_resumed_turn_asks_for_the_rest(void **state)
{
    struct gw_request r;
    char err[256];
    struct headers h = {0};
    const char *body = "{\"libra\": {\"resume\": true}, \"input_ids\": [1, 2 ], "
                       "\"sampling_params\": {\"max_new_tokens\": 10, \"temperature\": 1.0}}";
    assert_int_equal(parse(GW_SGLANG_GENERATE, body, &h, &config, &r, err), 0);
    size_t n;
    char *next = gw_resume_body(body, strlen(body), &r, "7, 8", 4, 2, &n);
    assert_non_null(next);
    assert_int_equal(n, strlen(next));
    assert_string_equal(next, "{\"input_ids\": [1, 2 ,7, 8], \"sampling_params\": "
                              "{\"max_new_tokens\": 8, \"temperature\": 1.0}}");
    free(next);
    /* aborted before its first token (a drain at once): the same ids, the whole budget */
    next = gw_resume_body(body, strlen(body), &r, NULL, 0, 0, &n);
    assert_non_null(next);
    assert_string_equal(next, "{\"input_ids\": [1, 2 ], \"sampling_params\": "
                              "{\"max_new_tokens\": 10, \"temperature\": 1.0}}");
    free(next);
    /* no budget, or not SGLang's token ids: nothing to ask */
    const char *text = "{\"text\": \"hi\", \"sampling_params\": {\"max_new_tokens\": 4}}";
    assert_int_equal(parse(GW_SGLANG_GENERATE, text, &h, &config, &r, err), 0);
    assert_null(gw_resume_body(text, strlen(text), &r, "7", 1, 1, &n));
    const char *open = "{\"input_ids\": [1]}";
    assert_int_equal(parse(GW_SGLANG_GENERATE, open, &h, &config, &r, err), 0);
    assert_null(gw_resume_body(open, strlen(open), &r, "7", 1, 1, &n));
}

static void test_chat_returns_are_named_through_their_call_ids(void **state)
{
    struct gw_request r;
    char err[256];
    struct headers h = {0};
    const char *body =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"fix it\"},"
        " {\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"a\", \"function\": "
        "{\"name\": \"old\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"a\", "
        "\"content\": \"x\"},"
        " {\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"c1\", \"function\": "
        "{\"name\": \"bash\"}}, {\"id\": \"c2\", \"function\": {\"name\": \"search\"}}]},"
        " {\"role\": \"tool\", \"tool_call_id\": \"c2\", \"content\": \"Traceback\"},"
        " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"ok\"},"
        " {\"role\": \"tool\", \"tool_call_id\": \"zz\", \"content\": \"?\"}]}";
    assert_int_equal(parse(GW_CHAT, body, &h, &config, &r, err), 0);
    assert_int_equal(r.n_chat, 3); /* only those after the last assistant message */
    assert_string_equal(r.chat[0].tool, "search");
    assert_int_equal(r.chat[0].text_len, strlen("\"Traceback\""));
    assert_memory_equal(r.chat[0].text, "\"Traceback\"", r.chat[0].text_len);
    assert_string_equal(r.chat[1].tool, "bash");
    assert_string_equal(r.chat[2].tool, ""); /* no such call */
    const char *none = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
    assert_int_equal(parse(GW_CHAT, none, &h, &config, &r, err), 0);
    assert_int_equal(r.n_chat, 0);
}

/* A body naming its trajectory by libra.trajectory, written as json (malloc'd). */
static char *libra_body(const char *json)
{
    size_t n = strlen(json) + 64;
    char *b = malloc(n);
    snprintf(b, n, "{\"input_ids\": [1, 2], \"libra\": {\"trajectory\": %s}}", json);
    return b;
}

/* The events call names a trajectory by its id's value: the key a request gets must be the one
 * gw_id_key makes of that value at every length up to the limit, kept whole or hashed (an id
 * past 223 bytes once generated but could not post its events). */
static void test_a_request_and_the_events_call_agree_on_every_length(void **state)
{
    static const size_t lengths[] = {1, 200, 240, 249, 250, 255, 256, 300, GW_ID_VALUE_MAX};
    struct gw_request *r = malloc(sizeof *r);
    struct headers h = {0};
    char err[256], key[GW_ID_MAX];
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        size_t n = lengths[i];
        char *quoted = malloc(n + 4); /* room for one byte past the limit */
        memset(quoted, 'a' + (int)i, n + 2);
        quoted[0] = quoted[n + 1] = '"';
        quoted[n + 2] = '\0';
        char *body = libra_body(quoted);
        assert_int_equal(parse(GW_SGLANG_GENERATE, body, &h, &config, r, err), 0);
        gw_id_key(key, GW_ID_LIBRA, quoted + 1, n);
        assert_string_equal(r->id, key);
        free(body);
        if (n == GW_ID_VALUE_MAX) { /* a byte more is refused, naming the field */
            memcpy(quoted + n + 1, "x\"", 3);
            body = libra_body(quoted);
            assert_int_equal(parse(GW_SGLANG_GENERATE, body, &h, &config, r, err), -1);
            assert_non_null(strstr(err, "libra.trajectory: expected an identity of at most"));
            free(body);
        }
        free(quoted);
    }
    /* the value, not its spelling: \u00e9 is the bytes of é, as a decoded path has them */
    char *body = libra_body("\"\\u00e9\"");
    assert_int_equal(parse(GW_SGLANG_GENERATE, body, &h, &config, r, err), 0);
    gw_id_key(key, GW_ID_LIBRA, "\xc3\xa9", 2);
    assert_string_equal(r->id, key);
    free(body);
    free(r);
}

/* --prompt-from-id reads the whole value, kept or hashed: siblings share their prompt. */
static void test_the_prompt_from_the_id_reads_a_hashed_value_whole(void **state)
{
    struct gw_request *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    struct gw_parse_config by_id = {.prompt_tokens = 4, .prompt_sep = '-'};
    struct headers h = {0};
    char err[256], id[600];
    snprintf(id, sizeof id, "\"%0500d-1\"", 17);
    char *body = libra_body(id);
    assert_int_equal(parse(GW_SGLANG_GENERATE, body, &h, &by_id, a, err), 0);
    free(body);
    snprintf(id, sizeof id, "\"%0500d-2\"", 17);
    body = libra_body(id);
    assert_int_equal(parse(GW_SGLANG_GENERATE, body, &h, &by_id, b, err), 0);
    free(body);
    assert_true(a->has_prompt && b->has_prompt && a->prompt == b->prompt);
    assert_string_not_equal(a->id, b->id);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_follows_the_order_of_precedence),
        cmocka_unit_test(test_counts_budget_and_stream),
        cmocka_unit_test(test_the_prompt_key_is_the_first_tokens_or_libras),
        cmocka_unit_test(test_libras_member_is_cut_and_its_events_read),
        cmocka_unit_test(test_errors_name_the_field),
        cmocka_unit_test(test_the_events_call_takes_a_list_or_one),
        cmocka_unit_test(test_a_resumed_turn_asks_for_the_rest),
        cmocka_unit_test(test_chat_returns_are_named_through_their_call_ids),
        cmocka_unit_test(test_a_request_and_the_events_call_agree_on_every_length),
        cmocka_unit_test(test_the_prompt_from_the_id_reads_a_hashed_value_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
