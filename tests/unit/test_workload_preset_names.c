/*
 * workload/preset: preset names follow the rules of hardware and model names (spec/preset.c).
 * A name is lower-case letters, digits, '.', '-', '_', starting with a letter or digit, and
 * another is refused at its file:line:col; a name given twice in one file is refused at the
 * second, naming the first's position (two equal ignoring case cannot both pass the first
 * rule); a user file's name equal to a built-in one replaces it; look-up ignores case and the
 * preset keeps its own name. Values out of range say the range, also for a whole number past
 * int64. A refused file leaves the registry as it was.
 */
#include "testutil.h"

#include <string.h>

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
        cmocka_unit_test(test_name_twice_in_one_file),
        cmocka_unit_test(test_names_are_lower_case),
        cmocka_unit_test(test_user_name_replaces_builtin_keeping_lower_case),
        cmocka_unit_test(test_out_of_range_says_the_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
