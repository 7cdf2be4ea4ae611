/*
 * Tests of the plan export (src/plan/export*.c) on hand-made placements: which GPUs each engine
 * and each node's share of training get, in instance order with their ports (colocated plans,
 * idle GPUs and partial nodes included); placements that break the placement's contract
 * refused as internal errors; formats refused for plans they cannot express; the memory
 * fraction; the header's command quoted for a shell and kept on its line.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/export.h"
#include "util/alloc.h"

#define NODE_GPUS 4

/* A plan on nodes of NODE_GPUS GPUs, its placement written one character per GPU: 't'
 * training, '.' idle, a digit the rollout instance the GPU belongs to (its TP the number of
 * GPUs with that digit). Colocated: every GPU also trains. */
struct fixture {
    struct plan_result r;
    struct plan_gpu gpu[32];
    struct libra_config cfg;
};

static void make(struct fixture *f, const char *roles, bool colocated)
{
    memset(f, 0, sizeof *f);
    spec_config_defaults(&f->cfg);
    struct plan_result *r = &f->r;
    *r = (struct plan_result){
        .feasible = true,
        .colocated = colocated,
        .gpus = (int)strlen(roles),
        .gpus_per_node = NODE_GPUS,
        .gpu = f->gpu,
        .train = {.tp = 1, .pp = 1, .cp = 1, .dp = 1, .budget_tokens = 8192},
        .layout = {.n = 1, .bucket = {{.max_tokens = 1000, .n_tp = 1, .tp = {1}}}},
    };
    for (int g = 0; g < r->gpus; g++) {
        struct plan_gpu *u = &f->gpu[g];
        char c = roles[g];
        bool rollout = c >= '0' && c <= '9';
        *u = (struct plan_gpu){.node = g / NODE_GPUS, .local = g % NODE_GPUS, .instance = -1};
        u->role = c == 't' || colocated ? PLAN_ROLE_TRAIN
                  : rollout             ? PLAN_ROLE_ROLLOUT
                                        : PLAN_ROLE_IDLE;
        r->n_train += u->role == PLAN_ROLE_TRAIN;
        if (!rollout)
            continue;
        u->instance = c - '0';
        for (const char *p = roles; *p; p++)
            u->instance_tp += *p == c;
        if (strchr(roles, c) == roles + g) { /* the instance's first GPU */
            r->instances++;
            r->counts[__builtin_ctz((unsigned)u->instance_tp)]++;
        }
        r->n_rollout++;
    }
}

/* Asserts group g is on node with the GPU list want ("0,1"). */
static void assert_group(const struct plan_export_group *g, int node, const char *want)
{
    char have[64] = "";
    for (int i = 0; i < g->n_gpus; i++)
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%d", i ? "," : "", g->gpu[i]);
    assert_int_equal(g->node, node);
    assert_string_equal(have, want);
}

static void test_engines_in_instance_order_then_training(void **state)
{
    (void)state;
    struct fixture f;
    make(&f,
         "ttt2"
         "0011"
         "33.."
         "t",
         false); /* a partial fourth node trains */
    struct plan_export_layout l;
    struct libra_error err = {0};
    assert_int_equal(plan_export_layout(&f.r, &l, &err), 0);
    assert_int_equal(l.nodes, 4);
    assert_int_equal(l.n_engines, 4);
    assert_int_equal(l.n_train, 2);
    const int node[] = {1, 1, 0, 2}, tp[] = {2, 2, 1, 2};
    const char *gpus[] = {"0,1", "2,3", "3", "0,1"};
    for (int i = 0; i < l.n_engines; i++) {
        assert_group(&l.group[i], node[i], gpus[i]);
        assert_int_equal(l.group[i].instance, i);
        assert_int_equal(l.group[i].tp, tp[i]);
        assert_int_equal(l.group[i].port, PLAN_EXPORT_ENGINE_PORT + i);
    }
    for (int k = 0; k < l.n_train; k++) {
        const struct plan_export_group *g = &l.group[l.n_engines + k];
        assert_group(g, k == 0 ? 0 : 3, k == 0 ? "0,1,2" : "0");
        assert_int_equal(g->instance, -1);
        assert_int_equal(g->tp, 0);
        assert_int_equal(g->port, 0);
    }
    plan_export_layout_free(&l);
    plan_export_layout_free(&l); /* freed twice: a zeroed layout is fine */
}

static void test_colocated_groups_share_gpus(void **state)
{
    (void)state;
    struct fixture f;
    make(&f,
         "0000"
         "1122",
         true);
    struct plan_export_layout l;
    struct libra_error err = {0};
    assert_int_equal(plan_export_layout(&f.r, &l, &err), 0);
    assert_int_equal(l.n_engines, 3);
    assert_int_equal(l.n_train, 2);
    assert_group(&l.group[0], 0, "0,1,2,3");
    assert_group(&l.group[2], 1, "2,3");
    assert_group(&l.group[3], 0, "0,1,2,3");
    assert_group(&l.group[4], 1, "0,1,2,3");
    plan_export_layout_free(&l);
}

/* The placement's contract broken: refused as a bug, naming the instance. */
static void test_broken_placements_are_internal_errors(void **state)
{
    (void)state;
    struct fixture f;
    struct plan_export_layout l;
    struct libra_error err = {0};
    make(&f,
         "tt00"
         "00tt",
         false); /* one TP4 across two nodes */
    assert_int_equal(plan_export_layout(&f.r, &l, &err), LIBRA_EINTERNAL);
    assert_non_null(strstr(err.msg, "instance 0 spans nodes 0 and 1"));
    plan_export_layout_free(&l);
    make(&f,
         "tt00"
         "tttt",
         false);
    f.gpu[3].instance_tp = f.gpu[2].instance_tp = 4; /* two GPUs for TP4 */
    assert_int_equal(plan_export_layout(&f.r, &l, &err), LIBRA_EINTERNAL);
    assert_non_null(strstr(err.msg, "instance 0 has 2 GPUs for TP 4"));
    plan_export_layout_free(&l);
    make(&f,
         "tt00"
         "tttt",
         false);
    f.gpu[3].instance = 5;
    assert_int_equal(plan_export_layout(&f.r, &l, &err), LIBRA_EINTERNAL);
    assert_non_null(strstr(err.msg, "GPU 3 names instance 5 of 1"));
    plan_export_layout_free(&l);
}

static void test_format_names(void **state)
{
    (void)state;
    char list[128] = "";
    for (int i = 0; i < PLAN_EXPORT_FORMATS; i++) {
        enum plan_export_format f;
        const char *name = plan_export_format_name((enum plan_export_format)i);
        assert_int_equal(plan_export_format_parse(name, &f), 0);
        assert_int_equal(f, i);
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", name);
    }
    assert_string_equal(list, PLAN_EXPORT_FORMAT_LIST);
    enum plan_export_format f;
    assert_int_equal(plan_export_format_parse("SGLang", &f), LIBRA_EINVAL);
    assert_int_equal(plan_export_format_parse("", &f), LIBRA_EINVAL);
}

/* The fixtures' model: layers that their pipelines (PP 1) take whole. */
static const struct spec_model model = {.name = "m", .layers = 40};

/* Exports fixture f as format; returns the code, *out the text (NULL on error). */
static int export_as(const struct fixture *f, enum plan_export_format format, char **out,
                     struct libra_error *err)
{
    char *argv[] = {"plan", "--export", (char *)plan_export_format_name(format)};
    struct plan_export_input in = {
        .plan = &f->r, .cfg = &f->cfg, .model = &model, .argc = 3, .argv = argv};
    return plan_export(format, &in, out, err);
}

static void test_formats_refuse_what_they_cannot_express(void **state)
{
    (void)state;
    struct fixture f;
    struct libra_error err = {0};
    char *out = (char *)"unset";
    make(&f,
         "0000"
         "1122",
         true);
    for (int i = 0; i < PLAN_EXPORT_FORMATS; i++) {
        enum plan_export_format format = (enum plan_export_format)i;
        int rc = export_as(&f, format, &out, &err);
        if (format == PLAN_EXPORT_VERL || format == PLAN_EXPORT_MEGATRON) {
            assert_int_equal(rc, 0);
            assert_non_null(out);
            free(out);
            continue;
        }
        assert_int_equal(rc, LIBRA_EINVAL);
        assert_null(out);
        assert_non_null(strstr(err.msg, "a colocated plan runs its engines and training"));
    }
    make(&f,
         "tttt"
         "0011"
         "2",
         false); /* 9 GPUs: not whole nodes of 4 */
    assert_int_equal(export_as(&f, PLAN_EXPORT_SLURM, &out, &err), LIBRA_EINVAL);
    assert_non_null(strstr(err.msg, "9 GPUs are not whole nodes of 4"));
    assert_int_equal(export_as(&f, PLAN_EXPORT_SGLANG, &out, &err), 0);
    free(out);
}

/* A plan of n TP1 engines beside no training, on nodes of NODE_GPUS: gpu owns the GPUs. */
static struct plan_result many_engines(int n, struct plan_gpu **gpu)
{
    *gpu = xcalloc((size_t)n, sizeof **gpu);
    for (int g = 0; g < n; g++)
        (*gpu)[g] = (struct plan_gpu){.node = g / NODE_GPUS,
                                      .local = g % NODE_GPUS,
                                      .role = PLAN_ROLE_ROLLOUT,
                                      .instance = g,
                                      .instance_tp = 1};
    return (struct plan_result){
        .feasible = true,
        .gpus = n,
        .gpus_per_node = NODE_GPUS,
        .gpu = *gpu,
        .n_rollout = n,
        .instances = n,
        .counts = {n},
        .layout = {.n = 1, .bucket = {{.max_tokens = 1000, .n_tp = 1, .tp = {1}}}},
    };
}

/* Engine k listens on 30001 + k: ray, which starts no gateway and so takes more engines than
 * one registers, wrote ports past 65535 for a plan of more than 35,535 engines. */
static void test_engines_past_the_last_port_are_refused(void **state)
{
    (void)state;
    struct libra_config cfg;
    spec_config_defaults(&cfg);
    const int fit = PLAN_EXPORT_PORT_MAX - PLAN_EXPORT_ENGINE_PORT + 1;
    for (int n = fit; n <= fit + 1; n++) {
        struct plan_gpu *gpu;
        struct plan_result r = many_engines(n, &gpu);
        char *argv[] = {"plan", "--export", "ray"};
        struct plan_export_input in = {.plan = &r, .cfg = &cfg, .argc = 3, .argv = argv};
        struct libra_error err = {0};
        char *out = NULL;
        int rc = plan_export(PLAN_EXPORT_RAY, &in, &out, &err);
        if (n == fit) {
            assert_int_equal(rc, 0);
            assert_non_null(strstr(out, "\"port\": 65535"));
            assert_null(strstr(out, "\"port\": 65536"));
        } else {
            assert_int_equal(rc, LIBRA_EINVAL);
            assert_null(out);
            assert_non_null(strstr(err.msg, "35536 rollout engines would listen on ports 30001 "
                                            "to 65536 (instance k on 30001 + k), past 65535"));
        }
        free(out);
        free(gpu);
    }
}

static void test_memory_fraction_from_the_plan_else_the_default(void **state)
{
    (void)state;
    struct fixture f;
    struct libra_error err = {0};
    char *out;
    make(&f,
         "tttt"
         "0011",
         false);
    assert_int_equal(export_as(&f, PLAN_EXPORT_SGLANG, &out, &err), 0);
    assert_non_null(strstr(out, "--tp-size 2 --port 30001 --host 0.0.0.0 "
                                "--mem-fraction-static 0.9 &\n"));
    free(out);
    f.r.rollout_mem_util = 0.85;
    assert_int_equal(export_as(&f, PLAN_EXPORT_VLLM, &out, &err), 0);
    assert_non_null(strstr(out, "CUDA_VISIBLE_DEVICES=2,3 vllm serve \"$MODEL\" "
                                "--tensor-parallel-size 2 --port 30002 --host 0.0.0.0 "
                                "--gpu-memory-utilization 0.85 &\n"));
    free(out);
}

static void test_header_names_the_command_on_its_line(void **state)
{
    (void)state;
    struct fixture f;
    make(&f,
         "tttt"
         "0011",
         false);
    char *argv[] = {"plan", "my config.json", "--set", "a=it's", "x\ny", "--export", "verl"};
    struct plan_export_input in = {
        .plan = &f.r, .cfg = &f.cfg, .model = &model, .argc = 7, .argv = argv};
    struct libra_error err = {0};
    char *out;
    assert_int_equal(plan_export(PLAN_EXPORT_VERL, &in, &out, &err), 0);
    const char *want = "\n# made by: libra plan 'my config.json' --set 'a=it'\\''s' 'x y' "
                       "--export verl\n# plan: ";
    if (!strstr(out, want))
        fail_msg("no '%s' in:\n%s", want, out);
    for (const char *line = out; *line; line = strchr(line, '\n') + 1) /* '#' or key=value */
        assert_true(*line == '#' || strchr(line, '=') < strchr(line, '\n'));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engines_in_instance_order_then_training),
        cmocka_unit_test(test_colocated_groups_share_gpus),
        cmocka_unit_test(test_broken_placements_are_internal_errors),
        cmocka_unit_test(test_format_names),
        cmocka_unit_test(test_formats_refuse_what_they_cannot_express),
        cmocka_unit_test(test_engines_past_the_last_port_are_refused),
        cmocka_unit_test(test_memory_fraction_from_the_plan_else_the_default),
        cmocka_unit_test(test_header_names_the_command_on_its_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
