/* Tests of the trace codec (src/trace/parse.c, format.c): byte-exact round trips of canonical
 * lines and of random records, determinism, and one test per class of bad input with its exact
 * line, column and field. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"
#include "util/error.h"
#include "util/json.h"

#define HEADER                                                                                     \
    "{\"libra_trace\":1,\"workload\":\"r2e-gym\",\"model\":\"qwen3-14b\",\"group_size\":4,"        \
    "\"lossy\":false,\"generator\":{\"name\":\"r2e-gym\",\"params\":{\"turns\":12},\"seed\":1}}\n"

/* Every field present, two calls in one turn, an escaped tool name. */
#define FULL                                                                                       \
    "{\"step\":3,\"prompt_id\":17,\"epoch\":1,\"sample\":2,\"version_start\":2,"                   \
    "\"version_end\":3,\"start_us\":1500000,\"setup_us\":3100000,\"finish\":\"completed\","        \
    "\"reward\":0.25,\"turns\":[{\"prompt_tokens\":"                                               \
    "812,\"cached_tokens\":0,\"generated_tokens\":412,\"calls\":[{\"tool\":\"bash\",\"status\":"   \
    "\"success\",\"payload_tokens\":230,\"queue_us\":1200,\"exec_us\":850000},{\"tool\":"          \
    "\"say \\\"hi\\\"\\n\",\"status\":\"timeout\",\"payload_tokens\":0,\"queue_us\":0,"            \
    "\"exec_us\":30000000}]},{\"prompt_tokens\":1454,\"cached_tokens\":1224,"                      \
    "\"generated_tokens\":96}],\"extra\":{\"a\":[1,2.5,\"é\"],\"b\":null}}\n"

/* Only the required fields; a truncated trajectory whose last turn made a call. */
#define MINIMAL                                                                                    \
    "{\"step\":0,\"prompt_id\":0,\"epoch\":0,\"sample\":0,\"version_start\":0,"                    \
    "\"finish\":\"truncated\",\"turns\":[{\"prompt_tokens\":10,\"generated_tokens\":5,"            \
    "\"calls\":[{\"tool\":\"search\",\"status\":\"other\",\"payload_tokens\":7}]}]}\n"

/* A turn a gateway timed, streamed; then one not streamed (libra serve --capture). */
#define TIMED                                                                                      \
    "{\"step\":1,\"prompt_id\":5,\"epoch\":0,\"sample\":0,\"version_start\":1,"                    \
    "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":300,\"generated_tokens\":40,"          \
    "\"instance\":2,\"tp\":4,\"sent_us\":1000,\"first_us\":1500,\"done_us\":9000,\"calls\":"       \
    "[{\"tool\":\"search\",\"status\":\"success\",\"payload_tokens\":30}]},{\"prompt_tokens\":"    \
    "370,\"cached_tokens\":340,\"generated_tokens\":12,\"instance\":0,\"tp\":1,\"sent_us\":"       \
    "9500,\"done_us\":9500}]}\n"

/* Parses header then one trajectory line and formats them back. */
static void round_trip(const char *traj_line)
{
    struct trace_parser *p = trace_parser_new("t.jsonl");
    struct libra_error err = {0};
    const struct trace_header *h;
    const struct trace_traj *t;
    assert_int_equal(trace_parser_header(p, HEADER, strlen(HEADER) - 1, 1, &h, &err), 0);
    int rc = trace_parser_traj(p, traj_line, strlen(traj_line) - 1, 2, &t, &err);
    if (rc)
        print_error("%s\n", err.msg);
    assert_int_equal(rc, 0);
    struct trace_text out = {0};
    trace_format_header(&out, h);
    assert_string_equal(out.data, HEADER);
    out.len = 0;
    trace_format_traj(&out, t);
    assert_string_equal(out.data, traj_line);
    trace_text_free(&out);
    trace_parser_free(p);
}

static void test_round_trip_full(void **state)
{
    round_trip(FULL);
}

static void test_round_trip_minimal(void **state)
{
    round_trip(MINIMAL);
}

static void test_round_trip_timed(void **state)
{
    round_trip(TIMED);
    struct trace_parser *p = trace_parser_new("t.jsonl");
    const struct trace_traj *t;
    assert_int_equal(trace_parser_traj(p, TIMED, strlen(TIMED) - 1, 2, &t, NULL), 0);
    const struct trace_turn_timing *a = &t->turns[0].timing, *b = &t->turns[1].timing;
    assert_int_equal(a->instance, 2);
    assert_int_equal(a->tp, 4);
    assert_int_equal(a->sent_us, 1000);
    assert_int_equal(a->first_us, 1500);
    assert_int_equal(a->done_us, 9000);
    assert_int_equal(b->first_us, -1); /* not streamed */
    assert_int_equal(trace_parser_traj(p, MINIMAL, strlen(MINIMAL) - 1, 3, &t, NULL), 0);
    assert_int_equal(t->turns[0].timing.tp, 0); /* none recorded */
    trace_parser_free(p);
}

static void test_fields_parsed(void **state)
{
    struct trace_parser *p = trace_parser_new("t.jsonl");
    const struct trace_traj *t;
    assert_int_equal(trace_parser_traj(p, FULL, strlen(FULL) - 1, 2, &t, NULL), 0);
    assert_int_equal(t->step, 3);
    assert_int_equal(t->prompt_id, 17);
    assert_int_equal(t->sample, 2);
    assert_int_equal(t->version_end, 3);
    assert_true(t->has_start);
    assert_int_equal(t->start_us, 1500000);
    assert_int_equal(t->setup_us, 3100000);
    assert_int_equal(t->n_turns, 2);
    assert_int_equal(t->turns[0].n_calls, 2);
    assert_string_equal(t->turns[0].calls[1].tool, "say \"hi\"\n");
    assert_int_equal(t->turns[0].calls[1].status, TRACE_TOOL_TIMEOUT);
    assert_int_equal(t->turns[0].calls[1].exec_us, 30000000);
    assert_int_equal(t->turns[1].n_calls, 0);
    assert_int_equal(t->turns[1].cached_tokens, 1224);
    assert_true(t->has_reward);
    assert_true(t->reward == 0.25);
    assert_non_null(t->extra);

    /* unknown optional fields read as -1 */
    assert_int_equal(trace_parser_traj(p, MINIMAL, strlen(MINIMAL) - 1, 3, &t, NULL), 0);
    assert_int_equal(t->version_end, -1);
    assert_false(t->has_start);
    assert_int_equal(t->setup_us, 0); /* none */
    assert_int_equal(t->turns[0].cached_tokens, -1);
    assert_int_equal(t->turns[0].calls[0].queue_us, -1);
    assert_false(t->has_reward);
    assert_null(t->extra);
    trace_parser_free(p);
}

/* ---- random records: format -> parse -> format is the identity --------------------------- */

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int64_t pick(uint64_t *s, int64_t n)
{
    return (int64_t)(next_rand(s) % (uint64_t)n);
}

/* Fills t (storage in turns/calls, each of 8 slots) with a random valid trajectory. */
static void random_traj(uint64_t *s, struct trace_traj *t, struct trace_turn *turns,
                        struct trace_tool_call *calls)
{
    static char *const tools[] = {"bash", "search", "validator", "édit"};
    memset(t, 0, sizeof *t);
    t->step = pick(s, 1000);
    t->prompt_id = pick(s, 200000);
    t->epoch = pick(s, 4);
    t->sample = pick(s, 16);
    t->version_start = pick(s, 100);
    t->version_end = pick(s, 2) ? t->version_start + pick(s, 3) : -1;
    t->has_start = pick(s, 2);
    t->start_us = t->has_start ? pick(s, 4000000000) : 0;
    t->setup_us = pick(s, 2) ? pick(s, 60000000) : 0;
    t->finish = (enum trace_finish)pick(s, TRACE_FINISH_COUNT);
    t->has_reward = pick(s, 2);
    t->reward = (double)pick(s, 1000) / 7.0 - 50.0;
    t->n_turns = 1 + (size_t)pick(s, 8);
    t->turns = turns;
    bool may_end_on_call = t->finish == TRACE_FINISH_TRUNCATED || t->finish == TRACE_FINISH_ABORTED;
    for (size_t i = 0; i < t->n_turns; i++) {
        struct trace_turn *u = &turns[i];
        u->prompt_tokens = pick(s, 40000);
        u->cached_tokens = pick(s, 3) ? pick(s, u->prompt_tokens + 1) : -1;
        u->generated_tokens = pick(s, 30000);
        u->timing = (struct trace_turn_timing){0};
        if (pick(s, 2)) {
            int64_t sent = pick(s, 4000000000), first = sent + pick(s, 1000000);
            u->timing = (struct trace_turn_timing){.instance = pick(s, 64),
                                                   .tp = 1 << pick(s, 4),
                                                   .sent_us = sent,
                                                   .first_us = pick(s, 2) ? first : -1,
                                                   .done_us = first + pick(s, 100000000)};
        }
        bool last = i + 1 == t->n_turns;
        u->n_calls = last && !(may_end_on_call && pick(s, 2)) ? 0 : 1 + (size_t)pick(s, 2);
        u->calls = calls + 2 * i;
        for (size_t c = 0; c < u->n_calls; c++) {
            u->calls[c] = (struct trace_tool_call){
                .tool = tools[pick(s, 4)],
                .status = (enum trace_tool_status)pick(s, TRACE_TOOL_STATUS_COUNT),
                .payload_tokens = pick(s, 5000),
                .queue_us = pick(s, 4) ? pick(s, 1000000) : -1,
                .exec_us = pick(s, 4) ? pick(s, 100000000) : -1,
            };
        }
    }
}

static void assert_same_traj(const struct trace_traj *a, const struct trace_traj *b)
{
    assert_int_equal(a->step, b->step);
    assert_int_equal(a->prompt_id, b->prompt_id);
    assert_int_equal(a->epoch, b->epoch);
    assert_int_equal(a->sample, b->sample);
    assert_int_equal(a->version_start, b->version_start);
    assert_int_equal(a->version_end, b->version_end);
    assert_int_equal(a->has_start, b->has_start);
    if (a->has_start)
        assert_int_equal(a->start_us, b->start_us);
    assert_int_equal(a->setup_us, b->setup_us);
    assert_int_equal(a->finish, b->finish);
    assert_int_equal(a->has_reward, b->has_reward);
    if (a->has_reward)
        assert_true(a->reward == b->reward);
    assert_int_equal(a->n_turns, b->n_turns);
    for (size_t i = 0; i < a->n_turns; i++) {
        const struct trace_turn *u = &a->turns[i], *v = &b->turns[i];
        assert_int_equal(u->prompt_tokens, v->prompt_tokens);
        assert_int_equal(u->cached_tokens, v->cached_tokens);
        assert_int_equal(u->generated_tokens, v->generated_tokens);
        assert_memory_equal(&u->timing, &v->timing, sizeof u->timing);
        assert_int_equal(u->n_calls, v->n_calls);
        for (size_t c = 0; c < u->n_calls; c++) {
            assert_string_equal(u->calls[c].tool, v->calls[c].tool);
            assert_int_equal(u->calls[c].status, v->calls[c].status);
            assert_int_equal(u->calls[c].payload_tokens, v->calls[c].payload_tokens);
            assert_int_equal(u->calls[c].queue_us, v->calls[c].queue_us);
            assert_int_equal(u->calls[c].exec_us, v->calls[c].exec_us);
        }
    }
}

static void test_random_round_trip(void **state)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    struct trace_parser *p = trace_parser_new("random");
    struct trace_text first = {0}, second = {0};
    for (int i = 0; i < 2000; i++) {
        struct trace_traj t;
        struct trace_turn turns[8];
        struct trace_tool_call calls[16];
        random_traj(&seed, &t, turns, calls);
        struct libra_error err = {0};
        assert_int_equal(trace_check_traj(&t, 16, &err), 0);
        first.len = second.len = 0;
        trace_format_traj(&first, &t);
        const struct trace_traj *back;
        int rc = trace_parser_traj(p, first.data, first.len - 1, 2, &back, &err);
        if (rc)
            print_error("%s\n%s", err.msg, first.data);
        assert_int_equal(rc, 0);
        assert_same_traj(&t, back);
        trace_format_traj(&second, back);
        assert_int_equal(first.len, second.len);
        assert_memory_equal(first.data, second.data, first.len);
    }
    trace_text_free(&first);
    trace_text_free(&second);
    trace_parser_free(p);
}

/* Rewards print exactly as ujson_dump prints the same real, short cut or not. */
static void test_reward_matches_ujson(void **state)
{
    const double values[] = {0.0,  -0.0,  1.0, -1.0,        0.5,  1e14,  -1e14,
                             1e15, 1e300, 0.1, 123456789.0, -3.0, 2.5e-8};
    struct trace_turn turn = {.prompt_tokens = 1, .cached_tokens = -1, .generated_tokens = 1};
    struct trace_traj t = {.version_end = -1, .has_reward = true, .turns = &turn, .n_turns = 1};
    struct trace_text out = {0};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        t.reward = values[i];
        out.len = 0;
        trace_format_traj(&out, &t);
        json_t *r = json_real(values[i]);
        char *want = ujson_dump(r, false), field[64];
        snprintf(field, sizeof field, "\"reward\":%s,", want);
        if (!strstr(out.data, field))
            print_error("%.17g: want %s in %s", values[i], field, out.data);
        assert_non_null(strstr(out.data, field));
        free(want);
        json_decref(r);
    }
    trace_text_free(&out);
}

/* Formatting the same record twice, and from two parsers, gives the same bytes. */
static void test_deterministic(void **state)
{
    struct trace_parser *p1 = trace_parser_new("a"), *p2 = trace_parser_new("b");
    const struct trace_traj *a, *b;
    assert_int_equal(trace_parser_traj(p1, FULL, strlen(FULL) - 1, 2, &a, NULL), 0);
    assert_int_equal(trace_parser_traj(p2, FULL, strlen(FULL) - 1, 7, &b, NULL), 0);
    struct trace_text x = {0}, y = {0};
    trace_format_traj(&x, a);
    trace_format_traj(&x, a);
    trace_format_traj(&y, b);
    trace_format_traj(&y, b);
    assert_string_equal(x.data, y.data);
    trace_text_free(&x);
    trace_text_free(&y);
    trace_parser_free(p1);
    trace_parser_free(p2);
}

/* ---- bad input: one test per class, exact position and field ---------------------------- */

/* The 1-based column of the first occurrence of needle in line. */
static int col_of(const char *line, const char *needle)
{
    const char *at = strstr(line, needle);
    assert_non_null(at);
    return (int)(at - line) + 1;
}

/*
 * Parses line as line 5 of "t.jsonl" (after the group_size 4 header) and checks the whole
 * message: the column is that of the first occurrence of at (the offending key, or the
 * object that lacks one).
 */
static void traj_fails(const char *line, const char *at, const char *msg)
{
    struct trace_parser *p = trace_parser_new("t.jsonl");
    const struct trace_header *h;
    const struct trace_traj *t;
    struct libra_error err = {0};
    assert_int_equal(trace_parser_header(p, HEADER, strlen(HEADER) - 1, 1, &h, NULL), 0);
    assert_int_equal(trace_parser_traj(p, line, strlen(line), 5, &t, &err), LIBRA_EINVAL);
    char buf[1024], want[1024];
    snprintf(want, sizeof want, "t.jsonl:5:%d: %s", col_of(line, at), msg);
    assert_string_equal(error_format(&err, buf, sizeof buf), want);
    trace_parser_free(p);
}

#define PREFIX "{\"step\":0,\"prompt_id\":1,\"epoch\":0,\"sample\":0,\"version_start\":0,"
#define LAST_TURN "{\"prompt_tokens\":10,\"generated_tokens\":5}"
#define CALL(payload)                                                                              \
    "{\"prompt_tokens\":10,\"generated_tokens\":5,\"calls\":[{\"tool\":\"bash\",\"status\":"       \
    "\"success\",\"payload_tokens\":" payload "}]}"

static void test_bad_json(void **state)
{
    struct trace_parser *p = trace_parser_new("t.jsonl");
    const struct trace_traj *t;
    struct libra_error err = {0};
    const char *line = "{\"step\":0,";
    assert_int_equal(trace_parser_traj(p, line, strlen(line), 5, &t, &err), LIBRA_EINVAL);
    assert_string_equal(err.file, "t.jsonl");
    assert_int_equal(err.line, 5);
    assert_true(strncmp(err.msg, "invalid JSON: ", 14) == 0);
    trace_parser_free(p);
}

static void test_unknown_key(void **state)
{
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[" LAST_TURN "],\"stepp\":1}",
               "\"stepp\"", "stepp: unknown key");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10,"
                      "\"generated_tokens\":5,\"gen\":1}]}",
               "\"gen\"", "turns.0.gen: unknown key");
    /* of several, the smallest key is named */
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[" LAST_TURN "],\"zz\":1,\"b/c\":2}",
               "\"b/c\"", "b/c: unknown key");
}

static void test_wrong_type(void **state)
{
    traj_fails("{\"step\":\"0\"}", "\"step\"", "step: expected an integer, got a string");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10.5,"
                      "\"generated_tokens\":5}]}",
               "\"prompt_tokens\"",
               "turns.0.prompt_tokens: expected an integer, got a real number");
    traj_fails(PREFIX "\"finish\":\"done\",\"turns\":[" LAST_TURN "]}", "\"finish\"",
               "finish: unknown value 'done' (expected completed, truncated, aborted, filtered)");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[" LAST_TURN "],\"extra\":[]}",
               "\"extra\"", "extra: expected an object, got an array");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[7]}", "7",
               "turns.0: expected an object, got an integer");
    traj_fails("[1,2]", "[", "expected a trajectory object, got an array");
}

static void test_negative_tokens(void **state)
{
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[" CALL("-3") "," LAST_TURN "]}",
               "\"payload_tokens\"", "turns.0.calls.0.payload_tokens: must be >= 0, got -3");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10,"
                      "\"cached_tokens\":-1,\"generated_tokens\":5}]}",
               "\"cached_tokens\"", "turns.0.cached_tokens: must be >= 0, got -1");
    traj_fails("{\"step\":-2,\"prompt_id\":1,\"epoch\":0,\"sample\":0,\"version_start\":0,"
               "\"finish\":\"completed\",\"turns\":[" LAST_TURN "]}",
               "\"step\"", "step: must be >= 0, got -2");
    traj_fails("{\"step\":0,\"prompt_id\":1,\"epoch\":0,\"sample\":0,\"version_start\":0,"
               "\"start_us\":-5,\"finish\":\"completed\",\"turns\":[" LAST_TURN "]}",
               "\"start_us\"", "start_us: must be >= 0, got -5");
    traj_fails("{\"step\":0,\"prompt_id\":1,\"epoch\":0,\"sample\":0,\"version_start\":0,"
               "\"setup_us\":-1,\"finish\":\"completed\",\"turns\":[" LAST_TURN "]}",
               "\"setup_us\"", "setup_us: must be >= 0, got -1");
}

/* A trajectory's tokens of each kind and its microseconds off the GPU are bounded as sums, so that
 * no total a reader takes of it overflows (trace.h, TRACE_MAX_TOKENS and TRACE_MAX_TOOL_US). */
static void test_totals_bounded(void **state)
{
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10,"
                      "\"generated_tokens\":1099511627777}]}",
               "\"generated_tokens\"",
               "turns.0.generated_tokens: 1099511627777 brings the trajectory's generated tokens "
               "past 1099511627776");
    /* two turns whose sum wraps a 64-bit integer: the second is named */
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[" CALL(
                   "3") ",{\"prompt_tokens\":"
                        "9223372036854775807,\"generated_tokens\":5}]}",
               "\"prompt_tokens\":9223372036854775807",
               "turns.1.prompt_tokens: 9223372036854775807 brings the trajectory's prompt tokens "
               "past 1099511627776");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[" CALL("1099511627776") "," CALL(
                   "1") "," LAST_TURN "]}",
               "\"payload_tokens\":1}",
               "turns.1.calls.0.payload_tokens: 1 brings the trajectory's tool tokens past "
               "1099511627776");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10,"
                      "\"generated_tokens\":5,\"calls\":[{\"tool\":\"bash\",\"status\":"
                      "\"success\",\"payload_tokens\":3,\"queue_us\":2,\"exec_us\":"
                      "1125899906842623}]}," LAST_TURN "]}",
               "\"exec_us\"",
               "turns.0.calls.0.exec_us: 1125899906842623 brings the trajectory's off-GPU "
               "microseconds past 1125899906842624");
    /* the setup counts toward the same total */
    traj_fails(PREFIX "\"setup_us\":1125899906842624,\"finish\":\"completed\",\"turns\":[{"
                      "\"prompt_tokens\":10,\"generated_tokens\":5,\"calls\":[{\"tool\":\"bash\","
                      "\"status\":\"success\",\"payload_tokens\":3,\"exec_us\":1}]}," LAST_TURN
                      "]}",
               "\"exec_us\"",
               "turns.0.calls.0.exec_us: 1 brings the trajectory's off-GPU microseconds past "
               "1125899906842624");
    /* at the bounds, valid */
    struct trace_parser *p = trace_parser_new("t.jsonl");
    const struct trace_header *h;
    const struct trace_traj *t;
    struct libra_error err = {0};
    const char *line = PREFIX "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":"
                              "1099511627776,\"generated_tokens\":1099511627776,\"calls\":[{"
                              "\"tool\":\"bash\",\"status\":\"success\",\"payload_tokens\":"
                              "1099511627776,\"queue_us\":1,\"exec_us\":1125899906842623}]},"
                              "{\"prompt_tokens\":0,\"generated_tokens\":0}]}";
    assert_int_equal(trace_parser_header(p, HEADER, strlen(HEADER) - 1, 1, &h, NULL), 0);
    assert_int_equal(trace_parser_traj(p, line, strlen(line), 5, &t, &err), 0);
    trace_parser_free(p);
}

static void test_missing_field(void **state)
{
    traj_fails("{\"step\":0,\"epoch\":0}", "{", "prompt_id: missing");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10}]}",
               "{\"prompt_tokens\"", "turns.0.generated_tokens: missing");
}

static void test_semantic_rules(void **state)
{
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[]}", "\"turns\"",
               "turns: must hold at least one turn");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10,"
                      "\"cached_tokens\":11,\"generated_tokens\":5}]}",
               "\"cached_tokens\"", "turns.0.cached_tokens: 11 exceeds prompt_tokens 10");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[" LAST_TURN "," LAST_TURN "]}",
               "{\"prompt_tokens\"",
               "turns.0.calls: missing: every turn but the last ends in a tool call");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10,"
                      "\"generated_tokens\":5,\"calls\":[]}," LAST_TURN "]}",
               "\"calls\"", "turns.0.calls: empty: every turn but the last ends in a tool call");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[" CALL("3") "]}", "\"calls\"",
               "turns.0.calls: the last turn of a completed trajectory makes no tool call (only "
               "a truncated or aborted one may end after a call)");
    traj_fails("{\"step\":0,\"prompt_id\":1,\"epoch\":0,\"sample\":4,\"version_start\":0,"
               "\"finish\":\"completed\",\"turns\":[" LAST_TURN "]}",
               "\"sample\"", "sample: 4 is not below the header's group_size 4");
    traj_fails("{\"step\":0,\"prompt_id\":1,\"epoch\":0,\"sample\":0,\"version_start\":3,"
               "\"version_end\":2,\"finish\":\"completed\",\"turns\":[" LAST_TURN "]}",
               "\"version_end\"", "version_end: 2 is before version_start 3");
    traj_fails(PREFIX "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10,"
                      "\"generated_tokens\":5,\"calls\":[{\"tool\":\"\",\"status\":"
                      "\"success\",\"payload_tokens\":3}]}," LAST_TURN "]}",
               "\"tool\"", "turns.0.calls.0.tool: must be a non-empty string");
}

#define TIMED_TURN_HEAD                                                                            \
    "\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":10,\"generated_tokens\":5,"

/* A timing is whole and in order. */
static void test_timing_rules(void **state)
{
#define TURN_WITH(timing) PREFIX TIMED_TURN_HEAD timing "}]}"
    traj_fails(TURN_WITH("\"instance\":0,\"tp\":1,\"done_us\":5"), "{\"prompt_tokens\"",
               "turns.0.sent_us: missing: a turn's timing is instance, tp, sent_us and done_us "
               "together");
    traj_fails(TURN_WITH("\"first_us\":5"), "{\"prompt_tokens\"",
               "turns.0.instance: missing: a turn's timing is instance, tp, sent_us and done_us "
               "together");
    traj_fails(TURN_WITH("\"instance\":0,\"tp\":0,\"sent_us\":1,\"done_us\":5"), "\"tp\"",
               "turns.0.tp: must be >= 1, got 0");
    traj_fails(TURN_WITH("\"instance\":0,\"tp\":2048,\"sent_us\":1,\"done_us\":5"), "\"tp\"",
               "turns.0.tp: must be 1 to 1024, got 2048");
    traj_fails(TURN_WITH("\"instance\":0,\"tp\":1,\"sent_us\":9,\"done_us\":5"), "\"done_us\"",
               "turns.0.done_us: 5 is before sent_us 9");
    traj_fails(TURN_WITH("\"instance\":0,\"tp\":1,\"sent_us\":9,\"first_us\":8,\"done_us\":12"),
               "\"first_us\"", "turns.0.first_us: 8 is before sent_us 9");
    traj_fails(TURN_WITH("\"instance\":0,\"tp\":1,\"sent_us\":1,\"first_us\":8,\"done_us\":5"),
               "\"done_us\"", "turns.0.done_us: 5 is before first_us 8");
    traj_fails(TURN_WITH("\"instance\":-1,\"tp\":1,\"sent_us\":1,\"done_us\":5"), "\"instance\"",
               "turns.0.instance: must be >= 0, got -1");
#undef TURN_WITH
}
#undef TIMED_TURN_HEAD

static void test_empty_and_header_lines(void **state)
{
    traj_fails("  ", " ", "empty line");
    traj_fails("{\"libra_trace\":1,\"workload\":\"x\"}", "\"libra_trace\"",
               "libra_trace: a header is allowed only on line 1 (concatenated traces?)");
}

/* Parses line as a header and checks the whole message (column as in traj_fails). */
static void header_fails(const char *line, const char *at, const char *msg)
{
    struct trace_parser *p = trace_parser_new("t.jsonl");
    const struct trace_header *h;
    struct libra_error err = {0};
    assert_int_equal(trace_parser_header(p, line, strlen(line), 1, &h, &err), LIBRA_EINVAL);
    char buf[1024], want[1024];
    snprintf(want, sizeof want, "t.jsonl:1:%d: %s", col_of(line, at), msg);
    assert_string_equal(error_format(&err, buf, sizeof buf), want);
    trace_parser_free(p);
}

static void test_bad_header(void **state)
{
    header_fails(PREFIX "\"finish\":\"completed\",\"turns\":[" LAST_TURN "]}", "{",
                 "libra_trace: missing: line 1 must be the trace header {\"libra_trace\": 1, ...}");
    header_fails("{\"libra_trace\":2,\"workload\":\"x\"}", "\"libra_trace\"",
                 "libra_trace: unsupported schema version 2 (this libra reads 1)");
    header_fails("{\"libra_trace\":1}", "{", "workload: missing");
    header_fails("{\"libra_trace\":1,\"workload\":\"x\",\"group_size\":0}", "\"group_size\"",
                 "group_size: must be >= 1, got 0");
    header_fails("{\"libra_trace\":1,\"workload\":\"x\",\"lossy\":1}", "\"lossy\"",
                 "lossy: expected a boolean, got an integer");
    header_fails("{\"libra_trace\":1,\"workload\":\"x\",\"seed\":1}", "\"seed\"",
                 "seed: unknown key");
    /* a name is printed as it stands: an escape sequence would drive the terminal */
    header_fails("{\"libra_trace\":1,\"workload\":\"x\\u001b[2J\"}", "\"workload\"",
                 "workload: must not hold control characters");
    header_fails("{\"libra_trace\":1,\"workload\":\"x\",\"model\":\"m\\u007f\"}", "\"model\"",
                 "model: must not hold control characters");
}

static void test_check_header(void **state)
{
    struct trace_header h = {.version = 1, .workload = "w"};
    assert_int_equal(trace_check_header(&h, NULL), 0);
    struct libra_error err = {0};
    h.workload = "";
    assert_int_equal(trace_check_header(&h, &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "workload: must be a non-empty string");
    h.workload = "w\n";
    assert_int_equal(trace_check_header(&h, &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "workload: must not hold control characters");
}

/* trace_traj_lengths: sums over turns and calls; a call's unknown queue or execution time (-1)
 * counts 0. */
static void test_lengths_unknown_tool_time(void **state)
{
    (void)state;
    struct trace_tool_call calls[2] = {{.payload_tokens = 10, .queue_us = -1, .exec_us = 2500000},
                                       {.payload_tokens = 5, .queue_us = 500000, .exec_us = -1}};
    struct trace_turn turns[3] = {
        {.prompt_tokens = 100, .generated_tokens = 7, .calls = &calls[0], .n_calls = 1},
        {.generated_tokens = 8, .calls = &calls[1], .n_calls = 1},
        {.generated_tokens = 9}};
    struct trace_traj t = {.turns = turns, .n_turns = 3};
    struct trace_lengths l;
    trace_traj_lengths(&t, &l);
    assert_int_equal(l.prompt_tokens, 100);
    assert_int_equal(l.generated_tokens, 24);
    assert_int_equal(l.tool_tokens, 15);
    assert_int_equal(l.turns, 3);
    assert_true(l.tool_s == 3.0);
    t.setup_us = 1500000; /* the setup is time off the GPU as well */
    trace_traj_lengths(&t, &l);
    assert_true(l.tool_s == 4.5);
    t.setup_us = 0;
    t.n_turns = 0;
    trace_traj_lengths(&t, &l);
    assert_int_equal(l.prompt_tokens, 0);
    assert_int_equal(l.turns, 0);
    assert_true(l.tool_s == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_full),
        cmocka_unit_test(test_round_trip_minimal),
        cmocka_unit_test(test_round_trip_timed),
        cmocka_unit_test(test_fields_parsed),
        cmocka_unit_test(test_random_round_trip),
        cmocka_unit_test(test_reward_matches_ujson),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_unknown_key),
        cmocka_unit_test(test_wrong_type),
        cmocka_unit_test(test_negative_tokens),
        cmocka_unit_test(test_totals_bounded),
        cmocka_unit_test(test_missing_field),
        cmocka_unit_test(test_semantic_rules),
        cmocka_unit_test(test_timing_rules),
        cmocka_unit_test(test_empty_and_header_lines),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_check_header),
        cmocka_unit_test(test_lengths_unknown_tool_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
