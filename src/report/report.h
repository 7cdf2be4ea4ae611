/*
 * `libra report`: results of libra sim, plan and route eval turned into one self-contained
 * HTML page and standalone SVG figures (docs/report.md).
 *
 * Results go in as JSON text, the page and the figures come out as text: nothing here opens a
 * file (the CLI reads and writes them). A result is told by its `schema` member:
 * libra.sim/1, libra.sim-sweep/1, libra.load/1, libra.plan/1 or libra.route-eval/1; any one
 * of them is a page. Every figure carries the data it draws — data-* attributes on
 * the drawn elements and the figure's data as JSON in its <desc> — and a caption that says
 * what it shows and which command made its input. The same inputs and options always give the
 * same bytes: no clock, no locale, fixed number rules (report/svg.h), inputs in the order
 * given, modes and policies in a fixed order.
 *
 *     struct report r;
 *     report_init(&r, &(struct report_options){0});
 *     if (report_add(&r, "run.json", text, len, &err) == 0 &&
 *         report_render(&r, &out, &err) == 0)
 *         ... out.html, out.figures[i].id / .svg ...
 *     report_output_free(&out);
 *     report_free(&r);
 *
 * Not thread-safe: one report belongs to one caller; distinct reports are independent.
 */
#ifndef REPORT_REPORT_H
#define REPORT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"
#include "util/json.h"
#include "util/vec.h"

/* Options of the page; a zeroed struct asks for everything with every step. */
struct report_options {
    bool step_range;               /* per-step figures draw only steps first..last */
    int64_t step_first, step_last; /* inclusive, as the `step` members of libra sim --json */
};

enum report_kind { REPORT_SIM, REPORT_SWEEP, REPORT_LOAD, REPORT_PLAN, REPORT_ROUTE };

/* One input: its parsed text and what kind of result it is. */
struct report_input {
    struct ujson_doc doc; /* owned */
    enum report_kind kind;
};

struct report {
    struct report_options opt;
    VEC(struct report_input) inputs;
};

/* One figure: id (also the file name under --svg, without .svg) and a standalone SVG
 * document; both owned. */
struct report_figure {
    char *id;
    char *svg;
};

struct report_output {
    char *html; /* the page, every figure inline; owned */
    VEC(struct report_figure) figures;
};

/* Prepares an empty report with a copy of opt. */
void report_init(struct report *r, const struct report_options *opt);

/*
 * Parses len bytes of text as the result named name (a file name, for messages) and adds it.
 * Returns 0, or LIBRA_EINVAL with err: malformed JSON (name:line:col of the syntax error),
 * not an object, no `schema`, a schema report does not read (name:line:col of the schema
 * member, naming it), a member the figures read of another type or out of its range, or a
 * member its kind needs missing or null (report_check_shape, naming the member where it
 * stands). Nothing is added on error.
 */
int report_add(struct report *r, const char *name, const char *text, size_t len,
               struct libra_error *err);

/*
 * Renders every input added, in order, into out (which the caller frees with
 * report_output_free in every case). Returns 0, or LIBRA_EINVAL with err: no input, a step
 * range without a sim result among the inputs (nothing else takes one), or a step range
 * holding no step of a sim result. Members a figure needs that are missing leave that figure
 * out, and the page says so.
 */
int report_render(const struct report *r, struct report_output *out, struct libra_error *err);

/* Releases what out owns; a zeroed out is fine. */
void report_output_free(struct report_output *out);

/* Releases what r owns; a zeroed r is fine. */
void report_free(struct report *r);

#endif
