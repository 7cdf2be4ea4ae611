/*
 * Time model of the tools: CPU pools with log-normal service times, queueing and timeouts.
 *
 * Tools run on CPU pools that saturate (ReTool's tool time was about 10x generation time and
 * more sandbox workers barely helped; SWE tasks need about one core each plus a container
 * for the final tests — ../shared/reference/libra-spec.md §5), so a tool's latency is a
 * queueing delay plus an execution time, not a constant. The simulator queues calls on the
 * pools itself and takes only the execution time from here; the generator alone has no other
 * calls to queue behind, so it approximates the wait from the pool's utilisation: an M/G/c
 * queue in the Allen–Cunneen approximation — a call waits with the Erlang C probability
 * C(c, rho), and a waiting call waits an exponential time of mean
 * E[S] (1 + CV^2) / 2 / (c (1 - rho)). A pool with 0 workers is a sandbox per trajectory and
 * never queues. An execution longer than the tool's timeout is cut at the timeout.
 */
#ifndef WORKLOAD_TOOLTIME_H
#define WORKLOAD_TOOLTIME_H

#include <stdbool.h>

#include "util/rng.h"
#include "workload/preset.h"

/* What a pool implies, computed once per pool. */
struct workload_pool_model {
    double wait_probability; /* Erlang C: share of calls that wait for a worker */
    double mean_wait_s;      /* mean wait of a call that waits, seconds */
    double mean_service_s;   /* mean execution time before the timeout cut, seconds */
};

/* Fills m for pool p (checked by the preset parser: utilisation < 1, service > 0). */
void workload_pool_model(const struct workload_pool *p, struct workload_pool_model *m);

/*
 * Execution time of one call from a standard normal draw z: service_median_s *
 * exp(service_sigma * z), cut at timeout_s (then *timed_out is set). Seconds.
 */
double workload_pool_exec_s(const struct workload_pool *p, double z, bool *timed_out);

/* Queueing delay of one call from two uniforms in [0, 1): 0 with probability
 * 1 - wait_probability, else exponential with mean mean_wait_s. Seconds. */
double workload_pool_wait_s(const struct workload_pool_model *m, double u_wait, double u_len);

#endif
