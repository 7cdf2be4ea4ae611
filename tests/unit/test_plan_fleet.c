/*
 * Tests of a plan's fleet (src/plan/fleet.c): a plan document written by plan_document reads
 * back as the plan's fleet; a hand-edited one that is wrong is refused at the member's
 * file:line:col; the diff against engines names every difference and nothing else.
 */
#include "testutil.h"

#include <string.h>

#include "plan/fleet.h"
#include "plan/sample.h"
#include "util/error.h"

static const char good[] = "{\n"
                           "  \"schema\": \"libra.plan/1\",\n"
                           "  \"feasible\": true,\n"
                           "  \"objective\": {\"step_s\": 12.5},\n"
                           "  \"rollout\": {\"gpus\": 8,\n"
                           "    \"instances\": {\"tp1\": 2, \"tp2\": 1, \"tp4\": 1},\n"
                           "    \"buckets\": \"tp1:2000,tp2:6000,tp4:40960\"}\n"
                           "}\n";

/* Reads text as a plan document; returns the reader's code, err filled. */
static int read_text(const char *text, struct plan_fleet *f, struct libra_error *err)
{
    struct ujson_doc doc = {0};
    int rc = ujson_doc_parse(&doc, "plan.json", text, strlen(text), err);
    if (rc == 0)
        rc = plan_fleet_from_json(f, &doc, err);
    ujson_doc_free(&doc);
    return rc;
}

/* good with from replaced by to, read; err must hold want (and be at line:col when line). */
static void refused(const char *from, const char *to, const char *want, int line, int col)
{
    char text[1024];
    const char *at = strstr(good, from);
    assert_non_null(at);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    struct plan_fleet f;
    struct libra_error err = {0};
    assert_int_equal(read_text(text, &f, &err), LIBRA_EINVAL);
    if (!strstr(err.msg, want))
        fail_msg("'%s' does not say '%s'", err.msg, want);
    assert_string_equal(err.file, "plan.json");
    if (line) {
        assert_int_equal(err.line, line);
        assert_int_equal(err.col, col);
    }
}

static void test_reads_a_document(void **state)
{
    (void)state;
    struct plan_fleet f;
    struct libra_error err = {0};
    assert_int_equal(read_text(good, &f, &err), 0);
    assert_int_equal(f.counts[0], 2);
    assert_int_equal(f.counts[1], 1);
    assert_int_equal(f.counts[2], 1);
    assert_int_equal(f.counts[3], 0);
    assert_int_equal(f.rollout_gpus, 8);
    assert_true(f.step_s == 12.5);
    assert_int_equal(f.layout.n, 3);
    assert_int_equal(f.layout.bucket[2].max_tokens, 40960);
}

static void test_refuses_with_the_place(void **state)
{
    (void)state;
    refused("\"libra.plan/1\"", "\"libra.sim/1\"", "schema: expected \"libra.plan/1\"", 2, 3);
    refused("\"feasible\": true", "\"feasible\": false, \"why\": \"training memory\"",
            "infeasible (training memory)", 3, 3);
    refused("\"step_s\": 12.5", "\"step_s\": 0", "objective.step_s: expected a number", 4, 17);
    refused("\"tp2\": 1", "\"tp3\": 1", "rollout.instances.tp3: expected a TP size", 6, 29);
    refused("\"tp2\": 1", "\"tp2\": -1", "rollout.instances.tp2: expected a count", 6, 29);
    refused("tp1:2000,tp2:6000,tp4:40960", "tp1:2000,tp4:40960",
            "no bucket is served by TP2, but rollout.instances has 1", 7, 5);
    refused("tp1:2000,tp2:6000", "tp1:2000,tp2:600", "rollout.buckets: column", 7, 5);
    refused("\"rollout\": {", "\"rollouts\": {", "missing member \"rollout\"", 1, 1);
    refused("\"gpus\": 8,", "", "rollout: missing member \"gpus\"", 5, 3);
    refused("\"tp4\": 1}", "\"tp4\": 1}]", "", 6, 48); /* not JSON: the parser says where */
    refused("{\"tp1\": 2, \"tp2\": 1, \"tp4\": 1}", "[1]", "rollout.instances: expected an object",
            6, 5);
}

static void test_document_round_trip(void **state)
{
    (void)state;
    struct spec_presets presets;
    struct libra_error err = {0};
    assert_int_equal(spec_presets_init(&presets, &err), 0);
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    cfg.cluster.gpus = 16;
    cfg.cluster.gpus_per_node = 8;
    cfg.rl.batch_trajectories = 8;
    cfg.rl.samples = 4;
    struct plan_lengths l = {0};
    for (int i = 0; i < 16; i++)
        plan_lengths_add(&l, 500 + 10 * i, 1000 + 700 * i, 40 * i, 1 + i % 5, 0.5 * i, false);
    struct plan_result r;
    assert_int_equal(
        plan_solve_lengths(&l, &cfg, spec_hardware_find(&presets, cfg.cluster.hardware),
                           spec_model_find(&presets, cfg.model.name), NULL, NULL, &r, &err),
        0);
    assert_true(r.feasible);
    json_t *doc = plan_document(&cfg, &r, &r, NULL, "test");
    char *text = ujson_dump(doc, true);
    struct plan_fleet want, got;
    plan_fleet_of(&r, &want);
    assert_int_equal(read_text(text, &got, &err), 0);
    assert_memory_equal(got.counts, want.counts, sizeof want.counts);
    assert_int_equal(got.rollout_gpus, want.rollout_gpus);
    assert_true(got.step_s == want.step_s);
    assert_memory_equal(&got.layout, &want.layout, sizeof want.layout);
    free(text);
    json_decref(doc);
    plan_result_free(&r);
    plan_lengths_free(&l);
    spec_presets_free(&presets);
}

/* The diff's "differences" as one string, "; "-joined. */
static void differences(const json_t *diff, char *out, size_t size)
{
    size_t i, used = 0;
    const json_t *d;
    out[0] = '\0';
    json_array_foreach(json_object_get(diff, "differences"), i, d) used +=
        (size_t)snprintf(out + used, size - used, "%s%s", i ? "; " : "", json_string_value(d));
}

static void test_diff_names_the_differences(void **state)
{
    (void)state;
    struct plan_fleet f;
    struct libra_error err = {0};
    assert_int_equal(read_text(good, &f, &err), 0);
    struct spec_bucket_layout same, other;
    assert_int_equal(spec_bucket_parse(&same, "tp1x9:2000,tp2:6000,tp4:40960", "t", NULL), 0);
    assert_int_equal(spec_bucket_parse(&other, "tp1:2000,tp2+tp4:40960", "t", NULL), 0);
    assert_true(plan_layout_same(&f.layout, &same)); /* instance counts aside */
    assert_false(plan_layout_same(&f.layout, &other));

    int engines[PLAN_NTP] = {2, 1, 1, 0};
    assert_true(plan_fleet_matches(&f, engines));
    json_t *diff = plan_fleet_diff(&f, engines, &same);
    char text[1024];
    differences(diff, text, sizeof text);
    assert_string_equal(text, "");
    assert_true(json_is_true(json_object_get(diff, "matches")));
    json_decref(diff);

    int fewer[PLAN_NTP] = {1, 1, 1, 1};
    assert_false(plan_fleet_matches(&f, fewer));
    diff = plan_fleet_diff(&f, fewer, &other);
    differences(diff, text, sizeof text);
    assert_string_equal(text, "TP1: 2 in the plan, 1 registered (add 1); "
                              "TP8: 0 in the plan, 1 registered (remove 1); "
                              "buckets: tp1:2000,tp2:6000,tp4:40960 in the plan, "
                              "tp1:2000,tp2+tp4:40960 in the gateway");
    assert_true(json_is_false(json_object_get(diff, "matches")));
    assert_int_equal(json_array_size(json_object_get(diff, "instances")), 4);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(diff, "rollout_gpus"), "engines")), 15);
    assert_true(json_real_value(json_object_get(diff, "step_s")) == 12.5);
    json_decref(diff);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_a_document),
        cmocka_unit_test(test_refuses_with_the_place),
        cmocka_unit_test(test_document_round_trip),
        cmocka_unit_test(test_diff_names_the_differences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
