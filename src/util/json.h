/*
 * JSON documents that remember where things are.
 *
 * jansson parses strictly (duplicate keys rejected) but keeps no source positions once a
 * document is built, and users need "file:line:col" for a typo'd key or a wrong type, not just
 * for a syntax error. A ujson_doc keeps the source text next to the tree; ujson_locate walks
 * the text (already known to be valid JSON) along a path to find the position of a member's
 * key or an array element. Errors are therefore positional without a second, position-aware
 * parser on the hot path: lookup cost is paid only when an error is reported.
 *
 * Paths are JSON Pointers without the leading '/': "cluster/gpus", "models/3/heads"; "" is the
 * root; '~1' stands for '/' and '~0' for '~' inside a key; array indices are decimal without
 * leading zeros. A path P names what the pointer "/P" names, except that "" is the root, so a
 * top-level member with the empty key has no path of its own (its children do: "/x").
 */
#ifndef UTIL_JSON_H
#define UTIL_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "libra/libra.h"

struct ujson_doc {
    json_t *root; /* owned */
    char *name;   /* owned; file name used in messages */
    char *text;   /* owned copy of the source, NUL-terminated */
    size_t len;   /* bytes of text */
};

/*
 * Parses len bytes of text (a copy is kept) as one JSON value, rejecting duplicate keys and
 * NUL bytes.
 * name labels error messages (a file name, "<flags>", "<embedded:hardware.json>").
 * Returns 0, or LIBRA_EINVAL with err set to name:line:col of the syntax error; doc is then
 * left empty (safe to free).
 */
int ujson_doc_parse(struct ujson_doc *doc, const char *name, const char *text, size_t len,
                    struct libra_error *err);

/* Where in text (len bytes, line and column 1-based, columns in characters) the failed parse
 * that gave e is at fault: jansson's place, but a number out of range at its start and a text
 * cut short (in a value: a string, a literal, or wanting more) after its last character, past
 * the white space that ends it. Every parse error is placed by it. */
void ujson_error_at(const char *text, size_t len, const json_error_t *e, int *line, int *col);

/* The reason jansson gives for a failed parse, in our words where its own would name one of its
 * options ("\u0000 is not allowed without JSON_ALLOW_NUL"). Every parse error goes through it. */
const char *ujson_error_text(const json_error_t *e);

/* Releases everything doc owns; a zeroed doc is fine. */
void ujson_doc_free(struct ujson_doc *doc);

/*
 * Finds path in doc's source text: for an object member, the position of its key's opening
 * quote; for an array element or the root, the first character of the value. line and col
 * are 1-based (col counts characters, not bytes). Returns 0, or -1 when the path is absent.
 */
int ujson_locate(const struct ujson_doc *doc, const char *path, int *line, int *col);

/*
 * The path of member key of the value at path ("" for the root), key escaped as a JSON Pointer
 * component ('~' as "~0", '/' as "~1"), written to out (size bytes); path itself when that does
 * not fit, so that an error still points into the document (at the member's parent).
 */
const char *ujson_member_path(char *out, size_t size, const char *path, const char *key);

/*
 * Fills err with doc's name, the position of path (where it is absent, a missing member, the
 * position of its nearest ancestor present: the object that lacks it; 0:0 when doc is NULL)
 * and a message "PATH: MSG" (path shown with '.' separators, e.g. "cluster.gpus"). Returns
 * LIBRA_EINVAL.
 */
int ujson_errorf(struct libra_error *err, const struct ujson_doc *doc, const char *path,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Reads an integer-valued JSON number (a real with no fractional part is accepted) into *out.
 * Returns false when v is not a number or not an exact integer. */
bool ujson_as_int64(const json_t *v, int64_t *out);

/* Reads any JSON number into *out. Returns false when v is not a number. */
bool ujson_as_double(const json_t *v, double *out);

/*
 * Serialises v deterministically: sorted keys, 2-space indent when pretty, compact otherwise;
 * reals printed by the project's fixed float rule: the shortest of %.15g, %.16g and %.17g
 * that reads back as the same double (0.1 prints as 0.1, every value round-trips), with ".0"
 * appended to integral values (2.0, not 2) so they stay reals. Returns a malloc'd
 * NUL-terminated string the caller frees.
 */
char *ujson_dump(const json_t *v, bool pretty);

/*
 * A new JSON real, or JSON null when d is NaN or infinite (jansson refuses non-finite reals
 * and json_real returns NULL for them, which json_object_set_new would silently drop).
 * Returns a new reference.
 */
json_t *ujson_real(double d);

/*
 * Makes s valid UTF-8 in place, as jansson requires of every string it packs (json_pack
 * returns NULL otherwise): each byte that does not begin a complete, shortest-form sequence of
 * a scalar value (a stray continuation byte, a sequence cut short, an overlong form, a
 * surrogate, a value past U+10FFFF) becomes '?'. For text built from what a client sent, such
 * as a percent-decoded path, or cut to a buffer's size. Returns s.
 */
char *ujson_utf8_repair(char *s);

/* Whether s is valid UTF-8, as jansson takes a string (json_string makes no string of other
 * bytes): what a file libra writes as JSON may hold. */
bool ujson_utf8_valid(const char *s);

/* What v is, for a message ("expected a count, not a string"): "an object", "an array", "a
 * string", "an integer", "a real number", "a boolean" or "null". */
const char *ujson_type_name(const json_t *v);

#endif
