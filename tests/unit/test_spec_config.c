/*
 * Tests of the experiment config (spec/config.h): the defaults are the schema table's and the
 * built-in experiment's; each layer (defaults, hardware preset, preset values, file, flags)
 * overrides the ones below it; every class of error is reported where the value came from;
 * the digest is stable and follows the values; docs/config.md is the generated text.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "spec/config.h"
#include "testutil.h"
#include "util/error.h"

static struct spec_presets presets;

/* A 4-GPU-per-node hardware preset, so the preset layer is visible against the default 8. */
static const char four_per_node[] =
    "{\"hardware\": [{\"name\": \"quad\", \"bf16_flops_per_s\": 1e12, \"hbm_bytes\": 1e9, "
    "\"hbm_bw_bytes_per_s\": 1e9, \"nvlink_bw_bytes_per_s\": 1e9, "
    "\"allreduce_bus_bw_bytes_per_s\": 1e9, \"allreduce_latency_s\": 1e-5, "
    "\"inter_node_bw_bytes_per_s\": 1e9, \"gpus_per_node\": 4}]}";

static int setup(void **state)
{
    struct libra_error err = {0};
    if (spec_presets_init(&presets, &err) != 0)
        return -1;
    return spec_presets_add_text(&presets, "quad.json", four_per_node, strlen(four_per_node), &err);
}

static int teardown(void **state)
{
    spec_presets_free(&presets);
    return 0;
}

/* Resolves text (NULL: no file) and flags for the command of bit reader (0: any key); returns
 * the rc, err filled. */
static int resolve_for(unsigned reader, struct libra_config *cfg, const char *text,
                       const struct spec_config_override *flags, size_t n_flags,
                       const struct spec_config_override *values, size_t n_values,
                       struct libra_error *err)
{
    struct ujson_doc doc = {0};
    if (text && ujson_doc_parse(&doc, "exp.json", text, strlen(text), err) != 0)
        return LIBRA_EINVAL;
    struct spec_config_sources src = {.preset_values = values,
                                      .n_preset_values = n_values,
                                      .doc = text ? &doc : NULL,
                                      .flags = flags,
                                      .n_flags = n_flags,
                                      .reader = reader};
    int rc = spec_config_resolve(cfg, &presets, &src, err);
    ujson_doc_free(&doc);
    return rc;
}

static int resolve(struct libra_config *cfg, const char *text,
                   const struct spec_config_override *flags, size_t n_flags,
                   const struct spec_config_override *values, size_t n_values,
                   struct libra_error *err)
{
    return resolve_for(0, cfg, text, flags, n_flags, values, n_values, err);
}

static struct libra_config ok(const char *text, const struct spec_config_override *flags,
                              size_t n_flags)
{
    struct libra_config cfg;
    struct libra_error err = {0};
    if (resolve(&cfg, text, flags, n_flags, NULL, 0, &err) != 0) {
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
        fail();
    }
    return cfg;
}

/* The built-in default experiment (48 A800, Qwen3-14B, R2E-Gym) as the brief states it. */
static void test_defaults_are_the_default_experiment(void **state)
{
    struct libra_config c = ok(NULL, NULL, 0);
    assert_string_equal(c.cluster.hardware, "a800-80g");
    assert_int_equal(c.cluster.gpus, 48);
    assert_int_equal(c.cluster.gpus_per_node, 8);
    assert_string_equal(c.model.name, "qwen3-14b");
    assert_string_equal(c.workload.name, "r2e-gym");
    assert_int_equal(c.rl.batch_trajectories, 32);
    assert_int_equal(c.rl.samples, 4);
    assert_int_equal(c.rl.steps, 100);
    assert_int_equal(c.rl.max_staleness, 4);
    assert_int_equal(c.rl.sync_interval, 5);
    assert_int_equal(c.rl.sync_mode, SPEC_SYNC_DRAIN);
    assert_int_equal(c.rl.transport, SPEC_TRANSPORT_DISK_RESTART);
    assert_int_equal(c.plan.mode, SPEC_PLAN_ASYNC);
    assert_int_equal(c.plan.cp_min_seq_tokens, 16384);
    assert_false(c.plan.group_integrity);
    assert_false(c.ehp.enabled);
    assert_int_equal(c.sim.seed, 1);
    assert_int_equal(c.sim.modes, SPEC_SIM_COLOCATED | SPEC_SIM_ASYNC | SPEC_SIM_LIBRA);
}

/* spec_config_defaults writes exactly each row's default, and every row is in the JSON. */
static void test_defaults_equal_the_table(void **state)
{
    size_t n;
    const struct spec_field *f = spec_config_fields(&n);
    struct libra_config c;
    spec_config_defaults(&c);
    json_t *all = spec_config_to_json(&c);
    size_t leaves = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *v = spec_field_get(&f[i], &c);
        switch (f[i].type) {
        case SPEC_INT:
            assert_int_equal(json_integer_value(v), (json_int_t)f[i].def);
            break;
        case SPEC_DOUBLE:
            assert_true(json_real_value(v) == f[i].def);
            break;
        case SPEC_BOOL:
            assert_int_equal(json_is_true(v), f[i].def != 0);
            break;
        case SPEC_STRING:
            assert_string_equal(json_string_value(v), f[i].def_str);
            break;
        case SPEC_ENUM:
            assert_string_equal(json_string_value(v), f[i].names[(int)f[i].def]);
            break;
        case SPEC_SET:
        case SPEC_LIST:
            assert_true(json_is_array(v));
            break;
        }
        /* the row appears in the JSON under its section */
        char section[32];
        const char *dot = strchr(f[i].key, '.');
        assert_non_null(dot);
        snprintf(section, sizeof section, "%.*s", (int)(dot - f[i].key), f[i].key);
        assert_true(json_equal(json_object_get(json_object_get(all, section), dot + 1), v));
        json_decref(v);
    }
    const char *key;
    json_t *sec;
    json_object_foreach(all, key, sec) leaves += json_object_size(sec);
    assert_int_equal(leaves, n);
    json_decref(all);
}

/* Each layer overrides the ones below it, for a key every layer sets. */
static void test_precedence(void **state)
{
    /* defaults < hardware preset */
    struct spec_config_override hw = {"cluster.hardware", "quad", "--hardware"};
    struct libra_config c = ok(NULL, &hw, 1);
    assert_int_equal(c.cluster.gpus_per_node, 4);
    /* hardware preset < file */
    c = ok("{\"cluster\": {\"hardware\": \"quad\", \"gpus_per_node\": 2}}", NULL, 0);
    assert_int_equal(c.cluster.gpus_per_node, 2);
    /* file < flags; a flag naming the hardware beats the file's */
    struct spec_config_override flags[] = {
        {"cluster.gpus_per_node", "1", "--set cluster.gpus_per_node"},
        {"cluster.hardware", "a800-80g", "--hardware"},
    };
    c = ok("{\"cluster\": {\"hardware\": \"quad\", \"gpus_per_node\": 2}}", flags, 1);
    assert_int_equal(c.cluster.gpus_per_node, 1);
    c = ok("{\"cluster\": {\"hardware\": \"quad\"}}", &flags[1], 1);
    assert_string_equal(c.cluster.hardware, "a800-80g");
    assert_int_equal(c.cluster.gpus_per_node, 8);
    /* 0 in the file means "the preset's" */
    c = ok("{\"cluster\": {\"hardware\": \"quad\", \"gpus_per_node\": 0}}", NULL, 0);
    assert_int_equal(c.cluster.gpus_per_node, 4);
    /* later flags win */
    struct spec_config_override twice[] = {
        {"cluster.gpus", "16", "--gpus"},
        {"cluster.gpus", "24", "--set cluster.gpus"},
    };
    c = ok("{\"cluster\": {\"gpus\": 8}}", twice, 2);
    assert_int_equal(c.cluster.gpus, 24);
}

/* Preset values (a workload preset's group size) sit between the defaults and the file. */
static void test_preset_values_layer(void **state)
{
    struct spec_config_override values[] = {
        {"rl.samples", "8", "workload preset 'w'"},
        {"rl.batch_trajectories", "64", "workload preset 'w'"},
    };
    struct spec_config_override flag = {"rl.samples", "2", "--samples"};
    struct libra_config c;
    struct libra_error err = {0};
    assert_int_equal(resolve(&c, NULL, NULL, 0, values, 2, &err), 0);
    assert_int_equal(c.rl.samples, 8);
    assert_int_equal(c.rl.batch_trajectories, 64);
    assert_int_equal(resolve(&c, "{\"rl\": {\"samples\": 16}}", NULL, 0, values, 2, &err), 0);
    assert_int_equal(c.rl.samples, 16);
    assert_int_equal(c.rl.batch_trajectories, 64);
    assert_int_equal(resolve(&c, "{\"rl\": {\"samples\": 16}}", &flag, 1, values, 2, &err), 0);
    assert_int_equal(c.rl.samples, 2);
    /* an inconsistency caused by a preset value names the preset */
    struct spec_config_override odd = {"rl.samples", "5", "--samples"};
    assert_int_equal(resolve(&c, NULL, &odd, 1, values, 2, &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "--samples: 5 does not divide rl.batch_trajectories (64, from "
                                 "workload preset 'w'): training takes whole groups");
}

static void expect_error(const char *text, const struct spec_config_override *flags, size_t n_flags,
                         int line, int col, const char *msg)
{
    struct libra_config cfg;
    struct libra_error err = {0};
    assert_int_equal(resolve(&cfg, text, flags, n_flags, NULL, 0, &err), LIBRA_EINVAL);
    if (err.line != line || err.col != col || strcmp(err.msg, msg) != 0) {
        print_error("got %d:%d: %s\nwant %d:%d: %s\n", err.line, err.col, err.msg, line, col, msg);
        fail();
    }
    assert_string_equal(err.file, line ? "exp.json" : "");
}

static void test_file_errors(void **state)
{
    expect_error("{\n  \"clustr\": {}\n}", NULL, 0, 2, 3,
                 "clustr: unknown section (did you mean 'cluster'?)");
    expect_error("{\"cluster\": {\n  \"gpu\": 8}}", NULL, 0, 2, 3,
                 "cluster.gpu: unknown key (did you mean 'gpus'?)");
    expect_error("{\"cluster\": {\"gpus\": \"8\"}}", NULL, 0, 1, 14,
                 "cluster.gpus: must be an integer");
    expect_error("{\"cluster\": {\"gpus\": 8.5}}", NULL, 0, 1, 14,
                 "cluster.gpus: must be an integer");
    expect_error("{\"cluster\": {\"gpus\": 0}}", NULL, 0, 1, 14,
                 "cluster.gpus: must be in 1..65536");
    expect_error("{\"plan\": {\"time_limit_s\": 0}}", NULL, 0, 1, 11,
                 "plan.time_limit_s: must be > 0, <= 86400");
    expect_error("{\"rl\": {\"sync_mode\": \"pause\"}}", NULL, 0, 1, 9,
                 "rl.sync_mode: must be one of drain, abort_resume, keep, not 'pause'");
    expect_error("{\"sim\": {\"modes\": []}}", NULL, 0, 1, 10,
                 "sim.modes: must have at least 1 member");
    expect_error("{\"sim\": {\"modes\": [\"verl\"]}}", NULL, 0, 1, 10,
                 "sim.modes: members must be among colocated, async, libra, rollout, not 'verl'");
    expect_error("{\"sim\": {\"modes\": [\"libra\", \"async\", \"libra\"]}}", NULL, 0, 1, 10,
                 "sim.modes: 'libra' is listed twice");
    expect_error("{\"ehp\": {\"enabled\": 1}}", NULL, 0, 1, 10,
                 "ehp.enabled: must be true or false");
    expect_error("{\"ehp\": []}", NULL, 0, 1, 2, "ehp: must be an object");
    expect_error("{\"plan\": {\n  \"replan_min_gain_frac\": 1.5}}", NULL, 0, 2, 3,
                 "plan.replan_min_gain_frac: must be in 0..1");
    expect_error("[]", NULL, 0, 1, 1, "a config file must be a JSON object");
    expect_error("{\"cluster\": {\"hardware\": \"a900\"}}", NULL, 0, 1, 14,
                 "cluster.hardware: unknown hardware preset 'a900' (known: a100-80g, a800-80g, "
                 "h100-sxm, h800, h20, h200, quad)");
    expect_error(
        "{\"model\": {\n\"name\": \"qwen9\"}}", NULL, 0, 2, 1,
        "model.name: unknown model preset 'qwen9' (known: qwen2.5-7b, qwen2.5-14b, "
        "qwen2.5-32b, qwen3-4b, qwen3-8b, qwen3-14b, qwen3-32b, qwen3-30b-a3b, qwen3-235b-a22b)");
    expect_error("{\"rl\": {\"samples\": 3,\n \"batch_trajectories\": 32}}", NULL, 0, 2, 2,
                 "rl.batch_trajectories: 32 is not a multiple of rl.samples (3): training takes "
                 "whole groups");
    expect_error("{\"sched\": {\"buckets\": \"tp3:100\"}}", NULL, 0, 1, 12,
                 "sched.buckets: column 3: tp size 3 is not one of 1, 2, 4, 8");
    /* whatever the config check accepts, the commands accept: the planner's and the engine's
     * own rules are checked here too */
    expect_error("{\"plan\": {\"tp_pattern\": \"1,16\"}}", NULL, 0, 1, 11,
                 "plan.tp_pattern: column 3: expected a TP size: 1, 2, 4 or 8");
    expect_error("{\"plan\": {\"tp_pattern\": \"1,1,2\"}}", NULL, 0, 1, 11,
                 "plan.tp_pattern: its instances take 4 GPUs, a node has 8 "
                 "(cluster.gpus_per_node)");
    /* a rollout TP size splits the model's query heads evenly (qwen2.5-7b has 28) */
    expect_error("{\"model\": {\"name\": \"qwen2.5-7b\"}, \"plan\": {\"tp_pattern\": \"8\"}}", NULL,
                 0, 1, 44,
                 "plan.tp_pattern: TP 8 does not divide the 28 attention heads of qwen2.5-7b, "
                 "which takes TP 1, 2, 4");
    expect_error("{\"model\": {\"name\": \"qwen2.5-7b\"}, \"sched\": {\"buckets\": \"tp8:9\"}}",
                 NULL, 0, 1, 45,
                 "sched.buckets: TP 8 does not divide the 28 attention heads of qwen2.5-7b, "
                 "which takes TP 1, 2, 4");
    expect_error("{\"model\": {\"name\": \"qwen2.5-7b\"}, \"plan\": {\"min_tp_sizes\": 4}}", NULL,
                 0, 1, 44,
                 "plan.min_tp_sizes: 4 TP sizes, but qwen2.5-7b takes 3 on a node of 8 GPUs: TP "
                 "1, 2, 4 (a TP size divides its 28 attention heads)");
    expect_error("{\"sim\": {\"max_batched_tokens\": 255}}", NULL, 0, 1, 10,
                 "sim.max_batched_tokens: 255 is below sim.max_seqs (256): an iteration computes "
                 "at least one token for every running sequence");
    expect_error("{\"sim\": {\"timeline_steps\": \"3\"}}", NULL, 0, 1, 10,
                 "sim.timeline_steps: expected A:B, the first and last step (numbered from 0, at "
                 "most 10000000, without leading zeros), not '3'");
    expect_error("{\"sim\": {\"timeline_steps\": \"4:2\"}}", NULL, 0, 1, 10,
                 "sim.timeline_steps: '4:2' ends before it starts");
    expect_error("{\"sim\": {\"timeline_steps\": \"-1:2\"}}", NULL, 0, 1, 10,
                 "sim.timeline_steps: expected A:B, the first and last step (numbered from 0, at "
                 "most 10000000, without leading zeros), not '-1:2'");
    /* 01:2 would be 1:2's run under another config digest */
    expect_error("{\"sim\": {\"timeline_steps\": \"01:2\"}}", NULL, 0, 1, 10,
                 "sim.timeline_steps: expected A:B, the first and last step (numbered from 0, at "
                 "most 10000000, without leading zeros), not '01:2'");
    expect_error("{\"schema\": \"libra.plan/1\"}", NULL, 0, 1, 2,
                 "schema: must be \"libra.config/1\"");
    expect_error("{\"seed\": 7}", NULL, 0, 1, 2,
                 "seed: differs from sim.seed (1); the top-level seed is the output envelope's "
                 "copy, set sim.seed");
    expect_error("{\"model\": {\"name\": \"" /* 48 bytes: one too many */
                 "abcdefghijabcdefghijabcdefghijabcdefghijabcdefgh\"}}",
                 NULL, 0, 1, 12, "model.name: must be shorter than 48 bytes");
    /* jansson places a duplicate key at its closing quote */
    expect_error("{\"cluster\": {\"gpus\": 8, \"gpus\": 9}}", NULL, 0, 1, 30,
                 "duplicate object key near '\"gpus\"'");
}

static void test_flag_errors(void **state)
{
    struct spec_config_override bad[] = {
        {"cluster.gpus", "0", "--gpus"},
        {"cluster.gpus", "12x", "--gpus"},
        {"cluster.gpu", "8", "--set cluster.gpu"},
        {"model.name", "qwen9", "--model"},
        {"ehp.enabled", "yes", "--set ehp.enabled"},
        {"plan.time_limit_s", "inf", "--set plan.time_limit_s"},
        {"plan.replan_horizon_steps", "0", "--set plan.replan_horizon_steps"},
    };
    static const char *const want[] = {
        "--gpus: must be in 1..65536",
        "--gpus: must be an integer, written as JSON writes one",
        "--set cluster.gpu: unknown key 'cluster.gpu' (did you mean 'cluster.gpus'?)",
        ("--model: unknown model preset 'qwen9' (known: qwen2.5-7b, qwen2.5-14b, qwen2.5-32b, "
         "qwen3-4b, qwen3-8b, qwen3-14b, qwen3-32b, qwen3-30b-a3b, qwen3-235b-a22b)"),
        "--set ehp.enabled: must be true or false",
        "--set plan.time_limit_s: must be a finite number, written as JSON writes one",
        "--set plan.replan_horizon_steps: must be in 1..1000000",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_error("{\"cluster\": {\"gpus\": 8}, \"model\": {\"name\": \"qwen3-8b\"}}", &bad[i],
                     1, 0, 0, want[i]);
}

/*
 * A flag may give a key a value other than its default only for a command that reads it; the
 * file's values are taken whatever the command (one experiment file serves them all).
 */
/* A rule between two keys blames the one the user set, the later-applied of the two, where
 * they set it. */
static void test_cross_key_rules_blame_the_value_set(void **state)
{
    expect_error("{\"sim\": {\"max_seqs\": 9000}}", NULL, 0, 1, 10,
                 "sim.max_seqs: sim.max_batched_tokens: 8192 is below sim.max_seqs (9000): an "
                 "iteration computes at least one token for every running sequence");
    struct spec_config_override tokens = {"sim.max_batched_tokens", "100",
                                          "--set sim.max_batched_tokens"};
    expect_error("{\"sim\": {\"max_seqs\": 200}}", &tokens, 1, 0, 0,
                 "--set sim.max_batched_tokens: 100 is below sim.max_seqs (200): an iteration "
                 "computes at least one token for every running sequence");
    expect_error("{\"rl\": {\"max_staleness\": 0}}", NULL, 0, 1, 9,
                 "rl.max_staleness: 0 is below rl.sync_interval - 1 = 4: the batches trained "
                 "between two weight updates start on the weights of the first, so the async "
                 "mode would wait forever");
    struct spec_config_override interval = {"rl.sync_interval", "9", "--set rl.sync_interval"};
    expect_error(NULL, &interval, 1, 0, 0,
                 "--set rl.sync_interval: rl.max_staleness: 4 is below rl.sync_interval - 1 = 8: "
                 "the batches trained between two weight updates start on the weights of the "
                 "first, so the async mode would wait forever");
}

static void test_flags_only_for_readers(void **state)
{
    struct libra_config c;
    struct libra_error err = {0};
    struct spec_config_override colocated = {"plan.mode", "colocated", "--mode"};
    assert_int_equal(resolve_for(SPEC_READ_SIM, &c, NULL, &colocated, 1, NULL, 0, &err),
                     LIBRA_EINVAL);
    assert_string_equal(err.msg, "--mode: plan.mode is not used by libra sim (it is read by libra "
                                 "plan, libra route eval and libra serve)");
    assert_int_equal(resolve_for(SPEC_READ_PLAN, &c, NULL, &colocated, 1, NULL, 0, &err), 0);
    assert_int_equal(c.plan.mode, SPEC_PLAN_COLOCATED);
    /* the file's value is taken; a flag that gives the default back asks nothing of sim */
    const char *file = "{\"plan\": {\"mode\": \"colocated\"}}";
    struct spec_config_override async = {"plan.mode", "async", "--set plan.mode"};
    assert_int_equal(resolve_for(SPEC_READ_SIM, &c, file, NULL, 0, NULL, 0, &err), 0);
    assert_int_equal(c.plan.mode, SPEC_PLAN_COLOCATED);
    assert_int_equal(resolve_for(SPEC_READ_SIM, &c, file, &async, 1, NULL, 0, &err), 0);
    /* a key's default includes its preset's value; the last flag setting a key is named */
    struct spec_config_override values[] = {
        {"rl.samples", "8", "workload preset 'w'"},
        {"rl.batch_trajectories", "64", "workload preset 'w'"},
    };
    struct spec_config_override samples[] = {
        {"rl.samples", "4", "--samples"},
        {"rl.samples", "8", "--set rl.samples"},
        {"sim.trace_step", "3", "--set sim.trace_step"},
    };
    assert_int_equal(resolve_for(SPEC_READ_EMU, &c, NULL, samples, 2, values, 2, &err), 0);
    assert_int_equal(resolve_for(SPEC_READ_EMU, &c, NULL, samples, 1, values, 2, &err),
                     LIBRA_EINVAL);
    assert_string_equal(err.msg, "--samples: rl.samples is not used by libra emu (it is read by "
                                 "libra plan, libra route eval, libra sim, libra load and libra "
                                 "serve)");
    assert_int_equal(resolve_for(SPEC_READ_PLAN, &c, NULL, samples, 3, values, 2, &err),
                     LIBRA_EINVAL);
    assert_string_equal(err.msg, "--set sim.trace_step: sim.trace_step is not used by libra plan "
                                 "(it is read by libra sim)");
}

/* A key whose mechanism another setting switches on is refused while it is off, except by a
 * command whose own flag is its switch (the gateway's pool signal: --pool-steer). */
static void test_a_switch_of_another_command_is_its_own(void **state)
{
    struct libra_config c;
    struct libra_error err = {0};
    struct spec_config_override rule = {"ehp.signal", "reference", "--set ehp.signal"};
    assert_int_equal(resolve_for(SPEC_READ_SIM, &c, NULL, &rule, 1, NULL, 0, &err), LIBRA_EINVAL);
    assert_string_equal(err.msg, "--set ehp.signal: ehp.signal=\"reference\" has no effect "
                                 "without ehp.enabled");
    assert_int_equal(resolve_for(SPEC_READ_SERVE, &c, NULL, &rule, 1, NULL, 0, &err), 0);
    assert_int_equal(c.ehp.signal, SPEC_EHP_REFERENCE);
    (void)state;
}

/* Every key is read by some command; every command reads the presets; docs/cli.md carries the
 * generated table of who reads what. */
static void test_readers(void **state)
{
    size_t n;
    const struct spec_field *f = spec_config_fields(&n);
    for (size_t i = 0; i < n; i++) {
        if (f[i].readers == 0)
            fail_msg("%s: read by no command", f[i].key);
        assert_int_equal(f[i].readers >> SPEC_READERS, 0);
    }
    const struct spec_field *hw = spec_field_find(f, n, "cluster.hardware");
    assert_int_equal(hw->readers, (1u << SPEC_READERS) - 1);
    assert_string_equal(spec_reader_command(SPEC_READ_ROUTE), "route eval");
    assert_null(spec_reader_command(SPEC_READ_SIM | SPEC_READ_PLAN));
    char *table = spec_config_readers_markdown();
    char *cli = test_read_file(test_source_path("docs/cli.md"), NULL);
    char *doc = spec_config_doc_markdown();
    bool stale = !strstr(cli, table);
    assert_non_null(strstr(doc, table));
    assert_non_null(strstr(table, "| `libra sim` | all | all | all | all | all but `mode`, "
                                  "`time_limit_s` | all | all | all |\n"));
    free(doc);
    free(cli);
    free(table);
    if (stale)
        fail_msg("docs/cli.md: the table of the keys each command reads is stale: copy it from "
                 "docs/config.md");
}

/* Values of every type given as flags. */
static void test_flag_types(void **state)
{
    struct spec_config_override flags[] = {
        {"plan.homogeneous_rollout", "true", "--set plan.homogeneous_rollout"},
        {"plan.time_limit_s", "2.5", "--set plan.time_limit_s"},
        {"sim.modes", "libra,async", "--set sim.modes"},
        {"rl.transport", "nccl", "--set rl.transport"},
        {"sim.seed", "9007199254740991", "--seed"},
        {"model.name", "QWEN3-8B", "--model"},
        {"sim.timeline_steps", "0:10000000", "--timeline"},
    };
    struct libra_config c = ok(NULL, flags, sizeof flags / sizeof *flags);
    int64_t first, last;
    assert_int_equal(spec_timeline_steps_parse(c.sim.timeline_steps, &first, &last, NULL), 0);
    assert_true(first == 0 && last == 10000000);
    assert_int_equal(spec_timeline_steps_parse("", &first, &last, NULL), 0);
    assert_true(first == 0 && last == -1);                                      /* none */
    assert_int_equal(spec_timeline_steps_parse("0:0", &first, &last, NULL), 0); /* a lone 0 */
    assert_true(first == 0 && last == 0);
    assert_int_not_equal(spec_timeline_steps_parse("1:02", &first, &last, NULL), 0);
    assert_true(c.plan.homogeneous_rollout);
    assert_true(c.plan.time_limit_s == 2.5);
    assert_int_equal(c.sim.modes, SPEC_SIM_LIBRA | SPEC_SIM_ASYNC);
    assert_int_equal(c.rl.transport, SPEC_TRANSPORT_NCCL);
    assert_int_equal(c.sim.seed, 9007199254740991LL);
    assert_string_equal(c.model.name, "qwen3-8b"); /* canonical name */
}

static void test_digest(void **state)
{
    struct libra_config a = ok(NULL, NULL, 0);
    struct libra_config b = ok("{\"model\": {\"name\": \"QWEN3-14B\"}, "
                               "\"cluster\": {\"gpus\": 48, \"hardware\": \"a800-80g\"}}",
                               NULL, 0);
    char ha[17], hb[17];
    spec_config_digest_hex(&a, ha);
    spec_config_digest_hex(&b, hb);
    assert_int_equal(strlen(ha), 16);
    assert_int_equal(strspn(ha, "0123456789abcdef"), 16);
    assert_string_equal(ha, hb); /* same effective config, however written */
    size_t n;
    const struct spec_field *f = spec_config_fields(&n);
    /* changing any single value changes the digest */
    for (size_t i = 0; i < n; i++) {
        struct libra_config c = a;
        char *p = (char *)&c + f[i].offset;
        switch (f[i].type) {
        case SPEC_INT:
        case SPEC_ENUM:
        case SPEC_SET:
            p[0] ^= 1;
            break;
        case SPEC_DOUBLE:
            *(double *)p += 1;
            break;
        case SPEC_BOOL:
            *(bool *)p = !*(bool *)p;
            break;
        case SPEC_STRING:
        case SPEC_LIST:
            strcat(p, "x");
            break;
        }
        if (spec_config_digest(&c) == spec_config_digest(&a))
            fail_msg("changing %s leaves the digest unchanged", f[i].key);
    }
    /* and so do the presets' values, which api/ digests where it resolves them */
    struct libra_config c = a;
    c.presets_digest ^= 1;
    assert_true(spec_config_digest(&c) != spec_config_digest(&a));
    /* the envelope carries it */
    json_t *env = spec_config_envelope("libra.test/1", &a);
    assert_string_equal(json_string_value(json_object_get(env, "config_digest")), ha);
    assert_string_equal(json_string_value(json_object_get(env, "schema")), "libra.test/1");
    assert_int_equal(json_integer_value(json_object_get(env, "seed")), 1);
    assert_non_null(json_string_value(json_object_get(env, "libra_version")));
    json_decref(env);
}

/* `config show` output (envelope + sections) is itself a config giving the same config. */
static void test_show_output_round_trips(void **state)
{
    struct spec_config_override flags[] = {
        {"cluster.gpus", "16", "--gpus"},
        {"sim.seed", "42", "--seed"},
        {"sched.buckets", "tp1:4000,tp2:12000", "--set sched.buckets"},
    };
    struct libra_config a = ok(NULL, flags, 3);
    json_t *doc = spec_config_envelope(SPEC_CONFIG_SCHEMA, &a);
    json_t *sections = spec_config_to_json(&a);
    json_object_update(doc, sections);
    char *text = ujson_dump(doc, true);
    struct libra_config b = ok(text, NULL, 0);
    assert_int_equal(spec_config_digest(&a), spec_config_digest(&b));
    assert_memory_equal(&a, &b, sizeof a);
    free(text);
    json_decref(sections);
    json_decref(doc);
}

static void test_examples_default_is_the_default(void **state)
{
    char *text = test_read_file(test_source_path("examples/default.json"), NULL);
    struct libra_config a = ok(NULL, NULL, 0), b = ok(text, NULL, 0);
    assert_memory_equal(&a, &b, sizeof a);
    free(text);
}

static void test_doc_is_generated(void **state)
{
    char *want = spec_config_doc_markdown();
    char *have = test_read_file(test_source_path("docs/config.md"), NULL);
    bool stale = strcmp(want, have) != 0;
    free(have);
    if (stale) {
        free(want);
        fail_msg("docs/config.md is stale: run `libra config doc -o docs/config.md`");
    }
    size_t n;
    const struct spec_field *f = spec_config_fields(&n);
    char *keys = spec_config_keys_text();
    for (size_t i = 0; i < n; i++) {
        char cell[80];
        snprintf(cell, sizeof cell, "| `%s` |", f[i].key);
        assert_non_null(strstr(want, cell));
        assert_non_null(strstr(keys, f[i].key));
    }
    free(keys);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_the_default_experiment),
        cmocka_unit_test(test_defaults_equal_the_table),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_preset_values_layer),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_flag_errors),
        cmocka_unit_test(test_flags_only_for_readers),
        cmocka_unit_test(test_a_switch_of_another_command_is_its_own),
        cmocka_unit_test(test_readers),
        cmocka_unit_test(test_flag_types),
        cmocka_unit_test(test_digest),
        cmocka_unit_test(test_cross_key_rules_blame_the_value_set),
        cmocka_unit_test(test_show_output_round_trips),
        cmocka_unit_test(test_examples_default_is_the_default),
        cmocka_unit_test(test_doc_is_generated),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
