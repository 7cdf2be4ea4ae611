/* Tests of abort-and-resume (src/server/resume.c): the segments an engine aborted are merged,
 * their counts summed; a segment's count an engine got wrong (negative, or past what a trace
 * holds) is taken as 0, so the sum cannot overflow. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "server/internal.h"

static const char body[] = "{\"libra\": {\"resume\": true}, \"input_ids\": [1, 2], "
                           "\"sampling_params\": {\"max_new_tokens\": 10}}";

static const char *no_header(void *ctx, const char *name)
{
    return NULL;
}

/* r from body, the turn that opts in to resuming. */
static void parse_body(struct gw_request *r)
{
    struct gw_parse_config config = {.prompt_tokens = 4};
    char err[256];
    assert_int_equal(gw_request_parse(GW_SGLANG_GENERATE, body, strlen(body), no_header, NULL,
                                      &config, r, err, sizeof err),
                     0);
}

/* An SGLang answer of one token that ended as type says, counting count tokens. */
static char *answer(const char *type, const char *count)
{
    static char buf[256];
    snprintf(buf, sizeof buf,
             "{\"text\": \"x\", \"output_ids\": [7], \"meta_info\": {\"finish_reason\": "
             "{\"type\": \"%s\"}, \"completion_tokens\": %s}}",
             type, count);
    return buf;
}

static void test_bogus_segment_counts_are_taken_as_zero(void **state)
{
    struct gw_request r;
    parse_body(&r);
    struct gw_resume s = {0};
    size_t n;
    const char *segments[] = {"1", "9223372036854775807", "-5"};
    for (size_t i = 0; i < sizeof segments / sizeof segments[0]; i++) {
        const char *a = answer("abort", segments[i]);
        char *next = gw_resume_next(&s, &r, body, strlen(body), a, strlen(a), 0, &n);
        assert_non_null(next); /* budget left: 1 token of 10 counted */
        free(next);
    }
    int64_t total = -1;
    const char *last = answer("length", "2");
    char *merged = gw_resume_finish(&s, last, strlen(last), 0, &n, &total);
    assert_non_null(merged);
    assert_int_equal(total, 3);
    assert_non_null(strstr(merged, "\"completion_tokens\":3"));
    free(merged);
    gw_resume_free(&s);
}

/* The last segment was sent the budget left; the merged answer ends at the client's cap, as the
 * engine would have answered the turn unaborted (it once said the last segment's cap). */
static void test_a_length_end_names_the_clients_cap(void **state)
{
    struct gw_request r;
    parse_body(&r);
    struct gw_resume s = {0};
    size_t n;
    const char *a = answer("abort", "3");
    free(gw_resume_next(&s, &r, body, strlen(body), a, strlen(a), 0, &n));
    const char *last = "{\"output_ids\": [7], \"meta_info\": {\"finish_reason\": "
                       "{\"type\": \"length\", \"length\": 7}, \"completion_tokens\": 7}}";
    int64_t total = -1;
    char *merged = gw_resume_finish(&s, last, strlen(last), 0, &n, &total);
    assert_non_null(merged);
    assert_int_equal(total, 10);
    assert_non_null(strstr(merged, "\"finish_reason\":{\"type\":\"length\",\"length\":10}"));
    free(merged);
    gw_resume_free(&s);
}

/* The engines' time on the turn is every segment's: e2e_latency summed like completion_tokens
 * (it once kept the first segment's alone). */
static void test_the_latency_is_every_segments(void **state)
{
    struct gw_request r;
    parse_body(&r);
    struct gw_resume s = {0};
    size_t n;
    const char *first = "{\"output_ids\": [7], \"meta_info\": {\"finish_reason\": {\"type\": "
                        "\"abort\"}, \"completion_tokens\": 3, \"e2e_latency\": 0.5}}";
    free(gw_resume_next(&s, &r, body, strlen(body), first, strlen(first), 0, &n));
    const char *last = "{\"output_ids\": [7], \"meta_info\": {\"finish_reason\": {\"type\": "
                       "\"stop\"}, \"completion_tokens\": 2, \"e2e_latency\": 0.25}}";
    int64_t total = -1;
    char *merged = gw_resume_finish(&s, last, strlen(last), 0, &n, &total);
    assert_non_null(merged);
    assert_non_null(strstr(merged, "\"e2e_latency\":0.75"));
    free(merged);
    gw_resume_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bogus_segment_counts_are_taken_as_zero),
        cmocka_unit_test(test_a_length_end_names_the_clients_cap),
        cmocka_unit_test(test_the_latency_is_every_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
