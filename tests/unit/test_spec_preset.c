/*
 * Tests of the preset registry (spec/preset.h): the built-in presets against calibration.md,
 * parameter counts derived from shapes against the sheet's stated totals, user files that add
 * and override, and every class of bad input reported at the right file:line:col.
 */
#include <stdlib.h>
#include <string.h>

#include "spec/preset.h"
#include "testutil.h"
#include "util/embed.h"
#include "util/error.h"

static struct spec_presets builtin(void)
{
    struct spec_presets p;
    struct libra_error err = {0};
    if (spec_presets_init(&p, &err) != 0) {
        print_error("%s:%d:%d: %s\n", err.file, err.line, err.col, err.msg);
        fail();
    }
    return p;
}

static void test_builtin_names(void **state)
{
    static const char *const hardware[] = {"a100-80g", "a800-80g", "h100-sxm",
                                           "h800",     "h20",      "h200"};
    static const char *const models[] = {"qwen2.5-7b", "qwen2.5-14b",   "qwen2.5-32b",
                                         "qwen3-4b",   "qwen3-8b",      "qwen3-14b",
                                         "qwen3-32b",  "qwen3-30b-a3b", "qwen3-235b-a22b"};
    struct spec_presets p = builtin();
    assert_int_equal(p.n_hardware, 6);
    assert_int_equal(p.n_models, 9);
    for (size_t i = 0; i < 6; i++) {
        const struct spec_hardware *h = spec_hardware_find(&p, hardware[i]);
        assert_non_null(h);
        assert_string_equal(h->origin, "builtin");
        assert_true(strlen(h->source) > 0);
    }
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        const struct spec_model *m = spec_model_find(&p, models[i]);
        assert_non_null(m);
        assert_string_equal(m->origin, "builtin");
        assert_true(strlen(m->source) > 0);
    }
    assert_ptr_equal(spec_hardware_find(&p, "A800-80G"), spec_hardware_find(&p, "a800-80g"));
    assert_null(spec_hardware_find(&p, "a800"));
    spec_presets_free(&p);
}

/* Every built-in preset states its confidence and source in the file, not by default. */
static void test_builtin_files_state_provenance(void **state)
{
    int checked = 0;
    for (const struct embedded_file *f = embedded_files; f->name; f++) {
        json_t *root = json_loadb(f->data, f->len, 0, NULL);
        assert_non_null(root);
        static const char *const kinds[] = {"hardware", "models"};
        for (size_t k = 0; k < 2; k++) {
            size_t i;
            json_t *e;
            json_array_foreach(json_object_get(root, kinds[k]), i, e)
            {
                assert_non_null(json_string_value(json_object_get(e, "confidence")));
                assert_non_null(json_string_value(json_object_get(e, "source")));
                assert_non_null(json_object_get(e, "assumed"));
                checked++;
            }
        }
        json_decref(root);
    }
    assert_int_equal(checked, 15);
}

/* calibration.md §3.1, §3.2, §6 for A800, the default cluster's GPU. */
static void test_a800_matches_the_sheet(void **state)
{
    struct spec_presets p = builtin();
    const struct spec_hardware *h = spec_hardware_find(&p, "a800-80g");
    assert_close(h->bf16_flops_per_s, 312e12, 0);
    assert_close(h->hbm_bytes, 81234.0 * 1048576, 0); /* the CUDA total, not 80e9 */
    assert_close(h->hbm_bw_bytes_per_s, 2.039e12, 0);
    assert_close(h->nvlink_bw_bytes_per_s, 400e9, 0);
    assert_close(h->allreduce_bus_bw_bytes_per_s, 150e9, 0);
    assert_close(h->allreduce_latency_s, 30e-6, 0);
    assert_close(h->inter_node_bw_bytes_per_s, 100e9 / 8, 0);
    assert_int_equal(h->gpus_per_node, 8);
    assert_string_equal(h->assumed, "");
    spec_presets_free(&p);
}

/* Every built-in GPU states where its capacity comes from, and the capacity is what a device
 * reports: below the nameplate's GiB (the runtime keeps some) or, when unverified, exactly it. */
static void test_builtin_capacity_has_a_source(void **state)
{
    static const struct {
        const char *name;
        double nameplate_gib;
    } gpus[] = {{"a100-80g", 80}, {"a800-80g", 80}, {"h100-sxm", 80},
                {"h800", 80},     {"h20", 96},      {"h200", 141}};
    struct spec_presets p = builtin();
    for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
        const struct spec_hardware *h = spec_hardware_find(&p, gpus[i].name);
        double nameplate = gpus[i].nameplate_gib * 1073741824.0;
        assert_non_null(h);
        assert_true(h->hbm_bytes > 0.98 * nameplate && h->hbm_bytes <= nameplate);
        assert_true(h->hbm_bytes > gpus[i].nameplate_gib * 1e9); /* more than decimal GB */
        assert_string_not_equal(h->hbm_source, "not given");
        if (h->hbm_bytes == nameplate)
            assert_non_null(strstr(h->hbm_source, "not verified"));
        else
            assert_non_null(strstr(h->hbm_source, "MiB"));
    }
    spec_presets_free(&p);
}

/* §2.2 says to assume H20/H200 interconnect values; the presets must say so. */
static void test_assumed_interconnect_is_marked(void **state)
{
    struct spec_presets p = builtin();
    static const char *const gpus[] = {"h20", "h200"};
    for (size_t i = 0; i < 2; i++) {
        const struct spec_hardware *h = spec_hardware_find(&p, gpus[i]);
        assert_non_null(strstr(h->assumed, "allreduce_bus_bw_bytes_per_s"));
        assert_non_null(strstr(h->assumed, "allreduce_latency_s"));
        assert_non_null(strstr(h->assumed, "inter_node_bw_bytes_per_s"));
        assert_null(strstr(h->assumed, "hbm"));
    }
    spec_presets_free(&p);
}

/*
 * Parameter counts derived from the shapes against the counts calibration.md states. The
 * sheet's own derived counts have 3-4 significant digits (7.62 B): within 0.5%. Model-card
 * counts with 2 significant digits (4.0 B, 3.3 B active) are rounded to 0.05-0.1 B: within 2%.
 */
static void test_params_match_the_sheet(void **state)
{
    static const struct {
        const char *name;
        double total, active, rel;
    } sheet[] = {
        {"qwen2.5-7b", 7.62e9, 7.62e9, 0.005},    {"qwen2.5-14b", 14.77e9, 14.77e9, 0.005},
        {"qwen2.5-32b", 32.76e9, 32.76e9, 0.005}, {"qwen3-8b", 8.19e9, 8.19e9, 0.005},
        {"qwen3-14b", 14.77e9, 14.77e9, 0.005},   {"qwen3-32b", 32.76e9, 32.76e9, 0.005},
        {"qwen3-4b", 4.0e9, 4.0e9, 0.02},         {"qwen3-30b-a3b", 30.5e9, 3.3e9, 0.02},
        {"qwen3-235b-a22b", 235e9, 22e9, 0.02}, /* model card: 235 B total, 22 B active */
    };
    struct spec_presets p = builtin();
    for (size_t i = 0; i < sizeof sheet / sizeof *sheet; i++) {
        const struct spec_model *m = spec_model_find(&p, sheet[i].name);
        assert_non_null(m);
        assert_close(m->params_total, sheet[i].total, sheet[i].rel);
        assert_close(m->params_active, sheet[i].active, sheet[i].rel);
    }
    spec_presets_free(&p);
}

/* The differences the shapes encode: Qwen2.5's QKV bias, Qwen3-4B's tied embeddings, MoE. */
static void test_params_formula_terms(void **state)
{
    struct spec_presets p = builtin();
    struct spec_model m = *spec_model_find(&p, "qwen2.5-7b");
    double with_bias, without_bias, active;
    spec_model_params(&m, &with_bias, &active);
    m.qkv_bias = false;
    spec_model_params(&m, &without_bias, &active);
    /* q, k, v biases: (28 + 2 * 4) * 128 per layer, 28 layers */
    assert_close(with_bias - without_bias, 28.0 * (28 + 2 * 4) * 128, 1e-12);

    m = *spec_model_find(&p, "qwen3-4b");
    double tied, untied;
    spec_model_params(&m, &tied, &active);
    m.tied_embeddings = false;
    spec_model_params(&m, &untied, &active);
    assert_close(untied - tied, 151936.0 * 2560, 1e-12);

    const struct spec_model *moe = spec_model_find(&p, "qwen3-30b-a3b");
    assert_true(moe->params_active < moe->params_total / 8);
    assert_non_null(strstr(moe->note, "params_active"));
    assert_non_null(strstr(moe->note, "params_total"));
    spec_presets_free(&p);
}

static const char user_file[] = "{\n"
                                "  \"hardware\": [\n"
                                "    {\"name\": \"a800-80g\", \"bf16_flops_per_s\": 1e12, "
                                "\"hbm_bytes\": 1e9, \"hbm_bw_bytes_per_s\": 1e9,\n"
                                "     \"nvlink_bw_bytes_per_s\": 1e9, "
                                "\"allreduce_bus_bw_bytes_per_s\": 1e9,\n"
                                "     \"allreduce_latency_s\": 1e-5, "
                                "\"inter_node_bw_bytes_per_s\": 1e9, \"gpus_per_node\": 4}\n"
                                "  ],\n"
                                "  \"models\": [\n"
                                "    {\"name\": \"tiny\", \"layers\": 2, \"hidden\": 64, "
                                "\"heads\": 4, \"kv_heads\": 2,\n"
                                "     \"head_dim\": 16, \"ffn\": 128, \"vocab\": 100, "
                                "\"params_total\": 86848}\n"
                                "  ],\n"
                                "  \"workloads\": [{\"whatever\": 1}]\n"
                                "}\n";

static void test_user_file_adds_and_overrides(void **state)
{
    struct spec_presets p = builtin();
    struct libra_error err = {0};
    assert_int_equal(spec_presets_add_text(&p, "mine.json", user_file, strlen(user_file), &err), 0);
    assert_int_equal(p.n_hardware, 6); /* replaced, not added */
    assert_int_equal(p.n_models, 10);
    const struct spec_hardware *h = spec_hardware_find(&p, "a800-80g");
    assert_int_equal(h->gpus_per_node, 4);
    assert_string_equal(h->origin, "mine.json");
    assert_int_equal(h->confidence, SPEC_CONF_LOW);  /* not stated: low */
    assert_string_equal(h->hbm_source, "not given"); /* nor is the capacity's source */
    const struct spec_model *m = spec_model_find(&p, "tiny");
    assert_string_equal(m->origin, "mine.json");
    double total, active;
    spec_model_params(m, &total, &active);
    assert_close(total, 86848, 0);
    assert_close(m->params_total, total, 0);   /* given, and the shape's */
    assert_close(m->params_active, active, 0); /* not given: the shape's */
    spec_presets_free(&p);
}

/* Writing a preset as JSON and reading it back gives the same preset. */
static void test_json_round_trip(void **state)
{
    struct spec_presets p = builtin(), q = {0};
    json_t *file = json_object(), *hw = json_array(), *models = json_array();
    for (size_t i = 0; i < p.n_hardware; i++) {
        json_t *o = spec_hardware_to_json(&p.hardware[i]);
        json_object_del(o, "origin");
        json_array_append_new(hw, o);
    }
    for (size_t i = 0; i < p.n_models; i++) {
        json_t *o = spec_model_to_json(&p.models[i]);
        json_object_del(o, "origin");
        json_array_append_new(models, o);
    }
    json_object_set_new(file, "hardware", hw);
    json_object_set_new(file, "models", models);
    char *text = ujson_dump(file, true);
    struct libra_error err = {0};
    assert_int_equal(spec_presets_add_text(&q, "builtin", text, strlen(text), &err), 0);
    assert_int_equal(q.n_hardware, p.n_hardware);
    assert_int_equal(q.n_models, p.n_models);
    assert_memory_equal(q.hardware, p.hardware, p.n_hardware * sizeof *p.hardware);
    assert_memory_equal(q.models, p.models, p.n_models * sizeof *p.models);
    free(text);
    json_decref(file);
    spec_presets_free(&q);
    spec_presets_free(&p);
}

/* A bad file: the error names file:line:col and a message, and the registry is unchanged. */
static void expect_error(const char *text, int line, int col, const char *msg_part)
{
    struct spec_presets p = builtin();
    struct spec_hardware first = p.hardware[0];
    size_t n_models = p.n_models;
    struct libra_error err = {0};
    assert_int_equal(spec_presets_add_text(&p, "bad.json", text, strlen(text), &err), LIBRA_EINVAL);
    if (err.line != line || err.col != col || !strstr(err.msg, msg_part)) {
        print_error("got %s:%d:%d: %s\nwant line %d col %d with '%s'\n", err.file, err.line,
                    err.col, err.msg, line, col, msg_part);
        fail();
    }
    assert_string_equal(err.file, "bad.json");
    assert_memory_equal(&p.hardware[0], &first, sizeof first);
    assert_int_equal(p.n_models, n_models);
    spec_presets_free(&p);
}

#define MODEL(fields)                                                                              \
    "{\"models\": [\n{\"name\": \"m\", \"layers\": 2, \"hidden\": 64, \"vocab\": 100, " fields "}" \
    "]"                                                                                            \
    "}"
#define HW(fields)                                                                                 \
    "{\"hardware\": [\n{\"name\": \"g\", \"bf16_flops_per_s\": 1e12, \"hbm_bytes\": 1e9, "         \
    "\"hbm_bw_bytes_per_s\": 1e9, \"nvlink_bw_bytes_per_s\": 1e9, \"allreduce_latency_s\": "       \
    "1e-5, \"inter_node_bw_bytes_per_s\": 1e9, \"gpus_per_node\": 8, " fields "}]}"

static void test_errors(void **state)
{
    /* col counts from 1 at the start of the line holding the offending key */
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 4, \"head_dim\": 8, \"ffn\": 8, \"haeds\": 1"),
                 2, 108, "unknown key (did you mean 'heads'?)");
    expect_error(MODEL("\"heads\": \"4\", \"kv_heads\": 4, \"head_dim\": 8, \"ffn\": 8"), 2, 56,
                 "models.0.heads: must be an integer");
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 3, \"head_dim\": 8, \"ffn\": 8"), 2, 68,
                 "kv_heads: 3 does not divide heads (4)");
    expect_error(MODEL("\"heads\": 0, \"kv_heads\": 1, \"head_dim\": 8, \"ffn\": 8"), 2, 56,
                 "heads: must be in 1..1024");
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 1, \"ffn\": 8"), 2, 1,
                 "missing key 'head_dim'");
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 1, \"head_dim\": 8"), 2, 1,
                 "ffn: must be >= 1 for a dense model");
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 1, \"head_dim\": 8, \"experts\": 4, "
                       "\"top_k\": 5, \"expert_ffn\": 8"),
                 2, 112, "top_k: must be in 1..experts (4)");
    /* a field the model's kind leaves to the other is refused, not ignored by the cost model:
     * an MoE model's MLP is its experts, a dense model has none */
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 1, \"head_dim\": 8, \"experts\": 4, "
                       "\"top_k\": 2, \"expert_ffn\": 8, \"ffn\": 16"),
                 2, 141, "models.0.ffn: only dense models (experts 0) set it");
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 1, \"head_dim\": 8, \"ffn\": 8, "
                       "\"expert_ffn\": 8"),
                 2, 108, "models.0.expert_ffn: only MoE models (experts > 0) set it");
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 1, \"head_dim\": 8, \"ffn\": 8, "
                       "\"top_k\": 1"),
                 2, 108, "models.0.top_k: only MoE models (experts > 0) set it");
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 1, \"head_dim\": 8, \"ffn\": 8, "
                       "\"assumed\": [\"hedas\"]"),
                 2, 108, "'hedas' is not a value field");
    /* as a config list, "assumed" names a field once */
    expect_error(HW("\"allreduce_bus_bw_bytes_per_s\": 1e6, \"assumed\": [\"hbm_bytes\", "
                    "\"hbm_bytes\"]"),
                 2, 236, "hardware.0.assumed: 'hbm_bytes' is listed twice");
    expect_error(HW("\"allreduce_bus_bw_bytes_per_s\": -5"), 2, 199,
                 "allreduce_bus_bw_bytes_per_s: must be in 1000000..1e+15");
    expect_error(HW("\"allreduce_bus_bw_bytes_per_s\": 0"), 2, 199, "must be in 1000000..1e+15");
    expect_error(HW("\"allreduce_bus_bw_bytes_per_s\": 1e6, \"confidence\": \"X\""), 2, 236,
                 "must be one of H, M, L");
    /* figures no GPU has, whose costs would not be finite, are refused with the range */
    expect_error("{\"hardware\": [\n{\"name\": \"g\", \"bf16_flops_per_s\": 1e-300}]}", 2, 15,
                 "bf16_flops_per_s: must be in 1000000000..1e+18");
    expect_error("{\"modles\": []}", 1, 2, "unknown preset section (did you mean 'models'?)");
    expect_error("[1]", 1, 1, "must be a JSON object");
    expect_error("{\"models\": {}}", 1, 2, "models: must be an array");
    /* the cost model counts parameters from the shape: a count given is a check of it */
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 1, \"head_dim\": 8, \"ffn\": 8, "
                       "\"params_total\": 1"),
                 2, 108,
                 "models.0.params_total: 1 is not the shape's count, 26432: the cost model");
    expect_error(MODEL("\"heads\": 4, \"kv_heads\": 1, \"head_dim\": 8, \"ffn\": 8, "
                       "\"params_active\": 40000"),
                 2, 108, "models.0.params_active: 40000 is not the shape's count");
    expect_error("{\"models\": [\n{\"name\": \"Big\", \"layers\": 1, \"hidden\": 8, \"heads\": 1, "
                 "\"kv_heads\": 1, \"head_dim\": 8, \"ffn\": 8, \"vocab\": 8}]}",
                 2, 2, "'Big' must be lower-case");
    expect_error("{\"models\": [1, 2}", 1, 17, ""); /* a syntax error, from jansson */
    expect_error("{\"hardware\": [\n1]}", 2, 1, "hardware.0: must be an object");
}

static void test_duplicate_in_one_file(void **state)
{
    static const char twice[] =
        "{\"models\": [\n"
        "{\"name\": \"m\", \"layers\": 1, \"hidden\": 8, \"heads\": 1, \"kv_heads\": 1, "
        "\"head_dim\": 8, \"ffn\": 8, \"vocab\": 8},\n"
        "{\"name\": \"M\", \"layers\": 1, \"hidden\": 8, \"heads\": 1, \"kv_heads\": 1, "
        "\"head_dim\": 8, \"ffn\": 8, \"vocab\": 8}]}";
    /* "M" fails the lower-case rule before it could be a duplicate */
    expect_error(twice, 3, 2, "must be lower-case");
    static const char dup[] =
        "{\"models\": [\n"
        "{\"name\": \"m\", \"layers\": 1, \"hidden\": 8, \"heads\": 1, \"kv_heads\": 1, "
        "\"head_dim\": 8, \"ffn\": 8, \"vocab\": 8},\n"
        "{\"name\": \"m\", \"layers\": 1, \"hidden\": 8, \"heads\": 1, \"kv_heads\": 1, "
        "\"head_dim\": 8, \"ffn\": 8, \"vocab\": 8}]}";
    expect_error(dup, 3, 2,
                 "models.1.name: 'm' is defined twice in this file, first at 2:2 "
                 "(models.0.name)");
    static const char hw_dup[] =
        "{\"hardware\": [\n"
        "{\"name\": \"g\", \"bf16_flops_per_s\": 1e12, \"hbm_bytes\": 1e9, "
        "\"hbm_bw_bytes_per_s\": 1e9, \"nvlink_bw_bytes_per_s\": 1e9, "
        "\"allreduce_bus_bw_bytes_per_s\": 1e9, \"allreduce_latency_s\": 1e-5, "
        "\"inter_node_bw_bytes_per_s\": 1e9, \"gpus_per_node\": 8},\n"
        "\n"
        "  {\"bf16_flops_per_s\": 1e12, \"hbm_bytes\": 1e9, "
        "\"hbm_bw_bytes_per_s\": 1e9, \"nvlink_bw_bytes_per_s\": 1e9, "
        "\"allreduce_bus_bw_bytes_per_s\": 1e9, \"allreduce_latency_s\": 1e-5, "
        "\"inter_node_bw_bytes_per_s\": 1e9, \"gpus_per_node\": 8, "
        "\"name\": \"g\"}]}";
    expect_error(hw_dup, 4, 225,
                 "hardware.1.name: 'g' is defined twice in this file, first at "
                 "2:2 (hardware.0.name)");
}

/* Names are found ignoring case, so a file may not bring one that differs from a built-in one
 * only in case (it would replace it under another spelling): names are lower case. A built-in
 * name in lower case replaces the built-in preset. */
static void test_names_differing_in_case(void **state)
{
    expect_error("{\"hardware\": [\n{\"name\": \"A800-80G\", \"bf16_flops_per_s\": 1e12, "
                 "\"hbm_bytes\": 1e9, \"hbm_bw_bytes_per_s\": 1e9, \"nvlink_bw_bytes_per_s\": 1e9, "
                 "\"allreduce_bus_bw_bytes_per_s\": 1e9, \"allreduce_latency_s\": 1e-5, "
                 "\"inter_node_bw_bytes_per_s\": 1e9, \"gpus_per_node\": 8}]}",
                 2, 2, "hardware.0.name: 'A800-80G' must be lower-case");
    struct spec_presets p = builtin();
    struct libra_error err = {0};
    assert_int_equal(spec_presets_add_text(&p, "mine.json", user_file, strlen(user_file), &err), 0);
    assert_int_equal(p.n_hardware, 6);
    assert_string_equal(spec_hardware_find(&p, "A800-80G")->origin, "mine.json");
    assert_ptr_equal(spec_hardware_find(&p, "A800-80G"), spec_hardware_find(&p, "a800-80g"));
    spec_presets_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_names),
        cmocka_unit_test(test_builtin_files_state_provenance),
        cmocka_unit_test(test_a800_matches_the_sheet),
        cmocka_unit_test(test_builtin_capacity_has_a_source),
        cmocka_unit_test(test_assumed_interconnect_is_marked),
        cmocka_unit_test(test_params_match_the_sheet),
        cmocka_unit_test(test_params_formula_terms),
        cmocka_unit_test(test_user_file_adds_and_overrides),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_duplicate_in_one_file),
        cmocka_unit_test(test_names_differing_in_case),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
