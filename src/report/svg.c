/*
 * The SVG writer: escaping, the two number rules, nice ticks, text wrapping and elements. See
 * svg.h for the contract; the rules exist so that the same result always gives the same bytes.
 */
#include "report/svg.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- text --------------------------------------------------------------------------------- */

/* The length of the valid UTF-8 sequence at s that XML may carry, or 0 (an invalid or
 * overlong sequence, a surrogate, U+FFFE or U+FFFF). */
static size_t utf8_char(const unsigned char *s)
{
    size_t n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (n == 0 || s[0] > 0xF4)
        return 0;
    uint32_t cp = s[0] & (0x7F >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    bool bad = cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE ||
               cp == 0xFFFF;
    return bad ? 0 : n;
}

/* Escapes s for text content, and for a quoted attribute value when quotes. */
static void escape(struct strbuf *b, const char *s, bool quotes)
{
    static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const char *esc = *p == '&'              ? "&amp;"
                          : *p == '<'            ? "&lt;"
                          : *p == '>'            ? "&gt;"
                          : *p == '"' && quotes  ? "&quot;"
                          : *p == '\'' && quotes ? "&#39;"
                                                 : NULL;
        if (esc) {
            strbuf_puts(b, esc);
            p++;
        } else if (*p >= 0x80) {
            size_t n = utf8_char(p);
            strbuf_add(b, n ? (const char *)p : replacement, n ? n : 3);
            p += n ? n : 1;
        } else if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') {
            strbuf_puts(b, replacement);
            p++;
        } else {
            size_t run = 1;
            while (p[run] >= 0x20 && p[run] < 0x80 && !strchr(quotes ? "&<>\"'" : "&<>", p[run]))
                run++;
            strbuf_add(b, (const char *)p, run);
            p += run;
        }
    }
}

void svg_escape(struct strbuf *b, const char *s)
{
    escape(b, s, false);
}

size_t svg_wrap(const char *text, size_t cols, size_t *start, size_t *len, size_t max)
{
    size_t lines = 0, i = 0, n = strlen(text);
    for (;;) {
        while (i < n && text[i] == ' ')
            i++;
        if (i == n)
            return lines;
        size_t fit = i; /* the end of the last word on the line */
        for (size_t word = i; word < n;) {
            size_t stop = word;
            while (stop < n && text[stop] != ' ')
                stop++;
            if (stop - i > cols && fit > i)
                break;
            fit = stop;
            if (stop - i > cols)
                break; /* a word longer than a line, alone on it */
            for (word = stop; word < n && text[word] == ' ';)
                word++;
        }
        if (lines < max) {
            start[lines] = i;
            len[lines] = fit - i;
        }
        lines++;
        i = fit;
    }
}

/* ---- numbers ------------------------------------------------------------------------------ */

char *svg_format_fixed(char buf[SVG_NUM_MAX], double v, int decimals)
{
    decimals = decimals < 0 ? 0 : decimals > 9 ? 9 : decimals;
    if (!isfinite(v) || fabs(v) < 0.5 * pow(10, -decimals))
        v = 0; /* also keeps "-0" out */
    v = fmax(-1e15, fmin(1e15, v));
    snprintf(buf, SVG_NUM_MAX, "%.*f", decimals, v);
    if (strchr(buf, '.')) {
        char *end = buf + strlen(buf);
        while (end[-1] == '0')
            *--end = '\0';
        if (end[-1] == '.')
            end[-1] = '\0';
    }
    return buf;
}

char *svg_format_value(char buf[SVG_NUM_MAX], double v)
{
    if (!isfinite(v))
        snprintf(buf, SVG_NUM_MAX, "null");
    else
        snprintf(buf, SVG_NUM_MAX, "%.10g", v == 0 ? 0.0 : v);
    return buf;
}

/* ---- axes --------------------------------------------------------------------------------- */

/* The nice step (1, 2 or 5 times a power of ten) nearest above raw. */
static double nice_step(double raw)
{
    double mag = pow(10, floor(log10(raw)));
    double norm = raw / mag;
    return (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
}

/* The range [lo, hi] made finite, ordered and of positive width. */
static void widen(double *lo, double *hi)
{
    double a = isfinite(*lo) ? fmax(-1e300, fmin(1e300, *lo)) : 0;
    double b = isfinite(*hi) ? fmax(-1e300, fmin(1e300, *hi)) : 1;
    if (a > b) {
        double t = a;
        a = b;
        b = t;
    }
    double size = fmax(fabs(a), fabs(b));
    if (size < 1e-200) {
        a = 0;
        b = 1;
    } else if (b - a <= size * 1e-12) {
        a -= size * 0.5;
        b += size * 0.5;
    }
    *lo = a;
    *hi = b;
}

void svg_axis_make(struct svg_axis *a, double lo, double hi, int target, bool integer)
{
    widen(&lo, &hi);
    target = target < 2 ? 2 : target > SVG_TICKS_MAX / 2 ? SVG_TICKS_MAX / 2 : target;
    double step = nice_step((hi - lo) / target);
    if (integer && step < 1)
        step = 1;
    double first, last;
    for (;;) {
        first = floor(lo / step) * step;
        last = ceil(hi / step) * step;
        if ((last - first) / step < SVG_TICKS_MAX - 0.5)
            break;
        step = nice_step(step * 1.5);
    }
    a->step = step;
    a->log = false;
    a->n = (int)llround((last - first) / step) + 1;
    for (int i = 0; i < a->n; i++) {
        double t = first + i * step;
        a->tick[i] = fabs(t) < step * 1e-9 ? 0 : t;
    }
    a->lo = a->tick[0];
    a->hi = a->tick[a->n - 1];
    a->decimals = step >= 1 ? 0 : (int)fmin(9, ceil(-log10(step) - 1e-9));
}

void svg_axis_make_log(struct svg_axis *a, double lo, double hi)
{
    bool lo_ok = isfinite(lo) && lo > 0, hi_ok = isfinite(hi) && hi > 0;
    lo = lo_ok ? lo : hi_ok ? hi / 10 : 1;
    hi = hi_ok ? hi : lo * 10;
    double first = floor(log10(fmin(lo, hi)) + 1e-9), last = ceil(log10(fmax(lo, hi)) - 1e-9);
    first = fmax(first, -300);
    last = fmin(fmax(last, first + 1), 300);
    double every = 1;
    while ((last - first) / every >= SVG_TICKS_MAX - 0.5)
        every *= 2;
    last = first + ceil((last - first) / every) * every;
    *a = (struct svg_axis){.step = every, .log = true};
    a->n = (int)llround((last - first) / every) + 1;
    for (int i = 0; i < a->n; i++)
        a->tick[i] = pow(10, first + i * every);
    a->lo = a->tick[0];
    a->hi = a->tick[a->n - 1];
    a->decimals = first < 0 ? (int)fmin(9, -first) : 0;
}

double svg_axis_px(const struct svg_axis *a, double v, double px_lo, double px_hi)
{
    if (a->log)
        return v > 0 ? px_lo + (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo)) *
                                   (px_hi - px_lo)
                     : px_lo;
    return px_lo + (v - a->lo) / (a->hi - a->lo) * (px_hi - px_lo);
}

char *svg_axis_label(const struct svg_axis *a, double v, char buf[SVG_NUM_MAX])
{
    if (a->log && v > 0 && (v >= 1e5 || a->decimals > 3)) { /* a power of ten */
        snprintf(buf, SVG_NUM_MAX, "1e%d", (int)lround(log10(v)));
        return buf;
    }
    if (fabs(v) >= 1e9) {
        snprintf(buf, SVG_NUM_MAX, "%.3g", v);
        return buf;
    }
    return svg_format_fixed(buf, v, a->decimals);
}

/* ---- elements ----------------------------------------------------------------------------- */

void svg_tag(struct strbuf *b, const char *name)
{
    strbuf_printf(b, "<%s", name);
}

void svg_attr(struct strbuf *b, const char *name, const char *value)
{
    strbuf_printf(b, " %s=\"", name);
    escape(b, value, true);
    strbuf_puts(b, "\"");
}

void svg_attr_px(struct strbuf *b, const char *name, double v)
{
    char num[SVG_NUM_MAX];
    strbuf_printf(b, " %s=\"%s\"", name, svg_format_fixed(num, v, 2));
}

void svg_attr_value(struct strbuf *b, const char *name, double v)
{
    char num[SVG_NUM_MAX];
    if (isfinite(v))
        strbuf_printf(b, " %s=\"%s\"", name, svg_format_value(num, v));
}

void svg_end_tag(struct strbuf *b)
{
    strbuf_puts(b, "/>\n");
}

void svg_text(struct strbuf *b, double x, double y, const char *anchor, int size, bool bold,
              double rotate_deg, const char *cls, const char *text)
{
    char num[3][SVG_NUM_MAX];
    svg_tag(b, "text");
    svg_attr_px(b, "x", x);
    svg_attr_px(b, "y", y);
    svg_attr(b, "text-anchor", anchor);
    strbuf_printf(b, " font-size=\"%d\"", size);
    if (bold)
        strbuf_puts(b, " font-weight=\"bold\"");
    if (rotate_deg != 0)
        strbuf_printf(b, " transform=\"rotate(%s %s %s)\"", svg_format_fixed(num[0], rotate_deg, 2),
                      svg_format_fixed(num[1], x, 2), svg_format_fixed(num[2], y, 2));
    if (cls)
        svg_attr(b, "class", cls);
    strbuf_puts(b, ">");
    svg_escape(b, text);
    strbuf_puts(b, "</text>\n");
}

void svg_document_begin(struct strbuf *b, const char *id, double width, double height,
                        const char *title, const char *desc)
{
    char w[SVG_NUM_MAX], h[SVG_NUM_MAX];
    svg_format_fixed(w, width, 2);
    svg_format_fixed(h, height, 2);
    strbuf_printf(b, "<svg xmlns=\"%s\"", SVG_NS);
    svg_attr(b, "id", id);
    strbuf_printf(b,
                  " width=\"%s\" height=\"%s\" viewBox=\"0 0 %s %s\" font-family=\"sans-serif\" "
                  "font-size=\"11\">\n<title>",
                  w, h, w, h);
    svg_escape(b, title);
    strbuf_puts(b, "</title>\n");
    if (desc) {
        strbuf_puts(b, "<desc>");
        svg_escape(b, desc);
        strbuf_puts(b, "</desc>\n");
    }
    strbuf_printf(b, "<rect width=\"%s\" height=\"%s\" fill=\"#ffffff\"/>\n", w, h);
}

void svg_document_end(struct strbuf *b)
{
    strbuf_puts(b, "</svg>\n");
}
