/*
 * A small SVG writer: the few pieces charts are made of, with the output a fixed function of
 * the input.
 *
 * Reports are compared byte for byte and read back by tests that map drawn geometry to the
 * values it stands for, so every number goes through one of two fixed rules: coordinates with
 * two decimals (trailing zeros trimmed), data values with ten significant digits; -0 prints
 * as 0 and no rule ever prints a NaN or an infinity. Text is XML-escaped on the way in.
 * Axes get "nice" ticks (1, 2 or 5 times a power of ten apart) so that their labels are
 * short and their positions exact.
 *
 * Elements are written as a tag, attributes, then svg_end_tag:
 *
 *     svg_tag(b, "rect");
 *     svg_attr_px(b, "x", 10.5);
 *     svg_attr_value(b, "data-value", 123.4);
 *     svg_attr(b, "fill", "#4e79a7");
 *     svg_end_tag(b);                        (writes "/>" and a newline)
 *
 * Pure and reentrant: everything is appended to the caller's buffer.
 */
#ifndef REPORT_SVG_H
#define REPORT_SVG_H

#include <stdbool.h>
#include <stddef.h>

#include "util/strbuf.h"

#define SVG_NS "http://www.w3.org/2000/svg"

/* Bytes enough for any number svg_format_* writes, NUL included. */
#define SVG_NUM_MAX 48

/* Most ticks an axis gets. */
#define SVG_TICKS_MAX 24

/* Pixels per character of the 11 px sans-serif text, for layout (an estimate: no font is
 * measured, so output does not depend on the machine). */
#define SVG_CHAR_PX 6.2

/* Appends s as text content: &, < and > escaped; control characters other than tab, newline
 * and carriage return, invalid UTF-8, U+FFFE and U+FFFF (none of which XML 1.0 can carry)
 * written as U+FFFD. svg_attr escapes quotes too. */
void svg_escape(struct strbuf *b, const char *s);

/* Writes v with at most decimals (0..9) decimals, trailing zeros and a trailing point trimmed,
 * -0 as "0", into buf; a non-finite v writes "0". Returns buf. */
char *svg_format_fixed(char buf[SVG_NUM_MAX], double v, int decimals);

/* Writes a data value with ten significant digits ("%.10g"), -0 as "0", into buf; a
 * non-finite v writes "null". Returns buf. */
char *svg_format_value(char buf[SVG_NUM_MAX], double v);

/* An axis: ticks from lo to hi (the data range widened to whole steps), step apart; or, when
 * log, ticks at the powers of ten from lo to hi, positions proportional to log10. */
struct svg_axis {
    double lo, hi, step;
    bool log;
    int n;                      /* ticks, 2..SVG_TICKS_MAX */
    int decimals;               /* for labels: enough to tell the ticks apart */
    double tick[SVG_TICKS_MAX]; /* lo, lo + step, ..., hi */
};

/*
 * Chooses about target (2..SVG_TICKS_MAX / 2) ticks covering [lo, hi]: a step of 1, 2 or 5
 * times a power of ten (at least 1 when integer), lo and hi rounded out to multiples of it.
 * An empty or one-point range is widened around its value (to [0, 1] when that is 0);
 * non-finite ends are taken as 0 and 1, and ends are clamped to +-1e300 so that the span
 * stays finite. A tick within a billionth of a step of 0 is exactly 0.
 */
void svg_axis_make(struct svg_axis *a, double lo, double hi, int target, bool integer);

/*
 * A log axis over [lo, hi] (values > 0; a non-positive or non-finite end is taken as the
 * other's tenth or tenfold, or 1 and 10): ticks at each power of ten from the one at or below
 * lo to the one at or above hi (at most SVG_TICKS_MAX, every other one dropped until they
 * fit), labelled in full from 0.001 to 10000 and as 1eN beyond.
 */
void svg_axis_make_log(struct svg_axis *a, double lo, double hi);

/* The pixel position of v on an axis drawn from px_lo (at a->lo) to px_hi (at a->hi); on a
 * log axis a value <= 0 sits at px_lo. */
double svg_axis_px(const struct svg_axis *a, double v, double px_lo, double px_hi);

/* Writes a tick label: v with a->decimals decimals (three significant digits and an exponent
 * beyond 1e9). Returns buf. */
char *svg_axis_label(const struct svg_axis *a, double v, char buf[SVG_NUM_MAX]);

/* "<name" */
void svg_tag(struct strbuf *b, const char *name);

/* ' name="value"', value escaped. */
void svg_attr(struct strbuf *b, const char *name, const char *value);

/* ' name="v"' with the coordinate rule (two decimals). */
void svg_attr_px(struct strbuf *b, const char *name, double v);

/* ' name="v"' with the data rule (ten significant digits); nothing when v is not finite. */
void svg_attr_value(struct strbuf *b, const char *name, double v);

/* "/>" and a newline: closes the tag svg_tag opened as an empty element. */
void svg_end_tag(struct strbuf *b);

/*
 * A text element at (x, y): anchor is "start", "middle" or "end"; size in px; bold when
 * asked; rotate_deg turns it about (x, y) (0: no transform); cls, when not NULL, its class.
 */
void svg_text(struct strbuf *b, double x, double y, const char *anchor, int size, bool bold,
              double rotate_deg, const char *cls, const char *text);

/*
 * Splits text at spaces into lines of at most cols bytes (a longer word gets a line of its
 * own). Writes up to max line starts and lengths; returns the number of lines, which may be
 * more than max (only max are written). Empty text has no line.
 */
size_t svg_wrap(const char *text, size_t cols, size_t *start, size_t *len, size_t max);

/*
 * Opens a standalone SVG document of width x height px with id, a <title> and, when desc is
 * not NULL, a <desc> holding it (the figure's data as JSON), then a white background.
 */
void svg_document_begin(struct strbuf *b, const char *id, double width, double height,
                        const char *title, const char *desc);

/* Closes the document svg_document_begin opened. */
void svg_document_end(struct strbuf *b);

#endif
