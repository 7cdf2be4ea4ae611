/*
 * Figures for sched/: what a routing decision costs. The gateway routes every turn of every
 * live trajectory on its one event-loop thread, so a decision must stay far below the
 * milliseconds a turn takes to prefill: the target is a median of at most 2 us with
 * 100 k live trajectories and 10 k prompt trees, structured observations (the client sends
 * tool name, size and status), at most 512 bytes per live trajectory outside the trees and at
 * most 1 KiB per tree node under a total cap.
 *
 * Input (util/rng seed 1): tool-return states drawn from 4 tools x 3 sizes x 3 statuses with
 * a skew (index = floor(36 u^3): a few states are common, as in real runs); prompt trees from
 * 4 trajectories per prompt of 1-12 returns each, 10 % of them censored; live trajectories
 * spread over the prompts, each with 5 returns already routed; a registry of 12 instances in
 * the three buckets of R2E-Gym 14B (tp1:4000,tp2:12000,tp4:30000). One op of
 * route_tool_return is sched_router_turn_done + sched_router_tool_return (cmlfq) on the next
 * live trajectory in turn; route_tool_return_cmlfq_h is the same with cmlfq_h, its decision
 * costs those of Qwen2.5-14B on A800 (cost/move.h at sim.max_seqs 256, chunk 8192) with a 400 s
 * deadline and 48 GPUs waiting per second late, the registry's load live. status_from_text
 * classifies tool output without any of the keywords (the whole text is scanned; one op = one byte,
 * so op/s is bytes/s).
 *
 * route_eval_100mb is the whole `libra route eval` command on a 100 MB trace (R2E-Gym, 3200
 * steps of 32 trajectories, seed 1, written to TMPDIR first; smoke: 20 steps); the target is
 * at most 10 s.
 *
 * After the harness's figures the program prints, in the same line format, the per-decision
 * latency percentiles (each decision timed alone; the clock's own cost, about 20-30 ns, is
 * included), and the memory figures (unit "bytes").
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cost/calib.h"
#include "cost/move.h"
#include "harness.h"
#include "sched/router.h"
#include "util/alloc.h"
#include "util/json.h"
#include "util/rng.h"

#define INPUT_ROUTE                                                                                \
    "cmlfq, n live trajectories (5 returns each) over n/10 prompt trees of 4 trajectories, "       \
    "36 skewed states, 12 instances, tp1:4000,tp2:12000,tp4:30000 (bench_route.c, seed 1)"
#define INPUT_ROUTE_H                                                                              \
    "cmlfq_h, as route_tool_return; Qwen2.5-14B on A800 costs, deadline 400 s, 48 GPUs late "      \
    "(bench_route.c, seed 1)"
#define INPUT_TEXT "tool output without status keywords, 64 KiB chunks (bench_route.c, seed 1)"
#define LIVE_FULL 100000

static const char *const tools[] = {"execute_bash", "file_editor", "search", "validator"};

/* A state index in [0, 36) with a skew towards small indices. */
static unsigned draw_state(struct rng *r)
{
    double u = rng_uniform(r);
    return (unsigned)(36.0 * u * u * u);
}

static struct sched_obs obs_of(unsigned state)
{
    struct sched_obs o = {.size = (enum sched_size)(state / 3 % 3),
                          .status = (enum sched_status)(state % 3),
                          .status_from = SCHED_FROM_EXPLICIT,
                          .payload_tokens = 100};
    snprintf(o.tool, sizeof o.tool, "%s", tools[state / 9]);
    return o;
}

struct route_state {
    struct cost_move_model move; /* cmlfq_h's costs */
    struct sched_model *model;
    struct sched_router *router;
    struct sched_instance inst[12];
    struct sched_registry reg;
    struct sched_obs obs[36];
    uint64_t live, next;
};

static void teach(struct route_state *s, uint64_t prompts, struct rng *r)
{
    struct sched_obs_config oc = {0};
    char key[SCHED_STATE_KEY_MAX];
    uint32_t ids[36], path[12];
    int64_t gen[12];
    for (unsigned k = 0; k < 36; k++) {
        sched_state_key(&oc, &s->obs[k], 1, key, sizeof key);
        ids[k] = sched_model_state(s->model, key);
    }
    for (uint64_t p = 0; p < prompts; p++)
        for (int t = 0; t < 4; t++) {
            size_t n = 1 + (size_t)rng_uniform_int(r, 12);
            int64_t g = 0;
            for (size_t k = 0; k < n; k++) {
                path[k] = ids[draw_state(r)];
                g += 100 + (int64_t)rng_uniform_int(r, 2000);
                gen[k] = g;
            }
            struct sched_traj_summary sum = {.prompt = p,
                                             .start = (double)(p * 4 + (uint64_t)t),
                                             .censored = rng_uniform(r) < 0.1,
                                             .total_tokens = g + (int64_t)rng_uniform_int(r, 8000),
                                             .n = n,
                                             .states = path,
                                             .gen_before = gen};
            sched_model_insert(s->model, &sum);
        }
}

/* One decision on the next live trajectory in turn. */
static void decide(struct route_state *s, struct rng *r, struct sched_decision *d)
{
    uint64_t traj = s->next++ % s->live;
    sched_router_turn_done(s->router, traj, 200);
    struct sched_return ev = {.traj = traj,
                              .obs = &s->obs[draw_state(r)],
                              .n_obs = 1,
                              .context_tokens = 4000,
                              .true_remaining_tokens = -1,
                              .sibling_mean_tokens = NAN};
    sched_router_tool_return(s->router, &s->reg, &ev, d);
}

static void *route_setup_policy(uint64_t n, enum sched_policy policy)
{
    struct route_state *s = xcalloc(1, sizeof *s);
    struct rng r = rng_keyed(1, 0, 0, 0);
    struct spec_bucket_layout l;
    spec_bucket_parse(&l, "tp1:4000,tp2:12000,tp4:30000", "bench", NULL);
    for (int i = 0; i < 12; i++)
        s->inst[i] = (struct sched_instance){
            .id = i, .tp = 1 << (i / 4), .bucket = i / 4, .cap = 100, .ready = true};
    s->reg = (struct sched_registry){s->inst, 12};
    for (unsigned k = 0; k < 36; k++)
        s->obs[k] = obs_of(k);
    s->model = sched_model_new(NULL);
    s->live = n;
    teach(s, n / 10 ? n / 10 : 1, &r);
    struct sched_router_config c;
    sched_router_config_default(&c, policy, &l);
    if (policy == SCHED_CMLFQ_H) {
        const struct spec_hardware *hw = cost_ref_hardware(COST_REF_A800);
        struct cost_rollout_params p;
        struct cost_shape shape;
        cost_rollout_params_default(&p, hw);
        cost_shape_init(&shape, cost_ref_model(COST_REF_QWEN25_14B));
        cost_move_model_init(&s->move, &shape, hw, &p, 8192, 256);
        c.costs.decision = (struct sched_cost_model){.rate = cost_move_rate,
                                                     .ctx = &s->move,
                                                     .deadline_s = 400,
                                                     .late_gpus = 48,
                                                     .live = true};
    }
    if (sched_router_new(&s->router, &c, s->model, NULL) != 0)
        abort();
    struct sched_decision d;
    for (uint64_t t = 0; t < n; t++) {
        struct sched_start ev = {
            .traj = t, .prompt = t % (n / 10 ? n / 10 : 1), .true_remaining_tokens = -1};
        sched_router_start(s->router, &s->reg, &ev, &d);
    }
    for (uint64_t k = 0; k < 5 * n; k++)
        decide(s, &r, &d);
    return s;
}

static void *route_setup(uint64_t n)
{
    return route_setup_policy(n, SCHED_CMLFQ);
}

static void *route_setup_h(uint64_t n)
{
    return route_setup_policy(n, SCHED_CMLFQ_H);
}

static uint64_t route_run(void *state, uint64_t n)
{
    struct route_state *s = state;
    struct rng r = rng_keyed(1, 1, s->next, 0);
    struct sched_decision d;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        decide(s, &r, &d);
        sum += (uint64_t)d.to_bucket;
    }
    return sum;
}

static void route_teardown(void *state)
{
    struct route_state *s = state;
    sched_router_free(s->router);
    sched_model_free(s->model);
    free(s);
}

/* ---- text classification -------------------------------------------------------------------- */

struct text_state {
    char *buf;
    size_t len;
};

static void *text_setup(uint64_t n)
{
    static const char *const words[] = {"def ",    "return ", "self.",   "value ",  "file ",
                                        "line ",   "ok\n",    "test_",   "passed ", "assert ",
                                        "import ", "0x7f3a ", "(args) ", "print("};
    struct text_state *s = xcalloc(1, sizeof *s);
    s->buf = xmalloc(n + 16);
    struct rng r = rng_keyed(1, 2, 0, 0);
    while (s->len < n) {
        const char *w = words[rng_uniform_int(&r, sizeof words / sizeof words[0])];
        size_t k = strlen(w);
        memcpy(s->buf + s->len, w, k);
        s->len += k;
    }
    s->len = n;
    return s;
}

static uint64_t text_run(void *state, uint64_t n)
{
    struct text_state *s = state;
    uint64_t sum = 0;
    for (size_t at = 0; at < n; at += 65536) {
        size_t len = n - at < 65536 ? n - at : 65536;
        sum += (uint64_t)sched_status_from_text(s->buf + at, len, false);
    }
    return sum;
}

static void text_teardown(void *state)
{
    struct text_state *s = state;
    free(s->buf);
    free(s);
}

/* ---- extra figures: latency percentiles and memory ------------------------------------------ */

static void print_figure(const char *name, const char *unit, double value, uint64_t n,
                         const char *input)
{
    json_t *line =
        json_pack("{s:s,s:s,s:f,s:I,s:s,s:n}", "name", name, "unit", unit, "value",
                  round(value * 10) / 10, "n", (json_int_t)n, "input", input, "instructions");
    char *text = ujson_dump(line, false);
    printf("%s\n", text);
    free(text);
    json_decref(line);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void latency_and_memory(uint64_t live)
{
    struct route_state *s = route_setup(live);
    uint64_t n = live;
    double *lat = xmallocarray(n, sizeof *lat);
    struct rng r = rng_keyed(1, 3, 0, 0);
    struct sched_decision d;
    for (uint64_t i = 0; i < n; i++) {
        double t0 = now_ns();
        decide(s, &r, &d);
        lat[i] = now_ns() - t0;
    }
    qsort(lat, n, sizeof *lat, cmp_double);
    print_figure("route_decision_p50", "ns", lat[n / 2], n, INPUT_ROUTE ", each timed alone");
    print_figure("route_decision_p99", "ns", lat[n * 99 / 100], n,
                 INPUT_ROUTE ", each timed alone");
    free(lat);
    print_figure("route_bytes_per_live_trajectory", "bytes",
                 (double)sched_router_bytes(s->router) / (double)live, live,
                 INPUT_ROUTE ", router state only (sched_router_bytes / live), ~10 returns each");
    struct sched_model_stats st;
    sched_model_stats(s->model, &st);
    print_figure("tree_bytes_per_node_uncapped", "bytes", (double)st.tree_bytes / st.nodes,
                 st.nodes, INPUT_ROUTE ", all trees (tree_bytes / nodes)");
    route_teardown(s);

    /* The same trees under a 32 MiB cap: prompt trees are evicted, bytes stay under it. */
    struct sched_model_config cfg;
    sched_model_config_default(&cfg);
    cfg.max_bytes = (size_t)32 << 20;
    struct route_state capped = {.model = sched_model_new(&cfg)};
    for (unsigned k = 0; k < 36; k++)
        capped.obs[k] = obs_of(k);
    struct rng r2 = rng_keyed(1, 0, 0, 0);
    teach(&capped, live / 10 ? live / 10 : 1, &r2);
    sched_model_stats(capped.model, &st);
    char input[256];
    snprintf(input, sizeof input,
             "%s; cap 32 MiB: %zu bytes held, %zu prompt trees kept, %zu evicted", INPUT_ROUTE,
             st.tree_bytes, st.trees, st.evictions);
    print_figure("tree_bytes_per_node_capped", "bytes", (double)st.tree_bytes / st.nodes, st.nodes,
                 input);
    sched_model_free(capped.model);
}

int main(int argc, char **argv)
{
    static const struct bench_figure figures[] = {
        {"route_tool_return", INPUT_ROUTE, BENCH_NS_PER_OP, LIVE_FULL, 100, route_setup, route_run,
         route_teardown},
        {"route_tool_return_cmlfq_h", INPUT_ROUTE_H, BENCH_NS_PER_OP, LIVE_FULL, 100, route_setup_h,
         route_run, route_teardown},
        {"status_from_text", INPUT_TEXT, BENCH_OPS_PER_S, (uint64_t)64 << 20, 4096, text_setup,
         text_run, text_teardown},
    };
    static char trace[4200];
    const char *tmpdir = getenv("TMPDIR");
    snprintf(trace, sizeof trace, "%s/libra-bench-route-r2e.jsonl",
             tmpdir && *tmpdir ? tmpdir : "/tmp");
    const char *const eval[] = {LIBRA_BIN, "route", "eval", trace, NULL};
    const char *const gen[] = {LIBRA_BIN, "trace", "gen", "r2e-gym", "--steps", "3200",
                               "--seed",  "1",     "-o",  trace,     NULL};
    const char *const gen_small[] = {LIBRA_BIN, "trace", "gen", "r2e-gym", "--steps", "20",
                                     "--seed",  "1",     "-o",  trace,     NULL};
    const struct bench_command commands[] = {
        {"route_eval_100mb",
         "libra route eval on a 100 MB R2E-Gym trace (libra trace gen r2e-gym --steps 3200 "
         "--seed 1); op = the whole command",
         eval, eval, gen, gen_small},
    };
    int rc = bench_main_commands(argc, argv, figures, sizeof figures / sizeof figures[0], commands,
                                 sizeof commands / sizeof commands[0]);
    remove(trace);
    bool extras = rc == 0;
    bool smoke = false;
    for (int i = 1; i < argc; i++) {
        extras = extras && strcmp(argv[i], "--callgrind-child") != 0 &&
                 strcmp(argv[i], "--filter") != 0 && strcmp(argv[i], "--help") != 0;
        smoke = smoke || strcmp(argv[i], "--smoke") == 0;
    }
    if (extras)
        latency_and_memory(smoke ? 1000 : LIVE_FULL);
    return rc;
}
