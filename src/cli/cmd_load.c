/*
 * `libra load`: the rollout side of the experiment's RL job, played against engines over HTTP
 * (load/load.h). This file resolves the experiment, builds the trajectory records (a trace's,
 * or the workload generator's for every step), runs the client on an event loop and prints
 * the per-step table or one JSON document.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cost/lifecycle.h"
#include "cost/shape.h"
#include "ehp/lend.h"
#include "load/load.h"
#include "net/addr.h"
#include "net/client.h"
#include "net/http.h"
#include "plan/plan.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

#define SCHEMA "libra.load/1"
#define MAX_ENGINES 256

static const char help[] =
    "usage: libra load [EXPERIMENT] --engines URL[,URL...] [--style plain|areal|slime|skyrl]\n"
    "                  [--time-scale F] [--trace FILE] [--trainer] [--json] [-o TRACE] "
    "[--progress]\n"
    "                  [flags]\n"
    "\n"
    "Plays the RL job of the experiment against engines over HTTP, by the rules libra sim's\n"
    "async modes follow: GRPO groups (rl.samples trajectories each) start while their batch\n"
    "is within rl.max_staleness versions of the engines' weights, each trajectory's turns sent\n"
    "with the whole context as token ids, tool time waited between turns; a trainer takes the\n"
    "oldest complete groups as a batch of rl.batch_trajectories and trains for the time the\n"
    "cost model gives that batch on libra's training layout (as libra sim's trainer costs it),\n"
    "dropping and replacing groups too stale for its version and, under rl.dynamic_sampling,\n"
    "groups whose rewards are all equal; every rl.sync_interval versions a weight\n"
    "update on every engine in rl.sync_mode (drain, abort_resume, keep) over rl.transport\n"
    "(nccl: a broadcast; else a reload from disk). The run ends when the batch of the last of\n"
    "rl.steps is complete. The trajectories are the workload generator's, or a trace's with\n"
    "--trace. docs/load.md.\n"
    "\n"
    "  --engines URLS    engine base URLs, comma-separated (e.g. the lines of `libra emu`)\n"
    "  --time-scale F    wall seconds per emulated second of tool and training time (default\n"
    "                    1; match the emulator's)\n"
    "  --trace FILE      replay a trace's trajectories (workload.trace)\n"
    "  --style NAME      the RL framework's client: plain (default: libra's request object,\n"
    "                    rl.sync_mode), areal, slime, skyrl (vLLM; needs its development-mode\n"
    "                    endpoints) — docs/load.md \"Client styles\"\n"
    "\n"
    "  --trainer         the trainer also speaks the elastic pool's handshake with the\n"
    "                    gateway at the one URL of --engines (libra serve --pool-replica):\n"
    "                    reports its steps and, at each step boundary, confirms the lends\n"
    "                    and reclaims asked of it, a release taking the cost model's time;\n"
    "                    its layout is split into a core and hybrid replicas as libra sim's\n"
    "                    pool splits it, and a step trains with the hybrids active\n"
    "                    (docs/load.md \"The trainer's side of the elastic pool\")\n"
    "\n"
    "Against a `libra serve` gateway the weight updates and the pool's calls are admin calls:\n"
    "the bearer token is read from LIBRA_ADMIN_TOKEN.\n";

enum { OPT_ENGINES = 0x100, OPT_TIME_SCALE, OPT_TRACE, OPT_STYLE, OPT_TRAINER };

static const struct option own_options[] = {
    {"engines", required_argument, NULL, OPT_ENGINES},
    {"style", required_argument, NULL, OPT_STYLE},
    {"time-scale", required_argument, NULL, OPT_TIME_SCALE},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"trainer", no_argument, NULL, OPT_TRAINER},
    {0},
};

struct opts {
    char *engines; /* owned copy, split in place */
    const char *urls[MAX_ENGINES];
    int n_urls;
    double time_scale;
    enum load_style style;
    bool trainer; /* --trainer */
};

/* The gateway's admin token for the weight updates: LIBRA_ADMIN_TOKEN, NULL when unset. */
static const char *admin_token(void)
{
    const char *t = getenv("LIBRA_ADMIN_TOKEN");
    return t && *t ? t : NULL;
}

static int parse_engines(const struct cli_command *cmd, const char *arg, struct opts *o)
{
    free(o->engines);
    o->engines = xstrdup(arg);
    size_t size = strlen(arg) + NET_ADDR_WHY_EXTRA;
    char *why = xmalloc(size);
    int rc = net_base_urls_parse(o->engines, o->urls, MAX_ENGINES, &o->n_urls, why, size);
    if (rc != 0)
        rc = cli_value_error(cmd, "--engines", why);
    free(why);
    if (rc != 0)
        return rc;
    size_t a, b; /* one server under two spellings: localhost and 127.0.0.1 */
    if (net_urls_twins(o->urls, (size_t)o->n_urls, &a, &b)) {
        if (strcmp(o->urls[a], o->urls[b]) == 0)
            return cli_value_errorf(cmd, "--engines: '%s' given twice", o->urls[b]);
        char key[1024]; /* for the message: a longer one is cut */
        net_url_endpoint(o->urls[b], key, sizeof key);
        return cli_value_errorf(cmd, "--engines: '%s' and '%s' are one engine (both reach %s)",
                                o->urls[a], o->urls[b], key);
    }
    return 0;
}

static int own_flag(struct cli_common *cc, int c, struct opts *o)
{
    switch (c) {
    case OPT_ENGINES:
        return parse_engines(cc->cmd, optarg, o);
    case OPT_TIME_SCALE:
        return cli_parse_double(cc->cmd, "--time-scale", optarg, 1e-6, 1e6, &o->time_scale);
    case OPT_TRACE: /* the same as --set workload.trace=FILE */
        cli_common_set(cc, "workload.trace", optarg, "--trace");
        return 0;
    case OPT_TRAINER:
        o->trainer = true;
        return 0;
    case OPT_STYLE:
        if (load_style_parse(optarg, &o->style) == 0)
            return 0;
        return cli_value_errorf(cc->cmd, "--style: expected plain, areal, slime or skyrl, not '%s'",
                                optarg);
    default:
        return LIBRA_EXIT_USAGE; /* '?': the usage error is printed */
    }
}

/*
 * The trainer's model: the training side of libra's layout for the experiment as libra sim's
 * libra mode makes it before verification (sim_layout_make: the planner's analytic plan, or
 * with sim.planner off the GPUs sched.buckets' fleet leaves), split as the simulator's pool
 * splits it when the trainer plays the pool (--trainer: the core and the hybrid replicas, the
 * fastest layout that can lend when the planner's cannot). Each step is costed on the batch it
 * took as libra sim's trainer costs it (ehp_batch_step_s), with the hybrids the gateway's pool
 * has active.
 */
struct trainer_model {
    struct sim_layout lay;
    struct plan_settings st;
    struct cost_shape shape;
    const struct spec_hardware *hw;
    bool pool; /* --trainer: lend is the core's, for the hybrids */
    struct ehp_lend lend;
    struct cost_train_seqs seqs;
    struct cost_train_scratch sc;
};

static int trainer_step_s(void *arg, const uint32_t *lens, size_t n, int active, double *step_s)
{
    struct trainer_model *m = arg;
    cost_train_seqs_free(&m->seqs);
    if (cost_train_seqs_init(&m->seqs, &m->shape, lens, n) != 0)
        return -1;
    return ehp_batch_step_s(&m->lay.train, &m->st, m->pool ? &m->lend : NULL, active, &m->shape,
                            m->hw, &m->seqs, &m->sc, step_s);
}

static void trainer_model_free(struct trainer_model *m)
{
    sim_layout_free(&m->lay);
    cost_train_seqs_free(&m->seqs);
    cost_train_scratch_free(&m->sc);
}

/*
 * Makes the trainer's model for in under cfg (pool: the trainer plays the pool) and sets lc's
 * step cost, and with pool the trainer's side of the handshake from the cost model (ehp/lend.h):
 * a lent replica's GPUs are freed in the time its trainers take to stop (taken as the time they
 * take to start), a reclaimed one trains again after its join (start, state fetch, zero sync).
 * Returns 0, or -1 with why (size bytes) when there is no layout, or with pool none that lends.
 */
static int trainer_model_init(struct trainer_model *m, const struct sim_input *in,
                              const struct libra_config *cfg, bool pool, struct load_config *lc,
                              char *why, size_t size)
{
    struct libra_config lcfg = *cfg;
    lcfg.ehp.enabled = pool; /* a file's value left alone: check_ehp refuses a flag's */
    struct sim_input lin = *in;
    lin.cfg = &lcfg;
    struct libra_error err = {0};
    memset(m, 0, sizeof *m);
    m->hw = in->hw;
    m->pool = pool;
    plan_settings_from_config(&m->st, in->hw, cfg);
    if (sim_layout_make(&lin, SIM_LIBRA, 0, 0, &m->lay, &err) != 0 ||
        cost_shape_init(&m->shape, in->model) != 0) {
        snprintf(why, size, "the trainer: %s", err.msg[0] ? err.msg : "the model has no shape");
        return -1;
    }
    if (pool && (m->lay.n_hybrid == 0 ||
                 ehp_lend_layout(&m->lay.train, &m->st, &m->shape, in->hw, &m->lend) != 0 ||
                 !m->lend.can_lend)) {
        snprintf(why, size,
                 "--trainer: the experiment's training layout has no replica to lend (%s)",
                 m->lay.pool_note[0] ? m->lay.pool_note : "no layout can lend");
        return -1;
    }
    lc->step_cost = trainer_step_s;
    lc->step_cost_arg = m;
    struct cost_weight_update u;
    cost_weight_update(&m->st.lifecycle, &m->shape, in->hw, cfg->rl.transport, false, &u);
    lc->save_s = u.save_s;
    if (pool) {
        lc->release_s = m->lend.times.start_s;
        lc->retake_s = m->lend.join_s;
    }
    return 0;
}

/* The trainer in one line: "tp4 pp1 cp1 dp12 on 48 GPUs" (and the pool's hybrids, "+ 2 hybrid
 * replicas of 4 GPUs", and the checkpoint a disk update waits for). */
static void trainer_text(const struct trainer_model *m, double save_s, char *out, size_t size)
{
    const struct plan_train_layout *t = &m->lay.train;
    size_t n = (size_t)snprintf(out, size, "tp%d pp%d cp%d dp%d on %d GPUs", t->tp, t->pp, t->cp,
                                t->dp, m->lay.n_train);
    if (m->pool && n < size)
        n +=
            (size_t)snprintf(out + n, size - n, " + %d hybrid replica%s of %d GPUs",
                             m->lay.n_hybrid, m->lay.n_hybrid == 1 ? "" : "s", m->lay.replica_gpus);
    if (save_s > 0 && n < size)
        snprintf(out + n, size - n, ", checkpoint %.1f s", save_s);
}

static void print_table(const struct load_config *c, const struct trainer_model *m,
                        const struct load_result *r)
{
    char trainer[128];
    trainer_text(m, c->save_s, trainer, sizeof trainer);
    printf("libra load: %s client, %d engines, %d steps of %d trajectories (%d x %d), trainer "
           "%s, time x %g\n\n",
           load_style_name(c->style), c->n_urls, c->steps,
           (int)c->job.groups_per_batch * c->group_size, (int)c->job.groups_per_batch,
           c->group_size, trainer, c->time_scale);
    printf("step  traj  turns  prompt tok  cached tok   gen tok  resent  staleness  filtered  "
           "stale   wall s  train s%s\n",
           c->pool_trainer ? "  hybrids" : "");
    int64_t filtered = 0, stale = 0, filtered_tok = 0, stale_tok = 0;
    for (int i = 0; i < r->n_steps; i++) {
        const struct load_step *s = &r->steps[i];
        printf("%4lld %5lld %6lld %11lld %11lld %9lld %7lld %10.2f %9lld %6lld %8.2f %8.2f",
               (long long)s->step, (long long)s->trajectories, (long long)s->turns,
               (long long)s->prompt_tokens, (long long)s->cached_tokens,
               (long long)s->generated_tokens, (long long)s->resubmitted, s->mean_staleness,
               (long long)s->filtered_groups, (long long)s->stale_groups, s->wall_s, s->train_s);
        if (c->pool_trainer)
            printf(" %8d", s->active_hybrids);
        printf("\n");
        filtered += s->filtered_groups;
        stale += s->stale_groups;
        filtered_tok += s->filtered_tokens;
        stale_tok += s->stale_tokens;
    }
    printf("\nturns served by engine:");
    for (int i = 0; i < c->n_urls; i++)
        printf(" %lld%s", (long long)r->served[i], r->dead[i] ? " (dead)" : "");
    printf("\ngroups: %lld launched, %lld filtered (%lld tokens), %lld too stale (%lld tokens)\n",
           (long long)r->groups_launched, (long long)filtered, (long long)filtered_tok,
           (long long)stale, (long long)stale_tok);
    printf("weight updates: %d\n", r->weight_updates);
    if (c->pool_trainer)
        printf("pool: %lld released, %lld retaken, %lld refused, %lld step reports (release "
               "%.1f s, retake %.1f s)\n",
               (long long)r->pool.released, (long long)r->pool.retaken, (long long)r->pool.refused,
               (long long)r->pool.steps, c->release_s, c->retake_s);
}

static json_t *step_json(const struct load_step *s)
{
    json_t *o =
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "step", (json_int_t)s->step,
                  "trajectories", (json_int_t)s->trajectories, "turns", (json_int_t)s->turns,
                  "prompt_tokens", (json_int_t)s->prompt_tokens, "cached_tokens",
                  (json_int_t)s->cached_tokens, "generated_tokens", (json_int_t)s->generated_tokens,
                  "resubmitted", (json_int_t)s->resubmitted, "wall_s", s->wall_s);
    json_object_set_new(o, "mean_staleness", json_real(s->mean_staleness));
    json_object_set_new(o, "train_s", json_real(s->train_s));
    json_object_set_new(o, "active_hybrids", json_integer(s->active_hybrids));
    json_object_set_new(o, "filtered_groups", json_integer((json_int_t)s->filtered_groups));
    json_object_set_new(o, "stale_groups", json_integer((json_int_t)s->stale_groups));
    json_object_set_new(o, "timed_out", json_integer((json_int_t)s->timed_out));
    json_object_set_new(o, "timed_out_tokens", json_integer((json_int_t)s->timed_out_tokens));
    json_object_set_new(o, "wasted_tokens",
                        json_pack("{s:I, s:I}", "filtered", (json_int_t)s->filtered_tokens, "stale",
                                  (json_int_t)s->stale_tokens));
    return o;
}

static json_t *trainer_json(const struct trainer_model *m, const struct load_config *c)
{
    const struct plan_train_layout *t = &m->lay.train;
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:f}", "tp", t->tp, "pp", t->pp, "cp", t->cp,
                          "dp", t->dp, "gpus", m->lay.n_train, "save_s", c->save_s);
    if (m->pool) {
        json_object_set_new(o, "hybrid_replicas", json_integer(m->lay.n_hybrid));
        json_object_set_new(o, "replica_gpus", json_integer(m->lay.replica_gpus));
    }
    return o;
}

static json_t *result_json(const struct libra_config *cfg, const struct load_config *c,
                           const struct trainer_model *m, const struct load_result *r)
{
    json_t *doc = spec_config_envelope(SCHEMA, cfg);
    json_t *steps = json_array(), *engines = json_array();
    for (int i = 0; i < r->n_steps; i++)
        json_array_append_new(steps, step_json(&r->steps[i]));
    for (int i = 0; i < c->n_urls; i++)
        json_array_append_new(engines, json_pack("{s:s, s:I, s:b}", "url", c->urls[i], "turns",
                                                 (json_int_t)r->served[i], "dead", r->dead[i]));
    json_object_set_new(doc, "steps", steps);
    json_object_set_new(doc, "engines", engines);
    json_object_set_new(doc, "groups_launched", json_integer((json_int_t)r->groups_launched));
    json_object_set_new(doc, "weight_updates", json_integer(r->weight_updates));
    json_object_set_new(doc, "style", json_string(load_style_name(c->style)));
    json_object_set_new(doc, "trainer", trainer_json(m, c));
    if (c->pool_trainer)
        json_object_set_new(
            doc, "pool",
            json_pack("{s:I, s:I, s:I, s:I, s:f, s:f}", "released", (json_int_t)r->pool.released,
                      "retaken", (json_int_t)r->pool.retaken, "refused",
                      (json_int_t)r->pool.refused, "step_reports", (json_int_t)r->pool.steps,
                      "release_s", c->release_s, "retake_s", c->retake_s));
    if (r->error[0])
        json_object_set_new(doc, "error", json_string(r->error));
    return doc;
}

/* Refuses what the job's rules cannot run (as libra sim's async modes do) and an input with
 * nothing to draw groups from (its weight-update rules are the config's, checked as it
 * resolves, where the value that breaks one was set). Returns 0 or LIBRA_EXIT_USAGE. */
static int check_job(const struct sim_input *in)
{
    struct libra_error err = {0};
    if (sim_input_check(in, &err) == 0)
        return 0;
    char buf[1024];
    cli_errorf("load: %s", error_format(&err, buf, sizeof buf));
    return LIBRA_EXIT_USAGE;
}

/* Refuses rl.sync_mode from a flag, but for abort_resume, with a style whose framework aborts
 * the turns in flight for a weight update its own way (areal, slime: docs/load.md "Client
 * styles"): their flow is abort_resume whatever the mode, so another value would change
 * nothing. A file's value is taken: the file describes the job for libra sim as well. Checked
 * on the flag's text before the config resolves, so that this reason, the flag's own, is the
 * one given whatever the transport (keep with the default disk_restart breaks an update rule
 * too, which resolving refuses); a text that names no mode is left to resolving. */
static int check_sync_mode(const struct cli_common *cc, enum load_style style)
{
    const char *flag = NULL, *value = NULL;
    for (size_t i = 0; i < cc->n_overrides; i++)
        if (strcmp(cc->overrides[i].key, "rl.sync_mode") == 0) {
            flag = cc->overrides[i].label;
            value = cc->overrides[i].value;
        }
    if ((style != LOAD_AREAL && style != LOAD_SLIME) || !value ||
        (strcmp(value, "drain") != 0 && strcmp(value, "keep") != 0))
        return 0;
    return cli_value_errorf(cc->cmd,
                            "%s: rl.sync_mode %s has no effect with --style %s: its client "
                            "aborts the turns in flight for a weight update (abort_resume)",
                            flag, value, load_style_name(style));
}

/* Refuses ehp.enabled from a flag that disagrees with --trainer: the trainer's layout is split
 * into a core and hybrid replicas exactly when it plays the pool's handshake (docs/load.md "The
 * trainer's side of the elastic pool"); without it no replica is ever lent, with it the pool
 * needs the split. A file's value is left alone, as for rl.sync_mode above. */
static int check_ehp(const struct cli_common *cc, const struct libra_config *cfg, bool trainer)
{
    const char *flag = cli_common_flag(cc, "ehp.enabled");
    if (!flag || cfg->ehp.enabled == trainer)
        return 0;
    if (!trainer)
        return cli_value_errorf(cc->cmd,
                                "%s: ehp.enabled true has no effect without --trainer: the "
                                "trainer lends hybrid replicas only through the pool's handshake",
                                flag);
    return cli_value_errorf(cc->cmd,
                            "%s: ehp.enabled false cannot hold with --trainer: the trainer's side "
                            "of the elastic pool splits its layout into a core and hybrid replicas",
                            flag);
}

/* Writes the header and the recorded trajectories to path. Returns 0 or an exit code. */
static int write_trace(const char *path, const struct libra_config *cfg, const char *workload,
                       const struct load_config *lc, const struct load_result *r)
{
    json_t *engines = json_array(); /* which engines produced the trace, in --engines order */
    for (int i = 0; i < lc->n_urls; i++)
        json_array_append_new(engines, json_string(lc->urls[i]));
    json_t *how =
        json_pack("{s:s, s:s, s:o, s:f}", "source", "libra load", "style",
                  load_style_name(lc->style), "engines", engines, "time_scale", lc->time_scale);
    struct trace_header h = {.version = TRACE_SCHEMA_VERSION,
                             .workload = (char *)workload,
                             .model = (char *)cfg->model.name,
                             .group_size = lc->group_size,
                             .import = how};
    struct trace_text text = {0};
    trace_format_header(&text, &h);
    json_decref(how);
    char *all = xmalloc(text.len + r->trace.len + 1);
    memcpy(all, text.data, text.len);
    memcpy(all + text.len, r->trace.data ? r->trace.data : "", r->trace.len);
    all[text.len + r->trace.len] = '\0';
    trace_text_free(&text);
    int rc = cli_write_output(path, all);
    free(all);
    return rc;
}

/* The steps whose batch is complete, of the run's, for the progress line. */
struct watched {
    atomic_llong done;
    long long total;
};

static void read_progress(void *ctx, struct cli_progress_state *out)
{
    struct watched *w = ctx;
    out->unit = "steps";
    out->done = atomic_load(&w->done);
    out->total = w->total;
}

/*
 * SIGINT and SIGTERM, caught from the run's start until its report is written. The first stops
 * the run as an engine's failure does (the turns in flight cancelled, the steps finished
 * reported) rather than killing it without a word. Later ones are caught too, until the report,
 * the trace and the message are whole: restoring the default action once the loop stopped
 * would let a second signal (`timeout`, an impatient driver) cut them.
 */
struct interrupt {
    struct event_base *base;
    struct event *sigint, *sigterm;
    int sig; /* the first that came, or 0 */
};

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct interrupt *in = arg;
    if (!in->sig)
        in->sig = (int)sig;
    event_base_loopbreak(in->base);
}

static void interrupt_catch(struct interrupt *in, struct event_base *base)
{
    *in = (struct interrupt){.base = base};
    in->sigint = evsignal_new(base, SIGINT, on_signal, in);
    in->sigterm = evsignal_new(base, SIGTERM, on_signal, in);
    event_add(in->sigint, NULL);
    event_add(in->sigterm, NULL);
}

/* Stops catching. Once a signal came, the later ones are ignored to the end, so that the exit
 * status is the first's (the default action would kill the process with the second's); freeing
 * the events restores the default, so the signals are held off while it is replaced. */
static void interrupt_release(struct interrupt *in)
{
    sigset_t both, was;
    sigemptyset(&both);
    sigaddset(&both, SIGINT);
    sigaddset(&both, SIGTERM);
    sigprocmask(SIG_BLOCK, &both, &was);
    event_free(in->sigint);
    event_free(in->sigterm);
    if (in->sig) {
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
    }
    sigprocmask(SIG_SETMASK, &was, NULL);
}

/* Runs the job; returns an exit code: LIBRA_EXIT_INTERRUPTED or _TERMINATED when SIGINT or
 * SIGTERM stopped it. */
static int run(const struct cli_common *cc, const struct libra_config *cfg, const char *workload,
               struct load_config *lc, const struct trainer_model *m)
{
    signal(SIGPIPE, SIG_IGN);
    struct event_base *base = net_base_new();
    struct net_client *client = net_client_new(base);
    struct load_result r;
    struct watched w = {.total = lc->steps};
    struct load_config counted = *lc;
    counted.steps_done = &w.done;
    struct cli_progress *line = cli_progress_start("load", read_progress, &w, cc->progress);
    struct interrupt in;
    interrupt_catch(&in, base);
    int rc = client ? load_run(&counted, base, client, &r) : -1;
    int sig = rc ? in.sig : 0; /* one that came once the run was done stopped nothing */
    cli_progress_stop(line);
    if (!client) {
        cli_errorf("load: cannot start an HTTP client");
        rc = LIBRA_EXIT_INTERNAL;
    } else {
        if (cc->json) {
            json_t *doc = result_json(cfg, lc, m, &r);
            char *text = ujson_dump(doc, true);
            printf("%s\n", text);
            free(text);
            json_decref(doc);
        } else {
            print_table(lc, m, &r);
        }
        int wrc = cc->output ? write_trace(cc->output, cfg, workload, lc, &r) : 0;
        if (rc && sig) {
            cli_errorf("load: %s: %s", sig == SIGINT ? "SIGINT" : "SIGTERM", r.error);
            rc = sig == SIGINT ? LIBRA_EXIT_INTERRUPTED : LIBRA_EXIT_TERMINATED;
        } else if (rc) {
            cli_errorf("load: %s", r.error);
            rc = 1;
        }
        rc = rc ? rc : wrc;
        load_result_free(&r);
    }
    interrupt_release(&in);
    net_client_free(client);
    event_base_free(base);
    return rc;
}

/* -o naming standard output, where the table or --json goes: two outputs in one stream, or a
 * file renamed over the one holding the table (cli_is_stdout). */
static int check_output_not_stdout(const struct cli_common *cc)
{
    if (!cc->output || !cli_is_stdout(cc->output))
        return 0;
    return cli_value_errorf(cc->cmd,
                            "-o '%s' is standard output, which the table or --json is written to "
                            "(give -o a file)",
                            cc->output);
}

int cmd_load(int argc, char **argv)
{
    struct cli_common cc;
    cli_common_init(&cc, cli_find("load"),
                    CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS | CLI_FLAGS_JSON | CLI_FLAGS_OUTPUT |
                        CLI_FLAGS_PROGRESS,
                    "", own_options);
    cc.output_doc = "write the trajectories trained or dropped as a trace\n"
                    "                       (docs/trace-format.md): the turns as the client saw\n"
                    "                       them; the table or --json stays on standard output";
    struct opts o = {.time_scale = 1};
    struct api_presets p = {0};
    struct api_traces ts = {0};
    struct libra_config cfg;
    struct sim_input in = {0};
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            cli_common_help(&cc, help, stdout);
            goto out;
        }
        rc = own_flag(&cc, c, &o);
    }
    if (rc == 0 && argc - optind > 1)
        rc = cli_usage_error(cc.cmd, "unexpected argument '%s'", argv[optind + 1]);
    if (rc == 0 && o.n_urls == 0)
        rc = cli_usage_error(cc.cmd, "--engines is required");
    if (rc == 0 && o.trainer && o.n_urls != 1)
        rc = cli_usage_error(cc.cmd, "--trainer speaks to one gateway: give --engines its one URL");
    if (rc == 0)
        rc = check_output_not_stdout(&cc);
    if (rc == 0)
        rc = check_sync_mode(&cc, o.style);
    if (rc == 0)
        rc = cli_common_load(&cc, optind < argc ? argv[optind] : NULL, &p, &cfg);
    if (rc == 0)
        rc = cli_sim_input(&p, &ts, &cfg, false, &in);
    if (rc == 0)
        rc = check_job(&in);
    if (rc == 0)
        rc = check_ehp(&cc, &cfg, o.trainer);
    if (rc == 0) {
        struct load_config lc = {.style = o.style,
                                 .model = cfg.model.name,
                                 .urls = o.urls,
                                 .n_urls = o.n_urls,
                                 .workload = in.workload,
                                 .dynamic_sampling = cfg.rl.dynamic_sampling,
                                 .group_size = cfg.rl.samples,
                                 .steps = cfg.rl.steps,
                                 .sync_mode = cfg.rl.sync_mode,
                                 .nccl = cfg.rl.transport == SPEC_TRANSPORT_NCCL,
                                 .time_scale = o.time_scale,
                                 .trajectory_timeout_s = cfg.rl.trajectory_timeout_s,
                                 .vocab = in.model->vocab > 1 ? (uint32_t)in.model->vocab : 32000,
                                 .seed = (uint64_t)cfg.sim.seed,
                                 .record = cc.output != NULL,
                                 .admin_token = admin_token()};
        job_rules_from_config(&lc.job, &cfg);
        lc.pool_trainer = o.trainer;
        if (in.trace) {
            lc.trace = in.trace->trajs;
            lc.n_trace = in.trace->n;
        }
        char why[384];
        struct trainer_model m = {0};
        if (load_check_source(&lc, why, sizeof why) != 0 ||
            trainer_model_init(&m, &in, &cfg, o.trainer, &lc, why, sizeof why) != 0) {
            cli_errorf("load: %s", why);
            rc = LIBRA_EXIT_USAGE;
        } else if ((rc = cli_check_output(cc.output)) == 0) {
            cli_note_leftover_records("load", &in, lc.group_size);
            rc = run(&cc, &cfg, in.trace ? in.trace->workload : cfg.workload.name, &lc, &m);
        }
        trainer_model_free(&m);
    }
out:
    api_traces_free(&ts);
    free(o.engines);
    api_presets_free(&p);
    cli_common_free(&cc);
    return rc;
}
