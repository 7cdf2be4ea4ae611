/*
 * What the gateway reads of its admin calls: the engine to register (POST /workers' JSON body,
 * /add_worker's query), and the engine a path names (/workers/{id}, DELETE's id or URL, and
 * /libra/v1/engines/{id}/{action}), and the mode to route in. Every input is checked here, before
 * anything changes, so a bad call gets a 400 that says what is wrong.
 *
 * Pure: memory in, memory out (tests/fuzz/fuzz_serve_admin.c).
 */
#ifndef SERVER_ADMIN_H
#define SERVER_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_URL_MAX 256   /* bytes of an engine URL, NUL included */
#define GW_ACTION_MAX 16 /* bytes of an engine action ("drain"), NUL included */

/* An engine to register, as a call names it. */
struct gw_worker_spec {
    char url[GW_URL_MAX]; /* http://host[:port][/prefix], no trailing slash */
    int tp;               /* tensor-parallel size 1, 2, 4 or 8; 0: ask the engine */
};

/*
 * Checks the engine URL of len bytes at in and writes it to out (GW_URL_MAX bytes) without its
 * trailing slashes. It must start with http://, name a host and hold no whitespace, control
 * character, quote, backslash, '?' or '#' (the gateway appends API paths to it), and be one the
 * client can call (a port in 1..65535, no credentials: net_url_problem). Returns 0, or -1 with
 * err saying why.
 */
int gw_engine_url(const char *in, size_t len, char *out, char *err, size_t err_size);

/* Reads a TP size (decimal text: 1, 2, 4 or 8). Returns 0, or -1 with err. */
int gw_tp_parse(const char *text, int *tp, char *err, size_t err_size);

/*
 * Reads POST /workers' body of len bytes: {"url": URL, "tp": N, "worker_type": "regular"}, tp
 * and worker_type optional (SGLang's model gateway sends worker_type; the gateway serves
 * regular workers only). Any other member is refused by name: a setting the gateway would not
 * carry out is an error, not ignored. Returns 0, or -1 with err.
 */
int gw_worker_body_parse(const char *body, size_t len, struct gw_worker_spec *out, char *err,
                         size_t err_size);

/* Reads /add_worker's query values: url (required; NULL when absent), tp (NULL: ask the
 * engine) and worker_type (NULL, or "regular" as in the body). Returns 0, or -1 with err. */
int gw_worker_query_parse(const char *url, const char *tp, const char *type,
                          struct gw_worker_spec *out, char *err, size_t err_size);

/*
 * Reads the engine a path segment names: a decimal id (*id set, *url ""), or, as older SGLang
 * routers took it, the engine's URL (*id -1, url filled, GW_URL_MAX bytes). Returns 0, or -1
 * with err.
 */
int gw_engine_ref_parse(const char *text, int64_t *id, char *url, char *err, size_t err_size);

/*
 * Reads "{id}/{action}", the rest of /libra/v1/engines/{id}/{action}: a decimal id and an action,
 * drain, lend or reclaim (GW_ACTION_MAX bytes with the NUL). Returns 0, or -1 with err.
 */
int gw_engine_action_parse(const char *text, int64_t *id, char *action, char *err, size_t err_size);

/* Reads POST /libra/v1/admin/mode's body: {"mode": "shadow"} or {"mode": POLICY}, policy being
 * sched.policy's name; any other member is refused by name. Returns 0 with *shadow set, or -1
 * with err. */
int gw_mode_body_parse(const char *body, size_t len, const char *policy, bool *shadow, char *err,
                       size_t err_size);

#endif
