/* Tool latencies from pool parameters; see tooltime.h for the queueing approximation. */
#include "workload/tooltime.h"

#include <math.h>

/* Erlang C for c servers at utilisation rho, through the Erlang B recurrence (stable for
 * any c: every term stays in [0, 1]). */
static double erlang_c(int64_t c, double rho)
{
    double a = (double)c * rho, b = 1.0;
    for (int64_t k = 1; k <= c; k++)
        b = a * b / ((double)k + a * b);
    return b / (1.0 - rho * (1.0 - b));
}

void workload_pool_model(const struct workload_pool *p, struct workload_pool_model *m)
{
    double s2 = p->service_sigma * p->service_sigma;
    m->mean_service_s = p->service_median_s * exp(s2 / 2);
    if (p->workers == 0 || p->utilisation <= 0) {
        m->wait_probability = 0;
        m->mean_wait_s = 0;
        return;
    }
    double cv2 = expm1(s2); /* squared coefficient of variation of a log-normal */
    m->wait_probability = erlang_c(p->workers, p->utilisation);
    m->mean_wait_s =
        m->mean_service_s * (1 + cv2) / 2 / ((double)p->workers * (1 - p->utilisation));
}

double workload_pool_exec_s(const struct workload_pool *p, double z, bool *timed_out)
{
    double s = p->service_median_s * exp(p->service_sigma * z);
    *timed_out = s > p->timeout_s;
    return *timed_out ? p->timeout_s : s;
}

double workload_pool_wait_s(const struct workload_pool_model *m, double u_wait, double u_len)
{
    if (u_wait >= m->wait_probability)
        return 0;
    return -m->mean_wait_s * log1p(-u_len);
}
