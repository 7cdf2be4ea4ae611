/*
 * The tool-status rules of the text importers (tau-bench, swe-agent, openai-chat): their logs
 * hold what a tool printed, not whether it worked, so the status of a call is read from the
 * text by three user-replaceable lists (docs/trace-format.md, "Tool-status rules"):
 *
 *   timeout text       the output matches one           -> timeout
 *   exit-code pattern  one is followed by an integer    -> failure if non-zero, success if 0
 *   failure text       the output matches one           -> failure
 *   otherwise                                           -> success
 *
 * in that order of precedence: a scaffold that killed a command says so and may also print
 * an exit code (-1, 124, 137) for it; an exit code is the command's own verdict, so it beats
 * words like "Error" that a passing test run prints too. Matching is plain case-sensitive
 * substring search (a leading '^' anchors a text at the start), cheap next to parsing the log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/internal.h"
#include "util/json.h"
#include "util/alloc.h"
#include "util/error.h"

#define STATUS_PRECEDENCE                                                                          \
    "timeout_text, then exit_code_pattern (the last pattern in the output followed by an "         \
    "integer: non-zero failure, 0 success), then failure_text, else success"

/* One rule: its flag (for messages), header key, the default per format, and its texts. */
struct rule_spec {
    const char *flag, *key;
    const char *tau, *swe, *chat;
};

static const struct rule_spec specs[3] = {
    {"--timeout-text", "timeout_text", TRACE_TAU_TIMEOUT_TEXT, TRACE_SWE_TIMEOUT_TEXT,
     TRACE_CHAT_TIMEOUT_TEXT},
    {"--exit-code-pattern", "exit_code_pattern", TRACE_TAU_EXIT_CODE_PATTERN,
     TRACE_SWE_EXIT_CODE_PATTERN, TRACE_CHAT_EXIT_CODE_PATTERN},
    {"--failure-text", "failure_text", TRACE_TAU_FAILURE_TEXT, TRACE_SWE_FAILURE_TEXT,
     TRACE_CHAT_FAILURE_TEXT},
};

static struct trace_text_list *list_of(struct trace_status_rules *r, int k)
{
    return k == 0 ? &r->timeout : k == 1 ? &r->exit_code : &r->failure;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(" \t\r\n", s[i]))
            return false;
    return true;
}

/* Splits list (comma-separated) into out, refusing texts that make no sense for spec k and
 * those the header's import object cannot hold: bytes that are not UTF-8 (jansson makes no
 * string of them) and a text given twice (a config's list refuses one too). */
static int parse_list(struct trace_text_list *out, int k, const char *list, struct libra_error *err)
{
    const struct rule_spec *spec = &specs[k];
    if (!*list)
        return 0;
    if (!ujson_utf8_valid(list))
        return error_set(err, NULL, 0, 0, "%s: must be valid UTF-8", spec->flag);
    for (const char *s = list;; s++) {
        size_t n = strcspn(s, ",");
        size_t body = n - (n > 0 && s[0] == '^');
        if (body == 0 || blank(s + (n - body), body))
            return error_set(err, NULL, 0, 0,
                             "%s: an empty or blank text in '%s' would match every output "
                             "(separate texts by single commas; give \"\" for none)",
                             spec->flag, list);
        if (k == 1 && strchr("0123456789", s[n - 1]))
            return error_set(err, NULL, 0, 0,
                             "%s: '%.*s' ends in a digit (give the text that comes before the "
                             "exit code, e.g. 'exit code')",
                             spec->flag, (int)n, s);
        for (size_t i = 0; i < out->n; i++)
            if (strlen(out->v[i]) == n && memcmp(out->v[i], s, n) == 0)
                return error_set(err, NULL, 0, 0, "%s: '%.*s' is listed twice", spec->flag, (int)n,
                                 s);
        out->v = xreallocarray(out->v, out->n + 1, sizeof *out->v);
        out->v[out->n++] = xstrndup(s, n);
        s += n;
        if (!*s)
            return 0;
    }
}

int trace_status_rules_init(struct trace_status_rules *r, enum trace_import_format format,
                            const struct trace_import_options *o, struct libra_error *err)
{
    const char *given[3] = {o->timeout_text, o->exit_code_pattern, o->failure_text};
    memset(r, 0, sizeof *r);
    bool text = format == TRACE_IMPORT_TAU_BENCH || format == TRACE_IMPORT_SWE_AGENT ||
                format == TRACE_IMPORT_OPENAI_CHAT;
    for (int k = 0; k < 3; k++) {
        if (!text && given[k])
            return error_set(err, NULL, 0, 0,
                             "%s: --from %s does not classify tool outputs (only tau-bench, "
                             "swe-agent and openai-chat do)",
                             specs[k].flag, trace_import_format_name(format));
        if (!text)
            continue;
        const char *def = format == TRACE_IMPORT_TAU_BENCH   ? specs[k].tau
                          : format == TRACE_IMPORT_SWE_AGENT ? specs[k].swe
                                                             : specs[k].chat;
        int rc = parse_list(list_of(r, k), k, given[k] ? given[k] : def, err);
        if (rc) {
            trace_status_rules_free(r);
            return rc;
        }
    }
    return 0;
}

void trace_status_rules_free(struct trace_status_rules *r)
{
    for (int k = 0; k < 3; k++) {
        struct trace_text_list *l = list_of(r, k);
        for (size_t i = 0; i < l->n; i++)
            free(l->v[i]);
        free(l->v);
        l->v = NULL;
        l->n = 0;
    }
}

/* Whether out matches one of the texts of l. */
static bool matches(const struct trace_text_list *l, const char *out)
{
    for (size_t i = 0; i < l->n; i++) {
        bool anchored = l->v[i][0] == '^';
        const char *text = l->v[i] + anchored;
        size_t n = strlen(text);
        if (anchored ? strncmp(out, text, n) == 0 : strstr(out, text) != NULL)
            return true;
    }
    return false;
}

/* If an integer follows s (after blanks, ':' or '='), sets *nonzero and returns true. */
static bool exit_code_at(const char *s, bool *nonzero)
{
    s += strspn(s, " \t:=");
    s += *s == '-' || *s == '+';
    size_t digits = strspn(s, "0123456789");
    if (digits == 0)
        return false;
    *nonzero = strspn(s, "0") < digits;
    return true;
}

/* The exit code the last matching pattern gives: 1 non-zero, 0 zero, -1 none. */
static int exit_code_of(const struct trace_text_list *l, const char *out)
{
    const char *last = NULL;
    bool nonzero = false;
    for (size_t i = 0; i < l->n; i++) {
        const char *m = l->v[i];
        bool anchored = m[0] == '^', nz;
        const char *text = m + anchored;
        size_t n = strlen(text);
        if (anchored) {
            if (strncmp(out, text, n) == 0 && exit_code_at(out + n, &nz) && !last) {
                last = out;
                nonzero = nz;
            }
            continue;
        }
        for (const char *at = strstr(out, text); at; at = strstr(at + 1, text)) {
            if ((!last || at >= last) && exit_code_at(at + n, &nz)) {
                last = at;
                nonzero = nz;
            }
        }
    }
    return last ? nonzero : -1;
}

enum trace_tool_status trace_status_of(const struct trace_status_rules *r, const char *out)
{
    if (!out)
        out = "";
    if (matches(&r->timeout, out))
        return TRACE_TOOL_TIMEOUT;
    int code = exit_code_of(&r->exit_code, out);
    if (code >= 0)
        return code ? TRACE_TOOL_FAILURE : TRACE_TOOL_SUCCESS;
    return matches(&r->failure, out) ? TRACE_TOOL_FAILURE : TRACE_TOOL_SUCCESS;
}

void trace_status_rules_describe(const struct trace_status_rules *r, json_t *import)
{
    for (int k = 0; k < 3; k++) {
        const struct trace_text_list *l = list_of((struct trace_status_rules *)r, k);
        json_t *texts = json_array();
        for (size_t i = 0; i < l->n; i++)
            json_array_append_new(texts, json_string(l->v[i]));
        json_object_set_new(import, specs[k].key, texts);
    }
    json_object_set_new(import, "status_precedence", json_string(STATUS_PRECEDENCE));
}
