/*
 * The length sample's size, its buffer and a solve on it (sample.h).
 */
#include "plan/sample.h"

size_t plan_sample_size(size_t batch)
{
    size_t batches = (PLAN_SAMPLE_MIN + batch - 1) / batch;
    return (batches < PLAN_SAMPLE_BATCHES_MAX ? batches : PLAN_SAMPLE_BATCHES_MAX) * batch;
}

void plan_lengths_add(struct plan_lengths *l, int64_t prompt_tokens, int64_t generated_tokens,
                      int64_t tool_tokens, int64_t turns, double tool_s, bool filtered)
{
    vec_push(&l->prompt, prompt_tokens > 0 ? prompt_tokens : 1);
    vec_push(&l->generated, generated_tokens > 0 ? generated_tokens : 1);
    vec_push(&l->tool, tool_tokens);
    vec_push(&l->turns, turns);
    vec_push(&l->tool_s, tool_s);
    vec_push(&l->filtered, filtered);
}

struct plan_sample plan_lengths_view(const struct plan_lengths *l)
{
    return (struct plan_sample){l->prompt.n, l->prompt.v, l->generated.v, l->tool.v, l->turns.v};
}

void plan_lengths_free(struct plan_lengths *l)
{
    vec_free(&l->prompt);
    vec_free(&l->generated);
    vec_free(&l->tool);
    vec_free(&l->turns);
    vec_free(&l->tool_s);
    vec_free(&l->filtered);
}

int plan_solve_lengths(const struct plan_lengths *l, const struct libra_config *cfg,
                       const struct spec_hardware *hw, const struct spec_model *model,
                       bool (*should_stop)(void *), void *stop_arg, struct plan_result *out,
                       struct libra_error *err)
{
    struct plan_settings st;
    plan_settings_from_config(&st, hw, cfg);
    struct plan_problem p = {.cfg = cfg,
                             .hw = hw,
                             .model = model,
                             .settings = &st,
                             .sample = plan_lengths_view(l),
                             .tool_s = l->tool_s.v,
                             .filtered = l->filtered.v,
                             .pool_s = l->pool_s,
                             .should_stop = should_stop,
                             .stop_arg = stop_arg};
    return plan_solve(&p, out, err);
}
