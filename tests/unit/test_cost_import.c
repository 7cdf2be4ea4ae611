/* Tests of the measurement readers (src/cost/import.c): what each input is taken for, the runs
 * of vLLM and SGLang results and the points they make, verl step lines, Megatron-LM arguments
 * and iteration lines, input options, a log's steps as training points, and FILE:LINE:COL
 * errors for every kind of bad input. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"
#include "cost/import.h"

static int serving(const char *text, cost_serving_runs *runs, struct libra_error *err)
{
    memset(err, 0, sizeof *err);
    return cost_import_serving("r.json", text, strlen(text), runs, err);
}

/* The error of a serving text: its position and message. */
static void assert_serving_error(const char *text, int line, int col, const char *msg)
{
    cost_serving_runs runs = {0};
    struct libra_error err;
    assert_int_equal(serving(text, &runs, &err), LIBRA_EINVAL);
    if (err.line != line || err.col != col || !strstr(err.msg, msg))
        fail_msg("got %d:%d: %s; want %d:%d: ...%s...", err.line, err.col, err.msg, line, col, msg);
    assert_string_equal(err.file, "r.json");
    vec_free(&runs);
}

static void test_detect(void **state)
{
    static const struct {
        const char *text;
        enum cost_import_kind kind;
    } cases[] = {
        {"{\"duration\": 1}", COST_IMPORT_SERVING},
        /* a JSON object is a serving result by a member every one has (another libra
         * command's output is none); one that does not parse goes to the reader's message */
        {"\n  {\"a\": 1}\n{\"b\": 2}\n", COST_IMPORT_UNKNOWN},
        {"{\"schema\": \"libra.plan/1\", \"feasible\": true}", COST_IMPORT_UNKNOWN},
        {"{\n  \"backend\": \"vllm\",\n  \"itls\": []\n}\n", COST_IMPORT_SERVING},
        {"{\"request_rate\": Infinity, \"ttfts\": [NaN]}\n{\"b\": 2}\n", COST_IMPORT_SERVING},
        {"{\"duration\": 1,", COST_IMPORT_SERVING},
        {"{\n    \"duration\": 1,\n    \"itls\": [", COST_IMPORT_SERVING},
        {"{}", COST_IMPORT_UNKNOWN},
        /* a '{' that opens no JSON object (a Python dict verl prints) leaves the text to its
         * lines */
        {"{'actor': {'ppo_mini_batch_size': 256}}\nstep:1 - timing_s/update_actor:1.5\n",
         COST_IMPORT_VERL_LOG},
        {"{'actor': 1}\n", COST_IMPORT_UNKNOWN},
        {"{\"libra_trace\":1,\"workload\":\"x\"}\n{\"step\":0}\n", COST_IMPORT_TRACE},
        {"boot\n(TaskRunner pid=7) step:3 - timing_s/update_actor:1.5\n", COST_IMPORT_VERL_LOG},
        {"global_step:3 - x:1\n", COST_IMPORT_UNKNOWN},
        {"x\n [2025-08-01 07:19:37] iteration        2/    5000 | consumed samples: 1 |\n",
         COST_IMPORT_MEGATRON},
        {"------------------------ arguments ------------------------\n", COST_IMPORT_MEGATRON},
        {"validation loss at iteration 100 | lm loss value: 2.1 |\n", COST_IMPORT_UNKNOWN},
        {"iteration 2/x |\n", COST_IMPORT_UNKNOWN},
        {"step:x - a:1\n", COST_IMPORT_UNKNOWN},
        /* an actor update whose step is not a number is a verl line, refused at its step */
        {"step:-1 - timing_s/update_actor:1.5\n", COST_IMPORT_VERL_LOG},
        {"", COST_IMPORT_UNKNOWN},
        {"hello\n", COST_IMPORT_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(cost_import_detect(cases[i].text, strlen(cases[i].text)), cases[i].kind);
}

/* Three requests of vLLM's shape: one decodes (4 ITLs), one generates a single token, one
 * failed. */
static const char vllm_run[] =
    "{\"backend\": \"vllm\", \"model_id\": \"Qwen/Qwen2.5-7B-Instruct\", \"duration\": 2.0,\n"
    " \"request_rate\": \"inf\", \"max_concurrency\": 1,\n"
    " \"input_lens\": [100, 50, 70], \"output_lens\": [5, 1, 0],\n"
    " \"ttfts\": [0.1, 0.05, 0.0], \"itls\": [[0.01, 0.02, 0.03, 0.04], [], []],\n"
    " \"errors\": [\"\", \"\", \"Traceback: boom\"], \"generated_texts\": [\"a\", \"b\", \"\"]}\n";

static void test_vllm_run(void **state)
{
    cost_serving_runs runs = {0};
    struct libra_error err;
    assert_int_equal(serving(vllm_run, &runs, &err), 0);
    assert_int_equal(runs.n, 1);
    const struct cost_serving_run *r = &runs.v[0];
    assert_int_equal(r->line, 1);
    assert_string_equal(r->backend, "vllm");
    assert_string_equal(r->model, "Qwen/Qwen2.5-7B-Instruct");
    assert_int_equal(r->requests, 3);
    assert_int_equal(r->failed, 1);
    assert_int_equal(r->decoded, 1);
    assert_close(r->decode_s, 0.10, 1e-12);
    assert_close(r->decode_tokens, 4.0, 0);
    assert_close(r->ctx_sum, 4.0 * (100.0 + 2.5), 1e-12);
    assert_close(r->prompts, 2.0, 0);
    assert_close(r->prompt_tokens, 150.0, 0);
    assert_close(r->prompt_pairs, 100.0 * 101.0 / 2.0 + 50.0 * 51.0 / 2.0, 0);
    assert_close(r->prefill_share, 0.5, 0); /* the first of the two waited for nothing */

    struct cost_decode_point p;
    cost_serving_point(r, 2, &p);
    /* 0.1 s of decoding over 2 s: 0.05 requests decoding on average; 4 tokens in 80 iterations */
    assert_int_equal(p.kind, COST_DECODE_SERVING);
    assert_int_equal(p.tp, 2);
    assert_close(p.measured_s, 0.025, 1e-12);
    assert_close(p.decode_seqs, 0.05, 1e-12);
    assert_close(p.ctx_tokens, 102.5, 1e-12);
    assert_close(p.prefill_tokens, 0.5 * 150.0 / 80.0, 1e-12);
    assert_close(p.prefill_seqs, 0.5 * 2.0 / 80.0, 1e-12);
    assert_close(p.prefill_pairs, 0.5 * (5050.0 + 1275.0) / 80.0, 1e-12);
    vec_free(&runs);
}

/* Newer vLLM results carry latencies: decode time is latency − TTFT, whatever the ITLs say. */
static void test_latencies_win(void **state)
{
    static const char text[] = "{\"duration\": 10, \"input_lens\": [8], \"output_lens\": [3], "
                               "\"ttfts\": [0.5], \"itls\": [[9, 9]], \"latencies\": [1.5], "
                               "\"start_times\": [0.0]}";
    cost_serving_runs runs = {0};
    struct libra_error err;
    assert_int_equal(serving(text, &runs, &err), 0);
    assert_close(runs.v[0].decode_s, 1.0, 1e-12);
    vec_free(&runs);
}

/* Which prompts are prefilled while others decode: all sent at once, those beyond the first
 * wave; at a Poisson rate, as often as the engine is decoding. */
static void test_prefill_share(void **state)
{
    static const struct {
        const char *traffic;
        double share;
    } cases[] = {
        {"", 0.0},
        {"\"request_rate\": \"inf\", \"max_concurrency\": null,", 0.0},
        {"\"request_rate\": \"inf\", \"max_concurrency\": 1,", 0.75},
        {"\"request_rate\": \"inf\", \"max_concurrency\": 9,", 0.0},
        {"\"request_rate\": 2.5,", 0.0}, /* set below: 1 − exp(−batch) */
        {"\"request_rate\": Infinity, \"max_concurrency\": 2, \"p99\": NaN,", 0.5},
        /* NaN is null where null is taken: no limit, no backend */
        {"\"request_rate\": \"inf\", \"max_concurrency\": NaN, \"backend\": NaN,", 0.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{%s \"duration\": 8, \"input_lens\": [4, 4, 4, 4], \"output_lens\": [3, 3, 3, "
                 "3], \"ttfts\": [0, 0, 0, 0], \"itls\": [[1, 1], [1, 1], [1, 1], [1, 1]]}",
                 cases[i].traffic);
        cost_serving_runs runs = {0};
        struct libra_error err;
        if (serving(text, &runs, &err) != 0)
            fail_msg("%s: %s", cases[i].traffic, err.msg);
        double want = i == 4 ? 1.0 - exp(-1.0) : cases[i].share;
        assert_close(runs.v[0].prefill_share, want, 1e-12);
        vec_free(&runs);
    }
    assert_serving_error("{\"request_rate\": 0, \"duration\": 1, \"input_lens\": [1], "
                         "\"output_lens\": [3], \"ttfts\": [0.1], \"itls\": [[0.5, 0.5]]}",
                         1, 2, "request_rate: expected requests per second");
    assert_serving_error("{\"max_concurrency\": 0, \"duration\": 1, \"input_lens\": [1], "
                         "\"output_lens\": [3], \"ttfts\": [0.1], \"itls\": [[0.5, 0.5]]}",
                         1, 2, "max_concurrency: expected an integer >= 1 or null");
    /* NaN stands for no value: where a number is needed it is refused, at its position */
    assert_serving_error("{\"duration\": NaN}", 1, 2, "duration: expected seconds");
    assert_serving_error("{\"max_concurrency\": NaN, \"duration\": 0}", 1, 26,
                         "duration: expected seconds");
    /* an empty array is not null */
    assert_serving_error("{\"max_concurrency\": [], \"duration\": 1, \"input_lens\": [1], "
                         "\"output_lens\": [3], \"ttfts\": [0.1], \"itls\": [[0.5, 0.5]]}",
                         1, 2, "max_concurrency: expected an integer >= 1 or null");
    /* the words inside strings are text */
    cost_serving_runs runs = {0};
    struct libra_error err;
    assert_int_equal(serving("{\"backend\": \"NaN \\\" Infinity\", \"duration\": 4, "
                             "\"input_lens\": [1], \"output_lens\": [3], \"ttfts\": [0], "
                             "\"itls\": [[1, 1]]}",
                             &runs, &err),
                     0);
    assert_string_equal(runs.v[0].backend, "NaN \" Infinity");
    vec_free(&runs);
}

/* SGLang appends one run per line; blank lines are skipped and line numbers kept. */
static void test_sglang_lines(void **state)
{
    static const char text[] =
        "{\"backend\": \"sglang\", \"duration\": 4, \"max_concurrency\": 2, \"input_lens\": [10, "
        "10], \"output_lens\": [3, 3], \"ttfts\": [0.1, 0.1], \"itls\": [[1, 1], [1, 1]], "
        "\"errors\": [\"\", \"\"]}\n"
        "\n"
        "{\"backend\": \"sglang\", \"duration\": 4, \"input_lens\": [10], \"output_lens\": [3], "
        "\"ttfts\": [0.1], \"itls\": [[2, 2]], \"errors\": [null]}\n";
    cost_serving_runs runs = {0};
    struct libra_error err;
    assert_int_equal(serving(text, &runs, &err), 0);
    assert_int_equal(runs.n, 2);
    assert_int_equal(runs.v[0].line, 1);
    assert_int_equal(runs.v[1].line, 3);
    assert_string_equal(runs.v[1].backend, "sglang");
    struct cost_decode_point p;
    cost_serving_point(&runs.v[0], 1, &p);
    assert_close(p.decode_seqs, 1.0, 1e-12); /* 4 s of decoding over 4 s */
    assert_close(p.measured_s, 1.0, 1e-12);
    vec_free(&runs);
}

static void test_serving_errors(void **state)
{
    assert_serving_error("{\"duration\": 1, \"input_lens\": [1], \"output_lens\": [3], "
                         "\"ttfts\": [0.1]}",
                         1, 1, "itls: missing: the run has no per-request records");
    assert_serving_error("{\"input_lens\": []}", 1, 1, "duration: missing");
    assert_serving_error("{\"duration\": -1}", 1, 2, "duration: expected seconds");
    assert_serving_error("{\"duration\": 1, \"input_lens\": []}", 1, 17, "input_lens: no requests");
    assert_serving_error("{\"duration\": 1, \"input_lens\": [1, 2], \"output_lens\": [3], "
                         "\"ttfts\": [0, 0], \"itls\": [[], []]}",
                         1, 39, "output_lens: 1 entries, but input_lens has 2");
    assert_serving_error("{\"duration\": 1, \"input_lens\": [1.5], \"output_lens\": [3], "
                         "\"ttfts\": [0], \"itls\": [[]]}",
                         1, 32, "input_lens.0: expected a token count");
    assert_serving_error("{\"duration\": 1, \"input_lens\": [1], \"output_lens\": [3], "
                         "\"ttfts\": [-0.1], \"itls\": [[0.1, 0.1]]}",
                         1, 66, "ttfts.0: expected a time");
    assert_serving_error("{\"duration\": 1, \"input_lens\": [1], \"output_lens\": [3], "
                         "\"ttfts\": [0.1], \"itls\": [[0.1, \"x\"]]}",
                         1, 87, "itls.0.1: expected a time");
    assert_serving_error("{\"duration\": 1, \"input_lens\": [1], \"output_lens\": [3], "
                         "\"ttfts\": [0.1], \"itls\": [[]]}",
                         1, 81, "itls.0: the request generated 3 tokens in no time");
    assert_serving_error("{\"duration\": 1, \"input_lens\": [1], \"output_lens\": [3], "
                         "\"ttfts\": [0.5], \"itls\": [[]], \"latencies\": [0.2]}",
                         1, 100, "latencies.0: 0.2 s is below its TTFT");
    assert_serving_error("{\"duration\": 1, \"input_lens\": [1], \"output_lens\": [0], "
                         "\"ttfts\": [0], \"itls\": [[]], \"errors\": [\"x\"]}",
                         1, 36, "output_lens: no successful request generated more than one");
    assert_serving_error("{\"duration\": 1, \"input_lens\": [1], \"output_lens\": [3], "
                         "\"ttfts\": [0.1], \"itls\": [[1, 1]]}",
                         1, 2, "duration: 1 s is too short");
    /* fields are checked whether or not the point uses them */
    assert_serving_error("{\"duration\": 10, \"input_lens\": [8], \"output_lens\": [3], "
                         "\"ttfts\": [0.5], \"itls\": [[0.1, -0.5]], \"latencies\": [1.5]}",
                         1, 88, "itls.0.1: expected a time");
    assert_serving_error("{\"duration\": 10, \"input_lens\": [8], \"output_lens\": [3], "
                         "\"ttfts\": [0.5], \"itls\": [[0.1, 0.1]], \"errors\": [5]}",
                         1, 106, "errors.0: expected an error message");
    assert_serving_error("{\"backend\": 5, \"duration\": 10}", 1, 2, "backend: expected a string");
    assert_serving_error("{\"model_id\": [], \"duration\": 10}", 1, 2,
                         "model_id: expected a string");
    assert_serving_error("{\"duration\": 1,", 1, 16, "invalid JSON");
    assert_serving_error("[1, 2]", 1, 1, "expected a benchmark result");
    /* in JSON Lines, the line of the run and the column within it */
    assert_serving_error("{\"a\": 1}\n{\"duration\": 1, \"input_lens\": [1]}\n", 1, 1,
                         "duration: missing");
    assert_serving_error("{\"duration\": 1, \"input_lens\": [1], \"output_lens\": [3], "
                         "\"ttfts\": [0.1], \"itls\": [[0.3, 0.3]]}\n{\"duration\": 0}\n",
                         2, 2, "duration: expected seconds");
}

static int verl(const char *text, cost_log_steps *steps, size_t *skipped, struct libra_error *err)
{
    memset(err, 0, sizeof *err);
    *skipped = 0;
    return cost_import_verl("v.log", text, strlen(text), steps, skipped, err);
}

typedef int log_reader(const char *text, cost_log_steps *steps, size_t *skipped,
                       struct libra_error *err);

/* The error read() gives text: its position and message. */
static void assert_log_error(log_reader *read, const char *text, int line, int col, const char *msg)
{
    cost_log_steps steps = {0};
    struct libra_error err;
    size_t skipped;
    assert_int_equal(read(text, &steps, &skipped, &err), LIBRA_EINVAL);
    if (err.line != line || err.col != col || !strstr(err.msg, msg))
        fail_msg("got %d:%d: %s; want %d:%d: ...%s...", err.line, err.col, err.msg, line, col, msg);
    vec_free(&steps);
}

static void assert_verl_error(const char *text, int line, int col, const char *msg)
{
    assert_log_error(verl, text, line, col, msg);
}

static void test_verl_steps(void **state)
{
    static const char text[] =
        "INFO starting\r\n"
        "(TaskRunner pid=7) step:0 - val-core/x/reward/mean@1:np.float64(0.5)\r\n"
        "(TaskRunner pid=7) step:1 - actor/pg_loss:np.float64(-0.02) - prompt_length/mean:200.0 - "
        "response_length/mean:np.float64(1000.0) - timing_s/update_actor:np.float64(50.5) - "
        "perf/total_num_tokens:1228800 - perf/time_per_step:120.0 - perf/throughput:320.0\r\n"
        "step:2 - timing_s/update_actor:60 - perf/total_num_tokens:100 - prompt_length/mean:0 - "
        "response_length/mean:50 - flag:True - weird:nan\n";
    cost_log_steps steps = {0};
    struct libra_error err;
    size_t skipped;
    assert_int_equal(verl(text, &steps, &skipped, &err), 0);
    assert_int_equal(steps.n, 2);
    assert_int_equal(skipped, 1);
    const struct cost_log_step *s = &steps.v[0];
    assert_int_equal(s->line, 3);
    assert_int_equal(s->step, 1);
    assert_close(s->update_s, 50.5, 0);
    assert_close(s->tokens, 1228800.0, 0);
    assert_close(s->seq_tokens, 1200.0, 0);
    assert_close(s->gpus, 1228800.0 / (320.0 * 120.0), 1e-12); /* 32 */
    assert_true(steps.v[1].gpus == 0.0);                       /* no throughput: unknown */
    assert_int_equal(steps.v[1].line, 4);
    vec_free(&steps);
}

static void test_verl_errors(void **state)
{
    assert_verl_error("step:1 - timing_s/update_actor:abc - x:1\n", 1, 32,
                      "timing_s/update_actor: expected a number, got 'abc'");
    assert_verl_error("a\nstep:1 - timing_s/update_actor:5 - prompt_length/mean:1\n", 2, 1,
                      "perf/total_num_tokens: missing");
    assert_verl_error("step:1 - timing_s/update_actor:5 - timing_s/update_actor:6\n", 1, 36,
                      "given twice");
    assert_verl_error("step:1 - nocolon - x:1\n", 1, 10, "expected KEY:VALUE");
    assert_verl_error("x\n(TaskRunner pid=1) step:-1 - timing_s/update_actor:5\n", 2, 20,
                      "step: expected a step number (digits) before ' - ', got '-1'");
    assert_verl_error("step:1 - timing_s/update_actor:0 - perf/total_num_tokens:1 - "
                      "prompt_length/mean:1 - response_length/mean:1\n",
                      1, 32, "timing_s/update_actor: expected a number > 0");
    assert_verl_error("é step:1 - timing_s/update_actor:inf - perf/total_num_tokens:1 - "
                      "prompt_length/mean:1 - response_length/mean:1\n",
                      1, 34, "expected a number > 0");
}

static void test_options(void **state)
{
    struct cost_import_options o;
    char why[160];
    assert_int_equal(cost_import_options_parse("", &o, why, sizeof why), 0);
    assert_int_equal(o.given, 0);
    assert_int_equal(cost_import_options_parse("tp=2,gpus=64,micro_batch_tokens=65536,zero=0", &o,
                                               why, sizeof why),
                     0);
    assert_int_equal(o.given, 1u << COST_OPT_TP | 1u << COST_OPT_GPUS | 1u << COST_OPT_MICRO |
                                  1u << COST_OPT_ZERO);
    assert_int_equal(o.value[COST_OPT_TP], 2);
    assert_int_equal(o.value[COST_OPT_MICRO], 65536);
    assert_int_equal(o.value[COST_OPT_ZERO], 0);
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"foo=1", "unknown option 'foo'"},
        {"tp=1,tp=2", "tp: given twice"},
        {"tp=0", "tp: expected an integer in 1..1024"},
        {"zero=4", "zero: expected an integer in 0..3"},
        {"ep=0", "ep: expected an integer in 1..1024"},
        {"tp=", "tp: expected"},
        {"tp", "tp: expected"},
        {"tp=+2", "tp: expected"},
        {"tp=2x", "tp: expected"},
        {"tp=2,", "trailing comma"},
        {"gpus=99999999999999999999", "gpus: expected"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(cost_import_options_parse(bad[i].text, &o, why, sizeof why), -1);
        if (!strstr(why, bad[i].why))
            fail_msg("%s: %s", bad[i].text, why);
    }
    assert_string_equal(cost_import_option_name(COST_OPT_MICRO), "micro_batch_tokens");
}

static void test_verl_point(void **state)
{
    struct cost_shape shape;
    cost_shape_init(&shape, cost_ref_model(COST_REF_QWEN25_7B));
    struct cost_log_step st = {.line = 3,
                               .step = 1,
                               .update_s = 50.0,
                               .tokens = 1228800.0,
                               .seq_tokens = 1200.0,
                               .gpus = 31.9999};
    struct cost_import_options o;
    struct cost_train_seqs seqs;
    struct cost_train_point pt;
    char why[200];
    cost_import_options_parse("", &o, why, sizeof why);
    assert_int_equal(cost_log_point(&st, &o, &shape, &seqs, &pt, why, sizeof why), 0);
    assert_int_equal(seqs.n, 1024);
    assert_close(seqs.tokens[0], 1200.0, 0);
    assert_true(pt.seqs == &seqs && pt.measured_s == 50.0);
    assert_int_equal(pt.config.dp, 32);
    assert_int_equal(pt.config.tp * pt.config.pp * pt.config.cp, 1);
    assert_int_equal(pt.config.zero_stage, 3);
    assert_true(pt.config.full_recompute && !pt.config.old_logprob && !pt.config.reference);
    assert_close(pt.config.micro_batch_tokens, 16384.0, 0);
    cost_train_seqs_free(&seqs);

    /* Ulysses CP 4 over 64 GPUs: DP 16, the micro-batch budget per replica 4 × 16384 */
    cost_import_options_parse("cp=4,gpus=64,minibatches=2,recompute=0", &o, why, sizeof why);
    assert_int_equal(cost_log_point(&st, &o, &shape, &seqs, &pt, why, sizeof why), 0);
    assert_int_equal(pt.config.dp, 16);
    assert_int_equal(pt.config.minibatches, 2);
    assert_false(pt.config.full_recompute);
    assert_close(pt.config.micro_batch_tokens, 65536.0, 0);
    cost_train_seqs_free(&seqs);

    static const struct {
        const char *opt, *why;
        double gpus, tokens;
    } bad[] = {
        {"", "no GPU count", 0.0, 1228800.0},
        {"tp=3", "not a multiple of tp", 32.0, 1228800.0},
        {"micro_batch_tokens=1000", "exceed micro_batch_tokens", 32.0, 1228800.0},
        {"", "cannot fill 32 DP ranks", 32.0, 12000.0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st.gpus = bad[i].gpus;
        st.tokens = bad[i].tokens;
        cost_import_options_parse(bad[i].opt, &o, why, sizeof why);
        assert_int_equal(cost_log_point(&st, &o, &shape, &seqs, &pt, why, sizeof why), -1);
        if (!strstr(why, bad[i].why))
            fail_msg("%s: %s", bad[i].opt, why);
        assert_int_equal(seqs.n, 0); /* nothing to free */
    }
}

/* A Megatron-LM log: the arguments block (sorted, as Megatron prints it) and three iteration
 * lines, the first of which holds the start-up. */
static const char megatron_log[] =
    "using world size: 32, data-parallel size: 8, tensor-model-parallel size: 2\n"
    "------------------------ arguments ------------------------\n"
    "  context_parallel_size ........................... 2\n"
    "  hidden_size ..................................... 3584\n"
    "  micro_batch_size ................................ 2\n"
    "  num_layers ...................................... 28\n"
    "  pipeline_model_parallel_size .................... 1\n"
    "  recompute_granularity ........................... selective\n"
    "  seq_length ...................................... 8192\n"
    "  tensor_model_parallel_size ...................... 2\n"
    "  use_distributed_optimizer ....................... True\n"
    "  world_size ...................................... 32\n"
    "-------------------- end of arguments ---------------------\n"
    " [2025-08-01 07:19:37] iteration        1/    5000 | consumed samples:          128 | "
    "elapsed time per iteration (ms): 19138.8 | global batch size:   128 | lm loss: 1.04E+01 |\n"
    " [2025-08-01 07:19:50] iteration        2/    5000 | consumed samples:          256 | "
    "elapsed time per iteration (ms): 12936.1 | throughput per GPU (TFLOP/s/GPU): 118.7 | "
    "learning rate: 1.395349E-07 | global batch size:   128 | lm loss: 1.044022E+01 |\r\n"
    "validation loss at iteration 2 | lm loss value: 2.1 |\n"
    " iteration       12/    5000 | elapsed time per iteration (ms): 6500 | global batch size:"
    "    64 |";

static int megatron(const char *text, cost_log_steps *steps, size_t *skipped,
                    struct libra_error *err)
{
    memset(err, 0, sizeof *err);
    *skipped = 0;
    return cost_import_megatron("m.log", text, strlen(text), steps, skipped, err);
}

static void test_megatron_steps(void **state)
{
    cost_log_steps steps = {0};
    struct libra_error err;
    size_t skipped;
    assert_int_equal(megatron(megatron_log, &steps, &skipped, &err), 0);
    assert_int_equal(skipped, 1); /* iteration 1: the start-up */
    assert_int_equal(steps.n, 2);
    const struct cost_log_step *s = &steps.v[0];
    assert_int_equal(s->line, 15);
    assert_int_equal(s->step, 2);
    assert_close(s->update_s, 12.9361, 1e-12);
    assert_close(s->tokens, 128.0 * 8192.0, 0);
    assert_close(s->seq_tokens, 8192.0, 0);
    assert_close(s->gpus, 32.0, 0);
    assert_int_equal(s->layers, 28);
    assert_int_equal(s->hidden, 3584);
    const long *v = s->layout.value;
    assert_int_equal(v[COST_OPT_TP], 2);
    assert_int_equal(v[COST_OPT_PP], 1);
    assert_int_equal(v[COST_OPT_CP], 2);
    assert_int_equal(v[COST_OPT_EP], 1); /* absent: none */
    assert_int_equal(v[COST_OPT_GPUS], 32);
    assert_int_equal(v[COST_OPT_MINIBATCHES], 1);
    assert_int_equal(v[COST_OPT_MICRO], 2 * 8192);
    assert_int_equal(v[COST_OPT_ZERO], 1);      /* the distributed optimizer */
    assert_int_equal(v[COST_OPT_RECOMPUTE], 0); /* selective: not full */
    assert_int_equal(s->layout.given, (1u << COST_N_OPTIONS) - 1);
    assert_int_equal(steps.v[1].line, 17);
    assert_int_equal(steps.v[1].step, 12);
    assert_close(steps.v[1].tokens, 64.0 * 8192.0, 0);
    vec_free(&steps);
}

static void assert_megatron_error(const char *text, int line, int col, const char *msg)
{
    assert_log_error(megatron, text, line, col, msg);
}

#define ARGS_BEGIN "------------------------ arguments ------------------------\n"
#define ARGS_END "-------------------- end of arguments ---------------------\n"
#define ARGS_NEEDED                                                                                \
    "  seq_length .... 4096\n  world_size .... 8\n  tensor_model_parallel_size .... 1\n"           \
    "  pipeline_model_parallel_size .... 1\n  micro_batch_size .... 1\n"
#define ITERATION(t, g)                                                                            \
    " iteration 5/ 9 | elapsed time per iteration (ms): " t " | global batch size: " g " |\n"

static void test_megatron_errors(void **state)
{
    assert_megatron_error(ITERATION("1", "1"), 1, 1, "an iteration line before a whole arguments");
    assert_megatron_error(ARGS_BEGIN "  seq_length .... 4096\n" ARGS_END, 3, 1,
                          "the arguments block ending here has no world_size");
    assert_megatron_error(ARGS_BEGIN ARGS_NEEDED, 6, 1, "the arguments block does not end");
    assert_megatron_error(ARGS_BEGIN "  seq_length .... 4k\n  world_size .... 8\n"
                                     "  tensor_model_parallel_size .... 1\n"
                                     "  pipeline_model_parallel_size .... 1\n"
                                     "  micro_batch_size .... 1\n" ARGS_END,
                          2, 19, "seq_length: expected an integer >= 1, got '4k'");
    assert_megatron_error(ARGS_BEGIN ARGS_NEEDED "  expert_model_parallel_size .... 0\n" ARGS_END,
                          7, 35, "expert_model_parallel_size: expected an integer >= 1, got '0'");
    assert_megatron_error(ARGS_BEGIN ARGS_NEEDED "  use_distributed_optimizer .... yes\n" ARGS_END,
                          7, 34, "use_distributed_optimizer: expected True or False, got 'yes'");
    assert_megatron_error(ARGS_BEGIN ARGS_NEEDED ARGS_END ITERATION("0", "1"), 8, 52,
                          "elapsed time per iteration (ms): expected a number > 0, got '0'");
    assert_megatron_error(ARGS_BEGIN ARGS_NEEDED ARGS_END ITERATION("5", "x"), 8, 75,
                          "global batch size: expected a number > 0, got 'x'");
    assert_megatron_error(ARGS_BEGIN ARGS_NEEDED ARGS_END
                          " iteration 5/ 9 | global batch size: 8 |\n",
                          8, 18, "elapsed time per iteration (ms): missing");
    /* "None" stands for the model's shape unknown; a later block replaces an earlier one */
    cost_log_steps steps = {0};
    struct libra_error err;
    size_t skipped;
    assert_int_equal(
        megatron(ARGS_BEGIN ARGS_NEEDED "  num_layers .... None\n" ARGS_END ITERATION("5", "8")
                     ITERATION("5", "8") ARGS_BEGIN
                 "  seq_length .... 100\n  world_size .... 4\n"
                 "  tensor_model_parallel_size .... 1\n"
                 "  pipeline_model_parallel_size .... 1\n"
                 "  micro_batch_size .... 1\n" ARGS_END ITERATION("5", "8") ITERATION("6", "8"),
                 &steps, &skipped, &err),
        0);
    assert_int_equal(skipped, 2);
    assert_int_equal(steps.n, 2);
    assert_int_equal(steps.v[0].layers, 0);
    assert_close(steps.v[0].gpus, 8.0, 0);
    assert_close(steps.v[1].gpus, 4.0, 0);
    assert_close(steps.v[1].tokens, 800.0, 0);
    vec_free(&steps);
}

static void test_megatron_point(void **state)
{
    cost_log_steps steps = {0};
    struct libra_error err;
    size_t skipped;
    assert_int_equal(megatron(megatron_log, &steps, &skipped, &err), 0);
    struct cost_shape shape;
    cost_shape_init(&shape, cost_ref_model(COST_REF_QWEN25_7B));
    struct cost_import_options o;
    struct cost_train_seqs seqs;
    struct cost_train_point pt;
    char why[200];
    cost_import_options_parse("", &o, why, sizeof why);
    assert_int_equal(cost_log_point(&steps.v[0], &o, &shape, &seqs, &pt, why, sizeof why), 0);
    const struct cost_train_config *c = &pt.config; /* the log's layout, not verl's defaults */
    assert_int_equal(c->tp, 2);
    assert_int_equal(c->cp, 2);
    assert_int_equal(c->dp, 8);
    assert_int_equal(c->zero_stage, 1);
    assert_false(c->full_recompute);
    assert_close(c->micro_batch_tokens, 16384.0, 0);
    assert_int_equal(seqs.n, 128);
    assert_close(pt.measured_s, 12.9361, 1e-12);
    cost_train_seqs_free(&seqs);
    assert_int_equal(c->ep, 1);
    /* an input's options win over the log */
    cost_import_options_parse("tp=4,cp=1,recompute=1,ep=2", &o, why, sizeof why);
    assert_int_equal(cost_log_point(&steps.v[0], &o, &shape, &seqs, &pt, why, sizeof why), 0);
    assert_int_equal(pt.config.ep, 2);
    assert_int_equal(pt.config.tp, 4);
    assert_int_equal(pt.config.dp, 8);
    assert_true(pt.config.full_recompute);
    cost_train_seqs_free(&seqs);
    vec_free(&steps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect),         cmocka_unit_test(test_vllm_run),
        cmocka_unit_test(test_latencies_win),  cmocka_unit_test(test_prefill_share),
        cmocka_unit_test(test_sglang_lines),   cmocka_unit_test(test_serving_errors),
        cmocka_unit_test(test_verl_steps),     cmocka_unit_test(test_verl_errors),
        cmocka_unit_test(test_options),        cmocka_unit_test(test_verl_point),
        cmocka_unit_test(test_megatron_steps), cmocka_unit_test(test_megatron_errors),
        cmocka_unit_test(test_megatron_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
