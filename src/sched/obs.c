/*
 * Observations: classification of tool returns and their state keys; see obs.h.
 *
 * The text rule runs on every return the gateway forwards without an explicit status, so it is
 * one pass over the bytes with no allocation: it dispatches on the first letter of each
 * candidate word and compares the rest case-insensitively.
 */
#include "sched/obs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *workload; /* prefix: "dapo-math" covers "dapo-math-verl" */
    const char *tool;
    enum sched_tool_rule rule;
} workload_rules[] = {
    {"search-r1", "search", SCHED_RULE_RAISED},
    {"r2e-gym", "validator", SCHED_RULE_REWARD},
    {"dapo-math", "validator", SCHED_RULE_CORRECT},
};

void sched_obs_defaults(struct sched_obs_config *c, const char *workload, const char *model)
{
    memset(c, 0, sizeof *c);
    c->small_max_tokens = 500;
    c->large_above_tokens = 5000;
    c->chars_per_token = 4.0;
    bool r2e = workload && strncasecmp(workload, "r2e-gym", 7) == 0;
    bool dapo = workload && strncasecmp(workload, "dapo-math", 9) == 0;
    /* Without a model, the workload's reference run: DAPO on 4B, R2E-Gym on 14B. */
    if ((model && strcasecmp(model, "qwen3-4b") == 0) || (!model && dapo)) {
        c->small_max_tokens = 400;
        c->large_above_tokens = 1600;
    } else if (r2e && (!model || strcasecmp(model, "qwen3-14b") == 0)) {
        c->small_max_tokens = 1000;
        c->large_above_tokens = 12000;
    }
    for (size_t i = 0; workload && i < sizeof workload_rules / sizeof workload_rules[0]; i++) {
        const char *w = workload_rules[i].workload;
        if (strncasecmp(workload, w, strlen(w)) != 0)
            continue;
        snprintf(c->rules[c->n_rules].tool, SCHED_TOOL_NAME_MAX, "%s", workload_rules[i].tool);
        c->rules[c->n_rules++].rule = workload_rules[i].rule;
    }
}

/* Whether text[0..len) starts with the lower-case ASCII word w, in any case. (Not
 * strncasecmp: that one consults the locale on every byte.) */
static bool has_word(const char *text, size_t len, const char *w, size_t wlen)
{
    if (len < wlen)
        return false;
    for (size_t i = 0; i < wlen; i++)
        if (w[i] == ' ' ? text[i] != ' ' : (text[i] | 0x20) != w[i])
            return false;
    return true;
}

enum sched_status sched_status_from_text(const char *text, size_t len, bool raised_only)
{
    bool failed = false;
    for (size_t i = 0; i < len; i++) {
        const char *p = text + i;
        size_t left = len - i;
        switch (p[0] | 0x20) { /* ASCII lower case; other bytes never match below */
        case 't':
            if (has_word(p, left, "timeout", 7) || has_word(p, left, "timed out", 9))
                return SCHED_TIMEOUT;
            failed = failed || has_word(p, left, "traceback", 9);
            break;
        case 'e':
            failed = failed || has_word(p, left, "exception", 9) ||
                     (!raised_only && has_word(p, left, "error", 5));
            break;
        default:
            break;
        }
    }
    return failed ? SCHED_FAILURE : SCHED_SUCCESS;
}

enum sched_size sched_size_class(const struct sched_obs_config *c, int64_t tokens)
{
    if (tokens > c->large_above_tokens)
        return SCHED_LARGE;
    return tokens > c->small_max_tokens ? SCHED_MEDIUM : SCHED_SMALL;
}

static enum sched_tool_rule rule_of(const struct sched_obs_config *c, const char *tool)
{
    for (int i = 0; i < c->n_rules; i++)
        if (strcmp(c->rules[i].tool, tool) == 0)
            return c->rules[i].rule;
    return SCHED_RULE_TEXT;
}

static int64_t payload_tokens(const struct sched_obs_config *c, const struct sched_tool_return *r)
{
    double cpt = c->chars_per_token > 0 ? c->chars_per_token : 4.0;
    if (r->payload_tokens >= 0)
        return r->payload_tokens;
    if (r->payload_chars >= 0)
        return (int64_t)ceil((double)r->payload_chars / cpt);
    if (r->text)
        return (int64_t)ceil((double)r->text_len / cpt);
    return -1;
}

static void classify_status(const struct sched_obs_config *c, const struct sched_tool_return *r,
                            struct sched_obs *out)
{
    if (r->status >= 0 && r->status < SCHED_STATUS_COUNT) {
        out->status = (enum sched_status)r->status;
        out->status_from = SCHED_FROM_EXPLICIT;
        return;
    }
    enum sched_tool_rule rule = rule_of(c, out->tool);
    out->status_from = SCHED_FROM_RULE;
    if (rule == SCHED_RULE_REWARD && !isnan(r->reward)) {
        out->status = r->reward >= 0.5 ? SCHED_SUCCESS : SCHED_FAILURE;
    } else if (rule == SCHED_RULE_CORRECT && r->correct >= 0) {
        out->status = r->correct ? SCHED_SUCCESS : SCHED_FAILURE;
    } else if (r->text) {
        out->status = sched_status_from_text(r->text, r->text_len, rule == SCHED_RULE_RAISED);
        out->status_from = SCHED_FROM_TEXT;
    } else {
        out->status = SCHED_SUCCESS;
        out->status_from = SCHED_FROM_NONE;
    }
}

void sched_obs_classify(const struct sched_obs_config *c, const struct sched_tool_return *r,
                        struct sched_obs *out)
{
    memset(out, 0, sizeof *out);
    const char *tool = r->tool && *r->tool ? r->tool : "unknown";
    size_t n = 0;
    for (; tool[n] && n + 1 < SCHED_TOOL_NAME_MAX; n++) {
        unsigned char ch = (unsigned char)tool[n];
        bool separator = ch == ':' || ch == '|' || ch == ','; /* of a state key */
        out->tool[n] = ch < 0x20 || ch == 0x7f || separator ? '_' : (char)ch;
    }
    out->payload_tokens = payload_tokens(c, r);
    out->size = sched_size_class(c, out->payload_tokens);
    classify_status(c, r, out);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends src to buf (size bytes) at *len, as far as it fits, and terminates it; *len counts
 * what fits. */
static void append(char *buf, size_t size, size_t *len, const char *src)
{
    size_t n = strlen(src);
    if (*len + n >= size)
        n = size - 1 - *len;
    memcpy(buf + *len, src, n);
    *len += n;
    buf[*len] = '\0';
}

/* Writes "tool:size:status" of o into part (SCHED_TOOL_NAME_MAX + 24 bytes). The hot path of
 * every routing decision: string pieces, no formatted printing. */
static void part_key(const struct sched_obs *o, char *part, size_t size)
{
    size_t len = 0;
    append(part, size, &len, o->tool);
    append(part, size, &len, ":");
    append(part, size, &len, sched_size_name(o->size));
    append(part, size, &len, ":");
    append(part, size, &len, sched_status_name(o->status));
}

size_t sched_state_key(const struct sched_obs_config *c, const struct sched_obs *obs, size_t n,
                       char *buf, size_t size)
{
    if (size == 0)
        return 0;
    size_t len = 0;
    buf[0] = '\0';
    if (c->depth_only) {
        append(buf, size, &len, SCHED_DEPTH_KEY);
        return len;
    }
    enum { MAX_PARTS = 16 };
    char parts[MAX_PARTS][SCHED_TOOL_NAME_MAX + 24];
    const char *sorted[MAX_PARTS];
    size_t k = n < MAX_PARTS ? n : MAX_PARTS; /* more returns than this in one turn: truncated */
    for (size_t i = 0; i < k; i++) {
        part_key(&obs[i], parts[i], sizeof parts[i]);
        sorted[i] = parts[i];
    }
    if (k > 1)
        qsort(sorted, k, sizeof sorted[0], cmp_str);
    for (size_t i = 0; i < k; i++) {
        if (i)
            append(buf, size, &len, "|");
        append(buf, size, &len, sorted[i]);
    }
    return len;
}

const char *sched_status_name(enum sched_status s)
{
    static const char *const names[] = {"success", "failure", "timeout", "other"};
    return (unsigned)s < SCHED_STATUS_COUNT ? names[s] : "other";
}

const char *sched_size_name(enum sched_size s)
{
    static const char *const names[] = {"small", "medium", "large"};
    return (unsigned)s < SCHED_SIZE_COUNT ? names[s] : "small";
}

const char *sched_status_from_name(enum sched_status_from f)
{
    static const char *const names[] = {"explicit", "rule", "text", "none"};
    return (unsigned)f <= SCHED_FROM_NONE ? names[f] : "none";
}
