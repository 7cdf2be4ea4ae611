/*
 * A bounded JSON scanner for the gateway's hot path: validate a request body once, read the few
 * fields routing needs, and cut one top-level member out by its byte range — without building
 * a tree.
 *
 * Why not jansson: the gateway forwards bodies to the engine byte for byte (up to 64 MiB;
 * typically a few hundred KB, nearly all of it one array of token ids) and needs three or four
 * scalars from them (model, max_new_tokens, a session id), the length of the token array, and
 * the body without one member. A DOM costs an allocation per element and several times the
 * body in memory, and forwarding it means printing it again, which changes whitespace, number
 * spelling and perhaps key order. jscan validates in one pass with no allocation and no
 * recursion (a 64-bit stack of container kinds bounds the depth), then answers lookups by
 * skipping values in the validated text: strings by memchr for the closing quote, containers
 * and numbers eight bytes at a time. bench/bench_jscan.c, release build (gcc 12, a shared
 * 2-CPU AMD EPYC VM), on a 313 KB body of 50,000 token ids: jscan_check 0.25 ms (12
 * instructions per byte), jscan_count of the ids 0.08 ms, jscan_cut of them 0.05 ms; json_loadb
 * of the same body 7.3 ms (280 instructions per byte).
 *
 * Usage: jscan_check the body; take jscan_root; jscan_get / jscan_path for members; the typed
 * readers for scalars; jscan_count / jscan_next for arrays; jscan_cut to forward the body
 * without one member. Every function but jscan_check assumes its value comes from a document
 * jscan_check accepted (a value is a view into the caller's buffer: it owns nothing and is
 * valid while the buffer is); on other text they do not read outside [v.p, v.p + v.len) except
 * where stated, but their answers are unspecified.
 *
 * Pure: no I/O, no allocation, no globals; reentrant, and any number of threads may scan one
 * buffer at once.
 */
#ifndef UTIL_JSCAN_H
#define UTIL_JSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The deepest nesting jscan_check accepts: the top-level object is depth 1. */
#define JSCAN_MAX_DEPTH 64

/* A JSON value's place in a buffer. */
struct jscan_value {
    const char *p; /* first byte of the value */
    size_t len;    /* bytes of the value */
    /* 'o' object, 'a' array, 's' string, 'n' number, 't' true, 'f' false, 'z' null; 0 absent */
    char type;
};

/*
 * Validates that buf[0..len) is exactly one JSON object (RFC 8259) with optional whitespace
 * (space, tab, CR, LF) around it, nested at most JSCAN_MAX_DEPTH deep. Strings must not hold
 * raw control characters (< 0x20); escapes must be RFC 8259's, and a \uD800-\uDBFF escape must
 * be followed by a \uDC00-\uDFFF one (a lone surrogate is rejected, as jansson does). Bytes
 * >= 0x80 are not checked to be UTF-8. Numbers follow the RFC grammar (no leading zeros, no
 * '+', no "1." or ".5"); their magnitude is not limited. Duplicate names and \u0000 escapes
 * are accepted; raw NUL bytes are errors wherever they appear.
 * Returns 0, or -1 with *err_off set to the byte offset of the first error (len when the input
 * ends early) and *msg to a static string saying what is wrong ("expected ':' after a member
 * name"). err_off and msg may be NULL; they are untouched on success.
 */
int jscan_check(const char *buf, size_t len, size_t *err_off, const char **msg);

/*
 * Finds member key (a NUL-terminated UTF-8 string) among the direct members of the object obj.
 * Member names are compared after unescaping, so "\u0061" matches key "a"; a name holding
 * \u0000 matches no key. Duplicate names: the first one wins. Returns true and fills *out with
 * the member's value, or false (out->type = 0, out->p NULL, out->len 0) when key is absent or
 * obj is not an object. Linear in the bytes of obj up to the member.
 */
bool jscan_get(struct jscan_value obj, const char *key, struct jscan_value *out);

/*
 * jscan_get without skipping the member's value, for a large value read only at its start
 * (an answer's meta_info before its log-probs): *out starts at the value, is typed by its first
 * byte, and runs to the end of obj (out->len counts the value and what follows it in obj).
 * jscan_get and jscan_path on such an object value, and jscan_next on such an array value, read
 * it as they would the exact value (they stop at its closing bracket) and cost only the bytes
 * up to what they find; the other readers need the exact value. Returns as jscan_get does.
 * Linear in the bytes of obj up to the member's value.
 */
bool jscan_get_lazy(struct jscan_value obj, const char *key, struct jscan_value *out);

/*
 * jscan_get for several keys in one pass over obj's members: out[i] is the first member named
 * keys[i] (compared as jscan_get does), or absent (type 0, p NULL, len 0). Stops at the first
 * member after which every key has been found. Returns how many keys were found (0 when obj is
 * not an object). For a body whose bulk is one member (input_ids), n lookups cost one skip of
 * it rather than n. Linear in the bytes of obj up to the last member found (all of obj when a
 * key is absent), times n per member name.
 */
size_t jscan_get_many(struct jscan_value obj, const char *const *keys, size_t n,
                      struct jscan_value *out);

/*
 * How many direct members of the object obj are named key (compared as jscan_get does): more
 * than 1 where a name is repeated, which jscan_get reads as its first and most JSON libraries as
 * their last. 0 when obj is not an object. One pass over obj's members, no allocation.
 */
size_t jscan_member_count(struct jscan_value obj, const char *key);

/*
 * Whether the object obj has a direct member whose name is none of keys (NULL-terminated,
 * compared as jscan_get does); *name is then the first such name, a string value (its quotes
 * included, for jscan_string). False when obj is not an object. For refusing a member a reader
 * would not read rather than ignoring it.
 */
bool jscan_other_member(struct jscan_value obj, const char *const *keys, struct jscan_value *name);

/*
 * Follows a dotted path of member names from obj: "sampling_params.max_new_tokens" is
 * jscan_get(jscan_get(obj, "sampling_params"), "max_new_tokens"). The path is split at every
 * '.', so a name that contains '.' cannot be reached (use jscan_get) and "" names the member
 * with the empty name. Array elements cannot be named. Returns true and fills *out, or false
 * (out->type = 0) when a component is missing or a step is not an object.
 */
bool jscan_path(struct jscan_value obj, const char *path, struct jscan_value *out);

/*
 * The whole buffer as a value: buf[0..len) without the whitespace around it, typed by its
 * first byte ('o' after jscan_check succeeded). An empty or all-whitespace buffer gives
 * type 0.
 */
struct jscan_value jscan_root(const char *buf, size_t len);

/*
 * An integer: v is a number without fraction or exponent within [INT64_MIN, INT64_MAX]
 * ("-0" is 0). Returns true and sets *out, or false (leaving *out) for another type, 1.0, 1e5,
 * or a value out of range such as 9223372036854775808.
 */
bool jscan_int(struct jscan_value v, int64_t *out);

/*
 * A number as the nearest double (strtod's rounding; "C" locale assumed, as libra never calls
 * setlocale): overflow gives +-HUGE_VAL, underflow 0 or a subnormal. Returns true and sets
 * *out, or false (leaving *out) when v is not a number. A number of 64 bytes or more is read in
 * place, which relies on the byte after it being in the buffer and not part of a number
 * (always so for a value inside a checked object).
 */
bool jscan_number(struct jscan_value v, double *out);

/* A boolean: true and sets *out when v is true or false; else false, leaving *out. */
bool jscan_bool(struct jscan_value v, bool *out);

/*
 * A string's contents, unescaped into out[0..size) and NUL-terminated: \uXXXX escapes become
 * UTF-8 (a surrogate pair one 4-byte sequence); other bytes are copied as they are. Returns
 * true, or false when v is not a string, the text with its NUL does not fit in size bytes, it
 * contains \u0000 (a C string could not hold it), or an escape is malformed (a lone surrogate);
 * on false out holds "" when size > 0.
 */
bool jscan_string(struct jscan_value v, char *out, size_t size);

/*
 * The number of elements of the array v (0 for []), or -1 when v is not an array. One pass over
 * v's bytes, no allocation: a 50,000-element token-id array (300 KB) costs about 0.08 ms.
 */
long jscan_count(struct jscan_value v);

/* An array iterator: zero it ({0}) before the first jscan_next. */
struct jscan_iter {
    size_t off; /* offset in arr.p where the scan resumes; 0 before the first element */
};

/*
 * Iterates the array arr: each call fills *elem with the next element and returns true; at the
 * end (and on every later call) it returns false with elem->type = 0. Returns false at once when
 * arr is not an array. Each step costs the bytes of one element.
 */
bool jscan_next(struct jscan_value arr, struct jscan_iter *it, struct jscan_value *elem);

/*
 * Where to cut member key (first occurrence; compared as jscan_get does) out of the object obj:
 * the output head = obj.p[0..head_len) followed by tail = obj.p[tail_off..obj.len) is obj
 * without that member, still valid JSON. A member after the first is removed with the comma
 * before it, the first with the comma after it, and the only member leaves "{}" (plus the
 * whitespace that was around it). Whitespace between other members is kept. Returns true and
 * fills *out, or false (out untouched) when key is absent or obj is not an object.
 */
struct jscan_cut {
    size_t head_len; /* head = obj.p[0..head_len) */
    size_t tail_off; /* tail = obj.p[tail_off..obj.len) */
};
bool jscan_cut(struct jscan_value obj, const char *key, struct jscan_cut *out);

/*
 * The same cut for the member whose value is val, as jscan_get or jscan_get_many returned it
 * for obj, without walking the members before it: a proxy that looked its members up in one
 * pass cuts one of them at no further cost. Returns false (out untouched) when val cannot be
 * one: not inside obj, running to obj's end (jscan_get_lazy's values), or not after a name and
 * a colon. For a member's value of an object nested in obj the answer is unspecified (a cut
 * within obj).
 */
bool jscan_cut_value(struct jscan_value obj, struct jscan_value val, struct jscan_cut *out);

#endif
