/*
 * Keyed counter-based random numbers: every value is a pure function of (seed, keys, counter).
 *
 * The simulator must give the trajectory of (prompt, sample, policy version) the same tool
 * calls and lengths whichever resource manager it is simulating, in whatever order events
 * happen to draw it; a shared sequential generator would make every draw depend on every
 * earlier one. So a stream is named by a key tuple, and its i-th value is a mixing function of
 * (key, i): streams are independent, can be created anywhere in any order, and there is no
 * global state. Pure modules (workload/, engine/, sim/) take randomness only from here.
 *
 * Mixing: rng_mix64 is the SplitMix64 finaliser (Stafford's variant 13), a bijection with full
 * avalanche. Draw i of key k is mix64(mix64(k + i * golden) ^ k): the inner part is the
 * SplitMix64 sequence seeded with k (BigCrush-clean); the outer mix with k again keeps two
 * keys that lie on the same Weyl sequence from yielding shifted copies of each other.
 *
 * Distributions use integer arithmetic and log/exp/sqrt/pow from the C library; values are
 * reproducible for a given libm (glibc's are the reference for committed outputs).
 * Thread-safety: a struct rng is plain data; use one per thread or per stream.
 */
#ifndef UTIL_RNG_H
#define UTIL_RNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A stream: its key (a hash of the seed and key tuple) and the number of draws taken. */
struct rng {
    uint64_t key;
    uint64_t ctr;
};

/* The SplitMix64 finaliser: a bijective 64-bit mixer with full avalanche. Inline: hash tables
 * (util/intmap) call it on every probe. */
static inline uint64_t rng_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* Hashes seed and the n-tuple keys (order and length matter) to a 64-bit value. */
uint64_t rng_hash(uint64_t seed, const uint64_t *keys, size_t n);

/*
 * The stream named by (seed, k1, k2, k3), at its first draw; e.g. (seed, prompt, sample,
 * policy version). Unused keys are 0. Equal arguments give equal streams.
 */
struct rng rng_keyed(uint64_t seed, uint64_t k1, uint64_t k2, uint64_t k3);

/* The next 64 uniformly distributed bits. */
uint64_t rng_u64(struct rng *r);

/* Uniform in [0, 1) with 53 random bits (a multiple of 2^-53). */
double rng_uniform(struct rng *r);

/* Uniform integer in [0, n), without modulo bias (rejection); 0 when n is 0. */
uint64_t rng_uniform_int(struct rng *r, uint64_t n);

/* Standard normal (Marsaglia's polar method; the second variate is discarded, so each value
 * depends only on the stream position). */
double rng_normal(struct rng *r);

/* exp(mu + sigma * N(0, 1)). */
double rng_lognormal(struct rng *r, double mu, double sigma);

/* Exponential with the given rate (> 0); mean 1 / rate. */
double rng_exponential(struct rng *r, double rate);

/* Gamma with shape k > 0 and scale theta > 0 (mean k theta), by Marsaglia and Tsang (2000);
 * shape < 1 uses the boost Gamma(k) = Gamma(k + 1) U^(1/k). */
double rng_gamma(struct rng *r, double shape, double scale);

/* Beta(a, b), a, b > 0, as X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b). */
double rng_beta(struct rng *r, double a, double b);

/* true with probability p. */
bool rng_bernoulli(struct rng *r, double p);

/* Poisson with mean lambda (0 when lambda <= 0): multiplication of uniforms below 10,
 * Hörmann's transformed rejection (PTRS, 1993) from 10 up. */
uint64_t rng_poisson(struct rng *r, double lambda);

/* An index in [0, n) drawn with probability weights[i] / sum (weights >= 0); a zero weight is
 * never drawn. Returns n when no weight is positive. */
size_t rng_categorical(struct rng *r, const double *weights, size_t n);

#endif
