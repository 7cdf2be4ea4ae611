/*
 * Fuzz harness for workload preset files (workload/preset.h) and the generator behind them.
 * Arbitrary bytes are added to the built-in presets as a user file. Aborts when:
 *
 *   - a rejected file has no position or message, or changed the registry;
 *   - an accepted preset does not read back identically from workload_preset_to_json;
 *   - a trajectory generated from an accepted preset breaks the trace rules
 *     (trace_check_traj) or the preset's caps on turns, tokens and context.
 *
 * Generating from accepted presets puts extreme but valid parameters (huge medians, tiny
 * timeouts, a pool of one prompt) through the sanitizers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "util/json.h"
#include "workload/workload.h"

static char *dump(const struct workload_preset *w)
{
    json_t *j = workload_preset_to_json(w);
    char *s = ujson_dump(j, false);
    json_decref(j);
    return s;
}

static void check_round_trip(const struct workload_preset *w)
{
    char *one = dump(w);
    size_t len = strlen(one) + 32;
    char *file = malloc(len);
    snprintf(file, len, "{\"workloads\":[%s]}", one);
    struct workload_presets q = {0};
    struct libra_error err;
    fuzz_require(workload_presets_add_text(&q, "rt", file, strlen(file), &err) == 0,
                 "printed preset does not parse");
    char *two = dump(&q.items[0]);
    fuzz_require(strcmp(one, two) == 0, "printed preset reads back differently");
    free(one);
    free(two);
    free(file);
    workload_presets_free(&q);
}

static void check_generation(const struct workload_preset *w)
{
    struct workload_gen g;
    workload_gen_init(&g, w, 1);
    struct arena a;
    arena_init(&a, 0);
    for (int64_t i = 0; i < 8; i++) {
        int64_t p = workload_prompt_for(&g, i, i % w->prompts);
        fuzz_require(p >= 0 && p < w->prompts, "prompt outside the pool");
        struct trace_traj t;
        workload_gen_traj(&g, p, i, i, &t, &a);
        struct libra_error err;
        fuzz_require(trace_check_traj(&t, 0, &err) == 0, "generated record breaks the trace rules");
        fuzz_require(t.n_turns >= 1 && t.n_turns <= (size_t)w->max_turns, "turn cap broken");
        int64_t gen = 0;
        for (size_t k = 0; k < t.n_turns; k++) {
            gen += t.turns[k].generated_tokens;
            fuzz_require(t.turns[k].prompt_tokens + t.turns[k].generated_tokens <=
                             w->context_tokens,
                         "context cap broken");
        }
        fuzz_require(gen <= w->max_generated_tokens, "token cap broken");
        arena_reset(&a);
    }
    arena_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct workload_presets p;
    struct libra_error err;
    fuzz_require(workload_presets_init(&p, &err) == 0, "built-in presets do not load");
    size_t before = p.n;
    struct workload_preset *snapshot = malloc(before * sizeof *snapshot);
    memcpy(snapshot, p.items, before * sizeof *snapshot);
    if (workload_presets_add_text(&p, "fuzz", (const char *)data, size, &err) != 0) {
        fuzz_require(strcmp(err.file, "fuzz") == 0 && err.msg[0], "error without file or message");
        fuzz_require(p.n == before && memcmp(p.items, snapshot, before * sizeof *snapshot) == 0,
                     "a rejected file changed the registry");
    } else {
        for (size_t i = 0; i < p.n; i++) {
            if (strcmp(p.items[i].origin, "fuzz") != 0)
                continue;
            check_round_trip(&p.items[i]);
            check_generation(&p.items[i]);
        }
    }
    free(snapshot);
    workload_presets_free(&p);
    return 0;
}
