/* The replan acceptance rule (see replan.h and docs/planner.md). */
#include "plan/replan.h"

#include <math.h>
#include <string.h>

#include "cost/lifecycle.h"
#include "cost/rollout.h"

void plan_replan_decide(const struct cost_shape *sh, const struct spec_hardware *hw,
                        const struct plan_settings *st, const struct plan_replan_input *in,
                        struct plan_replan_decision *out)
{
    memset(out, 0, sizeof *out);
    out->gain_s = in->cur_step_s - in->cand_step_s;
    double gpus = 0.0, started = 0.0, lost = 0.0;
    double cold_s = cost_cold_start_s(&st->lifecycle, sh);
    for (int t = 0; t < PLAN_NTP; t++) {
        int tp = 1 << t, cur = in->cur_counts[t], cand = in->cand_counts[t];
        int kept = in->kept ? in->kept[t] : cur < cand ? cur : cand;
        int added = cand - kept, removed = cur - kept;
        gpus += (double)tp * cand;
        if (added != 0 || removed != 0)
            out->differs = true;
        started += (double)tp * added * cold_s;
        struct cost_rollout_pre pre;
        if (removed > 0 && in->resident_tokens[t] > 0.0 &&
            cost_rollout_pre_init(&pre, sh, hw, &st->rollout, tp) == 0)
            lost += (double)tp * removed *
                    cost_prefill_time(&pre, 0.0, in->resident_tokens[t], st->chunk_tokens);
    }
    if (!out->differs) {
        out->why = "no change";
        return;
    }
    out->start_s = gpus > 0.0 ? started / gpus : INFINITY;
    out->lost_kv_s = gpus > 0.0 ? lost / gpus : INFINITY;
    out->group_rebuild_s = cost_group_rebuild_s(&st->lifecycle, 1 + (int)gpus);
    out->cost_s = out->start_s + out->lost_kv_s + out->group_rebuild_s;
    if (!(in->fit >= 1.0 / PLAN_REPLAN_FIT && in->fit <= PLAN_REPLAN_FIT))
        out->why = "the model does not fit the running plan";
    else if (!(out->gain_s > 0.0) || out->gain_s / in->cur_step_s < in->min_gain_frac)
        out->why = "gain below plan.replan_min_gain_frac";
    else if (out->gain_s * in->horizon_steps - out->cost_s <= 0.0)
        out->why = "gain does not repay the reconfiguration";
    else {
        out->accept = true;
        out->why = "accepted";
    }
}
