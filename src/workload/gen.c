/*
 * The generative process of workload.h: prompt pool, latents, turns, tool calls, rewards.
 *
 * Randomness is keyed, never sequential across trajectories: a prompt's latents come from
 * the stream (prompt_key, prompt), a trajectory's from (traj_key(prompt, sample, version)),
 * and turn t takes a fixed set of draws from its own stream (traj, t). So changing the causal
 * strength or a tool's pool changes only what depends on it, not the noise behind every later
 * turn, and two trajectories never share a stream.
 */
#include "workload/workload.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"
#include "util/rng.h"

/* Domains of the derived keys (arbitrary distinct constants). */
enum { KEY_PROMPT = 1, KEY_TRAJ = 2, KEY_PERM = 3, KEY_SETUP = 4 };

#define FEISTEL_ROUNDS 4

static double sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static int64_t clamp_round(double x, double lo, double hi)
{
    return (int64_t)llround(fmin(fmax(x, lo), hi));
}

/* Seconds to integer microseconds, saturating far beyond any real wait (about 31 years). */
static int64_t to_us(double s)
{
    return (int64_t)llround(fmin(s * 1e6, 1e15));
}

static int64_t draw_lognormal(const struct workload_lognormal *l, double z, double shift_log)
{
    return clamp_round(l->median * exp(l->sigma * z + shift_log), l->min, l->max);
}

void workload_gen_init(struct workload_gen *g, const struct workload_preset *w, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->preset = w;
    g->seed = seed;
    g->prompt_key = rng_hash(seed, (const uint64_t[]){KEY_PROMPT}, 1);
    g->traj_key = rng_hash(seed, (const uint64_t[]){KEY_TRAJ}, 1);
    g->perm_key = rng_hash(seed, (const uint64_t[]){KEY_PERM}, 1);
    while (((uint64_t)1 << (2 * g->perm_half_bits)) < (uint64_t)w->prompts)
        g->perm_half_bits++;
    if (g->perm_half_bits == 0)
        g->perm_half_bits = 1;
    double total = 0, acc = 0;
    for (size_t i = 0; i < w->n_tools; i++)
        total += w->tools[i].weight;
    for (size_t i = 0; i < w->n_tools; i++) {
        acc += w->tools[i].weight;
        g->tool_cum_weight[i] = acc / total;
        g->tool_bad0[i] = sigmoid(w->tools[i].bad_logit);
        workload_pool_model(&w->tools[i].pool, &g->pools[i]);
    }
}

/* ---- the prompt pool ------------------------------------------------------------------- */

/* A balanced Feistel network on 2 * half_bits bits: a bijection for any round function. */
static uint64_t feistel(const struct workload_gen *g, uint64_t round_key, uint64_t x)
{
    unsigned h = g->perm_half_bits;
    uint64_t mask = ((uint64_t)1 << h) - 1;
    uint64_t left = x >> h, right = x & mask;
    for (uint64_t r = 0; r < FEISTEL_ROUNDS; r++) {
        uint64_t f = rng_mix64(right ^ rng_mix64(round_key + r)) & mask;
        uint64_t next = left ^ f;
        left = right;
        right = next;
    }
    return (left << h) | right;
}

int64_t workload_prompt_for(const struct workload_gen *g, int64_t epoch, int64_t index)
{
    uint64_t round_key = rng_hash(g->perm_key, (const uint64_t[]){(uint64_t)epoch}, 1);
    uint64_t x = (uint64_t)index;
    /* Cycle walking: the domain is < 4 times the pool, so a few steps on average. */
    do
        x = feistel(g, round_key, x);
    while (x >= (uint64_t)g->preset->prompts);
    return (int64_t)x;
}

void workload_prompt(const struct workload_gen *g, int64_t prompt_id, struct workload_prompt *out)
{
    struct rng r = rng_keyed(g->prompt_key, (uint64_t)prompt_id, 0, 0);
    out->difficulty = rng_normal(&r);
    out->prompt_tokens = draw_lognormal(&g->preset->prompt_tokens, rng_normal(&r), 0);
}

/* ---- one trajectory -------------------------------------------------------------------- */

/* The draws of one turn, taken in a fixed order from the turn's own stream: its generation's
 * first, then its tool call's, drawn only when the turn makes one (the stream is the turn's
 * alone, so leaving its tail undrawn changes nothing else). */
struct turn_draws {
    struct rng r;
    double tokens; /* N(0,1): generated tokens */
    double finish; /* U[0,1): finish or not */
    double tool;   /* U[0,1): which tool */
    double bad;    /* U[0,1): outcome */
    double payload;
    double exec; /* N(0,1): execution time */
    double wait; /* U[0,1): waits for a worker or not */
    double wait_len;
};

static void draw_turn(uint64_t traj, int64_t turn, struct turn_draws *d)
{
    d->r = rng_keyed(traj, (uint64_t)turn, 0, 0);
    d->tokens = rng_normal(&d->r);
    d->finish = rng_uniform(&d->r);
}

static void draw_call(struct turn_draws *d)
{
    d->tool = rng_uniform(&d->r);
    d->bad = rng_uniform(&d->r);
    d->payload = rng_normal(&d->r);
    d->exec = rng_normal(&d->r);
    d->wait = rng_uniform(&d->r);
    d->wait_len = rng_uniform(&d->r);
}

/* The agent's state while a trajectory unfolds. */
struct agent {
    double z, v;         /* prompt difficulty, trajectory verbosity */
    double deficit;      /* D: bad outcomes minus their expected count */
    double tokens_log;   /* log tokens of a turn before its noise, turn and causal terms */
    double finish_logit; /* finish logit before its turn and causal terms */
    int64_t context;     /* tokens of the context so far */
    int64_t generated;   /* tokens generated so far */
};

static double drift_ramp(const struct workload_preset *w, int64_t version)
{
    if (!w->drift.enabled || version <= 0)
        return 0;
    return version >= w->drift.versions ? 1.0 : (double)version / (double)w->drift.versions;
}

static size_t pick_tool(const struct workload_gen *g, double u)
{
    size_t i = 0;
    while (i + 1 < g->preset->n_tools && u >= g->tool_cum_weight[i])
        i++;
    return i;
}

/* Makes the tool call of a non-final turn and lets the agent see its return. */
static void call_tool(const struct workload_gen *g, struct agent *s, const struct turn_draws *d,
                      struct trace_tool_call *call)
{
    const struct workload_preset *w = g->preset;
    size_t i = pick_tool(g, d->tool);
    const struct workload_tool *t = &w->tools[i];
    double k = w->causal.strength;
    double p_bad = sigmoid(t->bad_logit + k * (t->bad_difficulty * s->z + t->bad_verbosity * s->v));
    bool bad = d->bad < p_bad, timed_out;
    double exec_s = workload_pool_exec_s(&t->pool, d->exec, &timed_out);
    call->tool = (char *)t->name;
    call->exec_us = to_us(exec_s);
    call->queue_us = to_us(workload_pool_wait_s(&g->pools[i], d->wait, d->wait_len));
    if (timed_out) {
        call->status = TRACE_TOOL_TIMEOUT;
        call->payload_tokens = t->timeout_payload_tokens;
    } else {
        call->status = bad ? t->bad_status : t->good_status;
        call->payload_tokens =
            draw_lognormal(&t->payload_tokens, d->payload, bad ? t->bad_payload_log : 0);
    }
    s->deficit += (bad || timed_out ? 1.0 : 0.0) - g->tool_bad0[i];
    s->context += call->payload_tokens;
}

/* Generated tokens of turn (1-based); 0 < result <= max_turn_generated_tokens. */
static int64_t turn_tokens(const struct workload_preset *w, const struct agent *s, int64_t turn,
                           double noise)
{
    double lg = s->tokens_log + w->turn_tokens.sigma * noise +
                w->causal.strength * w->causal.tokens_log * s->deficit;
    if (turn == 1)
        lg += w->turn_tokens.first_turn_log;
    return clamp_round(exp(lg), 1, (double)w->max_turn_generated_tokens);
}

static void start_agent(const struct workload_gen *g, int64_t prompt_id, int64_t version,
                        struct rng *r, struct agent *s)
{
    const struct workload_preset *w = g->preset;
    struct workload_prompt p;
    workload_prompt(g, prompt_id, &p);
    double ramp = drift_ramp(w, version);
    memset(s, 0, sizeof *s);
    s->z = p.difficulty;
    s->v = rng_normal(r);
    bool stuck = rng_uniform(r) < sigmoid(w->stuck.logit + w->stuck.difficulty * s->z);
    s->context = p.prompt_tokens;
    s->tokens_log = log(w->turn_tokens.median) + w->turn_tokens.difficulty * s->z +
                    w->turn_tokens.verbosity * s->v + ramp * log(w->drift.generated_scale) +
                    (stuck ? w->stuck.tokens_log : 0);
    s->finish_logit = w->finish.logit - w->finish.difficulty * s->z - w->finish.verbosity * s->v +
                      ramp * w->drift.finish_logit - (stuck ? w->stuck.finish_logit : 0);
}

static double final_reward(const struct workload_preset *w, const struct agent *s, bool finished,
                           enum trace_finish how, double u)
{
    if (how == TRACE_FINISH_TRUNCATED)
        return 0;
    if (w->finish.means == WORKLOAD_FINISH_CORRECT)
        return finished ? 1 : 0;
    return u < sigmoid(w->reward.logit - w->reward.difficulty * s->z) ? 1 : 0;
}

/* The trajectory's setup (preset.h), from a stream of its own so that a preset without one
 * draws everything else as before. */
static int64_t setup_us(const struct workload_preset *w, uint64_t traj)
{
    if (w->setup.median_s <= 0)
        return 0;
    struct rng r = rng_keyed(traj, 0, KEY_SETUP, 0);
    return to_us(w->setup.median_s * exp(w->setup.sigma * rng_normal(&r)));
}

void workload_gen_traj(const struct workload_gen *g, int64_t prompt_id, int64_t sample,
                       int64_t version, struct trace_traj *out, struct arena *a)
{
    const struct workload_preset *w = g->preset;
    uint64_t traj =
        rng_hash(g->traj_key,
                 (const uint64_t[]){(uint64_t)prompt_id, (uint64_t)sample, (uint64_t)version}, 3);
    struct rng r = rng_keyed(traj, 0, 0, 0);
    struct agent s;
    start_agent(g, prompt_id, version, &r, &s);
    double u_reward = rng_uniform(&r);

    memset(out, 0, sizeof *out);
    out->step = version;
    out->prompt_id = prompt_id;
    out->sample = sample;
    out->version_start = out->version_end = version;
    out->turns = arena_calloc(a, (size_t)w->max_turns, sizeof *out->turns);
    struct trace_tool_call *calls = arena_calloc(a, (size_t)w->max_turns, sizeof *calls);

    bool finished = false;
    enum trace_finish how = TRACE_FINISH_COMPLETED;
    for (int64_t t = 1;; t++) {
        struct turn_draws d;
        draw_turn(traj, t, &d);
        struct trace_turn *turn = &out->turns[out->n_turns++];
        turn->prompt_tokens = s.context;
        turn->cached_tokens = -1;
        int64_t g_tok = turn_tokens(w, &s, t, d.tokens);
        int64_t room = w->max_generated_tokens - s.generated;
        if (w->context_tokens - s.context < room)
            room = w->context_tokens - s.context;
        if (g_tok >= room) { /* the token budget or the context runs out in this turn */
            turn->generated_tokens = room;
            how = TRACE_FINISH_TRUNCATED;
            break;
        }
        turn->generated_tokens = g_tok;
        s.generated += g_tok;
        s.context += g_tok;
        double logit = s.finish_logit + w->finish.per_turn * (double)(t - 1) -
                       w->causal.strength * w->causal.finish_logit * s.deficit;
        if (d.finish < sigmoid(logit)) {
            finished = true;
            break;
        }
        if (t == w->max_turns) {
            if (w->finish.turn_cap == WORKLOAD_CAP_TRUNCATED)
                how = TRACE_FINISH_TRUNCATED;
            break;
        }
        turn->calls = &calls[t - 1];
        turn->n_calls = 1;
        draw_call(&d);
        call_tool(g, &s, &d, turn->calls);
        if (s.context >= w->context_tokens) { /* the return filled the context */
            how = TRACE_FINISH_TRUNCATED;
            break;
        }
    }
    out->setup_us = setup_us(w, traj);
    out->finish = how;
    out->has_reward = true;
    out->reward = final_reward(w, &s, finished, how, u_reward);
}

void workload_group_traj(const struct workload_gen *g, int64_t index, int64_t sample,
                         int64_t version, struct trace_traj *out, struct arena *a)
{
    int64_t prompts = g->preset->prompts, epoch = index / prompts;
    workload_gen_traj(g, workload_prompt_for(g, epoch, index % prompts), sample, version, out, a);
    out->epoch = epoch;
}

bool workload_group_filtered(enum spec_dynamic_sampling ds, const struct trace_traj *group,
                             size_t n)
{
    if (ds == SPEC_DS_OFF || n == 0)
        return false;
    for (size_t i = 1; i < n; i++)
        if (group[i].reward != group[0].reward)
            return false;
    return true;
}

bool workload_filter_group(enum spec_dynamic_sampling ds, struct trace_traj *group, size_t n)
{
    if (!workload_group_filtered(ds, group, n))
        return false;
    for (size_t i = 0; i < n; i++)
        if (group[i].finish == TRACE_FINISH_COMPLETED)
            group[i].finish = TRACE_FINISH_FILTERED;
    return true;
}

void workload_lengths(const struct workload_preset *w, enum spec_dynamic_sampling ds, uint64_t seed,
                      size_t batch, size_t samples, size_t steps, size_t n,
                      struct workload_length *out)
{
    struct workload_gen g;
    workload_gen_init(&g, w, seed);
    struct arena a;
    arena_init(&a, 0);
    struct trace_traj *group = xmallocarray(samples, sizeof *group);
    size_t groups_per_step = batch / samples, nb = (n + batch - 1) / batch;
    for (size_t i = 0; i < n; i += samples) {
        size_t j = i / batch, step = j * (steps > nb ? steps : nb) / nb; /* the run's step */
        int64_t run_group = (int64_t)(step * groups_per_step + i % batch / samples);
        for (size_t k = 0; k < samples; k++)
            workload_group_traj(&g, run_group, (int64_t)k, (int64_t)step, &group[k], &a);
        bool filtered = workload_filter_group(ds, group, samples);
        for (size_t k = 0; k < samples; k++) {
            out[i + k] = (struct workload_length){.filtered = filtered};
            trace_traj_lengths(&group[k], &out[i + k].len);
            workload_tool_exec(w, &group[k], out[i + k].tool_exec_s);
        }
        arena_reset(&a);
    }
    free(group);
    arena_free(&a);
}

int workload_tool_index(const struct workload_preset *w, const char *name)
{
    for (size_t i = 0; i < w->n_tools; i++)
        if (strncmp(w->tools[i].name, name, WORKLOAD_TOOL_NAME_MAX - 1) == 0)
            return (int)i;
    return -1;
}

void workload_tool_exec(const struct workload_preset *w, const struct trace_traj *t,
                        double exec_s[WORKLOAD_MAX_TOOLS])
{
    for (size_t i = 0; i + 1 < t->n_turns; i++)
        for (size_t k = 0; k < t->turns[i].n_calls; k++) {
            const struct trace_tool_call *c = &t->turns[i].calls[k];
            int tool = workload_tool_index(w, c->tool);
            if (tool >= 0 && c->exec_us > 0)
                exec_s[tool] += (double)c->exec_us / 1e6;
        }
}

double workload_pool_load_s(const struct workload_preset *w,
                            const double exec_s[WORKLOAD_MAX_TOOLS], size_t n)
{
    double most = 0.0;
    for (size_t i = 0; n > 0 && i < w->n_tools; i++)
        if (w->tools[i].pool.workers > 0)
            most = fmax(most, exec_s[i] / (double)n / (double)w->tools[i].pool.workers);
    return most;
}

bool workload_trace_never_fills(enum spec_dynamic_sampling ds, const struct trace_traj *t, size_t n,
                                size_t samples, char *why, size_t size)
{
    if (ds == SPEC_DS_OFF || n < samples)
        return false;
    for (size_t i = 0; i + samples <= n; i += samples)
        if (!workload_group_filtered(ds, &t[i], samples))
            return false;
    snprintf(why, size,
             "rl.dynamic_sampling %s filters every group of the trace (%zu of rl.samples = %zu): "
             "no batch can fill",
             spec_dynamic_sampling_names[ds], n / samples, samples);
    return true;
}
