/*
 * Values as typed on a command line: decimal numbers in a range, comma-separated lists (a comma
 * inside an item escaped as "\,"), integer lists and "A:B" ranges. Pure (a string in, values and
 * a reason out), so libFuzzer drives them directly (tests/fuzz/fuzz_cli_values.c); the CLI puts
 * its flag before the reason ("--steps: expected A:B, not '3'").
 *
 * Each parser writes its outputs only when it accepts the text. A refusal returns -1 and writes
 * the reason, lower case and without a full stop, into why (size bytes, cut there): it quotes the
 * text, so a why of strlen(text) + PARSE_WHY_EXTRA bytes always holds it whole.
 */
#ifndef UTIL_PARSE_H
#define UTIL_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes beyond the text's own that a why needs to hold any reason whole. */
#define PARSE_WHY_EXTRA 160

/* Whether text is a number as JSON writes it: an optional '-', no leading zero, a digit on each
 * side of a point, an optional exponent, nothing else ("-0.5e3"; not "+1", "016", ".5", " 1"). */
bool parse_number_text(const char *text);

/*
 * Parses text as an integer in [lo, hi], written as JSON writes one (parse_number_text, without
 * point or exponent), into *out. Returns 0, or -1 with why "expected an integer in [LO, HI],
 * not 'TEXT'".
 */
int parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out, char *why, size_t size);

/*
 * Parses text as a number in [lo, hi] written as JSON writes one (parse_number_text: no white
 * space, hexadecimal, inf or nan) into *out, a value that does not overflow. Returns 0, or -1
 * with why "expected a number in [LO, HI], not 'TEXT'" (LO and HI as %g writes them).
 */
int parse_double(const char *text, double lo, double hi, double *out, char *why, size_t size);

/*
 * Splits text at every comma not escaped as "\,"; an escaped comma is kept as ',' (a backslash
 * before anything else is kept as it is). Always gives at least one item: "" is one empty item,
 * "a," is "a" and "". Returns the number of items and sets *out to a malloc'd array of malloc'd
 * items (the caller frees each, then the array). Never fails.
 */
size_t parse_list(const char *text, char ***out);

/*
 * Parses text, a list as parse_list splits it, of decimal integers in [lo, hi] (parse_int),
 * each distinct from the others and from the *n values already in *vals, which the new ones
 * join. Items are read in order and the first bad one is reported. Returns 0 with the values
 * appended (*vals is realloc'd, *n grown), or -1 with *vals and *n untouched and why: parse_int's
 * reason for the item, or "WHAT V is listed twice" (what names the items, e.g. "seed").
 */
int parse_int_list(const char *text, int64_t lo, int64_t hi, const char *what, int64_t **vals,
                   size_t *n, char *why, size_t size);

/*
 * Parses text as "A:B", two decimal integers with lo <= A <= B <= hi, into *first and *last.
 * Returns 0, or -1 with why: "expected A:B, not 'TEXT'" (no ':', or an A of more than 31
 * characters), or parse_int's reason for A or B (in [LO, HI]), or "expected A:B with B at least A,
 * not 'TEXT'".
 */
int parse_int_range(const char *text, int64_t lo, int64_t hi, int64_t *first, int64_t *last,
                    char *why, size_t size);

#endif
