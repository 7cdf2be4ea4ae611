/*
 * From a chosen (split, layout, multiset) to the plan a user runs: the times, the bands of the
 * sorted sample and the bucket layout C-MLFQ routes over, and the placement of every GPU.
 *
 * Placement: training takes the first GPUs in node order, ranked the Megatron way (TP fastest,
 * then CP, DP, PP), so TP groups of a size dividing the node never straddle one; rollout
 * instances go largest first into the first node with room, which packs any multiset that
 * satisfies the nested capacities the search checked (docs/planner.md).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/search.h"
#include "util/alloc.h"

static void fill_bands(const struct plan_solver *s, const int counts[PLAN_NTP],
                       const struct plan_roll_score *sc, struct plan_result *out)
{
    out->n_bands = 0;
    for (int t = 0; t < PLAN_NTP; t++) {
        if (counts[t] == 0)
            continue;
        struct plan_band *b = &out->band[out->n_bands++];
        b->tp = 1 << t;
        b->instances = counts[t];
        b->first = sc->lo[t];
        b->last = sc->hi[t];
        b->max_generated = b->last > b->first ? (int64_t)s->roll.gen[b->last - 1] : 0;
        b->work_s = s->roll.all.prefix[t][b->last] - s->roll.all.prefix[t][b->first];
        b->load_s = b->work_s / counts[t];
    }
}

/* Adds TP size tp with n instances to bucket k. */
static void bucket_add(struct spec_bucket *k, int tp, int n)
{
    k->tp[k->n_tp] = tp;
    k->instances[k->n_tp++] = n;
}

/*
 * Buckets from bands, in TP order: a band becomes a bucket up to its longest generation; an
 * empty band's TP size serves the next bucket (or the last one); a band whose longest
 * generation does not exceed the previous bucket's (equal lengths at a boundary) joins it.
 */
static void fill_layout(struct plan_result *out)
{
    struct spec_bucket_layout *l = &out->layout;
    memset(l, 0, sizeof *l);
    int pending[PLAN_NTP], pending_n[PLAN_NTP], np = 0;
    for (int i = 0; i < out->n_bands; i++) {
        const struct plan_band *b = &out->band[i];
        if (b->last == b->first) {
            pending[np] = b->tp;
            pending_n[np++] = b->instances;
            continue;
        }
        int64_t max =
            b->max_generated < SPEC_BUCKET_TOKENS_MAX ? b->max_generated : SPEC_BUCKET_TOKENS_MAX;
        bool join = l->n > 0 && max <= l->bucket[l->n - 1].max_tokens;
        struct spec_bucket *k = join ? &l->bucket[l->n - 1] : &l->bucket[l->n++];
        if (!join)
            k->max_tokens = max;
        for (int j = 0; j < np; j++)
            bucket_add(k, pending[j], pending_n[j]);
        np = 0;
        bucket_add(k, b->tp, b->instances);
    }
    for (int j = 0; j < np && l->n > 0; j++)
        bucket_add(&l->bucket[l->n - 1], pending[j], pending_n[j]);
}

static void place(const struct plan_solver *s, const struct plan_split *sp,
                  const struct plan_train_layout *l, const int counts[PLAN_NTP],
                  struct plan_result *out)
{
    int N = s->N, G = s->G, train = s->colocated ? N : sp->n_train, nodes = (N + G - 1) / G;
    out->gpu = xcalloc((size_t)N, sizeof *out->gpu);
    for (int g = 0; g < N; g++) {
        struct plan_gpu *u = &out->gpu[g];
        u->node = g / G;
        u->local = g % G;
        u->role = g < train ? PLAN_ROLE_TRAIN : PLAN_ROLE_IDLE;
        u->instance = -1;
        if (g < train) {
            u->tp_rank = g % l->tp;
            u->cp_rank = g / l->tp % l->cp;
            u->dp_rank = g / (l->tp * l->cp) % l->dp;
            u->pp_rank = g / (l->tp * l->cp * l->dp);
        }
    }
    /* each node's rollout GPUs are [start, end) */
    int *start = xmallocarray((size_t)nodes, sizeof *start);
    for (int node = 0; node < nodes; node++) {
        int first = node * G, end = first + G < N ? first + G : N;
        start[node] = s->colocated ? first : train < first ? first : train > end ? end : train;
    }
    int id = 0;
    for (int t = PLAN_NTP - 1; t >= 0; t--)
        for (int k = 0; k < counts[t]; k++, id++) {
            int size = 1 << t, node = 0;
            while ((node + 1) * G < N && (node + 1) * G - start[node] < size)
                node++;
            for (int g = start[node]; g < start[node] + size; g++) {
                out->gpu[g].instance = id;
                out->gpu[g].instance_tp = size;
                if (!s->colocated)
                    out->gpu[g].role = PLAN_ROLE_ROLLOUT;
            }
            start[node] += size;
        }
    free(start);
}

/* The async terms of score sc (its span charges the split's least train side, as the search
 * scored it). */
static void async_parts(const struct plan_solver *s, const struct plan_roll_score *sc,
                        struct plan_async_parts *a)
{
    const struct plan_roll_job *j = &s->roll.job;
    *a = (struct plan_async_parts){
        .update_train_s = j->train_add_s,
        .fixed_point_s = sc->fixed_s,
        .work_s = sc->work_s,
        .little_s = sc->little_s,
        .pool_s = sc->pool_s,
        .tail_s = sc->tail_s,
        .update_s = sc->update_s,
        .drain_s = sc->drain_s,
        .reprefill_s = sc->reprefill_s,
        .fleet_s = sc->fleet_s,
        .span_s = sc->span_s,
        .interval = j->interval,
        .window = j->k1,
    };
}

void plan_build_result(struct plan_solver *s, const struct plan_split *sp, size_t layout,
                       const int counts[PLAN_NTP], struct plan_result *out)
{
    const struct plan_train_layout *l = &sp->layouts[layout];
    out->feasible = true;
    out->n_train = sp->n_train;
    out->n_rollout = sp->n_roll;
    out->train = *l;
    out->train_s = plan_train_time(&s->train, l, &out->train_step);
    plan_train_check(&s->train, l, &out->train_mem);
    const struct plan_roll_score *sc = plan_memo_score(s, sp, counts, NAN);
    if (!s->colocated)
        async_parts(s, sc, &out->async);
    out->rollout_s = sc->t_s;
    memcpy(out->counts, counts, sizeof out->counts);
    for (int t = 0; t < PLAN_NTP; t++) {
        out->instances += counts[t];
        if (s->colocated && counts[t] > 0)
            out->switch_s = fmax(out->switch_s, plan_train_switch_s(&s->train, l, 1 << t));
    }
    if (s->colocated) {
        out->step_s = out->rollout_s + (out->train_s + out->switch_s);
    } else {
        double train_side = out->train_s + out->async.update_train_s;
        out->step_s = fmax(train_side, out->rollout_s);
        out->train_bound = train_side >= out->rollout_s;
        out->rate_traj_per_s = (double)s->roll.m / sc->z_s;
        out->f_stale = plan_roll_stale(&s->roll, sc, out->step_s);
    }
    out->banded_batch_s = plan_roll_banded(&s->roll, counts, sc);
    out->greedy_batch_s = plan_roll_greedy(&s->roll, counts);
    fill_bands(s, counts, sc, out);
    fill_layout(out);
    place(s, sp, l, counts, out);
}
