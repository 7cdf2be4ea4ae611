/*
 * Fuzz harness for the plan file of `libra serve --plan FILE` (plan_fleet_from_json,
 * src/plan/fleet.c, and the bucket layout it reads with spec_bucket_from_json,
 * src/spec/bucket.c). The input is the file. Besides not crashing or leaking:
 *
 *   - a refused document has a message, the file's name, and a position (line and column >= 1,
 *     within the text) of the member at fault, which is in the document;
 *   - an accepted one has a step > 0, GPUs in 0..2^20, instance counts in
 *     0..SPEC_BUCKET_INSTANCES_MAX, a valid layout that serves every TP size with instances, and
 *     matches its own instances;
 *   - the fleet written back as a plan document reads back as the same fleet.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "plan/fleet.h"
#include "util/json.h"

static void check_refusal(const struct libra_error *err, const char *text, size_t size)
{
    int lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    fuzz_require(err->msg[0] != '\0', "a refusal without a message");
    fuzz_require(strcmp(err->file, "plan.json") == 0, "a refusal not naming the file");
    fuzz_require(err->line >= 1 && err->line <= lines && err->col >= 1,
                 "a refusal without a position in the file");
}

static void check_fleet(const struct plan_fleet *f)
{
    fuzz_require(isfinite(f->step_s) && f->step_s > 0, "a step that is not > 0");
    fuzz_require(f->rollout_gpus >= 0 && f->rollout_gpus <= 1 << 20, "GPUs out of range");
    fuzz_require(spec_bucket_validate(&f->layout, NULL) == 0, "an invalid layout");
    for (int t = 0; t < PLAN_NTP; t++) {
        fuzz_require(f->counts[t] >= 0 && f->counts[t] <= SPEC_BUCKET_INSTANCES_MAX,
                     "an instance count out of range");
        bool served = false;
        for (int b = 0; b < f->layout.n; b++)
            served |= spec_bucket_has_tp(&f->layout.bucket[b], 1 << t);
        fuzz_require(!f->counts[t] || served, "instances of a TP size no bucket serves");
    }
    fuzz_require(plan_fleet_matches(f, f->counts), "a fleet that does not match its own instances");
}

/* Same buckets, TP sizes and instance counts. */
static bool same_layout(const struct spec_bucket_layout *a, const struct spec_bucket_layout *b)
{
    if (!plan_layout_same(a, b))
        return false;
    for (int i = 0; i < a->n; i++)
        for (int k = 0; k < a->bucket[i].n_tp; k++)
            if (a->bucket[i].instances[k] != b->bucket[i].instances[k])
                return false;
    return true;
}

/* f as a plan document, read back. */
static void round_trip(const struct plan_fleet *f)
{
    json_t *inst = json_object();
    for (int t = 0; t < PLAN_NTP; t++) {
        char key[8];
        snprintf(key, sizeof key, "tp%d", 1 << t);
        json_object_set_new(inst, key, json_integer(f->counts[t]));
    }
    json_t *doc =
        json_pack("{s:s, s:b, s:{s:o}, s:{s:i, s:o, s:o}}", "schema", PLAN_SCHEMA, "feasible", 1,
                  "objective", "step_s", ujson_real(f->step_s), "rollout", "gpus", f->rollout_gpus,
                  "instances", inst, "buckets", spec_bucket_to_json(&f->layout));
    fuzz_require(doc != NULL, "the fleet cannot be written as a document");
    char *text = ujson_dump(doc, true);
    struct ujson_doc back;
    struct libra_error err;
    struct plan_fleet g;
    fuzz_require(ujson_doc_parse(&back, "back.json", text, strlen(text), &err) == 0,
                 "the written plan is not JSON");
    fuzz_require(plan_fleet_from_json(&g, &back, &err) == 0, "the written plan is refused");
    fuzz_require(memcmp(f->counts, g.counts, sizeof f->counts) == 0 &&
                     f->rollout_gpus == g.rollout_gpus && f->step_s == g.step_s &&
                     same_layout(&f->layout, &g.layout),
                 "the written plan reads back as another fleet");
    ujson_doc_free(&back);
    free(text);
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct ujson_doc doc;
    struct libra_error err;
    memset(&err, 0, sizeof err);
    if (ujson_doc_parse(&doc, "plan.json", text, size, &err) != 0)
        return 0; /* the JSON reader's own refusals: fuzz_json */
    struct plan_fleet f;
    memset(&err, 0, sizeof err);
    if (plan_fleet_from_json(&f, &doc, &err) == 0) {
        check_fleet(&f);
        round_trip(&f);
    } else {
        check_refusal(&err, text, size);
    }
    ujson_doc_free(&doc);
    return 0;
}
