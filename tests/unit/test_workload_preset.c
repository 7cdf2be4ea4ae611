/*
 * workload/preset: the built-in presets load and keep their pinned caps, a preset printed to
 * JSON reads back identically, "base" overrides only what it names, and every kind of bad
 * input in a user preset file fails with file:line:col and the field, leaving the registry
 * unchanged. Names follow the rules of hardware and model names (spec/preset.c): lower-case
 * letters, digits, '.', '-', '_', starting with a letter or digit; a name given twice in one
 * file is refused at the second, naming the first's position; a user file's name equal to a
 * built-in one replaces it; look-up ignores case and the preset keeps its own name. Values out
 * of range say the range, also for a whole number written as a real (1e30).
 */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "workload/preset.h"

static struct workload_presets builtins(void)
{
    struct workload_presets p;
    struct libra_error err = {0};
    if (workload_presets_init(&p, &err) != 0) {
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
        fail();
    }
    return p;
}

static void test_builtins_and_caps(void **state)
{
    (void)state;
    struct workload_presets p = builtins();
    assert_int_equal(p.n, 5);
    /* the drift experiment's preset: r2e-gym but for its drift */
    const struct workload_preset *r2e = workload_preset_find(&p, "r2e-gym");
    const struct workload_preset *drift = workload_preset_find(&p, "r2e-gym-drift");
    assert_non_null(drift);
    assert_true(!r2e->drift.enabled && drift->drift.enabled);
    assert_int_equal(drift->drift.versions, 200);
    assert_int_equal(drift->prompts, r2e->prompts);
    assert_int_equal(drift->n_tools, r2e->n_tools);
    assert_close(drift->turn_tokens.median, r2e->turn_tokens.median, 0);
    const struct workload_preset *s = workload_preset_find(&p, "Search-R1");
    assert_non_null(s);
    assert_string_equal(s->origin, "builtin");
    assert_int_equal(s->prompts, 169615);
    assert_int_equal(s->max_turns, 5);                         /* Libra's search_r1 workflow */
    assert_int_equal(s->max_turn_generated_tokens, 1024);      /* its max_new_tokens */
    assert_int_equal(s->context_tokens, 40960);                /* its Qwen3-14B config */
    assert_true(s->tools[0].payload_tokens.max > 5000);        /* some large pages */
    assert_true(s->tools[0].bad_status == TRACE_TOOL_FAILURE); /* misses are failures */
    /* prompt + every turn at its cap + every return at its cap fits: no mechanical
     * truncation link from payload size to remaining work */
    assert_true(s->prompt_tokens.max + s->max_turns * s->max_turn_generated_tokens +
                    (s->max_turns - 1) * s->tools[0].payload_tokens.max <=
                s->context_tokens);
    const struct workload_preset *d = workload_preset_find(&p, "dapo-math");
    assert_int_equal(d->prompts, 17900);
    assert_int_equal(d->max_turns, 2);
    assert_int_equal(d->max_generated_tokens, 32768);
    const struct workload_preset *v = workload_preset_find(&p, "dapo-math-verl");
    assert_int_equal(v->samples, 16);
    assert_int_equal(v->max_turns, 1);
    assert_int_equal(v->max_generated_tokens, 20480);
    assert_int_equal(v->dynamic_sampling, SPEC_DS_GEN_BATCH);
    const struct workload_preset *r = workload_preset_find(&p, "r2e-gym");
    assert_int_equal(r->prompts, 4578);
    assert_int_equal(r->max_turns, 12);
    assert_int_equal(r->max_generated_tokens, 30000);
    assert_int_equal(r->context_tokens, 32768);
    assert_null(workload_preset_find(&p, "nope"));
    workload_presets_free(&p);
}

static char *dump_preset(const struct workload_preset *w)
{
    json_t *j = workload_preset_to_json(w);
    char *s = ujson_dump(j, false);
    json_decref(j);
    return s;
}

static void test_json_round_trip(void **state)
{
    (void)state;
    struct workload_presets p = builtins();
    for (size_t i = 0; i < p.n; i++) {
        char *one = dump_preset(&p.items[i]);
        char file[70000];
        snprintf(file, sizeof file, "{\"workloads\": [%s]}", one);
        struct workload_presets q = {0};
        struct libra_error err = {0};
        assert_int_equal(workload_presets_add_text(&q, "rt.json", file, strlen(file), &err), 0);
        assert_int_equal(q.n, 1);
        char *two = dump_preset(&q.items[0]);
        assert_string_equal(one, two);
        assert_string_equal(q.items[0].origin, "rt.json");
        free(one);
        free(two);
        workload_presets_free(&q);
    }
    workload_presets_free(&p);
}

static void test_base_overrides_only_named_fields(void **state)
{
    (void)state;
    struct workload_presets p = builtins();
    const char *text = "{\"hardware\": [], \"workloads\": [\n"
                       "  {\"name\": \"r2e-drift\", \"base\": \"r2e-gym\",\n"
                       "   \"drift\": {\"enabled\": true}, \"causal\": {\"strength\": 0}}]}";
    struct libra_error err = {0};
    assert_int_equal(workload_presets_add_text(&p, "mine.json", text, strlen(text), &err), 0);
    assert_int_equal(p.n, 6);
    const struct workload_preset *base = workload_preset_find(&p, "r2e-gym");
    const struct workload_preset *w = workload_preset_find(&p, "r2e-drift");
    assert_true(w->drift.enabled);
    assert_int_equal(w->drift.versions, base->drift.versions);
    assert_true(w->causal.strength == 0);
    assert_true(w->causal.finish_logit == base->causal.finish_logit);
    assert_true(w->setup.median_s == base->setup.median_s);
    assert_int_equal(w->n_tools, base->n_tools);
    assert_string_equal(w->origin, "mine.json");

    /* Redefining a name replaces the preset in place. */
    text = "{\"workloads\": [{\"name\": \"r2e-gym\", \"base\": \"R2E-GYM\", \"prompts\": 10}]}";
    assert_int_equal(workload_presets_add_text(&p, "again.json", text, strlen(text), &err), 0);
    assert_int_equal(p.n, 6);
    assert_int_equal(workload_preset_find(&p, "r2e-gym")->prompts, 10);
    workload_presets_free(&p);
}

/* A user file that must fail: where, and what the message must contain. */
struct bad_case {
    const char *text;
    int line, col;
    const char *msg;
};

static const struct bad_case bad_cases[] = {
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\",\n \"promts\": 3}]}", 2, 2,
     "promts: unknown key"},
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\",\n \"finish\": {\"logitt\": 1}}]}",
     2, 13, "finish.logitt: unknown key"},
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\",\n \"prompts\": \"many\"}]}", 2, 2,
     "prompts: expected an integer"},
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\",\n \"max_turns\": 0}]}", 2, 2,
     "max_turns: out of range"},
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\",\n \"causal\": {\"strength\": 2}}]}",
     2, 13, "causal.strength: out of range"},
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\",\n \"setup\": {\"median_s\": -1}}]}",
     2, 12, "setup.median_s: out of range"},
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"nope\"}]}", 1, 30,
     "base: no workload preset 'nope' before this one"},
    {"{\"workloads\": [\n {\"name\": \"x\", \"prompts\": 5}]}", 2, 2,
     "workloads.0.samples: missing"},
    /* a missing field of an object present: placed at that object */
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\", \"tools\": [\n"
     "  {\"name\": \"t\", \"weight\": 1,\n   \"bad\": {}}]}]}",
     3, 4, "tools.0.bad.logit: missing"},
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\",\n \"samples\": 5}]}", 1, 16,
     "batch_trajectories: must be a multiple of samples"},
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\",\n"
     " \"prompt_tokens\": {\"median\": 5000}}]}",
     2, 2, "prompt_tokens: needs min <= median <= max"},
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\", \"tools\": [\n"
     "  {\"name\": \"t\", \"weight\": 1}]}]}",
     2, 3, "tools.0.bad.logit: missing"},
    {"{\"workloads\": [{\"name\": \"x\", \"base\": \"r2e-gym\",\n"
     " \"finish\": {\"means\": \"maybe\"}}]}",
     2, 13, "finish.means: expected one of answer, correct"},
    {"{\"workloads\": [{\"name\": \"bad name!\"}]}", 1, 17, "name: 'bad name!' must be lower-case"},
    {"{\"workload\": []}", 1, 2, "workload: unknown key"},
    {"{\"workloads\": {}}", 1, 2, "workloads: expected an array"},
    {"{\"workloads\": [{\"name\": \"x\",, }]}", 1, 29, "expected"},
};

static void test_bad_files_report_position(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        struct workload_presets p = builtins();
        const struct bad_case *c = &bad_cases[i];
        struct libra_error err = {0};
        int rc = workload_presets_add_text(&p, "user.json", c->text, strlen(c->text), &err);
        if (rc != LIBRA_EINVAL || strcmp(err.file, "user.json") != 0 || err.line != c->line ||
            err.col != c->col || !strstr(err.msg, c->msg)) {
            print_error("case %zu: rc %d, %s:%d:%d: %s (want %d:%d: %s)\n", i, rc, err.file,
                        err.line, err.col, err.msg, c->line, c->col, c->msg);
            fail();
        }
        assert_int_equal(p.n, 5); /* unchanged */
        assert_int_equal(workload_preset_find(&p, "r2e-gym")->prompts, 4578);
        workload_presets_free(&p);
    }
}

static void test_failed_file_changes_nothing(void **state)
{
    (void)state;
    struct workload_presets p = builtins();
    /* The first preset is fine, the second is not: neither may be added. */
    const char *text = "{\"workloads\": [{\"name\": \"ok\", \"base\": \"search-r1\"},\n"
                       " {\"name\": \"r2e-gym\", \"base\": \"ok\", \"prompts\": -1}]}";
    struct libra_error err = {0};
    assert_int_equal(workload_presets_add_text(&p, "u.json", text, strlen(text), &err),
                     LIBRA_EINVAL);
    assert_int_equal(err.line, 2);
    assert_null(workload_preset_find(&p, "ok"));
    assert_int_equal(workload_preset_find(&p, "r2e-gym")->prompts, 4578);
    workload_presets_free(&p);
}

static void test_summary_lists_caps(void **state)
{
    (void)state;
    struct workload_presets p = builtins();
    json_t *j = workload_preset_summary(workload_preset_find(&p, "r2e-gym"));
    char *s = ujson_dump(j, false);
    assert_string_equal(s, "{\"batch_trajectories\":32,\"context_tokens\":32768,"
                           "\"max_generated_tokens\":30000,"
                           "\"max_turns\":12,\"name\":\"r2e-gym\",\"origin\":\"builtin\","
                           "\"prompts\":4578,\"samples\":4,\"tools\":[\"execute_bash\","
                           "\"file_editor\",\"search\",\"validator\"]}");
    free(s);
    json_decref(j);
    workload_presets_free(&p);
}

/* Adds text as "user.json" and requires it to fail at line:col with exactly msg, leaving the
 * built-in presets as they were. */
static void expect_refused(const char *text, int line, int col, const char *msg)
{
    struct workload_presets p = builtins();
    struct libra_error err = {0};
    int rc = workload_presets_add_text(&p, "user.json", text, strlen(text), &err);
    if (rc != LIBRA_EINVAL || strcmp(err.file, "user.json") != 0 || err.line != line ||
        err.col != col || strcmp(err.msg, msg) != 0) {
        print_error("rc %d, %s:%d:%d: %s\n want %d:%d: %s\n", rc, err.file, err.line, err.col,
                    err.msg, line, col, msg);
        fail();
    }
    assert_int_equal(p.n, 5);
    assert_int_equal(workload_preset_find(&p, "r2e-gym")->prompts, 4578);
    assert_null(workload_preset_find(&p, "mine"));
    workload_presets_free(&p);
}

static void test_name_twice_in_one_file(void **state)
{
    (void)state;
    expect_refused("{\"workloads\": [\n"
                   "  {\"name\": \"mine\", \"base\": \"r2e-gym\"},\n"
                   "  {\"name\": \"other\", \"base\": \"mine\"},\n"
                   "  {\"name\": \"mine\", \"base\": \"search-r1\", \"prompts\": 3}]}",
                   4, 4,
                   "workloads.2.name: 'mine' is defined twice in this file, first at 2:4 "
                   "(workloads.0.name)");
    /* a built-in's name twice: the first would replace the built-in, the second the first */
    expect_refused("{\"workloads\": [\n"
                   " {\"name\": \"r2e-gym\", \"base\": \"r2e-gym\", \"prompts\": 3},\n"
                   " {\"name\": \"r2e-gym\", \"base\": \"r2e-gym\", \"prompts\": 4}]}",
                   3, 3,
                   "workloads.1.name: 'r2e-gym' is defined twice in this file, first at 2:3 "
                   "(workloads.0.name)");
}

static void test_names_are_lower_case(void **state)
{
    (void)state;
    static const char *const bad[] = {"R2E-Gym", "Mine", "a+b", "-a",     ".a",
                                      "_a",      "a b",  "a/b", "x$(id)", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[200], msg[200];
        snprintf(text, sizeof text,
                 "{\"workloads\": [\n  {\"name\": \"%s\", \"base\": \"r2e-gym\"}]}", bad[i]);
        snprintf(msg, sizeof msg,
                 "workloads.0.name: '%s' must be lower-case letters, digits, '.', '-', '_', "
                 "starting with a letter or digit",
                 bad[i]);
        expect_refused(text, 2, 4, msg);
    }
    /* one equal to an earlier one ignoring case is refused as upper case */
    expect_refused("{\"workloads\": [\n"
                   "  {\"name\": \"mine\", \"base\": \"r2e-gym\"},\n"
                   "  {\"name\": \"MINE\", \"base\": \"r2e-gym\"}]}",
                   3, 4,
                   "workloads.1.name: 'MINE' must be lower-case letters, digits, '.', '-', '_', "
                   "starting with a letter or digit");
    expect_refused("{\"workloads\": [\n  {\"name\": 7, \"base\": \"r2e-gym\"}]}", 2, 4,
                   "workloads.0.name: expected a string");
    expect_refused("{\"workloads\": [\n  {\"name\": "
                   "\"a23456789012345678901234567890123456789012345678\", \"base\": \"r2e-gym\"}]}",
                   2, 4,
                   "workloads.0.name: 'a23456789012345678901234567890123456789012345678' is too "
                   "long: a name is under 48 bytes");
}

static void test_user_name_replaces_builtin_keeping_lower_case(void **state)
{
    (void)state;
    struct workload_presets p = builtins();
    const char *text = "{\"workloads\": [\n"
                       "  {\"name\": \"r2e-gym\", \"base\": \"R2E-GYM\", \"prompts\": 10},\n"
                       "  {\"name\": \"r2e.gym_2\", \"base\": \"r2e-gym\"}]}";
    struct libra_error err = {0};
    assert_int_equal(workload_presets_add_text(&p, "mine.json", text, strlen(text), &err), 0);
    assert_int_equal(p.n, 6);
    const struct workload_preset *w = workload_preset_find(&p, "R2E-Gym");
    assert_non_null(w);
    assert_string_equal(w->name, "r2e-gym");
    assert_string_equal(w->origin, "mine.json");
    assert_int_equal(w->prompts, 10);
    /* the second starts from the first, the user's r2e-gym */
    assert_int_equal(workload_preset_find(&p, "R2E.GYM_2")->prompts, 10);
    workload_presets_free(&p);
}

static void test_out_of_range_says_the_range(void **state)
{
    (void)state;
    expect_refused("{\"workloads\": [{\"name\": \"mine\", \"base\": \"r2e-gym\",\n"
                   " \"max_turns\": 1001}]}",
                   2, 2, "workloads.0.max_turns: out of range: must be in 1..1000");
    expect_refused("{\"workloads\": [{\"name\": \"mine\", \"base\": \"r2e-gym\",\n"
                   " \"max_turns\": 1e30}]}",
                   2, 2, "workloads.0.max_turns: out of range: must be in 1..1000");
    expect_refused("{\"workloads\": [{\"name\": \"mine\", \"base\": \"r2e-gym\",\n"
                   " \"prompts\": -1e30}]}",
                   2, 2, "workloads.0.prompts: out of range: must be in 1..1000000000000");
    expect_refused("{\"workloads\": [{\"name\": \"mine\", \"base\": \"r2e-gym\",\n"
                   " \"max_turns\": 2.5}]}",
                   2, 2, "workloads.0.max_turns: expected an integer");
    expect_refused("{\"workloads\": [{\"name\": \"mine\", \"base\": \"r2e-gym\",\n"
                   " \"causal\": {\"strength\": 1.5}}]}",
                   2, 13, "workloads.0.causal.strength: out of range: must be in 0..1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins_and_caps),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_base_overrides_only_named_fields),
        cmocka_unit_test(test_bad_files_report_position),
        cmocka_unit_test(test_failed_file_changes_nothing),
        cmocka_unit_test(test_summary_lists_caps),
        cmocka_unit_test(test_name_twice_in_one_file),
        cmocka_unit_test(test_names_are_lower_case),
        cmocka_unit_test(test_user_name_replaces_builtin_keeping_lower_case),
        cmocka_unit_test(test_out_of_range_says_the_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
