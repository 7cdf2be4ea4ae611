/*
 * `libra emu`: emulated SGLang/vLLM engines on local ports, timed by the engine model the
 * simulator runs (emu/emu.h). This file turns the experiment config and flags into each
 * instance's engine limits and lifecycle times, starts them, prints one JSON line per instance
 * when all listen, and runs the event loop until SIGINT or SIGTERM.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_config.h"
#include "cli/commands.h"
#include "cost/lifecycle.h"
#include "cost/shape.h"
#include "emu/emu.h"
#include "net/http.h"
#include "plan/plan.h"
#include "spec/bucket.h"
#include "util/alloc.h"
#include "util/parse.h"
#include "util/strbuf.h"

#define MAX_INSTANCES 256

static const char help[] =
    "usage: libra emu [EXPERIMENT] [--instances LIST] [--time-scale F] [--host ADDR]\n"
    "                 [--base-port P] [--ports-file FILE] [--dev-mode] [--fail SPEC]...\n"
    "                 [--stall SPEC]... [--max-body-bytes N] [--request-cap-s S]\n"
    "                 [--request-read-s S] [--max-connections N] [flags]\n"
    "\n"
    "Runs emulated inference engines, each on its own port, answering SGLang's and vLLM's HTTP\n"
    "APIs with the timing of the engine model `libra sim` uses (the experiment's model and\n"
    "hardware, sim.max_seqs, sim.max_batched_tokens, sim.prefix_cache). Prints one JSON line\n"
    "per instance ({\"instance\", \"tp\", \"url\", \"port\", \"model\"}) when all listen; stops\n"
    "on SIGINT or SIGTERM. docs/emu.md lists the endpoints and their semantics.\n"
    "\n"
    "  --instances LIST      instances in order, e.g. tp1x4,tp2x2,tp4 (default tp1)\n"
    "  --time-scale F        wall seconds per emulated second (default 1; 0.01: 100x faster)\n"
    "  --host ADDR           address to listen on (default 127.0.0.1; IPv6 as ::1 or [::1])\n"
    "  --base-port P         instance i listens on P + i (default: ports chosen by the OS)\n"
    "  --ports-file FILE     also write the JSON lines to FILE once all instances listen\n"
    "  --dev-mode            expose vLLM's development-mode endpoints (pause, sleep, weights)\n"
    "  --fail SPEC           instance=I,after_s=T: instance I dies T emulated seconds in\n"
    "  --stall SPEC          instance=I,after_s=T,for_s=D: instance I answers nothing for D s\n"
    "  --max-body-bytes N    largest request body (default 67108864; 413 above)\n"
    "  --request-cap-s S     a request still open after S wall seconds gets 504 (default 3600)\n"
    "  --request-read-s S    a client that has not sent its whole request S s after connecting\n"
    "                        or its last answer is disconnected (default 60)\n"
    "  --max-connections N   open client connections per instance (default 4096)\n";

enum {
    OPT_INSTANCES = 0x100,
    OPT_TIME_SCALE,
    OPT_HOST,
    OPT_BASE_PORT,
    OPT_PORTS_FILE,
    OPT_DEV_MODE,
    OPT_FAIL,
    OPT_STALL,
    OPT_MAX_BODY,
    OPT_CAP,
    OPT_READ,
    OPT_MAX_CONN,
};

static const struct option own_options[] = {
    {"instances", required_argument, NULL, OPT_INSTANCES},
    {"time-scale", required_argument, NULL, OPT_TIME_SCALE},
    {"host", required_argument, NULL, OPT_HOST},
    {"base-port", required_argument, NULL, OPT_BASE_PORT},
    {"ports-file", required_argument, NULL, OPT_PORTS_FILE},
    {"dev-mode", no_argument, NULL, OPT_DEV_MODE},
    {"fail", required_argument, NULL, OPT_FAIL},
    {"stall", required_argument, NULL, OPT_STALL},
    {"max-body-bytes", required_argument, NULL, OPT_MAX_BODY},
    {"request-cap-s", required_argument, NULL, OPT_CAP},
    {"request-read-s", required_argument, NULL, OPT_READ},
    {"max-connections", required_argument, NULL, OPT_MAX_CONN},
    {0},
};

struct opts {
    const char *instances, *host, *ports_file;
    char host_buf[256]; /* --host without an IPv6 address's brackets */
    double time_scale;
    int64_t base_port;
    bool dev_mode;
    struct net_limits limits;
    struct emu_fault_flag faults[64];
    int n_faults;
};

/* "instance=I,after_s=T[,for_s=D]" (emu_fault_parse), refused naming the flag and the key */
static int parse_fault(const struct cli_command *cmd, const char *arg, bool stall,
                       struct emu_fault_flag *f)
{
    size_t size = strlen(arg) + PARSE_WHY_EXTRA;
    char *why = xmalloc(size);
    int rc = emu_fault_parse(arg, stall, f, why, size) != 0
                 ? cli_value_error(cmd, stall ? "--stall" : "--fail", why)
                 : 0;
    free(why);
    return rc;
}

/* Whether host (a name has no ':') is an IPv6 address, a zone ("%eth0") after it or not. */
static bool ipv6_literal(const char *host)
{
    char addr[64];
    struct in6_addr a;
    size_t n = strcspn(host, "%");
    if (n >= sizeof addr)
        return false;
    snprintf(addr, sizeof addr, "%.*s", (int)n, host);
    return inet_pton(AF_INET6, addr, &a) == 1;
}

static int own_flag(const struct cli_command *cmd, int c, struct opts *o)
{
    int64_t v = 0;
    int rc = 0;
    switch (c) {
    case OPT_INSTANCES:
        o->instances = optarg;
        return 0;
    case OPT_TIME_SCALE:
        return cli_parse_double(cmd, "--time-scale", optarg, 1e-6, 1e6, &o->time_scale);
    case OPT_HOST: { /* an IPv6 address may be bracketed, as in a URL: [::1] */
        size_t n = strlen(optarg);
        bool bracketed = n >= 2 && optarg[0] == '[' && optarg[n - 1] == ']';
        if (n >= sizeof o->host_buf)
            return cli_value_errorf(cmd, "--host: longer than %zu bytes", sizeof o->host_buf - 1);
        if (bracketed ? n == 2 : strpbrk(optarg, "[]") != NULL) /* else "cannot listen on :0" */
            return cli_value_errorf(cmd, "--host: '%s' is not an address%s", optarg,
                                    bracketed ? "" : " (an IPv6 one is bracketed whole: [::1])");
        snprintf(o->host_buf, sizeof o->host_buf, "%.*s", (int)n - (bracketed ? 2 : 0),
                 optarg + bracketed);
        if (strchr(o->host_buf, ':') && !ipv6_literal(o->host_buf)) /* "127.0.0.1:8000" */
            return cli_value_errorf(cmd, "--host: '%s' is not an address (a port is --base-port's)",
                                    optarg);
        o->host = o->host_buf;
        return 0;
    }
    case OPT_BASE_PORT:
        return cli_parse_int(cmd, "--base-port", optarg, 1, 65535, &o->base_port);
    case OPT_PORTS_FILE:
        if (strcmp(optarg, "-") == 0) /* the lines would come twice, as twice the instances */
            return cli_value_error(cmd, "--ports-file",
                                   "'-' is standard output, where the lines go already");
        o->ports_file = optarg;
        return 0;
    case OPT_DEV_MODE:
        o->dev_mode = true;
        return 0;
    case OPT_FAIL:
    case OPT_STALL:
        if (o->n_faults == (int)(sizeof o->faults / sizeof o->faults[0]))
            return cli_usage_error(cmd, "too many --fail and --stall flags");
        return parse_fault(cmd, optarg, c == OPT_STALL, &o->faults[o->n_faults++]);
    case OPT_MAX_BODY:
        rc = cli_parse_int(cmd, "--max-body-bytes", optarg, 1, INT64_C(1) << 40, &v);
        o->limits.max_body_bytes = v;
        return rc;
    case OPT_CAP:
        return cli_parse_double(cmd, "--request-cap-s", optarg, 0.001, 1e9,
                                &o->limits.request_cap_s);
    case OPT_READ:
        return cli_parse_double(cmd, "--request-read-s", optarg, 0.001, 1e9,
                                &o->limits.request_read_s);
    case OPT_MAX_CONN:
        rc = cli_parse_int(cmd, "--max-connections", optarg, 1, 1000000, &v);
        o->limits.max_connections = (int)v;
        return rc;
    default:
        return LIBRA_EXIT_USAGE;
    }
}

/* Fills each instance's engine limits and lifecycle times from the config. */
static int instance_configs(const struct api_presets *p, const struct libra_config *cfg,
                            const struct opts *o, struct emu_instance_config *inst, int n)
{
    const struct spec_hardware *hw = spec_hardware_find(&p->spec, cfg->cluster.hardware);
    const struct spec_model *model = spec_model_find(&p->spec, cfg->model.name);
    struct cost_shape shape;
    if (!hw || !model || cost_shape_init(&shape, model)) {
        cli_errorf("emu: internal: resolved presets '%s', '%s' are unusable", cfg->cluster.hardware,
                   cfg->model.name);
        return LIBRA_EXIT_INTERNAL;
    }
    if (o->base_port && o->base_port + n - 1 > 65535) {
        cli_errorf("emu: --base-port: instance %d would listen on port %lld, above 65535", n - 1,
                   (long long)(o->base_port + n - 1));
        return LIBRA_EXIT_USAGE;
    }
    struct plan_settings st;
    plan_settings_from_config(&st, hw, cfg);
    for (int i = 0; i < n; i++) {
        struct emu_instance_config *c = &inst[i];
        struct cost_rollout_pre pre;
        if (c->tp > hw->gpus_per_node ||
            cost_rollout_pre_init(&pre, &shape, hw, &st.rollout, c->tp) != 0 ||
            pre.kv_capacity_tokens < 1) {
            cli_errorf("emu: model %s does not fit a TP%d instance on %s", model->name, c->tp,
                       hw->name);
            return LIBRA_EXIT_USAGE;
        }
        engine_config_default(&c->engine, &pre);
        c->engine.max_seqs = st.max_seqs;
        c->engine.max_batched_tokens = (int64_t)st.chunk_tokens;
        c->engine.prefix_cache = cfg->sim.prefix_cache;
        c->times = (struct emu_times){
            .load_disk_s = cost_disk_reload_s(&st.lifecycle, &shape),
            .broadcast_s = cost_broadcast_s(&st.lifecycle, &shape, hw, false),
            .group_init_s = cost_group_rebuild_s(&st.lifecycle, 1 + c->tp),
            .wake_s = cost_wake_s(&st.lifecycle, &shape, c->tp),
        };
        c->port = o->base_port ? (int)o->base_port + i : 0;
        c->fault = (struct emu_fault){-1, -1, 0};
    }
    for (int k = 0; k < o->n_faults; k++) {
        const struct emu_fault_flag *f = &o->faults[k];
        if (f->instance >= n) {
            cli_errorf("emu: %s: instance: %d does not exist (there are %d instances)",
                       f->stall ? "--stall" : "--fail", f->instance, n);
            return LIBRA_EXIT_USAGE;
        }
        struct emu_fault *ef = &inst[f->instance].fault;
        if ((f->stall ? ef->stall_after_s : ef->fail_after_s) >= 0) { /* one would be lost */
            cli_errorf("emu: %s: instance: %d is given twice (an instance %s once)",
                       f->stall ? "--stall" : "--fail", f->instance, f->stall ? "stalls" : "fails");
            return LIBRA_EXIT_USAGE;
        }
        if (f->stall) {
            ef->stall_after_s = f->after_s;
            ef->stall_for_s = f->for_s;
        } else {
            ef->fail_after_s = f->after_s;
        }
        if (ef->fail_after_s >= 0 && ef->stall_after_s >= ef->fail_after_s) {
            cli_errorf(
                "emu: --stall: after_s: instance %d would stall at %g s, at or after it fails at "
                "%g s (--fail): the stall would never begin",
                f->instance, ef->stall_after_s, ef->fail_after_s);
            return LIBRA_EXIT_USAGE;
        }
    }
    return 0;
}

/* The ready lines: one JSON object per instance, each written by the JSON encoder: a host
 * of any length (255 bytes) or a model name never cuts a line short. Malloc'd. */
static char *ready_lines(const struct emu *e, const struct emu_config *c)
{
    struct strbuf out = {0};
    bool v6 = strchr(c->host, ':') != NULL; /* an IPv6 address is bracketed in a URL */
    for (int i = 0; i < c->n_inst; i++) {
        int port = emu_port(e, i);
        struct strbuf url = {0};
        strbuf_printf(&url, v6 ? "http://[%s]:%d" : "http://%s:%d", c->host, port);
        json_t *o = json_pack("{s:i, s:i, s:s, s:i, s:s}", "instance", i, "tp", c->inst[i].tp,
                              "url", url.data, "port", port, "model", c->model);
        char *line = json_dumps(o, JSON_PRESERVE_ORDER);
        strbuf_puts(&out, line);
        strbuf_puts(&out, "\n");
        free(line);
        json_decref(o);
        strbuf_free(&url);
    }
    return strbuf_detach(&out);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    event_base_loopbreak(arg);
}

static int serve(const struct emu_config *c, const struct opts *o)
{
    signal(SIGPIPE, SIG_IGN);
    struct event_base *base = net_base_new();
    struct emu *e = NULL;
    char err[512];
    int rc = 0;
    if (emu_new(&e, base, c, err, sizeof err)) {
        cli_errorf("emu: %s", err);
        event_base_free(base);
        return LIBRA_EXIT_IO;
    }
    /* the signals are caught before the ready lines tell a driver it may send them */
    struct event *sigint = evsignal_new(base, SIGINT, on_signal, base);
    struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, base);
    event_add(sigint, NULL);
    event_add(sigterm, NULL);
    char *lines = ready_lines(e, c);
    if (o->ports_file)
        rc = cli_write_output(o->ports_file, lines);
    if (rc == 0) /* a driver reads the ports from stdout: without them nothing can start */
        rc = cli_write_output(NULL, lines);
    if (rc == 0)
        event_base_dispatch(base);
    event_free(sigint);
    event_free(sigterm);
    free(lines);
    emu_free(e);
    event_base_free(base);
    return rc;
}

int cmd_emu(int argc, char **argv)
{
    struct cli_common cc;
    cli_common_init(&cc, cli_find("emu"), CLI_FLAGS_CONFIG | CLI_FLAGS_PRESETS, "", own_options);
    struct opts o = {.instances = "tp1", .host = "127.0.0.1", .time_scale = 1};
    net_limits_default(&o.limits);
    struct api_presets p = {0};
    struct libra_config cfg;
    struct emu_instance_config *inst = xcalloc(MAX_INSTANCES, sizeof *inst);
    int tp[MAX_INSTANCES], n = 0, c, rc = 0;
    while (rc == 0 && (c = cli_common_getopt(&cc, argc, argv)) != -1) {
        if (c == 'h') {
            cli_common_help(&cc, help, stdout);
            goto out;
        }
        rc = own_flag(cc.cmd, c, &o);
    }
    if (rc == 0 && argc - optind > 1)
        rc = cli_usage_error(cc.cmd, "unexpected argument '%s'", argv[optind + 1]);
    struct libra_error e = {0};
    if (rc == 0 && spec_fleet_parse(o.instances, "--instances", tp, MAX_INSTANCES, &n, &e))
        rc = cli_report_error(&e);
    if (rc == 0)
        rc = cli_common_load(&cc, optind < argc ? argv[optind] : NULL, &p, &cfg);
    for (int i = 0; i < n; i++)
        inst[i].tp = tp[i];
    if (rc == 0)
        rc = instance_configs(&p, &cfg, &o, inst, n);
    if (rc == 0) {
        const struct spec_model *m = spec_model_find(&p.spec, cfg.model.name);
        struct emu_config ec = {.host = o.host,
                                .model = cfg.model.name,
                                .vocab = m->vocab > 1 ? (uint32_t)m->vocab : 32000,
                                .time_scale = o.time_scale,
                                .seed = (uint64_t)cfg.sim.seed,
                                .dev_mode = o.dev_mode,
                                .limits = o.limits,
                                .inst = inst,
                                .n_inst = n};
        rc = serve(&ec, &o);
    }
out:
    free(inst);
    api_presets_free(&p);
    cli_common_free(&cc);
    return rc;
}
