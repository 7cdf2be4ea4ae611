/*
 * `libra serve`: runs the gateway (server/gateway.h) in front of the engines named on the
 * command line until SIGINT or SIGTERM, printing one JSON line with its URL once it listens.
 * With --plan it starts from a plan `libra plan --json` wrote (read here: files are the
 * process layer's). The first signal stops it gracefully (gw_stop), a second at once.
 */
#include <errno.h>
#include <event2/thread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "net/addr.h"
#include "net/http.h"
#include "plan/fleet.h"
#include "sched/router.h"
#include "server/gateway.h"
#include "server/pool_rec.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

static const char help[] =
    "usage: libra serve [EXPERIMENT] --engine URL[,tp=N] [--engine ...] [--listen HOST:PORT]\n"
    "                   [--mode shadow|POLICY] [--admin-token-file FILE] [--plan FILE]\n"
    "                   [--capture FILE] [--decisions FILE] [--rid-identity] [--prompt-tokens N]\n"
    "                   [--prompt-from-id C] [--idle-s S] [--poll-s S] [--state-dir DIR]\n"
    "                   [--grace-s S] [--pool-replica URL[,tp=N] ...] [--pool-timeout-s S]\n"
    "                   [--pool-steer] [--pool-core-replicas N] [--max-body-bytes N]\n"
    "                   [--max-answer-bytes N] [--request-cap-s S] [--request-read-s S]\n"
    "                   [--max-connections N] [flags]\n"
    "\n"
    "Runs the C-MLFQ gateway in front of vLLM/SGLang engines (docs/serve.md): every turn of\n"
    "every trajectory is routed by the experiment's sched section (the simulator's calls) and\n"
    "proxied byte for byte; control calls (pause, weight updates, loads) go to every engine.\n"
    "Engines are added and removed at run time through SGLang's worker calls (/add_worker,\n"
    "/workers) and listed at /libra/v1/engines. GET /libra/v1/plan plans the experiment's\n"
    "cluster on the trajectories seen to finish; POST /libra/v1/buckets (admin) re-buckets the\n"
    "engines (docs/serve.md \"Plans and buckets\"). Prints one JSON line with its URL when it\n"
    "listens. SIGTERM or SIGINT stops it gracefully: no new connection, the calls being served\n"
    "get --grace-s to finish, the state is committed; a second signal stops it at once.\n"
    "\n"
    "  --engine URL[,tp=N]    an engine (repeatable); its kind, version and TP asked of it\n"
    "                         (SGLang /get_server_info, else vLLM /version and tp=N); optional\n"
    "                         when the state dir has engines\n"
    "  --pool-replica URL[,tp=N]  a hybrid training replica of the elastic pool whose engine\n"
    "                         is at URL (repeatable; replica ids 0, 1, ... in flag order; the\n"
    "                         engine is registered as --engine is): lent to rollout and\n"
    "                         reclaimed with the trainer's consent through /libra/v1/pool\n"
    "                         (docs/serve.md \"The elastic pool\")\n"
    "  --pool-timeout-s S     a lend or reclaim the trainer has not confirmed S s after it was\n"
    "                         asked is cancelled (default 180; needs --pool-replica)\n"
    "  --pool-steer           the gateway asks for lends and reclaims itself, by the pool's\n"
    "                         signal at each step the trainer ends (the simulator's rule; every\n"
    "                         --pool-replica then needs the same tp=N)\n"
    "  --pool-core-replicas N  the trainer's data-parallel replicas that are never lent\n"
    "                         (default 1; the signal scales T_train by them)\n"
    "  --state-dir DIR        keep the gateway's state in DIR (SQLite; made when absent):\n"
    "                         what it learnt from, live trajectories, engines, layout and\n"
    "                         mode (the state's win over --plan, sched.buckets and --mode); a\n"
    "                         restart on DIR resumes routing where it stopped\n"
    "  --grace-s S            on SIGTERM/SIGINT, wait up to S s for the calls being served\n"
    "                         (default 20), then cut them\n"
    "  --listen HOST:PORT     address (default 127.0.0.1:0: a port chosen by the OS; IPv6 as\n"
    "                         [::1]:PORT); other than loopback (127.0.0.0/8, ::1, localhost)\n"
    "                         only with an admin token\n"
    "  --mode MODE            shadow (sticky least-requests routes; the policy's decision is\n"
    "                         logged beside it) or sched.policy's name (default: route by it)\n"
    "  --admin-token-file F   bearer token of the admin calls: every call that changes state\n"
    "                         (else LIBRA_ADMIN_TOKEN; without either, they answer 401)\n"
    "  --plan FILE            start from a plan of libra plan --json: its buckets are the\n"
    "                         layout (over sched.buckets); engines that are not its\n"
    "                         instances are named on stderr\n"
    "  --capture FILE         append every finished trajectory to FILE as a trace (a new\n"
    "                         file gets the header; a kept one must be this trace)\n"
    "  --decisions FILE       append one JSON line per routing decision to FILE\n"
    "  --rid-identity         the body's rid names the trajectory (for clients that send one\n"
    "                         per trajectory; most send one per request)\n"
    "  --prompt-tokens N      first prompt tokens hashed into the prompt key (default 64)\n"
    "  --prompt-from-id C     the prompt is the trajectory id up to its last C (\"17-3\" with\n"
    "                         -: prompt 17; SkyRL's session id with _) where it has one\n"
    "  --idle-s S             a trajectory idle S seconds is learnt as censored (default 7200)\n"
    "  --poll-s S             engines' health, weight version and pause state checked every\n"
    "                         S s (default 2)\n"
    "  --max-body-bytes N     largest request body (default 67108864; 413 above)\n"
    "  --max-answer-bytes N   largest engine answer held whole, not streamed (default\n"
    "                         1073741824; 502 above)\n"
    "  --request-cap-s S      a request still open after S seconds gets 504 (default 3600)\n"
    "  --request-read-s S     a client that has not sent its whole request S s after connecting\n"
    "                         or its last answer is disconnected (default 60)\n"
    "  --max-connections N    open client connections (default 4096)\n";

enum {
    OPT_ENGINE = 0x100,
    OPT_LISTEN,
    OPT_MODE,
    OPT_TOKEN_FILE,
    OPT_CAPTURE,
    OPT_DECISIONS,
    OPT_RID,
    OPT_PROMPT_TOKENS,
    OPT_PROMPT_SEP,
    OPT_IDLE,
    OPT_POLL,
    OPT_MAX_BODY,
    OPT_MAX_ANSWER,
    OPT_CAP,
    OPT_READ,
    OPT_MAX_CONN,
    OPT_PLAN,
    OPT_STATE_DIR,
    OPT_GRACE,
    OPT_POOL_REPLICA,
    OPT_POOL_TIMEOUT,
    OPT_POOL_STEER,
    OPT_POOL_CORE,
};

static const struct option own_options[] = {
    {"engine", required_argument, NULL, OPT_ENGINE},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"mode", required_argument, NULL, OPT_MODE},
    {"admin-token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"capture", required_argument, NULL, OPT_CAPTURE},
    {"decisions", required_argument, NULL, OPT_DECISIONS},
    {"rid-identity", no_argument, NULL, OPT_RID},
    {"prompt-tokens", required_argument, NULL, OPT_PROMPT_TOKENS},
    {"prompt-from-id", required_argument, NULL, OPT_PROMPT_SEP},
    {"idle-s", required_argument, NULL, OPT_IDLE},
    {"poll-s", required_argument, NULL, OPT_POLL},
    {"max-body-bytes", required_argument, NULL, OPT_MAX_BODY},
    {"max-answer-bytes", required_argument, NULL, OPT_MAX_ANSWER},
    {"request-cap-s", required_argument, NULL, OPT_CAP},
    {"request-read-s", required_argument, NULL, OPT_READ},
    {"max-connections", required_argument, NULL, OPT_MAX_CONN},
    {"plan", required_argument, NULL, OPT_PLAN},
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"grace-s", required_argument, NULL, OPT_GRACE},
    {"pool-replica", required_argument, NULL, OPT_POOL_REPLICA},
    {"pool-timeout-s", required_argument, NULL, OPT_POOL_TIMEOUT},
    {"pool-steer", no_argument, NULL, OPT_POOL_STEER},
    {"pool-core-replicas", required_argument, NULL, OPT_POOL_CORE},
    {0},
};

struct opts {
    struct gw_options gw;
    struct gw_worker_spec engines[GW_ENGINES_MAX];
    struct gw_worker_spec pool[GW_POOL_REPLICAS_MAX];
    const char *pool_only; /* the first flag given that needs --pool-replica */
    bool core_given;       /* --pool-core-replicas given */
    char host[NET_HOST_MAX];
    const char *mode, *token_file, *plan_file;
    char *token; /* owned */
    struct plan_fleet plan;
};

/* "URL[,tp=N]" */
static int parse_engine(const struct cli_command *cmd, const char *flag, const char *arg,
                        struct opts *o)
{
    size_t n = o->gw.n_engines;
    if (n == GW_ENGINES_MAX)
        return cli_usage_error(cmd, "%s: more than %d engines", flag, GW_ENGINES_MAX);
    char *url = xstrdup(arg), *comma = strchr(url, ',');
    const char *tp = NULL;
    if (comma) {
        *comma++ = '\0';
        tp = comma + 3;
        if (strncmp(comma, "tp=", 3) != 0) {
            free(url);
            return cli_usage_error(cmd, "%s: expected URL[,tp=N], got '%s'", flag, arg);
        }
    }
    char err[256];
    int rc = gw_worker_query_parse(url, tp, NULL, &o->engines[n], err, sizeof err);
    free(url);
    if (rc != 0)
        return cli_usage_error(cmd, "%s %s: %s", flag, arg, err);
    o->gw.n_engines++;
    return 0;
}

/* "URL[,tp=N]": an engine, and the pool's next replica. */
static int parse_pool_replica(const struct cli_command *cmd, const char *arg, struct opts *o)
{
    if (o->gw.n_pool == GW_POOL_REPLICAS_MAX)
        return cli_usage_error(cmd, "--pool-replica: more than %d replicas", GW_POOL_REPLICAS_MAX);
    int rc = parse_engine(cmd, "--pool-replica", arg, o);
    if (rc != 0)
        return rc;
    o->pool[o->gw.n_pool++] = o->engines[o->gw.n_engines - 1];
    return 0;
}

/* "HOST:PORT", an IPv6 HOST bracketed as in a URL ("[::1]:8000") or not ("::1:8000") */
static int parse_listen(const struct cli_command *cmd, const char *arg, struct opts *o)
{
    size_t size = strlen(arg) + NET_ADDR_WHY_EXTRA;
    char *why = xmalloc(size);
    int port, rc = net_listen_parse(arg, o->host, &port, why, size);
    if (rc == 0) {
        o->gw.host = o->host;
        o->gw.port = port;
    } else {
        rc = cli_usage_error(cmd, "%s: %s",
                             rc == NET_LISTEN_BAD_PORT ? "--listen port" : "--listen", why);
    }
    free(why);
    return rc;
}

/* An output file's name: "-" is refused rather than taken as a file of that name or as standard
 * output, which carries the ready line that a driver reads first. */
static int output_file(const struct cli_command *cmd, const char *flag, const char *path)
{
    if (strcmp(path, "-") == 0)
        return cli_usage_error(
            cmd, "%s: '-' is not a file (standard output carries the ready line); give a file",
            flag);
    return 0;
}

static int own_flag(const struct cli_command *cmd, int c, struct opts *o)
{
    int64_t v = 0;
    int rc;
    switch (c) {
    case OPT_ENGINE:
        return parse_engine(cmd, "--engine", optarg, o);
    case OPT_LISTEN:
        return parse_listen(cmd, optarg, o);
    case OPT_MODE:
        o->mode = optarg;
        return 0;
    case OPT_TOKEN_FILE:
        o->token_file = optarg;
        return 0;
    case OPT_PLAN:
        o->plan_file = optarg;
        return 0;
    case OPT_CAPTURE:
        o->gw.capture_path = optarg;
        return output_file(cmd, "--capture", optarg);
    case OPT_DECISIONS:
        o->gw.decisions_path = optarg;
        return output_file(cmd, "--decisions", optarg);
    case OPT_RID:
        o->gw.parse.rid_identity = true;
        return 0;
    case OPT_PROMPT_TOKENS:
        rc = cli_parse_int(cmd, "--prompt-tokens", optarg, 1, 1 << 20, &v);
        o->gw.parse.prompt_tokens = (int)v;
        return rc;
    case OPT_PROMPT_SEP:
        if (strlen(optarg) != 1)
            return cli_usage_error(cmd,
                                   "--prompt-from-id: expected one separator character, "
                                   "got '%s'",
                                   optarg);
        o->gw.parse.prompt_sep = optarg[0];
        return 0;
    case OPT_IDLE:
        return cli_parse_double(cmd, "--idle-s", optarg, 0.001, 1e9, &o->gw.idle_s);
    case OPT_POLL:
        return cli_parse_double(cmd, "--poll-s", optarg, 0.001, 1e6, &o->gw.poll_s);
    case OPT_MAX_BODY:
        rc = cli_parse_int(cmd, "--max-body-bytes", optarg, 1, INT64_C(1) << 40, &v);
        o->gw.limits.max_body_bytes = v;
        return rc;
    case OPT_MAX_ANSWER:
        return cli_parse_int(cmd, "--max-answer-bytes", optarg, 1, INT64_C(1) << 40,
                             &o->gw.max_answer_bytes);
    case OPT_CAP:
        return cli_parse_double(cmd, "--request-cap-s", optarg, 0.001, 1e9,
                                &o->gw.limits.request_cap_s);
    case OPT_READ:
        return cli_parse_double(cmd, "--request-read-s", optarg, 0.001, 1e9,
                                &o->gw.limits.request_read_s);
    case OPT_MAX_CONN:
        rc = cli_parse_int(cmd, "--max-connections", optarg, 1, 1000000, &v);
        o->gw.limits.max_connections = (int)v;
        return rc;
    case OPT_STATE_DIR:
        if (!*optarg)
            return cli_usage_error(cmd, "--state-dir: expected a directory");
        o->gw.state_dir = optarg;
        return 0;
    case OPT_GRACE:
        return cli_parse_double(cmd, "--grace-s", optarg, 0, 1e6, &o->gw.grace_s);
    case OPT_POOL_REPLICA:
        return parse_pool_replica(cmd, optarg, o);
    case OPT_POOL_TIMEOUT:
        o->pool_only = o->pool_only ? o->pool_only : "--pool-timeout-s";
        return cli_parse_double(cmd, "--pool-timeout-s", optarg, 0.001, 1e6, &o->gw.pool_timeout_s);
    case OPT_POOL_STEER:
        o->pool_only = o->pool_only ? o->pool_only : "--pool-steer";
        o->gw.pool_steer = true;
        return 0;
    case OPT_POOL_CORE:
        o->pool_only = o->pool_only ? o->pool_only : "--pool-core-replicas";
        o->core_given = true;
        rc = cli_parse_int(cmd, "--pool-core-replicas", optarg, 1, 4096, &v);
        o->gw.pool_core_replicas = (int)v;
        return rc;
    default:
        return LIBRA_EXIT_USAGE;
    }
}

/* Whether token (from where) can be the admin token: 16 to 4096 characters (a request's headers
 * are at most 64 KiB), none of them a space or control character (an Authorization header
 * could not carry it whole).
 * Returns 0, or LIBRA_EXIT_USAGE after printing why. */
static int check_token(const char *where, const char *token)
{
    for (const char *p = token; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            cli_errorf("serve: %s: the admin token holds a space or control character", where);
            return LIBRA_EXIT_USAGE;
        }
    size_t n = strlen(token);
    if (n < 16 || n > 4096) {
        cli_errorf("serve: %s: the admin token must be 16 to 4096 characters, not %zu", where, n);
        return LIBRA_EXIT_USAGE;
    }
    return 0;
}

/* The admin token: the file's first line, else LIBRA_ADMIN_TOKEN; never argv. */
static int read_token(struct opts *o)
{
    const char *env = getenv("LIBRA_ADMIN_TOKEN");
    if (!o->token_file) {
        if (!env || !*env)
            return 0;
        int rc = check_token("LIBRA_ADMIN_TOKEN", env);
        o->token = rc ? NULL : xstrdup(env);
        return rc;
    }
    struct libra_error err = {0};
    FILE *f = fileio_open(o->token_file, &err);
    if (!f)
        return cli_report(LIBRA_EIO, &err);
    /* The first line, read no further than a header could carry it (64 KiB; a token is at
     * most 4096 characters): a file of one endless line (/dev/zero) is not read whole */
    enum { MOST = 65536 };
    char *line = xmalloc(MOST + 2);
    size_t n = 0;
    int c = 0;
    while (n <= MOST && (c = getc(f)) != EOF && c != '\n')
        line[n++] = (char)c;
    line[n] = '\0';
    int failed = ferror(f) ? errno : 0;
    if (f != stdin)
        fclose(f);
    if (failed) {
        free(line);
        return cli_report(fileio_error(&err, o->token_file, failed), &err);
    }
    if ((n == 0 && c == EOF) || memchr(line, '\0', n) || n > MOST) {
        cli_errorf("serve: %s: %s", o->token_file,
                   n == 0                  ? "empty file: the admin token is its first line"
                   : memchr(line, '\0', n) ? "the admin token holds a NUL byte"
                                           : "the admin token must be 16 to 4096 characters, "
                                             "not more than 65536");
        free(line);
        return LIBRA_EXIT_USAGE;
    }
    line[strcspn(line, "\r")] = '\0';
    int rc = check_token(o->token_file, line);
    if (rc)
        free(line);
    else
        o->token = line;
    return rc;
}

/* --plan FILE: the fleet of a plan document, errors at FILE:LINE:COL. */
static int read_plan(struct opts *o)
{
    if (!o->plan_file)
        return 0;
    char *text;
    size_t len;
    int rc = cli_read_file(o->plan_file, &text, &len);
    if (rc)
        return rc;
    struct ujson_doc doc = {0};
    struct libra_error err = {0};
    if (ujson_doc_parse(&doc, o->plan_file, text, len, &err) == 0 &&
        plan_fleet_from_json(&o->plan, &doc, &err) == 0)
        o->gw.plan = &o->plan;
    else
        rc = cli_report_error(&err);
    ujson_doc_free(&doc);
    free(text);
    return rc;
}

static int resolve_mode(const struct cli_command *cmd, const struct libra_config *cfg,
                        struct opts *o)
{
    const char *policy = sched_policy_name(cfg->sched.policy);
    if (!o->mode || strcmp(o->mode, policy) == 0)
        return 0;
    if (strcmp(o->mode, "shadow") != 0)
        return cli_value_errorf(cmd, "--mode: expected shadow or %s (sched.policy), not '%s'",
                                policy, o->mode);
    o->gw.shadow = true;
    return 0;
}

/* Refuses a policy the gateway cannot act on: oracle routes by each trajectory's true remaining
 * tokens, which a live gateway never learns (it would answer the shortest bucket every time).
 * Names the flag that set sched.policy, else its place in the config file (the default is not
 * oracle). */
static int check_policy(const struct cli_common *cc, const struct ujson_doc *config,
                        const struct libra_config *cfg)
{
    const char *why = spec_policy_live_refusal(cfg->sched.policy);
    if (!why)
        return 0;
    const char *flag = cli_common_flag(cc, "sched.policy");
    if (flag)
        return cli_value_errorf(cc->cmd, "%s: %s", flag, why);
    struct libra_error err;
    ujson_errorf(&err, config, "sched/policy", "%s", why);
    return cli_report_error(&err);
}

/* ---- the event loop ------------------------------------------------------------------------- */

struct run {
    struct event_base *base;
    struct gw *gw;
    int rc;
    bool stopping; /* a signal came: the next one stops at once */
};

static void on_stopped(void *arg);

static void on_ready(void *arg, int rc, const char *msg)
{
    struct run *r = arg;
    if (rc != 0) {
        cli_errorf("serve: %s", msg);
        r->rc = rc == LIBRA_EIO ? LIBRA_EXIT_IO : LIBRA_EXIT_USAGE;
        event_base_loopbreak(r->base);
        return;
    }
    char *line = gw_ready_line(r->gw);
    bool ok = printf("%s\n", line) >= 0 && fflush(stdout) == 0;
    free(line);
    if (!ok) { /* a driver waits for this line: without it nothing can use the gateway */
        cli_errorf("serve: cannot write '<stdout>': %s", error_strerror(errno));
        r->rc = LIBRA_EXIT_IO;
        r->stopping = true;
        gw_stop(r->gw, on_stopped, r);
    }
}

static void on_stopped(void *arg)
{
    struct run *r = arg;
    event_base_loopbreak(r->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct run *r = arg;
    if (r->stopping) {
        event_base_loopbreak(r->base);
        return;
    }
    r->stopping = true;
    gw_stop(r->gw, on_stopped, r);
}

static int serve(const struct libra_config *cfg, struct opts *o)
{
    signal(SIGPIPE, SIG_IGN);
    evthread_use_pthreads(); /* the planner's thread and the state dir's worker post back */
    struct run r = {.base = net_base_new()};
    char err[512];
    int rc = gw_new(&r.gw, r.base, cfg, &o->gw, on_ready, &r, err, sizeof err);
    if (rc != 0) {
        cli_errorf("serve: %s", err);
        event_base_free(r.base);
        return rc == LIBRA_EIO         ? LIBRA_EXIT_IO
               : rc == LIBRA_EINTERNAL ? LIBRA_EXIT_INTERNAL
                                       : LIBRA_EXIT_USAGE;
    }
    struct event *sigint = evsignal_new(r.base, SIGINT, on_signal, &r);
    struct event *sigterm = evsignal_new(r.base, SIGTERM, on_signal, &r);
    event_add(sigint, NULL);
    event_add(sigterm, NULL);
    event_base_dispatch(r.base);
    event_free(sigint);
    event_free(sigterm);
    if (gw_free(r.gw, err, sizeof err) != 0 && r.rc == 0) {
        cli_errorf("serve: %s", err);
        r.rc = LIBRA_EXIT_IO;
    }
    event_base_free(r.base);
    return r.rc;
}

int cmd_serve(int argc, char **argv)
{
    struct cli_common cc;
    cli_common_init(&cc, cli_find("serve"), CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS, "", own_options);
    struct opts *o = xcalloc(1, sizeof *o);
    gw_options_default(&o->gw);
    o->gw.engines = o->engines;
    o->gw.pool = o->pool;
    struct api_presets p = {0};
    struct ujson_doc config = {0};
    struct libra_config cfg;
    int c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            cli_common_help(&cc, help, stdout);
            goto out;
        }
        rc = own_flag(cc.cmd, c, o);
    }
    if (rc == 0 && argc - optind > 1)
        rc = cli_usage_error(cc.cmd, "unexpected argument '%s'", argv[optind + 1]);
    if (rc == 0 && o->gw.n_engines == 0 && !o->gw.state_dir)
        rc = cli_usage_error(cc.cmd, "give at least one --engine URL[,tp=N] (or a --state-dir "
                                     "that has engines)");
    if (rc == 0 && o->pool_only && o->gw.n_pool == 0)
        rc = cli_usage_error(cc.cmd, "%s: needs --pool-replica", o->pool_only);
    if (rc == 0 && o->core_given && !o->gw.pool_steer)
        rc = cli_usage_error(cc.cmd, "--pool-core-replicas: needs --pool-steer (only the signal "
                                     "uses it)");
    if (rc == 0)
        rc = cli_common_load_doc(&cc, optind < argc ? argv[optind] : NULL, &p, &config, NULL, &cfg);
    const char *signal = cli_common_flag(&cc, "ehp.signal"); /* a file's serves its sim runs */
    if (rc == 0 && signal && cfg.ehp.signal != SPEC_EHP_BALANCE && !o->gw.pool_steer)
        rc = cli_usage_error(cc.cmd, "%s: needs --pool-steer (only the signal uses it)", signal);
    if (rc == 0)
        rc = check_policy(&cc, &config, &cfg);
    if (rc == 0)
        rc = resolve_mode(cc.cmd, &cfg, o);
    if (rc == 0)
        rc = read_token(o);
    if (rc == 0)
        rc = read_plan(o);
    o->gw.hw = spec_hardware_find(&p.spec, cfg.cluster.hardware);
    o->gw.model = spec_model_find(&p.spec, cfg.model.name);
    struct cost_move_model move;
    if (rc == 0)
        rc = cli_move_costs(&p, &cfg, &move, &o->gw.costs);
    o->gw.costs.decision.live = true; /* engines' in-flight turns are the load cmlfq_h sees */
    o->gw.admin_token = o->token;
    if (rc == 0)
        rc = serve(&cfg, o);
out:
    free(o->token);
    free(o);
    ujson_doc_free(&config);
    api_presets_free(&p);
    cli_common_free(&cc);
    return rc;
}
