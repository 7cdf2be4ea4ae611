/*
 * Differential test of the engine (sqlite bitvec.c style): a naive engine below steps one
 * iteration at a time with plain arrays and linear scans, costing each batch with
 * cost_iter_time on per-sequence cost_batch_add_* calls; the real engine fast-forwards over
 * runs of identical iterations in closed form (src/engine/series.c) with aggregate state and
 * heaps. Both get the same random calls — arrivals with shared prefix keys, aborts, cache
 * flushes, pauses, KV small enough to force preemption — and must produce the same records:
 * equal token counts, times within 1e-9 relative; between calls, the real engine's busy time
 * at any instant (asked without advancing) must match the naive one's stepped there.
 *
 * The naive engine implements the rules of docs/engine.md directly:
 *  - an iteration is composed when time passes its start (or the next event is asked for);
 *  - admitted sequences first: each decoder one token, the partial prompt a chunk of what the
 *    token budget leaves; while their KV slots do not fit, preempt the latest admitted (priority
 *    mode: most attained service, then latest arrival), freeing its KV into the cache and
 *    queueing it in front;
 *  - then, if none was preempted, queued requests (FIFO, or least attained service) while the
 *    budget, the sequence cap and the free KV (cache counts as free) allow, each taking its
 *    cached prefix;
 *  - at the end: decoders +1 token, chunks computed, completed prompts sample a token, finished
 *    sequences leave in admission order, then aborted ones in abort order; freed KV is cached
 *    under the request's key; the cache is trimmed LRU-first from entry tails to the free KV.
 */
#include "testutil.h"

#include <math.h>
#include <string.h>

#include "cost/rollout.h"
#include "cost/shape.h"
#include "engine/engine.h"
#include "libra/libra.h"
#include "spec/preset.h"
#include "util/rng.h"

#define MAXR 512
#define MAXC 512

enum { N_GONE, N_WAITING, N_RUNNING, N_ABORTED };

struct nreq {
    struct engine_request r;
    int state;
    bool decoding, was_admitted;
    int64_t gen, computed, high, reuse, arrival, wait_seq, admitted;
    int64_t chunk; /* prefill tokens in the composed iteration, 0 when decoding */
    double submit_s, first_token_s;
    int64_t cached_first, prefill, recompute, preemptions;
};

struct ncache {
    uint64_t key;
    int64_t tokens;
};

struct naive {
    struct engine_config c;
    struct nreq q[MAXR];
    int n;
    struct ncache cache[MAXC]; /* oldest first */
    int nc;
    int aborted[MAXR]; /* aborted while their iteration runs, in abort order */
    int na;
    int64_t used;
    double now, start_s, end_s;
    double iter_s, done_busy_s; /* the composed iteration's time; Σ of the completed ones' */
    bool ready, composed;
    int64_t next_front, next_admitted;
    struct engine_done out[MAXR];
    int nout;
    struct engine_stats st;
};

/* ---- cache ---- */

static int ncache_find(const struct naive *v, uint64_t key)
{
    for (int i = 0; i < v->nc; i++)
        if (v->cache[i].key == key)
            return i;
    return -1;
}

static void ncache_remove(struct naive *v, int i)
{
    memmove(&v->cache[i], &v->cache[i + 1], (size_t)(v->nc - i - 1) * sizeof v->cache[0]);
    v->nc--;
}

static int64_t ncache_total(const struct naive *v)
{
    int64_t t = 0;
    for (int i = 0; i < v->nc; i++)
        t += v->cache[i].tokens;
    return t;
}

static void ncache_fit(struct naive *v)
{
    while (ncache_total(v) > v->c.kv_capacity_tokens - v->used) {
        int64_t over = ncache_total(v) - (v->c.kv_capacity_tokens - v->used);
        if (v->cache[0].tokens <= over)
            ncache_remove(v, 0);
        else
            v->cache[0].tokens -= over;
    }
}

static void ncache_put(struct naive *v, uint64_t key, int64_t tokens)
{
    if (!v->c.prefix_cache || key == 0 || tokens == 0)
        return;
    int i = ncache_find(v, key);
    if (i >= 0)
        ncache_remove(v, i);
    assert_true(v->nc < MAXC);
    v->cache[v->nc++] = (struct ncache){key, tokens};
}

/* ---- requests ---- */

static int64_t ntokens(const struct nreq *q)
{
    return q->r.prompt_tokens + q->gen;
}

static struct engine_done nrecord(const struct nreq *q, enum engine_end end, double t)
{
    return (struct engine_done){.id = q->r.id,
                                .tag = q->r.tag,
                                .end = end,
                                .submit_s = q->submit_s,
                                .first_token_s = q->first_token_s,
                                .end_s = t,
                                .prompt_tokens = q->r.prompt_tokens,
                                .gen_tokens = q->gen,
                                .cached_tokens = q->cached_first,
                                .prefill_tokens = q->prefill,
                                .recompute_tokens = q->recompute,
                                .preemptions = q->preemptions};
}

/* Frees an admitted sequence's KV into the cache. */
static void nrelease(struct naive *v, struct nreq *q)
{
    v->used -= q->computed;
    ncache_put(v, q->r.prefix_key, q->computed);
    q->state = N_GONE;
}

static bool wait_before(const struct naive *v, const struct nreq *a, const struct nreq *b)
{
    if (v->c.priority && a->r.attained_service != b->r.attained_service)
        return a->r.attained_service < b->r.attained_service;
    return a->wait_seq < b->wait_seq;
}

static bool victim_before(const struct naive *v, const struct nreq *a, const struct nreq *b)
{
    if (v->c.priority && a->r.attained_service != b->r.attained_service)
        return a->r.attained_service > b->r.attained_service;
    return v->c.priority ? a->arrival > b->arrival : a->admitted > b->admitted;
}

static struct nreq *pick(struct naive *v, int state,
                         bool (*better)(const struct naive *, const struct nreq *,
                                        const struct nreq *))
{
    struct nreq *best = NULL;
    for (int i = 0; i < v->n; i++)
        if (v->q[i].state == state && (!best || better(v, &v->q[i], best)))
            best = &v->q[i];
    return best;
}

static int nrunning(const struct naive *v, int64_t *decoders)
{
    int n = 0;
    *decoders = 0;
    for (int i = 0; i < v->n; i++)
        if (v->q[i].state == N_RUNNING) {
            n++;
            *decoders += v->q[i].decoding;
        }
    return n;
}

/* ---- iterations ---- */

static int64_t running_need(struct naive *v)
{
    int64_t dec, need = 0;
    nrunning(v, &dec);
    for (int i = 0; i < v->n; i++) {
        struct nreq *q = &v->q[i];
        if (q->state != N_RUNNING)
            continue;
        q->chunk = q->decoding ? 0 : ntokens(q) - q->computed;
        if (q->chunk > v->c.max_batched_tokens - dec)
            q->chunk = v->c.max_batched_tokens - dec;
        need += q->decoding ? 1 : q->chunk;
    }
    return need;
}

static void npreempt(struct naive *v, struct nreq *q)
{
    if (q->computed > q->high)
        q->high = q->computed;
    nrelease(v, q);
    q->reuse = q->computed;
    q->computed = 0;
    q->decoding = false;
    q->state = N_WAITING;
    q->preemptions++;
    v->st.preemptions++;
    if (!v->c.priority)
        q->wait_seq = --v->next_front;
}

static bool nadmit(struct naive *v, int64_t *budget)
{
    struct nreq *q = pick(v, N_WAITING, wait_before);
    int ci = v->c.prefix_cache && q->r.prefix_key ? ncache_find(v, q->r.prefix_key) : -1;
    int64_t hit = ci >= 0 ? v->cache[ci].tokens : 0;
    if (hit > q->reuse)
        hit = q->reuse;
    if (hit > ntokens(q) - 1)
        hit = ntokens(q) - 1;
    int64_t chunk = ntokens(q) - hit < *budget ? ntokens(q) - hit : *budget;
    if (v->used + hit + chunk > v->c.kv_capacity_tokens)
        return false;
    if (ci >= 0)
        ncache_remove(v, ci);
    q->state = N_RUNNING;
    q->computed = hit;
    if (hit > q->high)
        q->high = hit;
    q->admitted = v->next_admitted++;
    if (!q->was_admitted) {
        q->was_admitted = true;
        q->cached_first = hit;
    }
    v->st.cached_tokens += hit;
    q->chunk = chunk;
    v->used += hit + chunk;
    *budget -= chunk;
    ncache_fit(v);
    return true;
}

static void ncompose(struct naive *v)
{
    bool preempted = false;
    int64_t need;
    while (v->used + (need = running_need(v)) > v->c.kv_capacity_tokens) {
        npreempt(v, pick(v, N_RUNNING, victim_before));
        preempted = true;
    }
    v->used += need;
    ncache_fit(v);
    int64_t dec, budget = v->c.max_batched_tokens - need;
    while (!preempted && pick(v, N_WAITING, wait_before) && budget > 0 &&
           nrunning(v, &dec) < v->c.max_seqs && nadmit(v, &budget))
        ;
    if (v->used > v->st.kv_peak_tokens)
        v->st.kv_peak_tokens = v->used;
    struct cost_batch b = {0};
    for (int i = 0; i < v->n; i++) {
        const struct nreq *q = &v->q[i];
        if (q->state == N_RUNNING && q->decoding)
            cost_batch_add_decode(&b, (double)q->computed);
    }
    for (int i = 0; i < v->n; i++) {
        const struct nreq *q = &v->q[i];
        if (q->state == N_RUNNING && !q->decoding)
            cost_batch_add_prefill(&b, (double)q->computed, (double)q->chunk,
                                   q->chunk == ntokens(q) - q->computed);
    }
    double t = cost_iter_time(&v->c.pre, &b);
    v->end_s = v->start_s + t;
    v->iter_s = t;
    v->st.busy_s += t;
    v->composed = true;
}

static void nfinish_iteration(struct naive *v)
{
    v->st.iterations++;
    v->done_busy_s += v->iter_s;
    for (int i = 0; i < v->n; i++) {
        struct nreq *q = &v->q[i];
        if (q->state != N_RUNNING && q->state != N_ABORTED)
            continue;
        if (q->decoding) {
            q->computed++;
            v->st.sampled_tokens++;
            if (q->state == N_RUNNING)
                q->gen++;
            continue;
        }
        int64_t redo =
            (q->computed + q->chunk < q->high ? q->computed + q->chunk : q->high) - q->computed;
        if (redo > 0) {
            q->recompute += redo;
            v->st.recompute_tokens += redo;
        }
        q->computed += q->chunk;
        q->prefill += q->chunk;
        v->st.prefill_tokens += q->chunk;
        if (q->computed > q->high)
            q->high = q->computed;
        if (q->computed == ntokens(q)) {
            v->st.sampled_tokens++;
            if (q->state == N_RUNNING) {
                q->gen++;
                q->decoding = true;
                if (q->first_token_s < 0.0)
                    q->first_token_s = v->end_s;
            }
        }
    }
    for (;;) { /* finished ones, in admission order */
        struct nreq *first = NULL;
        for (int i = 0; i < v->n; i++) {
            struct nreq *q = &v->q[i];
            if (q->state == N_RUNNING && q->decoding && q->gen == q->r.gen_tokens &&
                (!first || q->admitted < first->admitted))
                first = q;
        }
        if (!first)
            break;
        v->out[v->nout++] = nrecord(first, ENGINE_FINISHED, v->end_s);
        v->st.finished++;
        nrelease(v, first);
    }
    for (int i = 0; i < v->na; i++)
        nrelease(v, &v->q[v->aborted[i]]);
    v->na = 0;
    v->composed = false;
    v->start_s = v->end_s;
}

static bool nwork(struct naive *v)
{
    return pick(v, N_WAITING, wait_before) || pick(v, N_RUNNING, victim_before);
}

static void ncatch_up(struct naive *v, double until)
{
    for (;;) {
        if (!v->composed) {
            if (!(until > v->start_s) || !v->ready || !nwork(v))
                break;
            ncompose(v);
        }
        if (v->end_s > until)
            break;
        nfinish_iteration(v);
    }
    v->now = until;
    if (!v->composed)
        v->start_s = until;
}

static double nnext_event(struct naive *v)
{
    if (v->nout > 0)
        return v->now;
    if (!v->composed) {
        if (!v->ready || !nwork(v))
            return INFINITY;
        ncompose(v);
    }
    return v->end_s;
}

static void nsubmit(struct naive *v, double now, const struct engine_request *r)
{
    ncatch_up(v, now);
    assert_true(v->n < MAXR);
    v->q[v->n] = (struct nreq){.r = *r,
                               .state = N_WAITING,
                               .reuse = r->reusable_prefix_tokens,
                               .arrival = v->n,
                               .wait_seq = v->n,
                               .submit_s = now,
                               .first_token_s = -1.0};
    v->n++;
}

static bool nabort(struct naive *v, double now, uint64_t id, struct engine_done *d)
{
    ncatch_up(v, now);
    for (int i = 0; i < v->n; i++) {
        struct nreq *q = &v->q[i];
        if (q->r.id != id || (q->state != N_WAITING && q->state != N_RUNNING))
            continue;
        *d = nrecord(q, ENGINE_ABORTED, now);
        v->st.aborted++;
        if (q->state == N_WAITING) {
            q->state = N_GONE;
        } else if (v->composed) {
            q->state = N_ABORTED;
            v->aborted[v->na++] = i;
        } else {
            nrelease(v, q);
        }
        return true;
    }
    return false;
}

/* Busy seconds at q (not before the clock, not past the composed iteration): the completed
 * iterations and the part of the composed one before q. */
static double nbusy_at(const struct naive *v, double q)
{
    double part = v->composed ? q - v->start_s : 0;
    return v->done_busy_s + (part < 0 ? 0 : part > v->iter_s ? v->iter_s : part);
}

/* ---- the comparison ---- */

struct fast_out {
    struct engine_done d[MAXR];
    int n;
};

static void fast_collect(void *ctx, const struct engine_done *d)
{
    struct fast_out *o = ctx;
    assert_true(o->n < MAXR);
    o->d[o->n++] = *d;
}

static void same_record(const struct engine_done *a, const struct engine_done *b)
{
    assert_int_equal(a->id, b->id);
    assert_int_equal(a->tag, b->tag);
    assert_int_equal(a->end, b->end);
    assert_int_equal(a->gen_tokens, b->gen_tokens);
    assert_int_equal(a->prompt_tokens, b->prompt_tokens);
    assert_int_equal(a->cached_tokens, b->cached_tokens);
    assert_int_equal(a->prefill_tokens, b->prefill_tokens);
    assert_int_equal(a->recompute_tokens, b->recompute_tokens);
    assert_int_equal(a->preemptions, b->preemptions);
    assert_true(a->submit_s == b->submit_s);
    if (a->first_token_s < 0.0)
        assert_true(b->first_token_s == a->first_token_s);
    else
        assert_close(a->first_token_s, b->first_token_s, 1e-9);
    assert_close(a->end_s, b->end_s, 1e-9);
}

/* The naive engine's new records against the real engine's since the last check. */
static void same_outputs(struct naive *v, struct fast_out *o)
{
    assert_int_equal(v->nout, o->n);
    for (int i = 0; i < o->n; i++)
        same_record(&v->out[i], &o->d[i]);
    v->nout = o->n = 0;
}

static void same_stats(const struct naive *v, struct engine *e)
{
    struct engine_stats s;
    engine_stats(e, &s);
    assert_int_equal(s.iterations, v->st.iterations);
    assert_int_equal(s.sampled_tokens, v->st.sampled_tokens);
    assert_int_equal(s.prefill_tokens, v->st.prefill_tokens);
    assert_int_equal(s.cached_tokens, v->st.cached_tokens);
    assert_int_equal(s.recompute_tokens, v->st.recompute_tokens);
    assert_int_equal(s.preemptions, v->st.preemptions);
    assert_int_equal(s.finished, v->st.finished);
    assert_int_equal(s.aborted, v->st.aborted);
    assert_int_equal(s.kv_peak_tokens, v->st.kv_peak_tokens);
    assert_int_equal(s.cache_tokens, ncache_total(v));
    assert_close(s.busy_s, v->st.busy_s, 1e-9);
}

static struct cost_rollout_pre qwen_pre;

static int load_qwen(void **state)
{
    struct spec_presets ps;
    struct libra_error err = {0};
    struct cost_shape shape;
    struct cost_rollout_params p;
    assert_int_equal(spec_presets_init(&ps, &err), 0);
    const struct spec_hardware *hw = spec_hardware_find(&ps, "a800-80g");
    assert_int_equal(cost_shape_init(&shape, spec_model_find(&ps, "qwen3-14b")), 0);
    cost_rollout_params_default(&p, hw);
    assert_int_equal(cost_rollout_pre_init(&qwen_pre, &shape, hw, &p, 2), 0);
    spec_presets_free(&ps);
    return 0;
}

/*
 * Busy time at query times between the last call (now) and the next one (next): the real
 * engine answers without advancing, up to the end of what it has composed (asked for here, as
 * a caller would); the naive engine steps to each query time (which only composes iterations
 * that the next call would compose anyway) and counts the elapsed part of the running one.
 */
static void same_busy(struct naive *v, struct engine *e, double now, double next, struct rng *g)
{
    double tn = nnext_event(v), tf = engine_next_event_s(e);
    assert_int_equal(isinf(tn), isinf(tf));
    double hi = tf < next ? tf : next, mid = now + rng_uniform(g) * (hi - now);
    double q[3] = {now, mid, hi};
    for (int i = 0; i < 3; i++) {
        double bf;
        assert_int_equal(engine_busy_at(e, q[i], &bf), 0);
        ncatch_up(v, q[i]);
        assert_close(bf, nbusy_at(v, q[i]), 1e-9);
    }
}

/* The instance of scenario g: Qwen3-14B TP2 on A800 with its KV cut down, or a toy whose
 * attention bounds cross within a few hundred tokens of context. */
static struct engine_config scenario_config(struct rng *g)
{
    struct cost_rollout_pre pre = qwen_pre;
    if (rng_bernoulli(g, 0.5)) {
        pre = (struct cost_rollout_pre){.tp = 1,
                                        .layers = 2.0,
                                        .t_layer_weights_s = 0.01,
                                        .s_per_layer_token = 2e-5 * rng_uniform(g),
                                        .t_head_weights_s = 0.002,
                                        .s_per_head_token = 1e-5,
                                        .kv_bytes_per_token = 1.0,
                                        .s_per_kv_byte = 1e-5,
                                        .s_per_attn_pair = 1e-5 * (0.1 + 3.0 * rng_uniform(g)),
                                        .t_allreduce_fixed_s = 1e-4,
                                        .s_allreduce_per_token = 1e-7,
                                        .t_fix_s = 0.003,
                                        .t_seq_s = 1e-4};
    }
    struct engine_config c;
    engine_config_default(&c, &pre);
    c.max_seqs = 1 + (int)rng_uniform_int(g, 6);
    c.max_batched_tokens = c.max_seqs + (int64_t)rng_uniform_int(g, 80);
    c.kv_capacity_tokens = 40 + (int64_t)rng_uniform_int(g, 300);
    c.max_model_tokens = c.kv_capacity_tokens;
    c.prefix_cache = rng_bernoulli(g, 0.8);
    c.priority = rng_bernoulli(g, 0.3);
    return c;
}

/* One random scenario on both engines. Returns the real engine's (runs, iterations). */
static void scenario(uint64_t seed, int64_t *runs, int64_t *iterations)
{
    struct rng g = rng_keyed(seed, 0xe9, 0, 0), gq = rng_keyed(seed, 0xb5, 0, 0);
    static struct naive v;
    memset(&v, 0, sizeof v);
    v.c = scenario_config(&g);
    v.ready = true;
    struct engine *e;
    assert_int_equal(engine_new(&e, &v.c), 0);
    struct fast_out o = {.n = 0};
    double iter_s = cost_decode_time(&v.c.pre, 1.0, 100.0);
    double now = 0.0, next = rng_exponential(&g, 1.0 / (iter_s * (1.0 + 10.0 * rng_uniform(&g))));
    uint64_t next_id = 1;
    for (int op = 0; op < 80 && v.n < MAXR - 1; op++) {
        now = next;
        double u = rng_uniform(&g);
        if (u < 0.5) {
            int64_t cap = v.c.max_model_tokens;
            int64_t prompt = 1 + (int64_t)rng_uniform_int(&g, (uint64_t)cap / 2);
            uint64_t room = (uint64_t)(cap - prompt);
            struct engine_request r = {
                .id = next_id++,
                .tag = seed,
                .prefix_key = rng_uniform_int(&g, 5),
                .prompt_tokens = prompt,
                .reusable_prefix_tokens = (int64_t)rng_uniform_int(&g, (uint64_t)prompt + 1),
                .gen_tokens = 1 + (int64_t)rng_uniform_int(&g, room < 60 ? room : 60),
                .attained_service = (double)rng_uniform_int(&g, 4)};
            nsubmit(&v, now, &r);
            assert_int_equal(engine_submit(e, now, &r), 0);
        } else if (u < 0.62) {
            uint64_t id = 1 + rng_uniform_int(&g, next_id);
            struct engine_done dn, df;
            bool hit = nabort(&v, now, id, &dn);
            assert_int_equal(engine_abort(e, now, id, &df), hit ? 0 : LIBRA_ENOENT);
            if (hit)
                same_record(&dn, &df);
        } else if (u < 0.68) {
            ncatch_up(&v, now);
            v.nc = 0;
            assert_int_equal(engine_flush_cache(e, now), 0);
        } else if (u < 0.74) {
            bool ready = rng_bernoulli(&g, 0.6);
            ncatch_up(&v, now);
            v.ready = ready;
            assert_int_equal(engine_set_ready(e, now, ready), 0);
        } else if (u < 0.84) {
            ncatch_up(&v, now);
            assert_true(engine_advance(e, now, fast_collect, &o) >= 0);
            same_outputs(&v, &o);
            double tn = nnext_event(&v), tf = engine_next_event_s(e);
            assert_int_equal(isinf(tn), isinf(tf));
            assert_true(isinf(tf) || tf >= tn * (1.0 - 1e-12)); /* a run ends at a change */
        } else {
            ncatch_up(&v, now);
            assert_true(engine_advance(e, now, fast_collect, &o) >= 0);
            same_outputs(&v, &o);
        }
        next = now + rng_exponential(&g, 1.0 / (iter_s * (1.0 + 10.0 * rng_uniform(&g))));
        same_busy(&v, e, now, next, &gq);
    }
    now = next; /* past the last busy query */
    ncatch_up(&v, now);
    v.ready = true;
    assert_int_equal(engine_set_ready(e, now, true), 0);
    ncatch_up(&v, now + 1e7);
    assert_true(engine_advance(e, now + 1e7, fast_collect, &o) >= 0);
    same_outputs(&v, &o);
    same_stats(&v, e);
    struct engine_stats s;
    engine_stats(e, &s);
    assert_int_equal(s.running + s.waiting, 0);
    *runs = s.runs;
    *iterations = s.iterations;
    engine_free(e);
}

static void test_fast_forward_matches_per_iteration_stepping(void **state)
{
    int64_t runs = 0, iterations = 0;
    for (uint64_t seed = 1; seed <= 1500; seed++) {
        int64_t r, it;
        scenario(seed, &r, &it);
        runs += r;
        iterations += it;
    }
    /* the fast path was taken: far fewer compositions than iterations */
    assert_true(runs * 3 < iterations);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fast_forward_matches_per_iteration_stepping),
    };
    return cmocka_run_group_tests(tests, load_qwen, NULL);
}
