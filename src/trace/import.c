/*
 * Importers (import.h): the per-turn table mapping, read from JSON Lines or CSV, and the
 * dispatch to the verl importer (import_verl.c) and the agent-log importers (import_agent.c,
 * with the tool-status rules of import_status.c).
 *
 * A per-turn table has one row per turn (docs/trace-format.md, "Per-turn tables"). Both
 * syntaxes are read into the same row of typed columns, then one assembler groups rows into
 * trajectories: rows of a trajectory are contiguous and in turn order, a repeated turn number
 * adds a tool call to that turn, and trajectory-level columns may sit on any of its rows but
 * must agree where repeated. A trajectory is emitted when the next one starts (or its file
 * ends), so two are alive at once: the one being returned and the one being built.
 */
#include "trace/import.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/internal.h"
#include "util/alloc.h"
#include "util/arena.h"
#include "util/error.h"
#include "util/json.h"
#include "util/map.h"
#include "util/parse.h"
#include "util/vec.h"

/* ---- the columns ------------------------------------------------------------------------- */

enum col {
    C_TRAJ_ID,
    C_STEP,
    C_PROMPT_ID,
    C_EPOCH,
    C_SAMPLE,
    C_VERSION_START,
    C_VERSION_END,
    C_FINISH,
    C_REWARD,
    C_TURN,
    C_PROMPT_TOKENS,
    C_CACHED_TOKENS,
    C_GENERATED_TOKENS,
    C_TOOL,
    C_STATUS,
    C_PAYLOAD_TOKENS,
    C_QUEUE_US,
    C_EXEC_US,
    N_COLS
};

enum col_type { T_ID, T_INT, T_REAL, T_STR };

static const struct {
    const char *name;
    enum col_type type;
} cols[N_COLS] = {
    [C_TRAJ_ID] = {"traj_id", T_ID},
    [C_STEP] = {"step", T_INT},
    [C_PROMPT_ID] = {"prompt_id", T_INT},
    [C_EPOCH] = {"epoch", T_INT},
    [C_SAMPLE] = {"sample", T_INT},
    [C_VERSION_START] = {"version_start", T_INT},
    [C_VERSION_END] = {"version_end", T_INT},
    [C_FINISH] = {"finish", T_STR},
    [C_REWARD] = {"reward", T_REAL},
    [C_TURN] = {"turn", T_INT},
    [C_PROMPT_TOKENS] = {"prompt_tokens", T_INT},
    [C_CACHED_TOKENS] = {"cached_tokens", T_INT},
    [C_GENERATED_TOKENS] = {"generated_tokens", T_INT},
    [C_TOOL] = {"tool", T_STR},
    [C_STATUS] = {"status", T_STR},
    [C_PAYLOAD_TOKENS] = {"payload_tokens", T_INT},
    [C_QUEUE_US] = {"queue_us", T_INT},
    [C_EXEC_US] = {"exec_us", T_INT},
};

/* Columns every table must have (the CSV header is checked against them up front). */
static const enum col required_cols[] = {C_TRAJ_ID, C_STEP,          C_PROMPT_ID,
                                         C_TURN,    C_PROMPT_TOKENS, C_GENERATED_TOKENS};

/* Trajectory-level columns: any row of a trajectory may carry them; they must agree. */
static const enum col traj_cols[] = {C_STEP,          C_PROMPT_ID,   C_EPOCH,  C_SAMPLE,
                                     C_VERSION_START, C_VERSION_END, C_FINISH, C_REWARD};

static int find_col(const char *name, size_t n)
{
    for (int c = 0; c < N_COLS; c++)
        if (strlen(cols[c].name) == n && memcmp(cols[c].name, name, n) == 0)
            return c;
    return -1;
}

/* One row: which columns it gives and their values (strings point into the line's storage). */
struct row {
    bool has[N_COLS];
    int64_t i[N_COLS];
    double real;
    const char *s[N_COLS];
    int col[N_COLS];  /* CSV: 1-based column of the cell; JSON Lines: found on demand */
    char id_text[24]; /* an integer traj_id as text */
};

/* ---- the importer ------------------------------------------------------------------------ */

/* A trajectory being assembled or just returned. */
struct build {
    bool active;
    int64_t first_line, last_line;
    char *id;        /* in names */
    struct row traj; /* trajectory-level values (has/i/real/s) */
    struct trace_traj t;
    VEC(struct trace_turn) turns;
    VEC(struct trace_tool_call) calls;
    struct arena names; /* id and tool names */
};

struct trace_importer {
    struct trace_import_options opt;
    struct trace_header header;
    struct trace_verl *verl;
    struct trace_agentlog *agentlog; /* tau-bench, swe-agent, openai-chat */
    struct trace_status_rules rules; /* theirs */
    /* the current file */
    char *name;
    int64_t lineno;
    const char *line;
    size_t len;
    /* JSON Lines: the current row's tree */
    json_t *root;
    /* CSV: the column of each cell (from the file's header row), and the cells of a row */
    enum col csv_map[N_COLS];
    size_t csv_cells; /* cells per row; 0 before the header row */
    VEC(char) cell_text;
    VEC(size_t) cell_off;
    VEC(int) cell_col;
    /* assembly */
    struct build b[2];
    struct build *cur, *done;
    struct map finished; /* traj_id -> where its last row was (ended_at), to catch rows out of
                          * order, in this file or an earlier one */
    struct map samples;  /* "step:prompt" -> next sample index */
    VEC(char *) files;   /* every file begun, owned: the last is name */
};

static void build_init(struct build *b)
{
    memset(b, 0, sizeof *b);
    arena_init(&b->names, 0);
}

static void build_free(struct build *b)
{
    vec_free(&b->turns);
    vec_free(&b->calls);
    arena_free(&b->names);
}

const char *trace_import_format_name(enum trace_import_format f)
{
    static const char *const names[] = {"jsonl",     "csv",       "verl",
                                        "tau-bench", "swe-agent", "openai-chat"};
    return (unsigned)f < sizeof names / sizeof *names ? names[f] : "?";
}

/* The header's import object of an agent-log format (tau-bench, swe-agent, openai-chat). */
static json_t *agentlog_import(const struct trace_importer *im)
{
    double cpt = im->opt.chars_per_token;
    json_t *j;
    switch (im->opt.format) {
    case TRACE_IMPORT_TAU_BENCH:
        j = json_pack("{s:s,s:f,s:[ssss],s:[sss],s:[sssss],s:s,s:s,s:s}", "from", "tau-bench",
                      "chars_per_token", cpt, "estimated", "prompt_tokens", "generated_tokens",
                      "payload_tokens", "status", "derived", "finish", "prompt_id", "sample",
                      "unknown", "cached_tokens", "queue_us", "exec_us", "start_us", "setup_us",
                      "tokens",
                      "characters / chars_per_token, rounded up, per message; prompt_tokens: the "
                      "messages before the turn",
                      "user_messages",
                      "a call of tool 'user' (the simulated customer's reply), status success",
                      "ended_by", TAU_TERMINAL_TOOL_DOC);
        break;
    case TRACE_IMPORT_SWE_AGENT:
        j = json_pack("{s:s,s:f,s:[ssss],s:s,s:[sss],s:[sssss],s:s}", "from", "swe-agent",
                      "chars_per_token", cpt, "estimated", "prompt_tokens", "generated_tokens",
                      "payload_tokens", "status", "scaled",
                      "per trajectory, prompt_tokens and generated_tokens scaled to sum to "
                      "info.model_stats tokens_sent and tokens_received where given (factors in "
                      "extra.scale)",
                      "derived", "finish", "prompt_id", "sample", "unknown", "reward",
                      "cached_tokens", "queue_us", "start_us", "setup_us", "tokens",
                      "characters / chars_per_token, rounded up; prompt_tokens: the step's query "
                      "messages, else the history before the first response plus what came "
                      "before");
        break;
    default: /* openai-chat */
        j = json_pack(
            "{s:s,s:f,s:[ssss],s:[sss],s:[ssss],s:s,s:s,s:s,s:s,s:s}", "from", "openai-chat",
            "chars_per_token", cpt, "estimated", "prompt_tokens", "generated_tokens",
            "payload_tokens", "status", "derived", "finish", "prompt_id", "sample", "unknown",
            "queue_us", "exec_us", "start_us", "setup_us", "tokens",
            "an assistant message's usage.prompt_tokens / completion_tokens where given, as "
            "they are; else characters / chars_per_token, rounded up, per message (prompt_tokens: "
            "the tool definitions and the messages before the turn)",
            "scaled",
            "per trajectory, the estimated prompt_tokens and generated_tokens scaled so that all "
            "turns sum to the line's usage.prompt_tokens and completion_tokens where given "
            "(factors in extra.scale)",
            "cached_tokens",
            "an assistant message's usage.prompt_tokens_details.cached_tokens where given, else "
            "absent",
            "user_messages",
            "after the first assistant message, a call of tool 'user' (the environment's or "
            "user's reply), status by the rules",
            "ended_by", CHAT_TERMINAL_TOOL_DOC);
        break;
    }
    trace_status_rules_describe(&im->rules, j);
    return j;
}

int trace_importer_new(struct trace_importer **out, const struct trace_import_options *o,
                       struct libra_error *err)
{
    *out = NULL;
    /* 0: the default. Below a hundredth, an estimate could pass any token count. */
    if (!(o->chars_per_token == 0 || (o->chars_per_token >= 0.01 && o->chars_per_token <= 1000)))
        return error_set(err, NULL, 0, 0, "chars per token: must be in [0.01, 1000], got %g",
                         o->chars_per_token);
    if (o->chars_per_token != 0 &&
        (o->format == TRACE_IMPORT_JSONL || o->format == TRACE_IMPORT_CSV))
        return error_set(err, NULL, 0, 0,
                         "--chars-per-token: --from %s does not estimate tokens (only verl, "
                         "tau-bench, swe-agent and openai-chat do)",
                         trace_import_format_name(o->format));
    if (o->group_size < 0)
        return error_set(err, NULL, 0, 0, "samples: must be >= 1, got %lld",
                         (long long)o->group_size);
    struct trace_status_rules rules;
    int rc = trace_status_rules_init(&rules, o->format, o, err);
    if (rc)
        return rc;
    struct trace_importer *im = xcalloc(1, sizeof *im);
    im->opt = *o;
    im->rules = rules;
    if (im->opt.chars_per_token == 0)
        im->opt.chars_per_token = 4.0;
    im->header = (struct trace_header){
        .version = TRACE_SCHEMA_VERSION,
        .workload = (char *)(o->workload ? o->workload : "unknown"),
        .model = (char *)o->model,
        .group_size = o->group_size,
        .lossy = o->format != TRACE_IMPORT_JSONL && o->format != TRACE_IMPORT_CSV,
    };
    if (o->format == TRACE_IMPORT_VERL) {
        im->header.import = json_pack(
            "{s:s,s:f,s:[sssss],s:[sssss],s:[ssss]}", "from", "verl", "chars_per_token",
            im->opt.chars_per_token, "estimated", "turns", "prompt_tokens", "generated_tokens",
            "payload_tokens", "finish", "derived", "prompt_id", "epoch", "sample", "version_start",
            "version_end", "unknown", "cached_tokens", "status", "queue_us", "exec_us");
        im->verl = trace_verl_new(im->opt.chars_per_token, o->group_size);
    } else if (o->format == TRACE_IMPORT_TAU_BENCH || o->format == TRACE_IMPORT_SWE_AGENT ||
               o->format == TRACE_IMPORT_OPENAI_CHAT) {
        im->agentlog =
            trace_agentlog_new(o->format, im->opt.chars_per_token, o->group_size, &im->rules);
        im->header.import = agentlog_import(im);
    } else {
        im->header.import = json_pack("{s:s}", "from", trace_import_format_name(o->format));
    }
    build_init(&im->b[0]);
    build_init(&im->b[1]);
    im->cur = &im->b[0];
    im->done = &im->b[1];
    map_init(&im->finished);
    map_init(&im->samples);
    *out = im;
    return 0;
}

void trace_importer_free(struct trace_importer *im)
{
    if (!im)
        return;
    json_decref(im->header.import);
    trace_verl_free(im->verl);
    trace_agentlog_free(im->agentlog);
    trace_status_rules_free(&im->rules);
    json_decref(im->root);
    vec_free(&im->cell_text);
    vec_free(&im->cell_off);
    vec_free(&im->cell_col);
    build_free(&im->b[0]);
    build_free(&im->b[1]);
    map_free(&im->finished);
    map_free(&im->samples);
    for (size_t i = 0; i < im->files.n; i++)
        free(im->files.v[i]);
    vec_free(&im->files);
    free(im);
}

const struct trace_header *trace_importer_header(const struct trace_importer *im)
{
    return &im->header;
}

void trace_importer_begin(struct trace_importer *im, const char *name)
{
    im->name = xstrdup(name);
    vec_push(&im->files, im->name);
    im->lineno = 0;
    im->csv_cells = 0;
    if (im->agentlog)
        trace_agentlog_begin(im->agentlog, name);
}

/* ---- errors ------------------------------------------------------------------------------ */

static int row_error(const struct trace_importer *im, const struct row *r, enum col c,
                     struct libra_error *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Reports a fault in column c of the current row at its cell (CSV) or key (JSON Lines). */
static int row_error(const struct trace_importer *im, const struct row *r, enum col c,
                     struct libra_error *err, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int col = im->opt.format == TRACE_IMPORT_CSV ? (r->col[c] ? r->col[c] : 1)
                                                 : trace_line_col(im->line, im->len, cols[c].name);
    return error_set(err, im->name, (int)im->lineno, col, "%s: %s", cols[c].name, msg);
}

/* Reports a fault of the trajectory being finished, at its first row. */
static int traj_error(const struct trace_importer *im, const struct build *b,
                      struct libra_error *err, const char *msg)
{
    return error_set(err, im->name, (int)b->first_line, 1, "trajectory '%s': %s", b->id, msg);
}

/* ---- reading a row ----------------------------------------------------------------------- */

/* Reads text as the JSON number it spells, by the rule a JSON Lines row's integer is read by
 * (ujson_as_int64: a real with no fraction is accepted); false for any other text. */
static bool text_int64(const char *text, int64_t *out)
{
    json_t *v = parse_number_text(text) ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    bool ok = v && ujson_as_int64(v, out);
    json_decref(v);
    return ok;
}

/* Stores text (a JSON string or a CSV cell) as the value of column c. */
static int set_text(const struct trace_importer *im, struct row *r, enum col c, const char *text,
                    struct libra_error *err)
{
    char *end;
    switch (cols[c].type) {
    case T_ID:
    case T_STR:
        r->s[c] = text;
        break;
    case T_INT: /* as --from jsonl reads one (3.0 is 3): no "+1", "01", blank, hex */
        if (!text_int64(text, &r->i[c]))
            return row_error(im, r, c, err, "expected an integer, got '%s'", text);
        break;
    case T_REAL: /* as JSON writes one: no "+1", ".5", "1.", "01", hex, blank, inf, nan */
        errno = 0;
        r->real = strtod(text, &end);
        if (!parse_number_text(text) || errno)
            return row_error(im, r, c, err, "expected a number, got '%s'", text);
        break;
    }
    r->has[c] = true;
    return 0;
}

/* Stores a JSON value as column c; null leaves the column absent. */
static int set_json(struct trace_importer *im, struct row *r, enum col c, const json_t *v,
                    struct libra_error *err)
{
    if (json_is_null(v) || (c == C_TOOL && json_is_string(v) && !json_string_length(v)))
        return 0; /* null, and a tool "", are absent: no call, as an empty CSV cell */
    bool ok = false;
    switch (cols[c].type) {
    case T_ID:
        ok = json_is_string(v) || ujson_as_int64(v, &r->i[c]);
        if (ok && !json_is_string(v))
            snprintf(r->id_text, sizeof r->id_text, "%" PRId64, r->i[c]);
        r->s[c] = json_is_string(v) ? json_string_value(v) : r->id_text;
        break;
    case T_INT:
        ok = ujson_as_int64(v, &r->i[c]);
        break;
    case T_REAL:
        ok = ujson_as_double(v, &r->real);
        break;
    case T_STR:
        ok = json_is_string(v);
        r->s[c] = json_string_value(v);
        break;
    }
    if (!ok)
        return row_error(im, r, c, err, "expected %s",
                         cols[c].type == T_ID    ? "a string or an integer"
                         : cols[c].type == T_STR ? "a string"
                         : cols[c].type == T_INT ? "an integer"
                                                 : "a number");
    r->has[c] = true;
    return 0;
}

static int jsonl_row(struct trace_importer *im, struct row *r, struct libra_error *err)
{
    json_decref(im->root);
    json_error_t jerr;
    im->root = json_loadb(im->line, im->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!im->root) {
        int line, col; /* a row is one line */
        ujson_error_at(im->line, im->len, &jerr, &line, &col);
        return error_set(err, im->name, (int)im->lineno, col, "invalid JSON: %s",
                         ujson_error_text(&jerr));
    }
    if (!json_is_object(im->root))
        return error_set(err, im->name, (int)im->lineno, 1, "expected a JSON object per row");
    const char *key;
    json_t *v;
    json_object_foreach(im->root, key, v)
    {
        int c = find_col(key, strlen(key));
        if (c < 0) {
            char ptr[256];
            size_t n = 0;
            for (const char *k = key; *k && n + 3 < sizeof ptr; k++) {
                if (*k == '~' || *k == '/')
                    n += (size_t)snprintf(ptr + n, sizeof ptr - n, "~%c", *k == '~' ? '0' : '1');
                else
                    ptr[n++] = *k;
            }
            ptr[n] = '\0';
            return error_set(err, im->name, (int)im->lineno, trace_line_col(im->line, im->len, ptr),
                             "%s: unknown column (docs/trace-format.md lists them)", key);
        }
        int rc = set_json(im, r, (enum col)c, v, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* The 1-based character column of byte offset off of the current line. */
static int char_col(const struct trace_importer *im, size_t off)
{
    return trace_char_col(im->line, off);
}

/* Splits the current line into cells (RFC 4180 quoting; a field may not span lines). */
static int csv_split(struct trace_importer *im, struct libra_error *err)
{
    const char *s = im->line;
    size_t len = im->len, i = 0;
    if (len && s[len - 1] == '\r')
        len--;
    im->cell_text.n = im->cell_off.n = im->cell_col.n = 0;
    for (;;) {
        vec_push(&im->cell_off, im->cell_text.n);
        vec_push(&im->cell_col, char_col(im, i));
        if (i < len && s[i] == '"') {
            size_t open = i++;
            for (;; i++) {
                if (i >= len)
                    return error_set(err, im->name, (int)im->lineno, char_col(im, open),
                                     "unterminated quoted field (a field may not span lines)");
                if (s[i] == '"' && i + 1 < len && s[i + 1] == '"')
                    i++;
                else if (s[i] == '"')
                    break;
                vec_push(&im->cell_text, s[i]);
            }
            if (++i < len && s[i] != ',')
                return error_set(err, im->name, (int)im->lineno, char_col(im, i),
                                 "unexpected character after a quoted field");
        } else {
            for (; i < len && s[i] != ','; i++)
                vec_push(&im->cell_text, s[i]);
        }
        vec_push(&im->cell_text, '\0');
        if (i >= len)
            return 0;
        i++; /* the comma */
    }
}

/* Reads the column names of a file's first row. */
static int csv_header(struct trace_importer *im, struct libra_error *err)
{
    bool seen[N_COLS] = {false};
    if (im->cell_off.n > N_COLS)
        return error_set(err, im->name, (int)im->lineno, 1,
                         "%zu columns, more than the %d known ones", im->cell_off.n, N_COLS);
    for (size_t k = 0; k < im->cell_off.n; k++) {
        const char *name = im->cell_text.v + im->cell_off.v[k];
        int c = find_col(name, strlen(name));
        if (c < 0 || seen[c])
            return error_set(err, im->name, (int)im->lineno, im->cell_col.v[k], "%s: %s", name,
                             c < 0 ? "unknown column (docs/trace-format.md lists them)"
                                   : "duplicate column");
        seen[c] = true;
        im->csv_map[k] = (enum col)c;
    }
    for (size_t k = 0; k < sizeof required_cols / sizeof required_cols[0]; k++)
        if (!seen[required_cols[k]])
            return error_set(err, im->name, (int)im->lineno, 1, "missing column '%s'",
                             cols[required_cols[k]].name);
    im->csv_cells = im->cell_off.n;
    return 0;
}

/* Reads a CSV line: the header row (returns 0) or a data row into r (returns 1). */
static int csv_row(struct trace_importer *im, struct row *r, struct libra_error *err)
{
    int rc = csv_split(im, err);
    if (rc)
        return rc;
    if (im->csv_cells == 0)
        return csv_header(im, err);
    if (im->cell_off.n != im->csv_cells)
        return error_set(err, im->name, (int)im->lineno, 1, "%zu fields, the header has %zu",
                         im->cell_off.n, im->csv_cells);
    for (size_t k = 0; k < im->csv_cells; k++) {
        const char *text = im->cell_text.v + im->cell_off.v[k];
        enum col c = im->csv_map[k];
        r->col[c] = im->cell_col.v[k];
        if (*text && (rc = set_text(im, r, c, text, err)))
            return rc;
    }
    return 1;
}

/* ---- assembling trajectories ------------------------------------------------------------- */

/* Maps the string of column c (finish or status) onto its enum; names() gives the names. */
static int enum_of(const struct trace_importer *im, struct row *r, enum col c, int n,
                   const char *(*names)(int), struct libra_error *err)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(r->s[c], names(i)) == 0) {
            r->i[c] = i;
            return 0;
        }
    }
    return row_error(im, r, c, err, "unknown value '%s'", r->s[c]);
}

static const char *finish_name(int i)
{
    return trace_finish_name((enum trace_finish)i);
}

static const char *status_name(int i)
{
    return trace_tool_status_name((enum trace_tool_status)i);
}

/* Checks a row's values on their own: counts >= 0, known names. */
static int check_row(const struct trace_importer *im, struct row *r, struct libra_error *err)
{
    for (int c = 0; c < N_COLS; c++)
        if (r->has[c] && cols[c].type == T_INT && r->i[c] < 0)
            return row_error(im, r, (enum col)c, err, "must be >= 0, got %lld", (long long)r->i[c]);
    if (r->has[C_FINISH]) {
        int rc = enum_of(im, r, C_FINISH, TRACE_FINISH_COUNT, finish_name, err);
        if (rc)
            return rc;
    }
    if (r->has[C_STATUS])
        return enum_of(im, r, C_STATUS, TRACE_TOOL_STATUS_COUNT, status_name, err);
    return 0;
}

static void start(struct trace_importer *im, struct build *b, const char *id)
{
    b->active = true;
    b->first_line = im->lineno;
    arena_reset(&b->names);
    b->id = arena_strdup(&b->names, id);
    memset(&b->traj, 0, sizeof b->traj);
    b->turns.n = b->calls.n = 0;
}

/* Takes the trajectory-level columns of r into b; repeated values must agree. */
static int merge_traj(const struct trace_importer *im, struct build *b, const struct row *r,
                      struct libra_error *err)
{
    for (size_t k = 0; k < sizeof traj_cols / sizeof traj_cols[0]; k++) {
        enum col c = traj_cols[k];
        if (!r->has[c])
            continue;
        bool differs = c == C_REWARD ? r->real != b->traj.real : r->i[c] != b->traj.i[c];
        if (b->traj.has[c] && differs)
            return row_error(im, r, c, err,
                             "differs from the value an earlier row gave trajectory '%s'", b->id);
        b->traj.has[c] = true;
        b->traj.i[c] = r->i[c];
        if (c == C_REWARD)
            b->traj.real = r->real;
    }
    return 0;
}

/* Adds the tool call of r (if any) to the last turn of b. */
static int add_call(const struct trace_importer *im, struct build *b, const struct row *r,
                    struct libra_error *err)
{
    static const enum col call_cols[] = {C_STATUS, C_PAYLOAD_TOKENS, C_QUEUE_US, C_EXEC_US};
    if (!r->has[C_TOOL]) {
        for (size_t k = 0; k < 4; k++)
            if (r->has[call_cols[k]])
                return row_error(im, r, call_cols[k], err, "given without a tool");
        return 0;
    }
    for (size_t k = 0; k < 2; k++)
        if (!r->has[call_cols[k]])
            return row_error(im, r, call_cols[k], err, "missing (a row with a tool needs it)");
    struct trace_tool_call c = {
        .tool = arena_strdup(&b->names, r->s[C_TOOL]),
        .status = (enum trace_tool_status)r->i[C_STATUS],
        .payload_tokens = r->i[C_PAYLOAD_TOKENS],
        .queue_us = r->has[C_QUEUE_US] ? r->i[C_QUEUE_US] : -1,
        .exec_us = r->has[C_EXEC_US] ? r->i[C_EXEC_US] : -1,
    };
    vec_push(&b->calls, c);
    b->turns.v[b->turns.n - 1].n_calls++;
    return 0;
}

/* Adds the turn of r to b: a new turn, or another call of the last one. */
static int add_turn(const struct trace_importer *im, struct build *b, const struct row *r,
                    struct libra_error *err)
{
    static const enum col token_cols[] = {C_PROMPT_TOKENS, C_GENERATED_TOKENS, C_CACHED_TOKENS};
    int64_t turn = r->i[C_TURN], last = (int64_t)b->turns.n - 1;
    if (turn == last) {
        if (!r->has[C_TOOL])
            return row_error(im, r, C_TURN, err,
                             "repeats turn %lld without a tool (a repeated turn adds a call)",
                             (long long)turn);
        struct trace_turn *u = &b->turns.v[last];
        const int64_t have[] = {u->prompt_tokens, u->generated_tokens, u->cached_tokens};
        for (size_t k = 0; k < 3; k++)
            if (r->has[token_cols[k]] && r->i[token_cols[k]] != have[k])
                return row_error(im, r, token_cols[k], err,
                                 "differs from the earlier row of turn %lld", (long long)turn);
        return add_call(im, b, r, err);
    }
    if (turn != last + 1 && last < 0)
        return row_error(im, r, C_TURN, err, "%lld starts the trajectory (expected 0)",
                         (long long)turn);
    if (turn != last + 1)
        return row_error(im, r, C_TURN, err, "%lld follows turn %lld (expected %lld)",
                         (long long)turn, (long long)last, (long long)last + 1);
    for (size_t k = 0; k < 2; k++)
        if (!r->has[token_cols[k]])
            return row_error(im, r, token_cols[k], err, "missing");
    struct trace_turn u = {
        .prompt_tokens = r->i[C_PROMPT_TOKENS],
        .generated_tokens = r->i[C_GENERATED_TOKENS],
        .cached_tokens = r->has[C_CACHED_TOKENS] ? r->i[C_CACHED_TOKENS] : -1,
    };
    vec_push(&b->turns, u);
    return add_call(im, b, r, err);
}

/* A finished trajectory's place in one integer: the index of its file (in files) above its last
 * row's line, below 2^40 in any file under a TiB (a line holds at least its newline). */
#define ENDED_LINE_BITS 40

static int64_t ended_at(size_t file, int64_t line)
{
    return (int64_t)file << ENDED_LINE_BITS | line;
}

/* Completes b into b->t: defaults, links, semantic checks. */
static int finish(struct trace_importer *im, struct build *b, struct libra_error *err)
{
    const struct row *v = &b->traj;
    b->active = false;
    for (enum col c = C_STEP; c <= C_PROMPT_ID; c++) {
        if (!v->has[c]) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s: missing (give it on at least one of its rows)",
                     cols[c].name);
            return traj_error(im, b, err, msg);
        }
    }
    struct trace_traj *t = &b->t;
    memset(t, 0, sizeof *t);
    t->step = v->i[C_STEP];
    t->prompt_id = v->i[C_PROMPT_ID];
    t->epoch = v->has[C_EPOCH] ? v->i[C_EPOCH] : 0;
    if (v->has[C_SAMPLE]) {
        t->sample = v->i[C_SAMPLE];
    } else {
        char key[48];
        snprintf(key, sizeof key, "%" PRId64 ":%" PRId64, t->step, t->prompt_id);
        t->sample = map_slot(&im->samples, key, NULL)->i64++;
    }
    t->version_start = v->has[C_VERSION_START] ? v->i[C_VERSION_START] : t->step;
    t->version_end = v->has[C_VERSION_END] ? v->i[C_VERSION_END] : -1;
    t->finish = v->has[C_FINISH] ? (enum trace_finish)v->i[C_FINISH] : TRACE_FINISH_COMPLETED;
    t->has_reward = v->has[C_REWARD];
    t->reward = v->real;
    size_t next = 0;
    for (size_t i = 0; i < b->turns.n; i++) {
        b->turns.v[i].calls = b->turns.v[i].n_calls ? b->calls.v + next : NULL;
        next += b->turns.v[i].n_calls;
    }
    t->turns = b->turns.v;
    t->n_turns = b->turns.n;
    struct libra_error why = {0};
    if (trace_check_traj(t, im->opt.group_size, &why))
        return traj_error(im, b, err, why.msg);
    map_slot(&im->finished, b->id, NULL)->i64 = ended_at(im->files.n - 1, b->last_line);
    return 0;
}

/* Adds row r; returns 1 with *out when it started a new trajectory after a finished one. */
static int add_row(struct trace_importer *im, struct row *r, const struct trace_traj **out,
                   struct libra_error *err)
{
    for (size_t k = 0; k < 2; k++)
        if (!r->has[k == 0 ? C_TRAJ_ID : C_TURN])
            return row_error(im, r, k == 0 ? C_TRAJ_ID : C_TURN, err, "missing");
    int rc = check_row(im, r, err), produced = 0;
    if (rc)
        return rc;
    const char *id = r->s[C_TRAJ_ID];
    if (im->cur->active && strcmp(im->cur->id, id) != 0) {
        if ((rc = finish(im, im->cur, err)))
            return rc;
        struct build *tmp = im->done;
        im->done = im->cur;
        im->cur = tmp;
        produced = 1;
    }
    if (!im->cur->active) {
        union map_value ended;
        if (map_get(&im->finished, id, &ended))
            return row_error(im, r, C_TRAJ_ID, err,
                             "rows of '%s' are not contiguous (its last row was at %s:%" PRId64 ")",
                             id, im->files.v[ended.i64 >> ENDED_LINE_BITS],
                             ended.i64 & ((INT64_C(1) << ENDED_LINE_BITS) - 1));
        start(im, im->cur, id);
    }
    if ((rc = merge_traj(im, im->cur, r, err)) || (rc = add_turn(im, im->cur, r, err)))
        return rc;
    im->cur->last_line = im->lineno;
    if (produced)
        *out = &im->done->t;
    return produced;
}

int trace_importer_line(struct trace_importer *im, const char *line, size_t len,
                        const struct trace_traj **out, struct libra_error *err)
{
    im->lineno++;
    im->line = line;
    im->len = len;
    bool chat = im->opt.format == TRACE_IMPORT_OPENAI_CHAT;
    if (im->agentlog && !chat) {
        trace_agentlog_add(im->agentlog, line, len);
        return 0;
    }
    int rc = trace_line_nul(im->name, im->lineno, line, len, err);
    if (rc)
        return rc;
    size_t blank = 0;
    while (blank < len && strchr(" \t\r", line[blank])) /* no NUL here: strchr would match it */
        blank++;
    if (blank == len)
        return 0;
    if (im->verl)
        return trace_verl_line(im->verl, im->name, im->lineno, line, len, out, err);
    if (chat)
        return trace_agentlog_line(im->agentlog, im->lineno, line, len, out, err);
    struct row r;
    memset(&r, 0, sizeof r);
    rc = im->opt.format == TRACE_IMPORT_CSV ? csv_row(im, &r, err) : jsonl_row(im, &r, err);
    if (rc < 0 || (im->opt.format == TRACE_IMPORT_CSV && rc == 0))
        return rc;
    return add_row(im, &r, out, err);
}

int trace_importer_end(struct trace_importer *im, const struct trace_traj **out,
                       struct libra_error *err)
{
    if (im->agentlog)
        return trace_agentlog_next(im->agentlog, out, err);
    if (im->opt.format == TRACE_IMPORT_CSV && im->csv_cells == 0)
        return error_set(err, im->name, 1, 1,
                         "no header row: the first line of a CSV file names its columns");
    if (!im->cur->active)
        return 0;
    int rc = finish(im, im->cur, err);
    if (rc)
        return rc;
    struct build *tmp = im->done;
    im->done = im->cur;
    im->cur = tmp;
    *out = &im->done->t;
    return 1;
}
