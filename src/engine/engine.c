/*
 * One inference instance as a state machine over caller-supplied time; see engine.h for the
 * contract and docs/engine.md for the model.
 *
 * The batch is kept in aggregate (decoding sequences, the Σ of their contexts, KV in use) and
 * every decoding sequence's progress is implied by the engine's iteration counter, so running k
 * identical iterations is O(1) plus O(log k) to find where a caller's time falls in the run.
 * Per-request work happens only at changes: an admission, a prefill completing, a finish, a
 * preemption, an abort. Requests live in a slot table; three queues of slots give the next to
 * admit, the next to preempt and the next to finish (see "queues of slots" below).
 */
#include "engine/engine.h"

#include <math.h>
#include <stdlib.h>

#include "engine/cache.h"
#include "engine/series.h"
#include "util/intmap.h"
#include "libra/libra.h"
#include "util/alloc.h"
#include "util/heap.h"
#include "util/vec.h"

#define NO_SLOT UINT32_MAX

enum req_state {
    R_FREE,    /* slot unused */
    R_WAITING, /* queued: new, or preempted */
    R_RUNNING, /* admitted: prefilling or decoding */
    R_ABORTED  /* aborted while an iteration it is part of runs; leaves when it ends */
};

enum { H_WAIT, H_VICTIM, H_FINISH, H_COUNT };
#define H_LISTS 2 /* H_WAIT and H_VICTIM: the orders that are lists in FIFO mode */

struct req {
    struct engine_request r;
    enum req_state state;
    bool decoding;       /* prompt done: one token per iteration, progress implied by e->iter */
    bool was_admitted;   /* cached_first is set */
    int64_t gen;         /* tokens generated (for a decoding one: as of iteration `base`) */
    int64_t computed;    /* tokens in its KV (for a decoding one: as of iteration `base`) */
    int64_t base;        /* e->iter when gen and computed were last brought up to date */
    int64_t high;        /* most tokens its KV ever held: prefill below this is recompute */
    int64_t reuse;       /* tokens its next admission may find in the cache */
    int64_t arrival;     /* submission order */
    int64_t wait_seq;    /* FIFO queue order; preempted requests get negative ones (in front) */
    int64_t admitted;    /* admission order: FIFO preempts the latest */
    int64_t finish_iter; /* value of e->iter after the iteration that samples its last token */
    double submit_s;
    double first_token_s;
    int64_t cached_first, prefill, recompute, preemptions;
    uint32_t prev[H_LISTS]; /* neighbours in each list it is in (FIFO mode), NO_SLOT at an end */
    uint32_t next[H_LISTS];
};

/* A prefill chunk of a composed run: tokens per iteration of the run. */
struct chunk {
    uint32_t slot;
    int64_t tokens;
};

/* The iterations composed at start time t0: k identical ones (steady), or one of any shape. */
struct run {
    double t0;
    int64_t k;         /* iterations in the run */
    int64_t done;      /* of which completed */
    int64_t allocated; /* of which KV slots were allocated (one ahead of done) */
    int64_t slots;     /* KV slots each iteration after the first allocates */
    double done_rel_s; /* S(done): from t0 to the end of the completed iterations */
    double end_rel_s;  /* S(k): from t0 to the end of the run */
    struct engine_series s;
};

struct engine {
    struct engine_config c;
    VEC(struct req) reqs;
    VEC(uint32_t) free_slots;
    struct intmap ids;                 /* live id -> slot */
    struct heap_indexed heap[H_COUNT]; /* slots by their key (heap_key), copied in so that
                                        * sifting never touches the request table */
    struct {
        uint32_t head, tail;
        size_t n;
    } list[H_LISTS];
    struct engine_cache cache;

    int64_t running;  /* admitted sequences, aborted ones included until they leave */
    int64_t n_dec;    /* of which decoding */
    int64_t dec_ctx;  /* Σ KV tokens of the decoding ones, as of iteration iter */
    int64_t used;     /* KV held by admitted sequences, the current iteration's slots included */
    uint32_t partial; /* admitted sequence whose prompt is partly prefilled, or NO_SLOT */
    int64_t iter;     /* iterations completed */

    double now;     /* the clock: the latest time a caller passed */
    double start_s; /* when not composed: the time the next iteration may start */
    bool ready;
    bool composed; /* run holds the current iterations (the first one has started) */
    struct run run;
    VEC(struct chunk) chunks;    /* the run's prefill chunks */
    VEC(uint32_t) aborted;       /* R_ABORTED slots, in abort order */
    VEC(struct engine_done) out; /* records not yet reported */

    int64_t next_arrival, next_front, next_admitted;
    struct engine_stats st;
};

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static struct req *req_at(struct engine *e, uint32_t slot)
{
    return &e->reqs.v[slot];
}

/* ---- indexed heaps of slots ------------------------------------------------------------- */

/* Adds slot to heap h with its key (k1, then k2, ascending). */
static void heap_add(struct engine *e, int h, uint32_t slot)
{
    const struct req *q = &e->reqs.v[slot];
    bool prio = e->c.priority;
    switch (h) {
    case H_WAIT: /* least attained service, then queue order */
        heap_indexed_set(&e->heap[h], slot, prio ? q->r.attained_service : 0.0, q->wait_seq);
        break;
    case H_VICTIM: /* most attained service, then latest arrival; FIFO: latest admission */
        heap_indexed_set(&e->heap[h], slot, prio ? -q->r.attained_service : 0.0,
                         prio ? -q->arrival : -q->admitted);
        break;
    default: /* H_FINISH: earliest finish, then admission order */
        heap_indexed_set(&e->heap[h], slot, (double)q->finish_iter, q->admitted);
    }
}

static uint32_t heap_top(const struct engine *e, int h)
{
    return heap_indexed_top(&e->heap[h])->id;
}

/* ---- queues of slots -------------------------------------------------------------------- */

/*
 * H_FINISH is always a heap (finish iterations come in any order). With priorities H_WAIT and
 * H_VICTIM are heaps too; in FIFO mode (vLLM's default) they are orders of arrival: the queue
 * is served from its front and a preempted request goes back to its front, and the victim is
 * the latest admitted. So there each is a doubly linked list, O(1) per admission, preemption
 * and finish where a heap pays O(log n) for each.
 */
static bool is_list(const struct engine *e, int h)
{
    return h < H_LISTS && !e->c.priority;
}

static void list_unlink(struct engine *e, int h, uint32_t slot)
{
    struct req *q = req_at(e, slot);
    if (q->prev[h] != NO_SLOT)
        req_at(e, q->prev[h])->next[h] = q->next[h];
    else
        e->list[h].head = q->next[h];
    if (q->next[h] != NO_SLOT)
        req_at(e, q->next[h])->prev[h] = q->prev[h];
    else
        e->list[h].tail = q->prev[h];
    e->list[h].n--;
}

static void list_insert(struct engine *e, int h, uint32_t slot, bool front)
{
    struct req *q = req_at(e, slot);
    uint32_t *head = &e->list[h].head, *tail = &e->list[h].tail;
    if (front) {
        q->prev[h] = NO_SLOT;
        q->next[h] = *head;
        if (*head != NO_SLOT)
            req_at(e, *head)->prev[h] = slot;
        else
            *tail = slot;
        *head = slot;
    } else {
        q->next[h] = NO_SLOT;
        q->prev[h] = *tail;
        if (*tail != NO_SLOT)
            req_at(e, *tail)->next[h] = slot;
        else
            *head = slot;
        *tail = slot;
    }
    e->list[h].n++;
}

/* Adds slot to queue h; in a list, at its front (where it is taken next) or at its back. */
static void queue_add(struct engine *e, int h, uint32_t slot, bool front)
{
    if (is_list(e, h))
        list_insert(e, h, slot, front);
    else
        heap_add(e, h, slot);
}

static void queue_remove(struct engine *e, int h, uint32_t slot)
{
    if (is_list(e, h))
        list_unlink(e, h, slot);
    else
        heap_indexed_remove(&e->heap[h], slot);
}

static uint32_t queue_top(const struct engine *e, int h)
{
    return is_list(e, h) ? e->list[h].head : heap_top(e, h);
}

static size_t queue_len(const struct engine *e, int h)
{
    return is_list(e, h) ? e->list[h].n : e->heap[h].n;
}

/* ---- requests --------------------------------------------------------------------------- */

/* Brings a decoding request's counters up to the engine's iteration count. */
static void req_sync(const struct engine *e, struct req *q)
{
    if (!q->decoding)
        return;
    int64_t d = e->iter - q->base;
    q->gen += d;
    q->computed += d;
    q->base = e->iter;
    if (q->computed > q->high)
        q->high = q->computed;
}

static int64_t req_tokens(const struct req *q)
{
    return q->r.prompt_tokens + q->gen;
}

static struct engine_done req_record(const struct req *q, enum engine_end end, double end_s)
{
    return (struct engine_done){
        .id = q->r.id,
        .tag = q->r.tag,
        .end = end,
        .submit_s = q->submit_s,
        .first_token_s = q->first_token_s,
        .end_s = end_s,
        .prompt_tokens = q->r.prompt_tokens,
        .gen_tokens = q->gen,
        .cached_tokens = q->cached_first,
        .prefill_tokens = q->prefill,
        .recompute_tokens = q->recompute,
        .preemptions = q->preemptions,
    };
}

static bool lookup(const struct engine *e, uint64_t id, uint32_t *slot)
{
    uint64_t v;
    if (!intmap_get(&e->ids, id, &v))
        return false;
    *slot = (uint32_t)v;
    return true;
}

static void forget_id(struct engine *e, const struct req *q)
{
    intmap_del(&e->ids, q->r.id);
}

static void slot_release(struct engine *e, uint32_t slot)
{
    req_at(e, slot)->state = R_FREE;
    vec_push(&e->free_slots, slot);
}

/* The cache may hold what admitted sequences leave free. */
static void cache_fit(struct engine *e)
{
    engine_cache_fit(&e->cache, e->c.kv_capacity_tokens - e->used);
}

/* Takes an admitted sequence out of the batch (it is in no heap any more) and frees its KV
 * into the prefix cache. */
static void unbatch(struct engine *e, uint32_t slot)
{
    struct req *q = req_at(e, slot);
    req_sync(e, q);
    if (q->decoding) {
        e->n_dec--;
        e->dec_ctx -= q->computed;
    }
    if (e->partial == slot)
        e->partial = NO_SLOT;
    e->running--;
    e->used -= q->computed;
    if (e->c.prefix_cache && q->r.prefix_key != 0 && q->computed > 0)
        engine_cache_put(&e->cache, q->r.prefix_key, q->computed);
}

/* Back to the queue, its KV freed: it will prefill its whole context again (vLLM recompute). */
static void preempt(struct engine *e, uint32_t slot)
{
    struct req *q = req_at(e, slot);
    queue_remove(e, H_VICTIM, slot);
    if (q->decoding)
        queue_remove(e, H_FINISH, slot);
    unbatch(e, slot);
    q->reuse = q->computed;
    q->computed = 0;
    q->decoding = false;
    q->state = R_WAITING;
    q->preemptions++;
    e->st.preemptions++;
    if (!e->c.priority)
        q->wait_seq = --e->next_front;
    queue_add(e, H_WAIT, slot, true);
}

static void finish(struct engine *e, uint32_t slot, double end_s)
{
    queue_remove(e, H_FINISH, slot);
    queue_remove(e, H_VICTIM, slot);
    unbatch(e, slot);
    struct req *q = req_at(e, slot);
    vec_push(&e->out, req_record(q, ENGINE_FINISHED, end_s));
    forget_id(e, q);
    slot_release(e, slot);
    e->st.finished++;
}

/* ---- composing iterations --------------------------------------------------------------- */

/* Tokens the partly prefilled sequence computes in the next iteration (0 when none). */
static int64_t partial_chunk(const struct engine *e)
{
    if (e->partial == NO_SLOT)
        return 0;
    const struct req *q = &e->reqs.v[e->partial];
    return min64(req_tokens(q) - q->computed, e->c.max_batched_tokens - e->n_dec);
}

static int64_t cache_hit(const struct engine *e, const struct req *q)
{
    if (!e->c.prefix_cache || q->r.prefix_key == 0)
        return 0;
    int64_t hit = engine_cache_tokens(&e->cache, q->r.prefix_key);
    return min64(min64(hit, q->reuse), req_tokens(q) - 1);
}

/* Admits the head of the queue with a chunk of at most *budget tokens, if its cached prefix
 * and chunk fit in the KV the batch leaves free. Returns whether it did. */
static bool admit_head(struct engine *e, int64_t *budget)
{
    uint32_t slot = queue_top(e, H_WAIT);
    struct req *q = req_at(e, slot);
    int64_t hit = cache_hit(e, q);
    int64_t chunk = min64(req_tokens(q) - hit, *budget);
    if (e->used + hit + chunk > e->c.kv_capacity_tokens)
        return false;
    queue_remove(e, H_WAIT, slot);
    if (e->c.prefix_cache && q->r.prefix_key != 0)
        engine_cache_take(&e->cache, q->r.prefix_key);
    q->state = R_RUNNING;
    q->computed = hit;
    if (hit > q->high)
        q->high = hit;
    q->admitted = e->next_admitted++;
    if (!q->was_admitted) {
        q->was_admitted = true;
        q->cached_first = hit;
    }
    e->st.cached_tokens += hit;
    e->running++;
    e->used += hit + chunk;
    *budget -= chunk;
    if (chunk < req_tokens(q) - hit)
        e->partial = slot;
    queue_add(e, H_VICTIM, slot, true);
    vec_push(&e->chunks, ((struct chunk){slot, chunk}));
    cache_fit(e);
    return true;
}

/* Preempts (most attained service first, else latest admitted) until every admitted sequence
 * gets its KV slots for the next iteration. Returns whether any was preempted. */
static bool make_room(struct engine *e)
{
    bool any = false;
    while (e->used + e->n_dec + partial_chunk(e) > e->c.kv_capacity_tokens) {
        preempt(e, queue_top(e, H_VICTIM));
        any = true;
    }
    return any;
}

static void note_peak(struct engine *e)
{
    if (e->used > e->st.kv_peak_tokens)
        e->st.kv_peak_tokens = e->used;
}

/* Iterations a steady run lasts: until a sequence finishes, the partial prompt's last chunk,
 * or the KV slots run out (e->used holds the first iteration's slots). */
static int64_t steady_length(const struct engine *e, int64_t m, int64_t rem)
{
    int64_t k = 1 + (e->c.kv_capacity_tokens - e->used) / (e->n_dec + m);
    if (m > 0)
        k = min64(k, (rem - 1) / m);
    if (e->heap[H_FINISH].n > 0)
        k = min64(k, e->reqs.v[heap_top(e, H_FINISH)].finish_iter - e->iter);
    return k;
}

/* The one-iteration cost of the composed batch (decoders in aggregate, then the chunks). */
static double batch_time(struct engine *e)
{
    struct cost_batch b = {.decode_seqs = (double)e->n_dec,
                           .decode_ctx_tokens = (double)e->dec_ctx};
    for (size_t i = 0; i < e->chunks.n; i++) {
        const struct req *q = req_at(e, e->chunks.v[i].slot);
        int64_t n = e->chunks.v[i].tokens;
        cost_batch_add_prefill(&b, (double)q->computed, (double)n,
                               n == req_tokens(q) - q->computed);
    }
    return cost_iter_time(&e->c.pre, &b);
}

/*
 * Composes the iterations starting at e->start_s (vLLM v1's scheduler step): the admitted
 * sequences first — each decoder one token, the partial prompt a chunk of what the budget
 * leaves, preempting when their KV slots do not fit — then, if nobody was preempted, queued
 * requests while the budget, the sequence cap and the free KV allow. When the result repeats
 * (no admission, no preemption, the partial prompt not completing), the run covers every
 * iteration until the next change.
 */
static void compose(struct engine *e)
{
    e->chunks.n = 0;
    bool preempted = make_room(e);
    uint32_t partial = e->partial;
    int64_t m = partial_chunk(e);
    int64_t rem =
        partial == NO_SLOT ? 0 : req_tokens(req_at(e, partial)) - req_at(e, partial)->computed;
    if (partial != NO_SLOT)
        vec_push(&e->chunks, ((struct chunk){partial, m}));
    e->used += e->n_dec + m;
    cache_fit(e);
    int64_t budget = e->c.max_batched_tokens - e->n_dec - m;
    size_t first_new = e->chunks.n;
    while (!preempted && queue_len(e, H_WAIT) > 0 && budget > 0 && e->running < e->c.max_seqs &&
           admit_head(e, &budget))
        ;
    note_peak(e);

    struct run *r = &e->run;
    *r = (struct run){.t0 = e->start_s, .k = 1, .allocated = 1};
    if (!preempted && e->chunks.n == first_new && (partial == NO_SLOT || m < rem)) {
        r->slots = e->n_dec + m;
        r->k = steady_length(e, m, rem);
        engine_series_init(&r->s, &e->c.pre, e->n_dec, e->dec_ctx, m,
                           partial == NO_SLOT ? 0 : req_at(e, partial)->computed);
    } else {
        engine_series_single(&r->s, batch_time(e));
    }
    r->end_rel_s = engine_series_sum(&r->s, r->k);
    e->composed = true;
    e->st.runs++;
}

/* ---- running iterations ----------------------------------------------------------------- */

/* Applies `tokens` of prefill to a chunk's sequence; at the end of the run, a completed prompt
 * samples a token and the sequence decodes from then on (or finishes). */
static void apply_chunk(struct engine *e, uint32_t slot, int64_t tokens, bool run_end, double end_s)
{
    struct req *q = req_at(e, slot);
    int64_t redo = min64(q->computed + tokens, q->high) - q->computed;
    q->computed += tokens;
    q->prefill += tokens;
    e->st.prefill_tokens += tokens;
    if (redo > 0) {
        q->recompute += redo;
        e->st.recompute_tokens += redo;
    }
    if (q->computed > q->high)
        q->high = q->computed;
    if (!run_end || q->computed < req_tokens(q))
        return;
    if (e->partial == slot)
        e->partial = NO_SLOT;
    e->st.sampled_tokens++;
    if (q->state == R_ABORTED)
        return;
    q->gen++;
    if (q->first_token_s < 0.0)
        q->first_token_s = end_s;
    q->decoding = true;
    q->base = e->iter;
    q->finish_iter = e->iter + q->r.gen_tokens - q->gen;
    e->n_dec++;
    e->dec_ctx += q->computed;
    queue_add(e, H_FINISH, slot, false);
}

/* Completes the run's iterations up to d (done < d <= k), which end d_rel_s after t0. */
static void commit(struct engine *e, int64_t d, double d_rel_s)
{
    struct run *r = &e->run;
    int64_t j = d - r->done;
    e->st.busy_s += d_rel_s - r->done_rel_s;
    e->st.iterations += j;
    e->st.sampled_tokens += e->n_dec * j;
    e->iter += j;
    e->dec_ctx += e->n_dec * j;
    r->done = d;
    r->done_rel_s = d_rel_s;
    int64_t alloc = min64(d + 1, r->k);
    e->used += r->slots * (alloc - r->allocated);
    r->allocated = alloc;
    note_peak(e);
    cache_fit(e);
    for (size_t i = 0; i < e->chunks.n; i++)
        apply_chunk(e, e->chunks.v[i].slot, e->chunks.v[i].tokens * j, d == r->k, r->t0 + d_rel_s);
}

/* After the run's last iteration: report the finished sequences, let the aborted ones go. */
static void end_run(struct engine *e)
{
    double end_s = e->run.t0 + e->run.end_rel_s;
    while (e->heap[H_FINISH].n > 0 && req_at(e, heap_top(e, H_FINISH))->finish_iter <= e->iter)
        finish(e, heap_top(e, H_FINISH), end_s);
    for (size_t i = 0; i < e->aborted.n; i++) {
        unbatch(e, e->aborted.v[i]);
        slot_release(e, e->aborted.v[i]);
    }
    e->aborted.n = 0;
    e->composed = false;
    e->start_s = end_s;
}

/* Ends run r after its first k iterations. */
static void run_cut(struct run *r, int64_t k)
{
    r->k = k;
    r->end_rel_s = engine_series_sum(&r->s, k);
}

static bool has_work(const struct engine *e)
{
    return e->running > 0 || queue_len(e, H_WAIT) > 0;
}

/* Runs every iteration that ends by until_s, composing those that start before it. */
static void catch_up(struct engine *e, double until_s)
{
    for (;;) {
        if (!e->composed) {
            if (!(until_s > e->start_s) || !e->ready || !has_work(e))
                break;
            compose(e);
        }
        struct run *r = &e->run;
        int64_t d = r->k;
        double d_rel_s = r->end_rel_s;
        if (r->t0 + d_rel_s > until_s) {
            d = engine_series_count(&r->s, r->done, r->k - 1, r->t0, until_s);
            d_rel_s = engine_series_sum(&r->s, d);
            /* an iteration that starts exactly at until_s is not composed yet: the run stops */
            if (d > r->done && r->t0 + d_rel_s == until_s)
                run_cut(r, d);
        }
        if (d > r->done)
            commit(e, d, d_rel_s);
        if (r->done < r->k)
            break;
        end_run(e);
    }
    e->now = until_s;
    if (!e->composed)
        e->start_s = until_s;
}

/* Common start of the calls that change the engine at now_s: catch up, then let the running
 * iteration be the last of its run, so the change applies when it ends. */
static int touch(struct engine *e, double now_s)
{
    if (!(now_s >= e->now) || isinf(now_s))
        return LIBRA_EINVAL;
    catch_up(e, now_s);
    if (e->composed)
        run_cut(&e->run, e->run.done + 1);
    return 0;
}

/* ---- API -------------------------------------------------------------------------------- */

void engine_config_default(struct engine_config *c, const struct cost_rollout_pre *pre)
{
    int64_t kv = (int64_t)floor(pre->kv_capacity_tokens);
    *c = (struct engine_config){
        .pre = *pre,
        .max_seqs = 256,
        .max_batched_tokens = 8192,
        .kv_capacity_tokens = kv,
        .max_model_tokens = kv,
        .prefix_cache = true,
    };
}

int engine_new(struct engine **out, const struct engine_config *c)
{
    *out = NULL;
    if (c->max_seqs < 1 || c->max_batched_tokens < c->max_seqs || c->kv_capacity_tokens < 1 ||
        c->max_model_tokens < 1 || c->max_model_tokens > c->kv_capacity_tokens)
        return LIBRA_EINVAL;
    struct engine *e = xcalloc(1, sizeof *e);
    e->c = *c;
    engine_cache_init(&e->cache);
    e->partial = NO_SLOT;
    for (int h = 0; h < H_LISTS; h++)
        e->list[h].head = e->list[h].tail = NO_SLOT;
    e->ready = true;
    e->st.kv_capacity_tokens = c->kv_capacity_tokens;
    *out = e;
    return 0;
}

void engine_free(struct engine *e)
{
    if (!e)
        return;
    vec_free(&e->reqs);
    vec_free(&e->free_slots);
    intmap_free(&e->ids);
    for (int h = 0; h < H_COUNT; h++)
        heap_indexed_free(&e->heap[h]);
    engine_cache_free(&e->cache);
    vec_free(&e->chunks);
    vec_free(&e->aborted);
    vec_free(&e->out);
    free(e);
}

int engine_advance(struct engine *e, double until_s, engine_done_fn fn, void *ctx)
{
    if (!(until_s >= e->now) || isinf(until_s))
        return LIBRA_EINVAL;
    catch_up(e, until_s);
    size_t n = e->out.n;
    for (size_t i = 0; fn && i < n; i++)
        fn(ctx, &e->out.v[i]);
    e->out.n = 0;
    return (int)n;
}

double engine_next_event_s(struct engine *e)
{
    if (e->out.n > 0)
        return e->now;
    if (!e->composed) {
        if (!e->ready || !has_work(e))
            return INFINITY;
        compose(e);
    }
    return e->run.t0 + e->run.end_rel_s;
}

static bool request_ok(const struct engine *e, const struct engine_request *r)
{
    return r->prompt_tokens >= 1 && r->gen_tokens >= 1 && r->reusable_prefix_tokens >= 0 &&
           r->reusable_prefix_tokens <= r->prompt_tokens &&
           r->prompt_tokens <= e->c.max_model_tokens &&
           r->gen_tokens <= e->c.max_model_tokens - r->prompt_tokens &&
           isfinite(r->attained_service);
}

static uint32_t slot_new(struct engine *e)
{
    if (e->free_slots.n > 0)
        return e->free_slots.v[--e->free_slots.n];
    vec_push(&e->reqs, (struct req){0});
    return (uint32_t)(e->reqs.n - 1);
}

int engine_submit(struct engine *e, double now_s, const struct engine_request *r)
{
    uint32_t slot;
    if (!(now_s >= e->now) || !request_ok(e, r) || lookup(e, r->id, &slot))
        return LIBRA_EINVAL;
    int rc = touch(e, now_s);
    if (rc)
        return rc;
    slot = slot_new(e);
    struct req *q = req_at(e, slot);
    *q = (struct req){
        .r = *r,
        .state = R_WAITING,
        .reuse = r->reusable_prefix_tokens,
        .arrival = e->next_arrival,
        .wait_seq = e->next_arrival,
        .submit_s = now_s,
        .first_token_s = -1.0,
    };
    e->next_arrival++;
    intmap_put(&e->ids, r->id, slot);
    queue_add(e, H_WAIT, slot, false);
    e->st.submitted++;
    return 0;
}

int engine_abort(struct engine *e, double now_s, uint64_t id, struct engine_done *out)
{
    int rc = touch(e, now_s);
    if (rc)
        return rc;
    uint32_t slot;
    if (!lookup(e, id, &slot))
        return LIBRA_ENOENT;
    struct req *q = req_at(e, slot);
    req_sync(e, q);
    if (out)
        *out = req_record(q, ENGINE_ABORTED, now_s);
    forget_id(e, q);
    e->st.aborted++;
    if (q->state == R_WAITING) {
        queue_remove(e, H_WAIT, slot);
        slot_release(e, slot);
        return 0;
    }
    queue_remove(e, H_VICTIM, slot);
    if (q->decoding)
        queue_remove(e, H_FINISH, slot);
    if (e->composed) { /* part of the running iteration: leaves when it ends */
        q->state = R_ABORTED;
        vec_push(&e->aborted, slot);
    } else {
        unbatch(e, slot);
        slot_release(e, slot);
    }
    return 0;
}

int engine_flush_cache(struct engine *e, double now_s)
{
    int rc = touch(e, now_s);
    if (rc)
        return rc;
    engine_cache_flush(&e->cache);
    e->st.cache_flushes++;
    return 0;
}

int engine_set_ready(struct engine *e, double now_s, bool ready)
{
    int rc = touch(e, now_s);
    if (rc)
        return rc;
    e->ready = ready;
    return 0;
}

int engine_generated_tokens(const struct engine *e, uint64_t id, int64_t *gen_tokens)
{
    uint32_t slot;
    if (!lookup(e, id, &slot))
        return LIBRA_ENOENT;
    const struct req *q = &e->reqs.v[slot];
    *gen_tokens = q->gen + (q->decoding ? e->iter - q->base : 0);
    return 0;
}

int engine_busy_at(const struct engine *e, double now_s, double *busy_s)
{
    if (!(now_s >= e->now) || isinf(now_s))
        return LIBRA_EINVAL;
    double busy = e->st.busy_s;
    if (e->composed) {
        const struct run *r = &e->run;
        double end_s = r->t0 + r->end_rel_s;
        if (now_s > end_s && e->ready) /* the next run is not composed yet */
            return LIBRA_EINVAL;
        double rel = now_s >= end_s ? r->end_rel_s : now_s - r->t0;
        if (rel > r->done_rel_s)
            busy += rel - r->done_rel_s;
    } else if (now_s > e->now && e->ready && has_work(e)) {
        return LIBRA_EINVAL; /* the iteration starting at the clock is not composed yet */
    }
    *busy_s = busy;
    return 0;
}

void engine_stats(const struct engine *e, struct engine_stats *out)
{
    *out = e->st;
    out->running = e->running;
    out->waiting = (int64_t)queue_len(e, H_WAIT);
    out->kv_used_tokens = e->used;
    out->cache_tokens = e->cache.tokens;
}
