/* The cost of a routing decision (cost.h). */
#include "sched/cost.h"

void sched_cost_rates(const struct sched_cost_model *m, const struct spec_bucket_layout *l,
                      int64_t context_tokens, struct cost_rate *out)
{
    for (int b = 0; b < l->n; b++)
        m->rate(m->ctx, l->bucket[b].tp[0], context_tokens, 0.0, &out[b]);
}

double sched_cost(const struct sched_cost_model *m, const struct cost_rate *r,
                  double remaining_tokens, double elapsed_s, bool move)
{
    double gpu_s = remaining_tokens * r->gpu_token_s + (move ? r->move_gpu_s : 0.0);
    if (m->deadline_s <= 0)
        return gpu_s;
    double end_s = elapsed_s + remaining_tokens * r->token_s + (move ? r->move_s : 0.0);
    return end_s > m->deadline_s ? gpu_s + m->late_gpus * (end_s - m->deadline_s) : gpu_s;
}
