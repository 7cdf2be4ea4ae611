/*
 * The Elastic Hybrid Pool's state machine (see pool.h).
 *
 * Every role change of a hybrid replica goes through set_role, which moves all its members at
 * once and keeps the per-role GPU counts; every way out of a join (cancel, failure, return)
 * goes through roll_back, which clears everything the join set. Those two are what make a
 * replica wholly in or out and a failed join traceless; tests/unit/test_ehp_pool.c checks
 * both after every event of random sequences.
 */
#include "ehp/pool.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"

struct ehp_pool {
    struct ehp_pool_config c; /* GPU lists NULL: the pool keeps its own */
    double now_s;
    int64_t version;           /* the core's state version */
    int64_t last_step;         /* the last step begun, -1 before the first */
    enum ehp_role *role;       /* per GPU */
    int count[EHP_ROLES];      /* GPUs per role */
    int *hybrid_gpu;           /* hybrid_replicas · replica_gpus */
    bool *member_fetched;      /* same shape */
    struct ehp_hybrid *hybrid; /* per hybrid replica */
    struct ehp_step step;
    uint8_t *member;      /* step.member's storage, per hybrid replica */
    uint8_t *prev_member; /* the previous step's, for the epoch */
    int *share;           /* step.share's storage, per replica (core, then hybrid) */
    bool *lost;           /* step.lost's storage */
    struct ehp_signal signal;
};

void ehp_params_default(struct ehp_params *p)
{
    *p = (struct ehp_params){
        .rule = EHP_RULE_BALANCE,
        .min_gain_frac = 0.05,
        .pressure_guard = 0.80, /* libra-spec.md §3, the reference's defaults */
        .borrow_ratio = 1.15,
        .release_ratio = 0.90,
        .signal_ttl_steps = 20,
        .join_timeout_s = 180.0,
        .batch = EHP_BATCH_FIXED, /* libra-spec.md §5: the reference grows the batch */
    };
}

/* ---- the signal ----------------------------------------------------------------------------- */

static bool finite_nonneg(double x)
{
    return isfinite(x) && x >= 0.0;
}

static bool input_ok(const struct ehp_signal_input *in)
{
    return isfinite(in->train_s) && in->train_s > 0.0 && isfinite(in->rollout_s) &&
           in->rollout_s > 0.0 && finite_nonneg(in->queue_pressure) &&
           finite_nonneg(in->active_pressure) && in->want_train_gpus >= 0 &&
           in->train_replicas >= 0 && in->rollout_gpus >= 0;
}

/* The predicted step with k hybrids training: T_train scaled by the replicas training from
 * those that trained the step observed, T_rollout by the GPUs left in rollout from those there
 * now, while `holding` hybrids are out of it (joining or training). */
static double predicted_step(const struct ehp_signal_input *in, int replica_gpus, int core,
                             int holding, int k)
{
    double rollout_gpus = in->rollout_gpus + (double)(holding - k) * replica_gpus;
    if (rollout_gpus <= 0.0)
        return INFINITY;
    return fmax(in->train_s * in->train_replicas / (core + k),
                in->rollout_s * in->rollout_gpus / rollout_gpus);
}

/* The balance rule's target: the least predicted step over 0..capacity, unless it beats the
 * step held by less than min_gain_frac. */
static int balance_target(const struct ehp_params *p, const struct ehp_signal_input *in,
                          int capacity, int replica_gpus, int core, int holding,
                          enum ehp_signal_why *why)
{
    int best = holding;
    double held = predicted_step(in, replica_gpus, core, holding, holding), least = held;
    for (int k = 0; k <= capacity; k++) {
        double t = predicted_step(in, replica_gpus, core, holding, k);
        if (t < least) {
            least = t;
            best = k;
        }
    }
    bool move = best != holding && least < (1.0 - p->min_gain_frac) * held;
    *why = move ? EHP_SIGNAL_BALANCE : EHP_SIGNAL_HOLD;
    return move ? best : holding;
}

const char *ehp_signal_why_name(enum ehp_signal_why why)
{
    static const char *const names[] = {
        [EHP_SIGNAL_GUARD] = "guard",   [EHP_SIGNAL_PLAN] = "plan",
        [EHP_SIGNAL_BORROW] = "borrow", [EHP_SIGNAL_RELEASE] = "release",
        [EHP_SIGNAL_HOLD] = "hold",     [EHP_SIGNAL_BALANCE] = "balance",
    };
    return why >= EHP_SIGNAL_GUARD && why <= EHP_SIGNAL_BALANCE ? names[why] : "unknown";
}

int ehp_signal_decide(const struct ehp_params *p, const struct ehp_signal_input *in, int capacity,
                      int replica_gpus, int core_replicas, int holding, int64_t step,
                      struct ehp_signal *out)
{
    if (!input_ok(in) || capacity < 0 || replica_gpus < 1 || core_replicas < 1 || holding < 0)
        return LIBRA_EINVAL;
    bool balance =
        p->rule == EHP_RULE_BALANCE && in->train_replicas >= core_replicas && in->rollout_gpus > 0;
    struct ehp_signal s = {
        .live = true,
        .capacity = capacity,
        .ratio = in->train_s / in->rollout_s,
        .pressure = fmax(in->queue_pressure, in->active_pressure),
        .issued_step = step,
        .expires_step = step + p->signal_ttl_steps,
    };
    if (s.pressure >= p->pressure_guard) {
        s.why = EHP_SIGNAL_GUARD;
    } else if (in->want_train_gpus > 0) {
        int64_t want = ((int64_t)in->want_train_gpus + replica_gpus - 1) / replica_gpus;
        s.target = want < capacity ? (int)want : capacity;
        s.why = EHP_SIGNAL_PLAN;
    } else if (balance) {
        int held = holding < capacity ? holding : capacity;
        s.target = balance_target(p, in, capacity, replica_gpus, core_replicas, held, &s.why);
    } else if (s.ratio >= p->borrow_ratio) {
        s.target = capacity;
        s.why = EHP_SIGNAL_BORROW;
    } else if (s.ratio <= p->release_ratio) {
        s.why = EHP_SIGNAL_RELEASE;
    } else {
        s.target = holding < capacity ? holding : capacity;
        s.why = EHP_SIGNAL_HOLD;
    }
    *out = s;
    return 0;
}

/* ---- creation ------------------------------------------------------------------------------- */

static int check_config(const struct ehp_pool_config *c, struct libra_error *err)
{
    const struct ehp_params *p = &c->params;
    const struct ehp_times *t = &c->times;
    if (c->gpus < 1 || c->gpus_per_node < 1 || c->replica_gpus < 1 || c->core_replicas < 1 ||
        c->hybrid_replicas < 0 || c->min_rollout_gpus < 0)
        return error_set(err, NULL, 0, 0, "ehp: a size is out of range");
    if ((int64_t)(c->core_replicas + (int64_t)c->hybrid_replicas) * c->replica_gpus > c->gpus)
        return error_set(err, NULL, 0, 0, "ehp: the replicas need more GPUs than the %d given",
                         c->gpus);
    if (c->core_gpu == NULL || (c->hybrid_replicas > 0 && c->hybrid_gpu == NULL))
        return error_set(err, NULL, 0, 0, "ehp: a GPU list is missing");
    if (c->batch_trajectories < c->core_replicas)
        return error_set(err, NULL, 0, 0,
                         "ehp: batch of %d trajectories below the %d core "
                         "replicas",
                         c->batch_trajectories, c->core_replicas);
    if (!(p->pressure_guard > 0.0) || !(p->release_ratio > 0.0) ||
        !(p->borrow_ratio > p->release_ratio) || !isfinite(p->borrow_ratio) ||
        !isfinite(p->pressure_guard) || p->signal_ttl_steps < 1 || !(p->join_timeout_s > 0.0) ||
        (p->batch != EHP_BATCH_FIXED && p->batch != EHP_BATCH_GROW) ||
        (p->rule != EHP_RULE_BALANCE && p->rule != EHP_RULE_REFERENCE) ||
        !(p->min_gain_frac >= 0.0 && p->min_gain_frac < 1.0))
        return error_set(err, NULL, 0, 0, "ehp: a parameter is out of range");
    if (!finite_nonneg(t->start_s) || !finite_nonneg(t->fetch_s) ||
        !finite_nonneg(t->zero_sync_s) || !finite_nonneg(t->return_s))
        return error_set(err, NULL, 0, 0, "ehp: a phase time is negative or not finite");
    return 0;
}

/* Checks the GPU lists and fills p->role; role starts as core rollout everywhere. */
static int place(struct ehp_pool *p, const struct ehp_pool_config *c, struct libra_error *err)
{
    int r = c->replica_gpus;
    for (int g = 0; g < c->gpus; g++)
        p->role[g] = EHP_ROLE_CORE_ROLLOUT;
    for (int i = 0; i < c->core_replicas * r + c->hybrid_replicas * r; i++) {
        bool core = i < c->core_replicas * r;
        int g = core ? c->core_gpu[i] : c->hybrid_gpu[i - c->core_replicas * r];
        if (g < 0 || g >= c->gpus)
            return error_set(err, NULL, 0, 0, "ehp: GPU %d is out of range", g);
        if (p->role[g] != EHP_ROLE_CORE_ROLLOUT)
            return error_set(err, NULL, 0, 0, "ehp: GPU %d is listed twice", g);
        p->role[g] = core ? EHP_ROLE_CORE_TRAINING : EHP_ROLE_HYBRID_ROLLOUT;
    }
    for (int h = 0; h < c->hybrid_replicas; h++)
        for (int m = 1; m < r; m++)
            if (c->hybrid_gpu[h * r + m] / c->gpus_per_node !=
                c->hybrid_gpu[h * r] / c->gpus_per_node)
                return error_set(err, NULL, 0, 0, "ehp: hybrid replica %d spans nodes", h);
    return 0;
}

int ehp_pool_new(const struct ehp_pool_config *c, struct ehp_pool **out, struct libra_error *err)
{
    *out = NULL;
    int rc = check_config(c, err);
    if (rc != 0)
        return rc;
    struct ehp_pool *p = xcalloc(1, sizeof *p);
    size_t nh = (size_t)c->hybrid_replicas, members = nh * (size_t)c->replica_gpus;
    p->c = *c;
    p->c.core_gpu = p->c.hybrid_gpu = NULL;
    p->role = xmallocarray((size_t)c->gpus, sizeof *p->role);
    p->hybrid_gpu = xmallocarray(members + 1, sizeof *p->hybrid_gpu);
    p->member_fetched = xcalloc(members + 1, sizeof *p->member_fetched);
    p->hybrid = xcalloc(nh + 1, sizeof *p->hybrid);
    p->member = xcalloc(nh + 1, sizeof *p->member);
    p->prev_member = xcalloc(nh + 1, sizeof *p->prev_member);
    p->lost = xcalloc(nh + 1, sizeof *p->lost);
    p->share = xcalloc((size_t)c->core_replicas + nh, sizeof *p->share);
    rc = place(p, c, err);
    if (rc != 0) {
        ehp_pool_free(p);
        return rc;
    }
    if (members > 0)
        memcpy(p->hybrid_gpu, c->hybrid_gpu, members * sizeof *p->hybrid_gpu);
    for (int g = 0; g < c->gpus; g++)
        p->count[p->role[g]]++;
    for (size_t h = 0; h < nh; h++)
        p->hybrid[h] = (struct ehp_hybrid){
            .deadline_s = INFINITY,
            .fetch_version = -1,
            .gpu = p->hybrid_gpu + h * (size_t)c->replica_gpus,
            .member_fetched = p->member_fetched + h * (size_t)c->replica_gpus,
        };
    p->last_step = -1;
    p->step = (struct ehp_step){
        .step = -1,
        .member = p->member,
        .share = p->share,
        .lost = p->lost,
    };
    *out = p;
    return 0;
}

void ehp_pool_free(struct ehp_pool *p)
{
    if (p == NULL)
        return;
    free(p->role);
    free(p->hybrid_gpu);
    free(p->member_fetched);
    free(p->hybrid);
    free(p->member);
    free(p->prev_member);
    free(p->lost);
    free(p->share);
    free(p);
}

/* ---- moves ---------------------------------------------------------------------------------- */

static bool joining(enum ehp_join j)
{
    return j >= EHP_JOIN_REQUESTED && j <= EHP_JOIN_ACTIVATING;
}

static int rollout_gpus(const struct ehp_pool *p)
{
    return p->count[EHP_ROLE_CORE_ROLLOUT] + p->count[EHP_ROLE_HYBRID_ROLLOUT];
}

/* Moves every member of hybrid replica h to role r. */
static void set_role(struct ehp_pool *p, int h, enum ehp_role r)
{
    for (int m = 0; m < p->c.replica_gpus; m++) {
        int g = p->hybrid[h].gpu[m];
        assert(p->count[p->role[g]] > 0);
        p->count[p->role[g]]--;
        p->role[g] = r;
        p->count[r]++;
    }
}

/* Appends a record of kind about hybrid replica h (-1: none) at the pool's clock. */
static struct ehp_decision *record(struct ehp_pool *p, ehp_decision_vec *out,
                                   enum ehp_decision_kind kind, int h)
{
    struct ehp_decision d = {
        .kind = kind,
        .at_s = p->now_s,
        .replica = h,
        .member = -1,
        .generation = h >= 0 ? p->hybrid[h].generation : 0,
        .step = p->last_step,
        .version = p->version,
        .rollout_gpus = rollout_gpus(p),
    };
    vec_push(out, d);
    return &out->v[out->n - 1];
}

/* The rollout fleet changed: its weight-update group (trainer rank 0 + rollout GPUs) is
 * rebuilt. */
static void fleet_changed(struct ehp_pool *p, struct ehp_decision *d)
{
    d->group_rebuild_s = cost_group_rebuild_s(&p->c.lifecycle, 1 + rollout_gpus(p));
}

/*
 * Ends hybrid replica h's join at at_s (a cancel, a failure, or the return of an active one:
 * kind CANCELLED, FAILED or RETURNED): every member back to rollout, everything the join set
 * cleared, the generation bumped so that its events are stale.
 */
static void roll_back(struct ehp_pool *p, int h, enum ehp_decision_kind kind, enum ehp_why why,
                      int member, double at_s, ehp_decision_vec *out)
{
    struct ehp_hybrid *hy = &p->hybrid[h];
    uint64_t generation = hy->generation;
    if (kind != EHP_DEC_RETURNED && p->step.open && p->member[h] == EHP_MEMBER_ACTIVE &&
        !p->lost[h]) {
        p->lost[h] = true; /* its payload for the open step never arrives */
        p->step.lost_count++;
    }
    hy->ended_generation = generation;
    hy->ended = kind == EHP_DEC_CANCELLED ? EHP_JOIN_CANCELLED
                : kind == EHP_DEC_FAILED  ? EHP_JOIN_FAILED
                                          : EHP_JOIN_ACTIVE;
    hy->generation++;
    hy->join = EHP_JOIN_NONE;
    hy->leaving = false;
    hy->requested_s = 0.0;
    hy->deadline_s = INFINITY;
    hy->fetched = 0;
    hy->fetch_version = -1;
    memset(p->member_fetched + (size_t)h * (size_t)p->c.replica_gpus, 0,
           (size_t)p->c.replica_gpus * sizeof *p->member_fetched);
    set_role(p, h, EHP_ROLE_HYBRID_ROLLOUT);
    hy->rollout_ready_s = at_s + p->c.times.return_s;

    struct ehp_decision *d = record(p, out, kind, h);
    d->at_s = at_s;
    d->why = why;
    d->member = member;
    d->generation = generation;
    d->expect_s = p->c.times.return_s;
    fleet_changed(p, d);
}

/* Advances the clock to now_s, failing the joins whose deadline has come (at the deadline). */
static void advance(struct ehp_pool *p, double now_s, ehp_decision_vec *out)
{
    p->now_s = now_s;
    for (int h = 0; h < p->c.hybrid_replicas; h++) {
        const struct ehp_hybrid *hy = &p->hybrid[h];
        if (joining(hy->join) && hy->deadline_s <= now_s) /* INFINITY once ACTIVATING */
            roll_back(p, h, EHP_DEC_FAILED, EHP_WHY_TIMEOUT, -1, hy->deadline_s, out);
    }
}

static bool time_ok(const struct ehp_pool *p, double now_s)
{
    return isfinite(now_s) && now_s >= p->now_s;
}

static void request(struct ehp_pool *p, int h, struct ehp_handle *hd, ehp_decision_vec *out)
{
    struct ehp_hybrid *hy = &p->hybrid[h];
    hy->generation++;
    hy->join = EHP_JOIN_REQUESTED;
    hy->requested_s = p->now_s;
    hy->deadline_s = p->now_s + p->c.params.join_timeout_s;
    set_role(p, h, EHP_ROLE_HYBRID_JOINING);
    struct ehp_decision *d = record(p, out, EHP_DEC_JOIN, h);
    d->expect_s = p->c.times.start_s;
    d->deadline_s = hy->deadline_s;
    fleet_changed(p, d);
    if (hd)
        *hd = (struct ehp_handle){h, hy->generation};
}

/* Releases h (joining or active, not leaving). */
static void release(struct ehp_pool *p, int h, ehp_decision_vec *out)
{
    struct ehp_hybrid *hy = &p->hybrid[h];
    if (joining(hy->join)) {
        roll_back(p, h, EHP_DEC_CANCELLED, EHP_WHY_NONE, -1, p->now_s, out);
    } else if (p->step.open) {
        hy->leaving = true;
        record(p, out, EHP_DEC_RELEASE, h);
    } else {
        roll_back(p, h, EHP_DEC_RETURNED, EHP_WHY_NONE, -1, p->now_s, out);
    }
}

int ehp_pool_join(struct ehp_pool *p, double now_s, int replica, struct ehp_handle *h,
                  ehp_decision_vec *out)
{
    if (!time_ok(p, now_s) || replica < 0 || replica >= p->c.hybrid_replicas)
        return LIBRA_EINVAL;
    advance(p, now_s, out);
    if (p->hybrid[replica].join != EHP_JOIN_NONE || p->hybrid[replica].lost)
        return LIBRA_EINVAL;
    request(p, replica, h, out);
    return 0;
}

int ehp_pool_release(struct ehp_pool *p, double now_s, int replica, ehp_decision_vec *out)
{
    if (!time_ok(p, now_s) || replica < 0 || replica >= p->c.hybrid_replicas)
        return LIBRA_EINVAL;
    advance(p, now_s, out);
    const struct ehp_hybrid *hy = &p->hybrid[replica];
    if (hy->join == EHP_JOIN_NONE || hy->leaving)
        return LIBRA_EINVAL;
    release(p, replica, out);
    return 0;
}

enum ehp_join ehp_pool_join_state(const struct ehp_pool *p, struct ehp_handle h)
{
    if (h.replica < 0 || h.replica >= p->c.hybrid_replicas)
        return EHP_JOIN_FAILED;
    const struct ehp_hybrid *hy = &p->hybrid[h.replica];
    if (h.generation == hy->generation && hy->join != EHP_JOIN_NONE)
        return hy->join;
    if (h.generation == hy->ended_generation && hy->ended != EHP_JOIN_NONE)
        return hy->ended;
    return EHP_JOIN_FAILED;
}

/* ---- steps ---------------------------------------------------------------------------------- */

static void step_begin(struct ehp_pool *p, const struct ehp_event *ev, ehp_decision_vec *out)
{
    int nh = p->c.hybrid_replicas, core = p->c.core_replicas;
    p->version = ev->version;
    p->last_step = ev->step;
    if (p->signal.live && p->last_step >= p->signal.expires_step) {
        p->signal.live = false;
        record(p, out, EHP_DEC_SIGNAL_EXPIRED, -1);
    }
    int active = 0, placeholders = 0;
    for (int h = 0; h < nh; h++) {
        struct ehp_hybrid *hy = &p->hybrid[h];
        if (hy->join == EHP_JOIN_ACTIVATING) {
            hy->join = EHP_JOIN_ACTIVE;
            set_role(p, h, EHP_ROLE_HYBRID_TRAINING);
            record(p, out, EHP_DEC_ACTIVE, h);
        }
        /* a replica whose trainers are up is in the elastic domain */
        p->member[h] = hy->join == EHP_JOIN_ACTIVE ? EHP_MEMBER_ACTIVE
                       : joining(hy->join) && hy->join != EHP_JOIN_REQUESTED
                           ? EHP_MEMBER_PLACEHOLDER
                           : EHP_MEMBER_OUT;
        active += p->member[h] == EHP_MEMBER_ACTIVE;
        placeholders += p->member[h] == EHP_MEMBER_PLACEHOLDER;
        p->lost[h] = false;
    }
    if (nh > 0 && memcmp(p->member, p->prev_member, (size_t)nh) != 0) {
        p->step.epoch++;
        memcpy(p->prev_member, p->member, (size_t)nh);
    }

    /* shares: the core's replicas first, then the active hybrids in replica order; a fixed
     * batch is dealt over all of them, a growing one gives each hybrid a core replica's */
    int b = p->c.batch_trajectories, trained = 0;
    bool grow = p->c.params.batch == EHP_BATCH_GROW;
    int over = grow ? core : core + active, k = 0;
    assert(core >= 1 && over >= 1); /* ehp_pool_new refuses a pool without a core */
    for (int i = 0; i < core + nh; i++) {
        bool trains = i < core || p->member[i - core] == EHP_MEMBER_ACTIVE;
        if (!trains)
            p->share[i] = 0;
        else if (grow && i >= core)
            p->share[i] = b / core; /* a core replica's share, rounded down */
        else
            p->share[i] = b / over + (k < b % over); /* the first b % over get one more */
        k += trains;
        trained += p->share[i];
    }

    p->step.open = true;
    p->step.step = ev->step;
    p->step.version = ev->version;
    p->step.begin_s = p->now_s;
    p->step.active = active;
    p->step.placeholders = placeholders;
    p->step.batch_trajectories = trained;
    p->step.lost_count = 0;
    struct ehp_decision *d = record(p, out, EHP_DEC_STEP, -1);
    d->active = active;
    d->trajectories = trained;
}

static void step_end(struct ehp_pool *p, ehp_decision_vec *out)
{
    int nh = p->c.hybrid_replicas, lost_share = 0;
    for (int h = 0; h < nh; h++)
        if (p->lost[h])
            lost_share += p->share[p->c.core_replicas + h];
    p->step.open = false;
    p->version = p->step.version + 1;
    struct ehp_decision *d = record(p, out, EHP_DEC_STEP_END, -1);
    d->active = p->step.active;
    d->lost = p->step.lost_count;
    d->trajectories = p->step.batch_trajectories - lost_share;
    for (int h = 0; h < nh; h++)
        if (p->hybrid[h].leaving)
            roll_back(p, h, EHP_DEC_RETURNED, EHP_WHY_NONE, -1, p->now_s, out);
}

/* ---- replica events ------------------------------------------------------------------------- */

static void drop(struct ehp_pool *p, const struct ehp_event *ev, enum ehp_why why,
                 ehp_decision_vec *out)
{
    struct ehp_decision *d = record(p, out, EHP_DEC_DROPPED, ev->replica);
    d->why = why;
    d->generation = ev->generation;
    d->member = ev->kind == EHP_EV_FETCHED || ev->kind == EHP_EV_MEMBER_FAILED ? ev->member : -1;
}

static void fail(struct ehp_pool *p, int h, enum ehp_why why, int member, ehp_decision_vec *out)
{
    roll_back(p, h, EHP_DEC_FAILED, why, member, p->now_s, out);
}

/* Member `member` of hybrid replica h failed: its join (if any) fails, and since a replica
 * trains only whole, it leaves the pool for good. */
static void lose(struct ehp_pool *p, int h, int member, uint64_t generation, ehp_decision_vec *out)
{
    if (p->hybrid[h].join != EHP_JOIN_NONE)
        fail(p, h, EHP_WHY_MEMBER_FAILED, member, out);
    p->hybrid[h].lost = true;
    struct ehp_decision *d = record(p, out, EHP_DEC_LOST, h);
    d->member = member;
    d->generation = generation;
}

static void fetched(struct ehp_pool *p, const struct ehp_event *ev, ehp_decision_vec *out)
{
    int h = ev->replica;
    struct ehp_hybrid *hy = &p->hybrid[h];
    bool *mine = p->member_fetched + (size_t)h * (size_t)p->c.replica_gpus;
    if (hy->fetched > 0 && ev->version != hy->fetch_version) {
        fail(p, h, EHP_WHY_VERSION, ev->member, out);
        return;
    }
    if (mine[ev->member]) {
        drop(p, ev, EHP_WHY_PHASE, out); /* a repeat */
        return;
    }
    mine[ev->member] = true;
    hy->fetched++;
    hy->fetch_version = ev->version;
    if (hy->fetched == p->c.replica_gpus) {
        hy->join = EHP_JOIN_ZERO_SYNC;
        struct ehp_decision *d = record(p, out, EHP_DEC_ZERO_SYNC, h);
        d->version = hy->fetch_version;
        d->expect_s = p->c.times.zero_sync_s;
    }
}

static void replica_event(struct ehp_pool *p, const struct ehp_event *ev, ehp_decision_vec *out)
{
    int h = ev->replica;
    struct ehp_hybrid *hy = &p->hybrid[h];
    bool serving = hy->join == EHP_JOIN_NONE && ev->kind != EHP_EV_MEMBER_FAILED;
    if (ev->generation != hy->generation || hy->lost || serving) {
        drop(p, ev, EHP_WHY_STALE, out);
        return;
    }
    switch (ev->kind) {
    case EHP_EV_STARTED:
        if (hy->join != EHP_JOIN_REQUESTED) {
            drop(p, ev, EHP_WHY_PHASE, out);
            return;
        }
        hy->join = EHP_JOIN_FETCHING_STATE;
        record(p, out, EHP_DEC_FETCH, h)->expect_s = p->c.times.fetch_s;
        return;
    case EHP_EV_FETCHED:
        if (hy->join != EHP_JOIN_FETCHING_STATE)
            drop(p, ev, EHP_WHY_PHASE, out);
        else
            fetched(p, ev, out);
        return;
    case EHP_EV_SYNCED:
        if (hy->join != EHP_JOIN_ZERO_SYNC) {
            drop(p, ev, EHP_WHY_PHASE, out);
        } else if (ev->version != p->version) {
            fail(p, h, EHP_WHY_OUT_OF_STEP, -1, out);
        } else {
            hy->join = EHP_JOIN_ACTIVATING;
            hy->deadline_s = INFINITY;
            record(p, out, EHP_DEC_ACTIVATING, h);
        }
        return;
    default: /* EHP_EV_MEMBER_FAILED */
        lose(p, h, ev->member, ev->generation, out);
        return;
    }
}

/* ---- entry points --------------------------------------------------------------------------- */

/* Whether ev is well formed for p's state (nothing changes when it is not). */
static bool event_ok(const struct ehp_pool *p, const struct ehp_event *ev)
{
    if (!time_ok(p, ev->now_s))
        return false;
    switch (ev->kind) {
    case EHP_EV_TICK:
        return true;
    case EHP_EV_STEP_BEGIN:
        return !p->step.open && ev->step > p->last_step && ev->version >= p->version;
    case EHP_EV_STEP_END:
        return p->step.open && ev->step == p->step.step;
    case EHP_EV_STARTED:
    case EHP_EV_SYNCED:
        return ev->replica >= 0 && ev->replica < p->c.hybrid_replicas;
    case EHP_EV_FETCHED:
    case EHP_EV_MEMBER_FAILED:
        return ev->replica >= 0 && ev->replica < p->c.hybrid_replicas && ev->member >= 0 &&
               ev->member < p->c.replica_gpus;
    }
    return false;
}

int ehp_pool_event(struct ehp_pool *p, const struct ehp_event *ev, ehp_decision_vec *out)
{
    if (!event_ok(p, ev))
        return LIBRA_EINVAL;
    advance(p, ev->now_s, out);
    switch (ev->kind) {
    case EHP_EV_TICK:
        break;
    case EHP_EV_STEP_BEGIN:
        step_begin(p, ev, out);
        break;
    case EHP_EV_STEP_END:
        step_end(p, out);
        break;
    default:
        replica_event(p, ev, out);
        break;
    }
    return 0;
}

/* Hybrid replicas joining or training and not leaving, less those marked in leaving. */
static int committed(const struct ehp_pool *p, const bool *leaving)
{
    int n = 0;
    for (int h = 0; h < p->c.hybrid_replicas; h++) {
        const struct ehp_hybrid *hy = &p->hybrid[h];
        n += (joining(hy->join) || (hy->join == EHP_JOIN_ACTIVE && !hy->leaving)) &&
             !(leaving && leaving[h]);
    }
    return n;
}

int ehp_pool_signal(struct ehp_pool *p, double now_s, const struct ehp_signal_input *in,
                    ehp_decision_vec *out)
{
    struct ehp_signal_input checked = *in; /* T_rollout 0 is well formed here (below) */
    if (checked.rollout_s == 0.0)
        checked.rollout_s = 1.0;
    if (!time_ok(p, now_s) || !input_ok(&checked))
        return LIBRA_EINVAL;
    advance(p, now_s, out);
    if (in->rollout_s == 0.0) /* no rollout work seen: nothing to weigh T_train against */
        return 0;
    const struct ehp_pool_config *c = &p->c;
    int64_t spare = (int64_t)p->count[EHP_ROLE_CORE_ROLLOUT] +
                    (int64_t)c->hybrid_replicas * c->replica_gpus - c->min_rollout_gpus;
    int capacity = spare <= 0 ? 0 : (int)(spare / c->replica_gpus), left = 0;
    for (int h = 0; h < c->hybrid_replicas; h++)
        left += !p->hybrid[h].lost;
    if (capacity > left)
        capacity = left;
    ehp_signal_decide(&c->params, in, capacity, c->replica_gpus, c->core_replicas,
                      committed(p, NULL), p->last_step, &p->signal);
    record(p, out, EHP_DEC_SIGNAL, -1)->active = p->signal.target;
    return 0;
}

int ehp_pool_moves(const struct ehp_pool *p, const bool *leaving, struct ehp_move *out)
{
    int target = p->signal.live ? p->signal.target : 0, have = committed(p, leaving), n = 0;
    for (int h = 0; h < p->c.hybrid_replicas && have < target; h++)
        if (p->hybrid[h].join == EHP_JOIN_NONE && !p->hybrid[h].lost && !(leaving && leaving[h])) {
            out[n++] = (struct ehp_move){h, true};
            have++;
        }
    for (int pass = 0; pass < 2; pass++)
        for (int h = p->c.hybrid_replicas - 1; h >= 0 && have > target; h--) {
            const struct ehp_hybrid *hy = &p->hybrid[h];
            bool pick = pass == 0 ? joining(hy->join) : hy->join == EHP_JOIN_ACTIVE && !hy->leaving;
            if (pick && !(leaving && leaving[h])) {
                out[n++] = (struct ehp_move){h, false};
                have--;
            }
        }
    return n;
}

int ehp_pool_steer(struct ehp_pool *p, double now_s, ehp_decision_vec *out)
{
    if (!time_ok(p, now_s))
        return LIBRA_EINVAL;
    advance(p, now_s, out);
    struct ehp_move *moves = xmallocarray((size_t)p->c.hybrid_replicas + 1, sizeof *moves);
    int n = ehp_pool_moves(p, NULL, moves);
    for (int i = 0; i < n; i++) {
        if (moves[i].join)
            request(p, moves[i].replica, NULL, out);
        else
            release(p, moves[i].replica, out);
    }
    free(moves);
    return 0;
}

/* ---- read access ---------------------------------------------------------------------------- */

enum ehp_role ehp_pool_role(const struct ehp_pool *p, int gpu)
{
    return p->role[gpu];
}

int ehp_pool_role_gpus(const struct ehp_pool *p, enum ehp_role r)
{
    return p->count[r];
}

const struct ehp_hybrid *ehp_pool_hybrid(const struct ehp_pool *p, int replica)
{
    return &p->hybrid[replica];
}

const struct ehp_step *ehp_pool_step(const struct ehp_pool *p)
{
    return &p->step;
}

const struct ehp_signal *ehp_pool_signal_now(const struct ehp_pool *p)
{
    return &p->signal;
}

int64_t ehp_pool_version(const struct ehp_pool *p)
{
    return p->version;
}
