/* Tests of the importers (src/trace/import.c, import_verl.c, import_agent.c, import_status.c):
 * the per-turn table read from JSON Lines and from CSV gives the same trajectories, each class
 * of bad row is reported at its line, column and field, verl dumps are split into turns and
 * estimated as documented, tau-bench runs, SWE-agent .traj files and OpenAI chat lines map as
 * docs/trace-format.md says, and each tool-status rule decides what it should, in its order. */
#include "testutil.h"

#include <string.h>

#include "trace/import.h"
#include "util/error.h"

/*
 * Imports text (lines separated by '\n') as file "in" and appends every trajectory, formatted,
 * to out. Returns 0 or the first error (err filled).
 */
static int import_opts(const struct trace_import_options *o, const char *text,
                       struct trace_text *out, struct libra_error *err)
{
    struct trace_importer *im;
    assert_int_equal(trace_importer_new(&im, o, NULL), 0);
    trace_importer_begin(im, "in");
    const struct trace_traj *t;
    int rc = 0;
    for (const char *s = text; *s && rc >= 0;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        rc = trace_importer_line(im, s, len, &t, err);
        if (rc == 1)
            trace_format_traj(out, t);
        s += len + (nl != NULL);
    }
    while (rc >= 0 && (rc = trace_importer_end(im, &t, err)) == 1)
        trace_format_traj(out, t);
    trace_importer_free(im);
    return rc < 0 ? rc : 0;
}

/* import_opts with the format's defaults and a group size of 4. */
static int import_text(enum trace_import_format fmt, const char *text, struct trace_text *out,
                       struct libra_error *err)
{
    struct trace_import_options o = {.format = fmt, .group_size = 4};
    return import_opts(&o, text, out, err);
}

/* Two trajectories: "a" (turn 0 with two calls, then the answer), and 7 (one turn). */
static const char *const table_jsonl =
    "{\"traj_id\":\"a\",\"step\":3,\"prompt_id\":9,\"turn\":0,\"prompt_tokens\":100,"
    "\"generated_tokens\":20,\"tool\":\"search\",\"status\":\"success\",\"payload_tokens\":400,"
    "\"exec_us\":1500}\n"
    "{\"traj_id\":\"a\",\"turn\":0,\"tool\":\"search\",\"status\":\"timeout\","
    "\"payload_tokens\":0,\"queue_us\":5,\"exec_us\":30000000,\"reward\":null}\n"
    "\n"
    "{\"traj_id\":\"a\",\"turn\":1,\"prompt_tokens\":520,\"cached_tokens\":120,"
    "\"generated_tokens\":30,\"finish\":\"completed\",\"reward\":1}\n"
    "{\"traj_id\":7,\"step\":3,\"prompt_id\":9,\"turn\":0,\"prompt_tokens\":100,"
    "\"generated_tokens\":50,\"finish\":\"truncated\",\"version_end\":4}\n";

static const char *const table_csv =
    "traj_id,step,prompt_id,turn,prompt_tokens,cached_tokens,generated_tokens,tool,status,"
    "payload_tokens,queue_us,exec_us,finish,reward,version_end\r\n"
    "a,3,9,0,100,,20,search,success,400,,1500,,,\r\n"
    "\"a\",,,0,,,,\"search\",timeout,0,5,30000000,,,\r\n"
    "a,,,1,520,120,30,,,,,,completed,1.0,\r\n"
    "7,3,9,0,100,,50,,,,,,truncated,,4\r\n";

static const char *const table_expected =
    "{\"step\":3,\"prompt_id\":9,\"epoch\":0,\"sample\":0,\"version_start\":3,\"finish\":"
    "\"completed\",\"reward\":1.0,\"turns\":[{\"prompt_tokens\":100,\"generated_tokens\":20,"
    "\"calls\":[{\"tool\":\"search\",\"status\":\"success\",\"payload_tokens\":400,\"exec_us\":"
    "1500},{\"tool\":\"search\",\"status\":\"timeout\",\"payload_tokens\":0,\"queue_us\":5,"
    "\"exec_us\":30000000}]},{\"prompt_tokens\":520,\"cached_tokens\":120,\"generated_tokens\":"
    "30}]}\n"
    "{\"step\":3,\"prompt_id\":9,\"epoch\":0,\"sample\":1,\"version_start\":3,\"version_end\":4,"
    "\"finish\":\"truncated\",\"turns\":[{\"prompt_tokens\":100,\"generated_tokens\":50}]}\n";

static void test_table_jsonl(void **state)
{
    struct trace_text out = {0};
    struct libra_error err = {0};
    int rc = import_text(TRACE_IMPORT_JSONL, table_jsonl, &out, &err);
    if (rc)
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
    assert_int_equal(rc, 0);
    assert_string_equal(out.data, table_expected);
    trace_text_free(&out);
}

static void test_table_csv_matches_jsonl(void **state)
{
    struct trace_text out = {0};
    struct libra_error err = {0};
    int rc = import_text(TRACE_IMPORT_CSV, table_csv, &out, &err);
    if (rc)
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
    assert_int_equal(rc, 0);
    assert_string_equal(out.data, table_expected);
    trace_text_free(&out);
}

/*
 * Imports text expecting the error "in:LINE:COL: MSG", COL being where needle first occurs in
 * that line (1 when needle is NULL).
 */
static void import_fails(enum trace_import_format fmt, const char *text, int line,
                         const char *needle, const char *msg)
{
    struct trace_text out = {0};
    struct libra_error err = {0};
    assert_int_equal(import_text(fmt, text, &out, &err), LIBRA_EINVAL);
    const char *at = text;
    for (int i = 1; i < line; i++)
        at = strchr(at, '\n') + 1;
    int col = 1;
    if (needle) {
        const char *hit = strstr(at, needle);
        assert_non_null(hit);
        col = (int)(hit - at) + 1;
    }
    char buf[1024], want[1024];
    snprintf(want, sizeof want, "in:%d:%d: %s", line, col, msg);
    assert_string_equal(error_format(&err, buf, sizeof buf), want);
    trace_text_free(&out);
}

#define ROW0 "{\"traj_id\":\"a\",\"step\":0,\"prompt_id\":1,\"turn\":0,\"prompt_tokens\":5,"
#define ANSWER "\"generated_tokens\":5}\n"
#define CALL "\"generated_tokens\":5,\"tool\":\"t\",\"status\":\"success\",\"payload_tokens\":1}\n"

static void test_table_errors_jsonl(void **state)
{
    import_fails(TRACE_IMPORT_JSONL, ROW0 "\"generated_tokens\":5,\"gen\":1}", 1, "\"gen\"",
                 "gen: unknown column (docs/trace-format.md lists them)");
    import_fails(TRACE_IMPORT_JSONL, ROW0 "\"generated_tokens\":\"5\"}", 1, "\"generated",
                 "generated_tokens: expected an integer");
    import_fails(TRACE_IMPORT_JSONL, ROW0 "\"generated_tokens\":-5}", 1, "\"generated",
                 "generated_tokens: must be >= 0, got -5");
    import_fails(TRACE_IMPORT_JSONL, ROW0 "\"generated_tokens\":5,\"status\":\"success\"}", 1,
                 "\"status\"", "status: given without a tool");
    /* an absent column is reported at the start of its row */
    import_fails(TRACE_IMPORT_JSONL, ROW0 "\"generated_tokens\":5,\"tool\":\"t\"}", 1, NULL,
                 "status: missing (a row with a tool needs it)");
    import_fails(TRACE_IMPORT_JSONL,
                 ROW0 CALL "{\"traj_id\":\"a\",\"turn\":2,\"prompt_tokens\":1,"
                           "\"generated_tokens\":1}\n",
                 2, "\"turn\"", "turn: 2 follows turn 0 (expected 1)");
    import_fails(TRACE_IMPORT_JSONL,
                 ROW0 CALL "{\"traj_id\":\"a\",\"step\":1,\"turn\":1,\"prompt_tokens\":1,"
                           "\"generated_tokens\":1}\n",
                 2, "\"step\"", "step: differs from the value an earlier row gave trajectory 'a'");
    /* rows of a trajectory must be contiguous */
    import_fails(TRACE_IMPORT_JSONL,
                 ROW0 ANSWER "{\"traj_id\":\"b\",\"step\":0,\"prompt_id\":1,\"turn\":0,"
                             "\"prompt_tokens\":5,\"generated_tokens\":5}\n" ROW0 ANSWER,
                 3, "\"traj_id\"",
                 "traj_id: rows of 'a' are not contiguous (its last row was at in:1)");
    /* trajectory-level faults are reported at the trajectory's first row */
    import_fails(TRACE_IMPORT_JSONL,
                 "{\"traj_id\":\"a\",\"turn\":0,\"prompt_tokens\":5,\"generated_tokens\":5}\n", 1,
                 NULL, "trajectory 'a': step: missing (give it on at least one of its rows)");
    import_fails(TRACE_IMPORT_JSONL,
                 ROW0 CALL "{\"traj_id\":\"b\",\"step\":0,\"prompt_id\":1,\"turn\":0,"
                           "\"prompt_tokens\":5,\"generated_tokens\":5}\n",
                 1, NULL,
                 "trajectory 'a': turns.0.calls: the last turn of a completed trajectory makes no "
                 "tool call (only a truncated or aborted one may end after a call)");
    import_fails(TRACE_IMPORT_JSONL,
                 "{\"traj_id\":\"a\",\"step\":0,\"prompt_id\":1,\"sample\":4,\"turn\":0,"
                 "\"prompt_tokens\":5,\"generated_tokens\":5}\n",
                 1, NULL, "trajectory 'a': sample: 4 is not below the header's group_size 4");
    import_fails(TRACE_IMPORT_JSONL, "[1]\n", 1, NULL, "expected a JSON object per row");
}

static void test_table_errors_csv(void **state)
{
    import_fails(TRACE_IMPORT_CSV, "traj_id,step,prompt_id,turn,prompt_tokens,gen\n", 1, "gen",
                 "gen: unknown column (docs/trace-format.md lists them)");
    import_fails(TRACE_IMPORT_CSV, "traj_id,step,prompt_id,turn,prompt_tokens,step\n", 1, "step\n",
                 "step: duplicate column");
    import_fails(TRACE_IMPORT_CSV, "traj_id,step,prompt_id,turn,prompt_tokens\n", 1, NULL,
                 "missing column 'generated_tokens'");
    const char *head = "traj_id,step,prompt_id,turn,prompt_tokens,generated_tokens\n";
    char text[512];
    snprintf(text, sizeof text, "%sa,0,1,0,5\n", head);
    import_fails(TRACE_IMPORT_CSV, text, 2, NULL, "5 fields, the header has 6");
    snprintf(text, sizeof text, "%sa,0,1,0,5,5x\n", head);
    import_fails(TRACE_IMPORT_CSV, text, 2, "5x",
                 "generated_tokens: expected an integer, got '5x'");
    /* numbers as JSON writes them, as --from jsonl reads them */
    static const char *const reals[] = {"1.", ".5", "+1", "01", "00.5", "1.e5", "-.5", "0x1"};
    for (size_t i = 0; i < sizeof reals / sizeof *reals; i++) {
        char why[64];
        snprintf(text, sizeof text, "%.*s,reward\na,0,1,0,5,5,%s\n", (int)strlen(head) - 1, head,
                 reals[i]);
        snprintf(why, sizeof why, "reward: expected a number, got '%s'", reals[i]);
        import_fails(TRACE_IMPORT_CSV, text, 2, reals[i], why);
    }
    static const char *const ints[] = {"01", "00", "-01", "1.5", "+1", "1e400"}; /* 1.0 is 1 */
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        char why[64];
        snprintf(text, sizeof text, "%sa,0,1,0,5,%s\n", head, ints[i]);
        snprintf(why, sizeof why, "generated_tokens: expected an integer, got '%s'", ints[i]);
        import_fails(TRACE_IMPORT_CSV, text, 2, ints[i], why);
    }
    snprintf(text, sizeof text, "%s\"a,0,1,0,5,5\n", head);
    import_fails(TRACE_IMPORT_CSV, text, 2, "\"",
                 "unterminated quoted field (a field may not span lines)");
    snprintf(text, sizeof text, "%s\"a\"b,0,1,0,5,5\n", head);
    import_fails(TRACE_IMPORT_CSV, text, 2, "b,", "unexpected character after a quoted field");
}

/* ---- verl dumps --------------------------------------------------------------------------- */

static void test_verl_search_r1(void **state)
{
    /* at 4 characters a token, rounded up: input 40 chars -> 10 tokens; each search turn
     * generates 19 chars -> 5; observations 38 -> 10 and 30 -> 8; the answer 18 -> 5. Each
     * turn's context is the previous one's plus what it generated and got back. */
    const char *line =
        "{\"input\":\"0123456789012345678901234567890123456789\",\"output\":\""
        "<search>q1</search>"                                          /* 19 chars -> 5 tokens */
        "<information>abcdefghijk</information>"                       /* 38 chars -> 10 */
        "<search>q2</search>"                                          /* 5 */
        "<information>abc</information>"                               /* 30 chars -> 8 */
        "<answer>x</answer>\",\"step\":2,\"score\":1.0,\"acc\":true}"; /* 18 chars -> 5 */
    struct trace_text out = {0};
    struct libra_error err = {0};
    int rc = import_text(TRACE_IMPORT_VERL, line, &out, &err);
    if (rc)
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
    assert_int_equal(rc, 0);
    assert_string_equal(
        out.data,
        "{\"step\":2,\"prompt_id\":0,\"epoch\":0,\"sample\":0,\"version_start\":1,\"version_end\":"
        "1,"
        "\"finish\":\"completed\",\"reward\":1.0,\"turns\":[{\"prompt_tokens\":10,"
        "\"generated_tokens\":5,\"calls\":[{\"tool\":\"search\",\"status\":\"other\","
        "\"payload_tokens\":10}]},{\"prompt_tokens\":25,\"generated_tokens\":5,\"calls\":[{"
        "\"tool\":\"search\",\"status\":\"other\",\"payload_tokens\":8}]},{\"prompt_tokens\":38,"
        "\"generated_tokens\":5}],\"extra\":{\"acc\":true}}\n");
    trace_text_free(&out);
}

static void test_verl_tool_calls_and_truncation(void **state)
{
    /* two <tool_call>s answered by two <tool_response> blocks (one turn, two calls named from
     * the calls; "<tool_response>ok</tool_response>" is 33 chars -> 9 tokens), then an
     * observation at the very end: the trajectory was cut after a call */
    const char *line =
        "{\"input\":\"p\",\"output\":\"<tool_call>{\\\"name\\\": \\\"bash\\\"}</tool_call>"
        "<tool_call>{\\\"name\\\":\\\"edit\\\"}</tool_call>\\nuser\\n<tool_response>ok"
        "</tool_response>\\n<tool_response>done</tool_response>\\nassistant\\nnext"
        "<tool_call>{}</tool_call><tool_response>x</tool_response>\\nassistant\\n\","
        "\"step\":1,\"reward\":0.5}";
    struct trace_text out = {0};
    assert_int_equal(import_text(TRACE_IMPORT_VERL, line, &out, NULL), 0);
    assert_non_null(strstr(out.data, "\"finish\":\"truncated\""));
    assert_non_null(strstr(out.data, "\"calls\":[{\"tool\":\"bash\",\"status\":\"other\","
                                     "\"payload_tokens\":9},{\"tool\":\"edit\""));
    assert_non_null(strstr(out.data, "{\"tool\":\"tool\",\"status\":\"other\""));
    assert_non_null(strstr(out.data, "\"reward\":0.5"));
    assert_null(strstr(out.data, "extra"));
    trace_text_free(&out);
}

/*
 * How calls are named, on lines of several turns. The k-th call of a turn is named from the
 * turn's k-th <tool_call>, even when an earlier call was a search (line 1: "grep", not
 * "edit"); a "name" key past its call's </tool_call> (line 1, turn 2), a name whose closing
 * quote is past the turn's text (line 3, turn 1) or a key in a later turn's text (line 3,
 * turn 2) names nothing; two unclosed <tool_call>s share the key after them (line 2).
 */
static void test_verl_call_names_over_many_turns(void **state)
{
    const char *text =
        "{\"input\":\"a\",\"output\":\"think<tool_call>{\\\"name\\\": \\\"bash\\\"}</tool_call>"
        "<tool_call>{\\\"name\\\":\\\"edit\\\"}</tool_call><tool_call>{\\\"name\\\": "
        "\\\"grep\\\"}</tool_call>\\nuser\\n<tool_response>a</tool_response>\\n"
        "<information>doc</information> <tool_response>b</tool_response>\\nassistant\\nnext"
        "<tool_call>{}</tool_call> \\\"name\\\": \\\"late\\\"<tool_response>c</tool_response>"
        "done\",\"step\":1}\n"
        "{\"input\":\"a\",\"output\":\"<tool_call><tool_call>\\\"name\\\": \\\"x\\\""
        "<tool_response>1</tool_response><tool_response>2</tool_response>\\nassistant\\n\","
        "\"step\":1}\n"
        "{\"input\":\"b\",\"output\":\"<tool_call>{\\\"name\\\": \\\"ab<tool_response>\\\"}"
        "</tool_response>tail<tool_call>{}<tool_response>r</tool_response>\\\"name\\\": "
        "\\\"n\\\"\",\"step\":2}\n";
    struct trace_text out = {0};
    struct libra_error err = {0};
    int rc = import_text(TRACE_IMPORT_VERL, text, &out, &err);
    if (rc)
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
    assert_int_equal(rc, 0);
    assert_string_equal(
        out.data,
        "{\"step\":1,\"prompt_id\":0,\"epoch\":0,\"sample\":0,\"version_start\":0,"
        "\"version_end\":0,\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":1,"
        "\"generated_tokens\":32,\"calls\":[{\"tool\":\"bash\",\"status\":\"other\","
        "\"payload_tokens\":8},{\"tool\":\"search\",\"status\":\"other\",\"payload_tokens\":8},"
        "{\"tool\":\"grep\",\"status\":\"other\",\"payload_tokens\":8}]},{\"prompt_tokens\":57,"
        "\"generated_tokens\":14,\"calls\":[{\"tool\":\"tool\",\"status\":\"other\","
        "\"payload_tokens\":8}]},{\"prompt_tokens\":79,\"generated_tokens\":1}]}\n"
        "{\"step\":1,\"prompt_id\":0,\"epoch\":0,\"sample\":1,\"version_start\":0,"
        "\"version_end\":0,\"finish\":\"truncated\",\"turns\":[{\"prompt_tokens\":1,"
        "\"generated_tokens\":9,\"calls\":[{\"tool\":\"x\",\"status\":\"other\","
        "\"payload_tokens\":8},{\"tool\":\"x\",\"status\":\"other\",\"payload_tokens\":8}]}]}\n"
        "{\"step\":2,\"prompt_id\":1,\"epoch\":0,\"sample\":0,\"version_start\":1,"
        "\"version_end\":1,\"finish\":\"completed\",\"turns\":[{\"prompt_tokens\":1,"
        "\"generated_tokens\":6,\"calls\":[{\"tool\":\"tool\",\"status\":\"other\","
        "\"payload_tokens\":9}]},{\"prompt_tokens\":16,\"generated_tokens\":5,\"calls\":[{"
        "\"tool\":\"tool\",\"status\":\"other\",\"payload_tokens\":8}]},{\"prompt_tokens\":29,"
        "\"generated_tokens\":3}]}\n");
    trace_text_free(&out);
}

static void test_verl_prompt_identity(void **state)
{
    /* prompts by identical input: A twice in step 1 (samples 0, 1), B, then A in step 2
     * (epoch 1, sample 0) */
    const char *text = "{\"input\":\"A\",\"output\":\"\",\"step\":1}\n"
                       "{\"input\":\"A\",\"output\":\"\",\"step\":1}\n"
                       "{\"input\":\"B\",\"output\":\"\",\"step\":1}\n"
                       "{\"input\":\"A\",\"output\":\"\",\"step\":2}\n";
    struct trace_text out = {0};
    assert_int_equal(import_text(TRACE_IMPORT_VERL, text, &out, NULL), 0);
    const char *want[] = {
        "\"prompt_id\":0,\"epoch\":0,\"sample\":0", "\"prompt_id\":0,\"epoch\":0,\"sample\":1",
        "\"prompt_id\":1,\"epoch\":0,\"sample\":0", "\"prompt_id\":0,\"epoch\":1,\"sample\":0"};
    const char *s = out.data;
    for (int i = 0; i < 4; i++) {
        const char *nl = strchr(s, '\n');
        const char *at = strstr(s, want[i]);
        assert_true(at && at < nl);
        s = nl + 1;
    }
    trace_text_free(&out);
}

static void test_verl_errors(void **state)
{
    import_fails(TRACE_IMPORT_VERL, "{\"output\":\"\",\"step\":1}", 1, NULL, "input: missing");
    import_fails(TRACE_IMPORT_VERL, "{\"input\":\"a\",\"output\":3,\"step\":1}", 1, "\"output\"",
                 "output: expected a string");
    import_fails(TRACE_IMPORT_VERL, "{\"input\":\"a\",\"output\":\"\",\"step\":1,\"score\":\"x\"}",
                 1, "\"score\"", "score: expected a number");
    /* verl numbers training steps from 1: a step 0 is no rollout step's */
    import_fails(TRACE_IMPORT_VERL, "{\"input\":\"a\",\"output\":\"b\",\"step\":0}", 1, "\"step\"",
                 "step: expected an integer >= 1 (verl numbers training steps from 1; a step 0 "
                 "dump is validation's, before training)");
    import_fails(TRACE_IMPORT_VERL,
                 "{\"input\":\"a\",\"output\":\"\",\"step\":2}\n"
                 "{\"input\":\"a\",\"output\":\"\",\"step\":1}",
                 2, "\"step\"", "step: 1 after step 2 (give dump files in step order)");
}

/* ---- tau-bench and SWE-agent --------------------------------------------------------------- */

/* Two runs: a tool call that fails, a customer reply, the customer's stop; then a transfer. At
 * 4 characters a token: "system prompt!" 14 -> 4, "hi there" 8 -> 2, arguments 13 -> 4,
 * "Error: no user" 14 -> 4, "Sorry, who?" 11 -> 3, "it is me" 8 -> 2, "ok" 2 -> 1. */
static const char *const tau_runs =
    "[{\"task_id\": 5, \"trial\": 2, \"reward\": 1.0, \"info\": {}, \"traj\": [\n"
    " {\"role\": \"system\", \"content\": \"system prompt!\"},\n"
    " {\"role\": \"user\", \"content\": \"hi there\"},\n"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"c1\", "
    "\"type\": \"function\", \"function\": {\"name\": \"get_user\", \"arguments\": "
    "\"{\\\"id\\\": \\\"abc\\\"}\"}}]},\n"
    " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"name\": \"get_user\", \"content\": "
    "\"Error: no user\"},\n"
    " {\"role\": \"assistant\", \"content\": \"Sorry, who?\"},\n"
    " {\"role\": \"user\", \"content\": \"it is me\"},\n"
    " {\"role\": \"assistant\", \"content\": \"ok\"},\n"
    " {\"role\": \"user\", \"content\": \"###STOP###\"}]},\n"
    "{\"task_id\": 6, \"trial\": 0, \"reward\": 0.0, \"traj\": [\n"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"t\", \"function\": "
    "{\"name\": \"transfer_to_human_agents\", \"arguments\": \"{}\"}}]},\n"
    " {\"role\": \"tool\", \"tool_call_id\": \"t\", \"content\": \"Transfer successful\"}]}]\n";

static void test_tau_bench(void **state)
{
    struct trace_text out = {0};
    assert_int_equal(import_text(TRACE_IMPORT_TAU_BENCH, tau_runs, &out, NULL), 0);
    assert_string_equal(
        out.data,
        "{\"step\":0,\"prompt_id\":5,\"epoch\":0,\"sample\":2,\"version_start\":0,\"finish\":"
        "\"completed\",\"reward\":1.0,\"turns\":[{\"prompt_tokens\":6,\"generated_tokens\":4,"
        "\"calls\":[{\"tool\":\"get_user\",\"status\":\"failure\",\"payload_tokens\":4}]},{"
        "\"prompt_tokens\":14,\"generated_tokens\":3,\"calls\":[{\"tool\":\"user\",\"status\":"
        "\"success\",\"payload_tokens\":2}]},{\"prompt_tokens\":19,\"generated_tokens\":1}],"
        "\"extra\":{\"ended_by\":\"user\",\"task_id\":5,\"trial\":2}}\n"
        "{\"step\":0,\"prompt_id\":6,\"epoch\":0,\"sample\":0,\"version_start\":0,\"finish\":"
        "\"completed\",\"reward\":0.0,\"turns\":[{\"prompt_tokens\":0,\"generated_tokens\":1}],"
        "\"extra\":{\"ended_by\":\"transfer_to_human_agents\",\"task_id\":6,\"trial\":0}}\n");
    trace_text_free(&out);
}

static void test_tau_bench_errors(void **state)
{
    import_fails(TRACE_IMPORT_TAU_BENCH, "{\"task_id\": 1}\n", 1, NULL,
                 "expected an array of runs (tau-bench results)");
    import_fails(TRACE_IMPORT_TAU_BENCH, "[{\"trial\": 0,\n \"task_id\": \"x\"}]\n", 2,
                 "\"task_id\"", "0.task_id: expected an integer >= 0");
    import_fails(TRACE_IMPORT_TAU_BENCH, "[{\"task_id\": 1, \"trial\": 0}]\n", 1, "{",
                 "0: traj: missing");
    import_fails(TRACE_IMPORT_TAU_BENCH,
                 "[{\"task_id\": 1, \"trial\": 0, \"traj\": [\n"
                 "{\"role\": \"assistant\", \"content\": \"a\"},\n"
                 "{\"role\": \"tool\", \"tool_call_id\": \"zz\", \"content\": \"x\"}]}]\n",
                 3, "\"tool_call_id\"",
                 "0.traj.1.tool_call_id: 'zz' answers no open tool call of the last assistant "
                 "message");
    import_fails(TRACE_IMPORT_TAU_BENCH,
                 "[{\"task_id\": 1, \"trial\": 0, \"traj\": [\n"
                 "{\"role\": \"critic\", \"content\": \"a\"}]}]\n",
                 2, "\"role\"",
                 "0.traj.0.role: unknown role 'critic' (expected system, developer, user, "
                 "assistant, tool or function)");
    import_fails(TRACE_IMPORT_TAU_BENCH, "[{\"task_id\": 1, \"trial\": 0, \"traj\": []}]\n", 1,
                 "\"traj\"", "0.traj: no assistant message (nothing to import)");
    /* a trial the header's group size (4) cannot hold */
    import_fails(TRACE_IMPORT_TAU_BENCH,
                 "[{\"task_id\": 1, \"trial\": 4, \"traj\": [{\"role\": \"assistant\"}]}]\n", 1,
                 "\"trial\"", "0.trial: 4 is not below the header's group_size 4");
    /* cut short: after its last byte, on its last line */
    import_fails(TRACE_IMPORT_TAU_BENCH, "[{\"task_id\": 1,\n", 1, "\n",
                 "invalid JSON: string or '}' expected near end of file");
}

/* Three steps; model_stats totals 30 sent and 9 received; a Traceback marks a failure. */
static const char *const swe_traj =
    "{\"trajectory\": [\n"
    " {\"action\": \"open a.py\", \"observation\": \"1:import os\", \"response\": \"open a.py\","
    " \"thought\": \"\", \"execution_time\": 0.25},\n"
    " {\"action\": \"python a.py\", \"observation\": \"Traceback (most recent)\", \"response\": "
    "null, \"thought\": \"run it\"},\n"
    " {\"action\": \"submit\", \"observation\": \"diff\", \"response\": \"submit\"}],\n"
    " \"history\": [{\"role\": \"system\", \"content\": \"be good\"}, {\"role\": \"user\", "
    "\"content\": \"fix bug\"}, {\"role\": \"assistant\", \"content\": \"ignored\"}],\n"
    " \"info\": {\"exit_status\": \"submitted\", \"model_stats\": {\"tokens_sent\": 30, "
    "\"tokens_received\": 9, \"api_calls\": 3}}}\n";

static void test_swe_agent(void **state)
{
    /* estimates: history 2 + 2 = 4; turn 0 generates 3 (9 chars), payload 3 (11 chars); turn 1
     * generates 2 + 3 = 5 ("run it", "python a.py"), payload 6 (23 chars); turn 2 generates 2.
     * prompts 4, 10, 21 (sum 35) scale by 30/35 on the cumulative sums 4, 14, 35: 3.4, 12, 30
     * round to 3, 12, 30 -> 3, 9, 18;
     * generated 3, 5, 2 (sum 10) by 9/10: 2.7, 7.2, 9 -> 3, 4, 2. */
    struct trace_text out = {0};
    assert_int_equal(import_text(TRACE_IMPORT_SWE_AGENT, swe_traj, &out, NULL), 0);
    assert_string_equal(
        out.data,
        "{\"step\":0,\"prompt_id\":0,\"epoch\":0,\"sample\":0,\"version_start\":0,\"finish\":"
        "\"completed\",\"turns\":[{\"prompt_tokens\":3,\"generated_tokens\":3,\"calls\":[{"
        "\"tool\":\"open\",\"status\":\"success\",\"payload_tokens\":3,\"exec_us\":250000}]},{"
        "\"prompt_tokens\":9,\"generated_tokens\":4,\"calls\":[{\"tool\":\"python\",\"status\":"
        "\"failure\",\"payload_tokens\":6}]},{\"prompt_tokens\":18,\"generated_tokens\":2}],"
        "\"extra\":{\"api_calls\":3,\"exit_status\":\"submitted\",\"final_action\":\"submit\","
        "\"instance\":\"in\",\"scale\":{\"generated_tokens\":0.9,\"prompt_tokens\":"
        "0.8571428571428571}}}\n");
    trace_text_free(&out);
}

static void test_swe_agent_finish_and_errors(void **state)
{
    struct trace_text out = {0};
    const char *capped = "{\"trajectory\": [{\"action\": \"ls\", \"observation\": \"bash: "
                         "lx: command not found\"}], \"info\": {\"exit_status\": "
                         "\"submitted (exit_cost)\"}}\n";
    assert_int_equal(import_text(TRACE_IMPORT_SWE_AGENT, capped, &out, NULL), 0);
    assert_non_null(strstr(out.data, "\"finish\":\"truncated\""));
    assert_non_null(strstr(out.data, "\"tool\":\"ls\",\"status\":\"failure\""));
    out.len = 0;
    const char *crashed = "{\"trajectory\": [{\"action\": \"ls\"}], \"info\": {\"exit_status\": "
                          "\"early_exit\"}}\n";
    assert_int_equal(import_text(TRACE_IMPORT_SWE_AGENT, crashed, &out, NULL), 0);
    assert_non_null(strstr(out.data, "\"finish\":\"aborted\""));
    trace_text_free(&out);

    import_fails(TRACE_IMPORT_SWE_AGENT, "{\"info\": {}}\n", 1, NULL, "trajectory: missing");
    import_fails(TRACE_IMPORT_SWE_AGENT, "{\"trajectory\": [\n {\"action\": 7}]}\n", 2,
                 "\"action\"", "trajectory.0.action: expected a string");
    import_fails(TRACE_IMPORT_SWE_AGENT, "{\"trajectory\": []}\n", 1, "\"trajectory",
                 "trajectory: no steps (nothing to import)");
}

/*
 * Two chat lines. Line 1 (task t, attempt 1): provider usage on the first assistant message, two
 * parallel calls (the second answered first, the first by a tool message without id), then a
 * legacy function_call and its function reply, an answer. Line 2 (the same prompt text, no id):
 * an observation in a user message, and the line's usage totals.
 */
static const char *const chat_lines =
    "{\"task_id\": \"t\", \"attempt\": 1, \"reward\": 0.5, \"messages\": ["
    "{\"role\": \"system\", \"content\": \"sys.\"}, {\"role\": \"user\", \"content\": \"do it\"}, "
    "{\"role\": \"assistant\", \"content\": \"ok\", \"usage\": {\"prompt_tokens\": 50, "
    "\"completion_tokens\": 9, \"prompt_tokens_details\": {\"cached_tokens\": 40}}, "
    "\"tool_calls\": [{\"id\": \"a\", \"function\": {\"name\": \"ls\", \"arguments\": \"{}\"}}, "
    "{\"id\": \"b\", \"function\": {\"name\": \"cat\", \"arguments\": {\"f\": 1}}}]}, "
    "{\"role\": \"tool\", \"tool_call_id\": \"b\", \"content\": \"exit code 2\"}, "
    "{\"role\": \"tool\", \"content\": [{\"type\": \"text\", \"text\": \"a.py\"}]}, "
    "{\"role\": \"assistant\", \"content\": null, \"function_call\": {\"name\": \"run\", "
    "\"arguments\": \"a.py\"}}, "
    "{\"role\": \"function\", \"name\": \"run\", \"content\": \"TimeoutError\"}, "
    "{\"role\": \"assistant\", \"content\": \"done\"}]}\n"
    "\n"
    "{\"usage\": {\"prompt_tokens\": 40, \"completion_tokens\": 8}, \"messages\": ["
    "{\"role\": \"system\", \"content\": \"sys.\"}, {\"role\": \"user\", \"content\": \"do it\"}, "
    "{\"role\": \"assistant\", \"content\": \"12345678\"}, "
    "{\"role\": \"user\", \"content\": \"<returncode>0</returncode>\"}, "
    "{\"role\": \"assistant\", \"content\": \"1234\", \"tool_calls\": [{\"id\": \"z\", "
    "\"function\": {\"name\": \"submit\"}}]}]}\n";

static void test_openai_chat(void **state)
{
    /* line 1: turn 0 from usage; its calls ls (success, 1 token) and cat (exit code 2:
     * failure, 3 tokens); estimates: context 1 + 2 = 3, turn 0 generates 1 + 1 + 2 ({"f":1}
     * is 7 characters) = 4, so turn 1 sees 3 + 4 + 3 + 1 = 11 and generates 1 (a.py), its
     * call times out (3 tokens); turn 2 sees 11 + 1 + 3 = 15.
     * line 2: estimates 3 then 3 + 2 + 7 = 12 (sum 15), generated 2 and 1 (sum 3); scaled to
     * 40 and 8 on cumulative sums 3, 15 -> 8, 40 -> 8, 32 and 2, 3 -> 5.33, 8 -> 5, 3. The
     * submit call ends it: completed, the call dropped. */
    struct trace_text out = {0};
    struct libra_error err = {0};
    int rc = import_text(TRACE_IMPORT_OPENAI_CHAT, chat_lines, &out, &err);
    if (rc)
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
    assert_int_equal(rc, 0);
    assert_string_equal(
        out.data,
        "{\"step\":0,\"prompt_id\":0,\"epoch\":0,\"sample\":1,\"version_start\":0,\"finish\":"
        "\"completed\",\"reward\":0.5,\"turns\":[{\"prompt_tokens\":50,\"cached_tokens\":40,"
        "\"generated_tokens\":9,\"calls\":[{\"tool\":\"ls\",\"status\":\"success\","
        "\"payload_tokens\":1},{\"tool\":\"cat\",\"status\":\"failure\",\"payload_tokens\":3}]},"
        "{\"prompt_tokens\":11,\"generated_tokens\":1,\"calls\":[{\"tool\":\"run\",\"status\":"
        "\"timeout\",\"payload_tokens\":3}]},{\"prompt_tokens\":15,\"generated_tokens\":1}],"
        "\"extra\":{\"attempt\":1,\"task_id\":\"t\"}}\n"
        "{\"step\":0,\"prompt_id\":1,\"epoch\":0,\"sample\":0,\"version_start\":0,\"finish\":"
        "\"completed\",\"turns\":[{\"prompt_tokens\":8,\"generated_tokens\":5,\"calls\":[{"
        "\"tool\":\"user\",\"status\":\"success\",\"payload_tokens\":7}]},{\"prompt_tokens\":32,"
        "\"generated_tokens\":3}],\"extra\":{\"ended_by\":\"submit\",\"scale\":{"
        "\"generated_tokens\":2.6666666666666665,\"prompt_tokens\":2.6666666666666665}}}\n");
    trace_text_free(&out);
}

#define CHAT_HEAD "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, "
#define CHAT_CALL                                                                                  \
    "{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"a\", \"function\": {\"name\": "         \
    "\"f\"}}]}"

static void test_openai_chat_errors(void **state)
{
    import_fails(TRACE_IMPORT_OPENAI_CHAT, "\n[1]\n", 2, NULL,
                 "expected a JSON object (one trajectory per line)");
    import_fails(TRACE_IMPORT_OPENAI_CHAT, "{\"id\": 1}\n", 1, NULL, "messages: missing");
    import_fails(TRACE_IMPORT_OPENAI_CHAT, "{\"messages\": {}}\n", 1, "\"messages",
                 "messages: expected an array of messages");
    import_fails(TRACE_IMPORT_OPENAI_CHAT,
                 CHAT_HEAD CHAT_CALL ", {\"role\": \"function\", \"name\": \"f\"}]}\n", 1,
                 "\"name\": \"f\"}]",
                 "messages.2.name: 'f' answers no open function_call of the "
                 "last assistant message");
    import_fails(TRACE_IMPORT_OPENAI_CHAT,
                 CHAT_HEAD CHAT_CALL ", {\"role\": \"tool\", \"content\": \"x\"}, "
                                     "{\"role\": \"tool\", \"content\": \"y\"}]}\n",
                 1, "{\"role\": \"tool\", \"content\": \"y",
                 "messages.3: tool message answers no open tool call of the last assistant "
                 "message");
    import_fails(TRACE_IMPORT_OPENAI_CHAT,
                 CHAT_HEAD "{\"role\": \"assistant\", \"usage\": {\"prompt_tokens\": 5, "
                           "\"prompt_tokens_details\": {\"cached_tokens\": 6}}}]}\n",
                 1, "\"cached_tokens",
                 "messages.1.usage.prompt_tokens_details.cached_tokens: 6 exceeds prompt_tokens 5");
    import_fails(TRACE_IMPORT_OPENAI_CHAT,
                 CHAT_HEAD "{\"role\": \"assistant\", \"usage\": {\"completion_tokens\": -1}}]}\n",
                 1, "\"completion_tokens",
                 "messages.1.usage.completion_tokens: expected an "
                 "integer >= 0");
    import_fails(TRACE_IMPORT_OPENAI_CHAT,
                 CHAT_HEAD "{\"role\": \"assistant\", \"content\": 5}]}\n", 1, "\"content\": 5",
                 "messages.1.content: expected a string, an array of content parts or null");
    import_fails(TRACE_IMPORT_OPENAI_CHAT,
                 "{\"attempt\": -1, \"messages\": [{\"role\": \"assistant\"}]}\n", 1, "\"attempt",
                 "attempt: expected an integer >= 0");
    import_fails(TRACE_IMPORT_OPENAI_CHAT,
                 "{\"trial\": 4, \"messages\": [{\"role\": \"assistant\"}]}\n", 1, "\"trial",
                 "trial: 4 is not below the header's group_size 4");
    import_fails(TRACE_IMPORT_OPENAI_CHAT,
                 "{\"resolved\": \"yes\", \"messages\": [{\"role\": \"assistant\"}]}\n", 1,
                 "\"resolved", "resolved: expected a number or a boolean");
}

/* The status one openai-chat call gets for tool output out (a JSON string body) under o. */
static const char *chat_status(struct trace_import_options *o, const char *out)
{
    static char status[16];
    char line[512];
    snprintf(line, sizeof line,
             CHAT_HEAD CHAT_CALL ", {\"role\": \"tool\", \"tool_call_id\": \"a\", \"content\": "
                                 "\"%s\"}, {\"role\": \"assistant\", \"content\": \"k\"}]}\n",
             out);
    struct trace_text text = {0};
    o->format = TRACE_IMPORT_OPENAI_CHAT;
    assert_int_equal(import_opts(o, line, &text, NULL), 0);
    const char *at = strstr(text.data, "\"status\":\"");
    assert_non_null(at);
    at += 10;
    snprintf(status, sizeof status, "%.*s", (int)strcspn(at, "\""), at);
    trace_text_free(&text);
    return status;
}

static void test_status_rules(void **state)
{
    struct trace_import_options o = {0};
    /* the defaults, in their order: timeout > exit code > failure text > success */
    assert_string_equal(chat_status(&o, "ok"), "success");
    assert_string_equal(chat_status(&o, "Traceback"), "failure");
    assert_string_equal(chat_status(&o, "Traceback\\n[Command finished with exit code 0]"),
                        "success");
    assert_string_equal(chat_status(&o, "[The command completed with exit code 3.]"), "failure");
    assert_string_equal(chat_status(&o, "timed out\\n[Command finished with exit code 0]"),
                        "timeout");
    assert_string_equal(chat_status(&o, "<returncode>-1</returncode>"), "failure");
    assert_string_equal(chat_status(&o, "exit code: 000"), "success");
    /* the last pattern followed by an integer counts; one without an integer is no code */
    assert_string_equal(chat_status(&o, "exit code 1, then exit code 0"), "success");
    assert_string_equal(chat_status(&o, "exit code 0, then exit code 1"), "failure");
    assert_string_equal(chat_status(&o, "exit code 1, exit code unknown"), "failure");
    assert_string_equal(chat_status(&o, "exit code unknown"), "success");
    /* each rule replaced: anchors, and "" switching a rule off */
    o.exit_code_pattern = "^rc=";
    assert_string_equal(chat_status(&o, "rc=2"), "failure");
    assert_string_equal(chat_status(&o, "x rc=2"), "success");
    assert_string_equal(chat_status(&o, "rc=0 Traceback"), "success");
    o.exit_code_pattern = "";
    assert_string_equal(chat_status(&o, "Traceback\\n[Command finished with exit code 0]"),
                        "failure");
    o.failure_text = "^E:,oops";
    assert_string_equal(chat_status(&o, "E: no"), "failure");
    assert_string_equal(chat_status(&o, "x E: no"), "success");
    assert_string_equal(chat_status(&o, "an oops"), "failure");
    o.timeout_text = "^slow";
    assert_string_equal(chat_status(&o, "slow oops"), "timeout");
    assert_string_equal(chat_status(&o, "timed out"), "success");
    o.timeout_text = "";
    assert_string_equal(chat_status(&o, "TimeoutError"), "success");

    /* swe-agent reads no exit code by default; given a pattern it does */
    const char *traj = "{\"trajectory\": [{\"action\": \"make\", \"observation\": \"Error 2\\n"
                       "exit code 0\"}], \"info\": {\"exit_status\": \"exit_cost\"}}\n";
    struct trace_import_options swe = {.format = TRACE_IMPORT_SWE_AGENT};
    struct trace_text text = {0};
    assert_int_equal(import_opts(&swe, traj, &text, NULL), 0);
    assert_non_null(strstr(text.data, "\"status\":\"failure\""));
    text.len = 0;
    swe.exit_code_pattern = "exit code";
    assert_int_equal(import_opts(&swe, traj, &text, NULL), 0);
    assert_non_null(strstr(text.data, "\"status\":\"success\""));
    trace_text_free(&text);
}

/* trace_importer_new refuses o with the message msg. */
static void refuses(const struct trace_import_options *o, const char *msg)
{
    struct trace_importer *im = NULL;
    struct libra_error err = {0};
    assert_int_equal(trace_importer_new(&im, o, &err), LIBRA_EINVAL);
    assert_null(im);
    assert_string_equal(err.msg, msg);
}

static void test_status_rules_refused(void **state)
{
    struct trace_import_options o = {.format = TRACE_IMPORT_OPENAI_CHAT, .timeout_text = ","};
    refuses(&o, "--timeout-text: an empty or blank text in ',' would match every output "
                "(separate texts by single commas; give \"\" for none)");
    o.timeout_text = "a,^ ";
    refuses(&o, "--timeout-text: an empty or blank text in 'a,^ ' would match every output "
                "(separate texts by single commas; give \"\" for none)");
    o.timeout_text = NULL;
    o.exit_code_pattern = "rc,code 7";
    refuses(&o, "--exit-code-pattern: 'code 7' ends in a digit (give the text that comes before "
                "the exit code, e.g. 'exit code')");
    o = (struct trace_import_options){.format = TRACE_IMPORT_JSONL, .failure_text = ""};
    refuses(&o, "--failure-text: --from jsonl does not classify tool outputs (only tau-bench, "
                "swe-agent and openai-chat do)");

    /* the header reports every rule */
    o = (struct trace_import_options){.format = TRACE_IMPORT_TAU_BENCH, .timeout_text = "^T,x"};
    struct trace_importer *im;
    assert_int_equal(trace_importer_new(&im, &o, NULL), 0);
    struct trace_text text = {0};
    trace_format_header(&text, trace_importer_header(im));
    assert_non_null(strstr(text.data, "\"timeout_text\":[\"^T\",\"x\"]"));
    assert_non_null(strstr(text.data, "\"exit_code_pattern\":[]"));
    assert_non_null(strstr(text.data, "\"failure_text\":[\"^Error:\"]"));
    assert_non_null(strstr(text.data, "\"status_precedence\":\"timeout_text, then"));
    trace_text_free(&text);
    trace_importer_free(im);
}

static void test_options(void **state)
{
    struct trace_importer *im;
    struct libra_error err = {0};
    struct trace_import_options o = {.format = TRACE_IMPORT_VERL, .chars_per_token = -1};
    assert_int_equal(trace_importer_new(&im, &o, &err), LIBRA_EINVAL);
    o.chars_per_token = 0;
    o.workload = "search-r1";
    assert_int_equal(trace_importer_new(&im, &o, NULL), 0);
    const struct trace_header *h = trace_importer_header(im);
    assert_true(h->lossy);
    assert_string_equal(h->workload, "search-r1");
    struct trace_text text = {0};
    trace_format_header(&text, h);
    assert_non_null(strstr(text.data, "\"chars_per_token\":4.0"));
    trace_text_free(&text);
    trace_importer_free(im);
}

/* trace_groups: groups by first appearance of (step, prompt_id), then sample, equal samples as
 * they came; copies outlive the records added (extra deep-copied). */
static void test_groups_order(void **state)
{
    (void)state;
    static const int64_t in[][3] = {/* step, prompt_id, sample */
                                    {0, 7, 1},
                                    {0, 3, 0},
                                    {1, 7, 0},
                                    {0, 7, 0},
                                    {0, 3, 0}};
    static const size_t want[] = {3, 0, 1, 4, 2}; /* indexes into in */
    struct trace_groups *g = trace_groups_new();
    for (size_t i = 0; i < 5; i++) {
        struct trace_tool_call call = {.tool = "bash"};
        struct trace_turn turn = {.prompt_tokens = 1, .calls = &call, .n_calls = 1};
        struct trace_traj t = {.step = in[i][0],
                               .prompt_id = in[i][1],
                               .sample = in[i][2],
                               .turns = &turn,
                               .n_turns = 1,
                               .extra = json_integer((int)i)};
        trace_groups_add(g, &t);
        json_decref(t.extra);
    }
    for (size_t i = 0; i < 5; i++) {
        const struct trace_traj *t = trace_groups_get(g, i);
        assert_non_null(t);
        assert_int_equal(json_integer_value(t->extra), want[i]);
        assert_int_equal(t->step, in[want[i]][0]);
        assert_string_equal(t->turns[0].calls[0].tool, "bash");
    }
    assert_null(trace_groups_get(g, 5));
    trace_groups_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_jsonl),
        cmocka_unit_test(test_table_csv_matches_jsonl),
        cmocka_unit_test(test_table_errors_jsonl),
        cmocka_unit_test(test_table_errors_csv),
        cmocka_unit_test(test_verl_search_r1),
        cmocka_unit_test(test_verl_tool_calls_and_truncation),
        cmocka_unit_test(test_verl_call_names_over_many_turns),
        cmocka_unit_test(test_verl_prompt_identity),
        cmocka_unit_test(test_verl_errors),
        cmocka_unit_test(test_tau_bench),
        cmocka_unit_test(test_tau_bench_errors),
        cmocka_unit_test(test_swe_agent),
        cmocka_unit_test(test_swe_agent_finish_and_errors),
        cmocka_unit_test(test_openai_chat),
        cmocka_unit_test(test_openai_chat_errors),
        cmocka_unit_test(test_status_rules),
        cmocka_unit_test(test_status_rules_refused),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_groups_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
