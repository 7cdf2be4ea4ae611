/*
 * Fuzz harness for the elastic pool's records (src/server/pool_rec.c): the bodies of POST
 * /libra/v1/pool/{lend,reclaim,step,confirm} and the pool records of the state dir's journal,
 * which one parser reads. Besides not crashing: whatever is accepted is in range (a replica
 * below GW_POOL_REPLICAS_MAX, ids >= 1, counts >= 0, finite times and measures, a reason without
 * control characters), its journal text reads back as the same record, and whatever is refused says
 * why.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/pool_rec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct gw_pool_rec *r)
{
    if (r->replica < -1 || r->replica >= GW_POOL_REPLICAS_MAX || r->request == 0 ||
        r->request < -1 || r->generation < -1 || r->step < -1 || r->version < -1 || r->phase < 0 ||
        r->phase > 2 || !(isfinite(r->t_s) && r->t_s >= -1) ||
        !memchr(r->reason, '\0', sizeof r->reason))
        abort();
    if (r->event != 0 && r->event != GW_POOL_OP_RELEASED && r->event != GW_POOL_OP_RETAKEN)
        abort();
    if (!(isfinite(r->train_s) && (r->train_s == -1 || r->train_s > 0)) ||
        !(isfinite(r->rollout_s) && r->rollout_s >= -1) ||
        !(isfinite(r->pressure) && r->pressure >= -1) || r->rollout_gpus < -1)
        abort();
    for (const char *p = r->reason; *p; p++)
        if ((unsigned char)*p < ' ' || *p == 0x7f)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_pool_rec r, back;
    char err[256] = "";
    if (gw_pool_rec_parse((const char *)data, size, &r, err, sizeof err) != 0) {
        if (!err[0] || !memchr(err, '\0', sizeof err))
            abort();
        return 0;
    }
    check(&r);
    char *text = gw_pool_rec_text(&r);
    if (!text || gw_pool_rec_parse(text, strlen(text), &back, err, sizeof err) != 0)
        abort();
    if (back.op != r.op || back.replica != r.replica || back.request != r.request ||
        back.generation != r.generation || back.step != r.step || back.version != r.version ||
        back.phase != r.phase || back.event != r.event || strcmp(back.reason, r.reason) != 0 ||
        (r.t_s >= 0 && back.t_s != r.t_s) || back.train_s != r.train_s ||
        back.rollout_s != r.rollout_s || back.pressure != r.pressure ||
        back.rollout_gpus != r.rollout_gpus)
        abort();
    free(text);
    return 0;
}
