/*
 * Stable radix sort of (64-bit key, index) pairs, ascending by key.
 *
 * The simulator orders every step's training sequences by their work and the planner every
 * batch of its sample: at a batch of 2,560 glibc's qsort through a callback took about 520
 * instructions per element, these eight byte-wide counting passes (those where every key has
 * the same byte skipped) about 180. Equal keys keep their input order, so a caller that
 * fills the pairs in index order gets ties by ascending index. For a descending order sort
 * ~key; sort_key_double gives a double an order-preserving key. Also the two binary searches
 * of a sorted array of doubles.
 *
 * Pure; allocates nothing (the caller gives the scratch).
 */
#ifndef UTIL_SORT_H
#define UTIL_SORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sort_pair {
    uint64_t key;
    uint32_t index;
};

/* Sorts v[0..n) by key, stably, using tmp[0..n) as scratch. */
void sort_pairs(struct sort_pair *v, size_t n, struct sort_pair *tmp);

/* The order-preserving key of any double but NaN (+0.0 and -0.0 alike): its bit pattern with
 * the sign bit set when x >= 0, every bit flipped when x < 0. */
uint64_t sort_key_double(double x);

/* The first index of sorted[0..n) (ascending) whose value is > x (above) or >= x; n when there
 * is none. Inline: the router's attained-service window searches on every decision. */
static inline size_t sort_bound(const double *sorted, size_t n, double x, bool above)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (above ? sorted[mid] <= x : sorted[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static inline size_t sort_lower_bound(const double *sorted, size_t n, double x)
{
    return sort_bound(sorted, n, x, false);
}

static inline size_t sort_upper_bound(const double *sorted, size_t n, double x)
{
    return sort_bound(sorted, n, x, true);
}

#endif
