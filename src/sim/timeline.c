/*
 * The GPU timeline of a step range (sim.timeline_steps): per row — the trainer, each rollout
 * instance — the intervals its GPUs spent rolling out, training or held by a weight update,
 * and each instance's load over the range, for the Gantt chart and the load bars of
 * `libra report` (docs/report.md).
 *
 * It is fed by the recording hooks of perfetto.c. An instance's busy time is not reported
 * iteration by iteration (the engine fast-forwards runs of identical iterations); it is placed
 * at each change of the instance instead. Between two changes the engine runs the stretch of
 * back-to-back iterations it composed and then idles until the simulator hands it something
 * (engine.h: an idle engine starts nothing by itself, and every change is followed by a
 * change of the instance at the same instant), so the busy seconds gained since the last
 * change (engine_busy_at) lie at the start of the gap. An instance's intervals therefore add
 * up to its busy time in the window, the simulator's own accounting, up to one rule: a gap
 * busy but for SNAP of the clock counts as busy throughout, so that rounding in the busy
 * counter does not split an interval.
 *
 * The trainer's intervals and the fleet's (a step, the trainer's share of a weight update, the
 * fleet held by one, a colocated switch) are recorded when they end, from their true start,
 * clipped to the window; on an instance's row a fleet-wide interval starts no earlier than its
 * last iteration ended (an iteration running when the fleet is quiesced completes), and it is
 * on the rows of live engines, and of failed instances in colocated mode (in_fleet). When the
 * run ends, rows are sorted, touching intervals of one use merged, and any overlap is an
 * internal error.
 *
 * Size: at most max_intervals intervals over all rows. Past the cap no interval is added; the
 * timeline says so (truncated) and from where its rows are incomplete (complete_to_s: the
 * earliest start of an interval left out; the rows are cut there). The seconds of each use,
 * the requests and the tokens stay exact over the whole window.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"
#include "util/alloc.h"
#include "util/json.h"

/* A gap busy for all but this share of the clock is busy throughout. */
#define SNAP 1e-9

const char *sim_use_name(enum sim_use u)
{
    static const char *const names[SIM_USES] = {"rollout", "train", "sync"};
    return (unsigned)u < SIM_USES ? names[u] : "unknown";
}

void sim_timeline_init(struct sim *s)
{
    struct sim_timeline_rec *r = &s->trace.timeline;
    struct sim_timeline *t = xcalloc(1, sizeof *t);
    t->first_step = s->opts->timeline_first;
    t->last_step = s->opts->timeline_last;
    t->max_intervals = s->opts->timeline_max_intervals ? s->opts->timeline_max_intervals
                                                       : SIM_TIMELINE_MAX_INTERVALS;
    t->has_trainer = s->lay->n_train > 0;
    t->n_inst = s->n_inst;
    t->inst = xcalloc((size_t)s->n_inst, sizeof *t->inst);
    r->tl = t;
    r->row = xcalloc((size_t)s->n_inst + 1, sizeof *r->row);
    r->inst = xcalloc((size_t)s->n_inst, sizeof *r->inst);
    r->cap = t->max_intervals;
    r->cut_s = INFINITY;
}

/* Instance i's recording starts now. */
static void inst_begin(struct sim *s, int i)
{
    double busy = sim_inst_busy_s(s, i);
    s->trace.timeline.inst[i] = (struct sim_timeline_inst){
        .seen_s = s->now,
        .seen_busy_s = busy,
        .start_busy_s = busy,
        .busy_end_s = s->now,
        .start_requests = s->out->requests_by_instance[i],
        .start_tokens = s->inst[i].gen_tokens,
    };
}

void sim_timeline_begin(struct sim *s)
{
    struct sim_timeline_rec *r = &s->trace.timeline;
    r->on = true;
    r->tl->from_s = s->now;
    for (int i = 0; i < s->n_inst; i++)
        inst_begin(s, i);
}

void sim_timeline_grow(struct sim *s)
{
    struct sim_timeline_rec *r = &s->trace.timeline;
    if (!r->tl)
        return;
    int i = s->n_inst - 1;
    struct sim_timeline *t = r->tl;
    t->inst = xreallocarray(t->inst, (size_t)s->n_inst, sizeof *t->inst);
    r->row = xreallocarray(r->row, (size_t)s->n_inst + 1, sizeof *r->row);
    r->inst = xreallocarray(r->inst, (size_t)s->n_inst, sizeof *r->inst);
    memset(&t->inst[i], 0, sizeof t->inst[i]);
    memset(&r->row[i + 1], 0, sizeof r->row[i + 1]);
    memset(&r->inst[i], 0, sizeof r->inst[i]);
    t->n_inst = s->n_inst;
    if (r->on) /* no engine yet: busy 0, counters 0 */
        r->inst[i] = (struct sim_timeline_inst){.seen_s = s->now, .busy_end_s = s->now};
}

void sim_timeline_end(struct sim *s)
{
    struct sim_timeline_rec *r = &s->trace.timeline;
    if (!r->on)
        return;
    if (s->elastic)
        sim_elastic_timeline_end(s);
    for (int i = 0; i < s->n_inst; i++) {
        sim_timeline_catch_up(s, i);
        struct sim_timeline_row *row = &r->tl->inst[i];
        const struct sim_timeline_inst *x = &r->inst[i];
        row->use_s[SIM_USE_ROLLOUT] = x->seen_busy_s - x->start_busy_s;
        row->requests = s->out->requests_by_instance[i] - x->start_requests;
        row->generated_tokens = s->inst[i].gen_tokens - x->start_tokens;
    }
    r->tl->to_s = s->now;
    r->on = false;
}

void sim_timeline_add(struct sim *s, int row, enum sim_use u, double from_s, double to_s)
{
    struct sim_timeline_rec *r = &s->trace.timeline;
    if (!r->on || (row == 0 && !r->tl->has_trainer))
        return;
    from_s = fmax(from_s, r->tl->from_s);
    if (!(to_s > from_s))
        return;
    if (u != SIM_USE_ROLLOUT) /* an instance's rollout seconds come from its busy counter */
        (row ? &r->tl->inst[row - 1] : &r->tl->trainer)->use_s[u] += to_s - from_s;
    struct sim_interval *last = r->row[row].n ? &r->row[row].v[r->row[row].n - 1] : NULL;
    if (last && last->use == u && last->to_s == from_s) {
        last->to_s = to_s;
        return;
    }
    if (r->n == r->cap) {
        r->cut_s = fmin(r->cut_s, from_s);
        return;
    }
    vec_push(&r->row[row], ((struct sim_interval){from_s, to_s, u}));
    r->n++;
}

void sim_timeline_catch_up(struct sim *s, int i)
{
    struct sim_timeline_rec *r = &s->trace.timeline;
    if (!r->on)
        return;
    struct sim_timeline_inst *x = &r->inst[i];
    double busy = sim_inst_busy_s(s, i);
    double gained = busy - x->seen_busy_s, gap = s->now - x->seen_s;
    if (gained > 0) {
        double to = gained >= gap - SNAP * fmax(1, s->now) ? s->now : x->seen_s + gained;
        sim_timeline_add(s, 1 + i, SIM_USE_ROLLOUT, x->seen_s, to);
        x->busy_end_s = to;
    }
    x->seen_s = s->now;
    x->seen_busy_s = busy;
}

void sim_timeline_borrowed(struct sim *s, int i, double from_s)
{
    struct sim_timeline_rec *r = &s->trace.timeline;
    if (!r->on)
        return;
    sim_timeline_catch_up(s, i);
    sim_timeline_add(s, 1 + i, SIM_USE_TRAIN, fmax(from_s, r->inst[i].busy_end_s), s->now);
}

/* Whether instance i's GPUs take part in a fleet-wide phase: a live engine's, and in colocated
 * mode a failed instance's too (its GPUs stay in the fleet, and there every GPU trains and
 * switches: the trainer's GPU count and step times do not change with a failure). */
static bool in_fleet(const struct sim *s, int i)
{
    return s->inst[i].eng ||
           (s->inst[i].state == SIM_INST_FAILED && sim_mode_desc(s->lay->mode)->colocated);
}

void sim_timeline_fleet(struct sim *s, enum sim_use u, double from_s)
{
    struct sim_timeline_rec *r = &s->trace.timeline;
    for (int i = 0; i < s->n_inst && r->on; i++) {
        if (!in_fleet(s, i))
            continue;
        sim_timeline_catch_up(s, i);
        sim_timeline_add(s, 1 + i, u, fmax(from_s, r->inst[i].busy_end_s), s->now);
    }
}

static int by_start(const void *a, const void *b)
{
    const struct sim_interval *x = a, *y = b;
    if (x->from_s != y->from_s)
        return x->from_s < y->from_s ? -1 : 1;
    return (x->to_s > y->to_s) - (x->to_s < y->to_s);
}

/* Row k of the recording into out: sorted, cut at cut_s, touching intervals of one use
 * merged. Returns false when two intervals overlap (a bug). */
static bool finish_row(struct sim_timeline_rec *r, int k, struct sim_timeline_row *out)
{
    struct sim_interval *v = r->row[k].v;
    size_t n = r->row[k].n, w = 0;
    if (n)
        qsort(v, n, sizeof *v, by_start);
    for (size_t j = 0; j < n; j++) {
        struct sim_interval x = v[j];
        if (x.from_s >= r->cut_s)
            break;
        x.to_s = fmin(x.to_s, r->cut_s);
        if (w && x.from_s < v[w - 1].to_s)
            return false;
        if (w && x.use == v[w - 1].use && x.from_s == v[w - 1].to_s)
            v[w - 1].to_s = x.to_s;
        else
            v[w++] = x;
    }
    out->iv = v;
    out->n = w;
    r->row[k].v = NULL;
    r->row[k].n = r->row[k].cap = 0;
    return true;
}

struct sim_timeline *sim_timeline_take(struct sim *s)
{
    struct sim_timeline_rec *r = &s->trace.timeline;
    struct sim_timeline *t = r->tl;
    if (!t)
        return NULL;
    sim_timeline_end(s); /* a window still open closes with the run */
    t->truncated = isfinite(r->cut_s);
    t->complete_to_s = fmin(t->to_s, r->cut_s);
    for (int k = 0; k <= s->n_inst; k++)
        if (!finish_row(r, k, k ? &t->inst[k - 1] : &t->trainer))
            sim_fail(s, LIBRA_EINTERNAL, "internal: intervals of timeline row %d overlap", k);
    for (int i = 0; i < s->n_inst; i++) {
        t->inst[i].tp = s->inst[i].tp;
        t->inst[i].bucket = s->inst[i].bucket;
        t->inst[i].gpu = s->inst[i].gpu;
        t->inst[i].hybrid = s->inst[i].hybrid;
    }
    r->tl = NULL;
    return t;
}

void sim_timeline_release(struct sim *s)
{
    struct sim_timeline_rec *r = &s->trace.timeline;
    for (int k = 0; r->row && k <= s->n_inst; k++)
        vec_free(&r->row[k]);
    free(r->row);
    free(r->inst);
    sim_timeline_free(r->tl);
    memset(r, 0, sizeof *r);
}

void sim_timeline_free(struct sim_timeline *t)
{
    if (!t)
        return;
    free(t->trainer.iv);
    for (int i = 0; i < t->n_inst; i++)
        free(t->inst[i].iv);
    free(t->inst);
    free(t);
}

/* ---- JSON ------------------------------------------------------------------------------ */

static json_t *intervals_json(const struct sim_timeline_row *row)
{
    json_t *a = json_array();
    for (size_t k = 0; k < row->n; k++)
        json_array_append_new(a,
                              json_pack("[o,o,s]", ujson_real(row->iv[k].from_s),
                                        ujson_real(row->iv[k].to_s), sim_use_name(row->iv[k].use)));
    return a;
}

static json_t *instance_json(const struct sim_timeline *t, int i)
{
    const struct sim_timeline_row *row = &t->inst[i];
    double window = t->to_s - t->from_s;
    json_t *o = json_pack(
        "{s:i,s:i,s:i,s:i,s:o,s:o,s:o}", "instance", i, "tp", row->tp, "bucket", row->bucket, "gpu",
        row->gpu, "rollout_s", ujson_real(row->use_s[SIM_USE_ROLLOUT]), "train_s",
        ujson_real(row->use_s[SIM_USE_TRAIN]), "sync_s", ujson_real(row->use_s[SIM_USE_SYNC]));
    json_object_set_new(o, "busy_share",
                        ujson_real(sim_util(row->use_s[SIM_USE_ROLLOUT], window > 0 ? window : 0)));
    json_object_set_new(o, "requests", json_integer((json_int_t)row->requests));
    json_object_set_new(o, "generated_tokens", json_integer((json_int_t)row->generated_tokens));
    json_object_set_new(o, "intervals", intervals_json(row));
    if (row->hybrid) /* a training replica's GPUs, lent to rollout while it serves */
        json_object_set_new(o, "hybrid_replica", json_integer(row->hybrid - 1));
    return o;
}

json_t *sim_timeline_to_json(const struct sim_timeline *t, const struct sim_layout *l)
{
    json_t *inst = json_array();
    for (int i = 0; i < t->n_inst; i++)
        json_array_append_new(inst, instance_json(t, i));
    json_t *trainer = t->has_trainer
                          ? json_pack("{s:i,s:o,s:o,s:o}", "gpus", l->n_train, "train_s",
                                      ujson_real(t->trainer.use_s[SIM_USE_TRAIN]), "sync_s",
                                      ujson_real(t->trainer.use_s[SIM_USE_SYNC]), "intervals",
                                      intervals_json(&t->trainer))
                          : json_null();
    json_t *o = json_pack("{s:{s:I,s:I},s:o,s:o,s:o,s:b}", "steps", "first",
                          (json_int_t)t->first_step, "last", (json_int_t)t->last_step, "from_s",
                          ujson_real(t->from_s), "to_s", ujson_real(t->to_s), "complete_to_s",
                          ujson_real(t->complete_to_s), "truncated", t->truncated);
    json_object_set_new(o, "max_intervals", json_integer((json_int_t)t->max_intervals));
    json_object_set_new(o, "trainer", trainer);
    json_object_set_new(o, "instances", inst);
    return o;
}
