/*
 * The policies' names: one table for the config schema (sched.policy), the router's
 * sched_policy_name / sched_policy_parse and every output that names a policy; see policy.h.
 */
#include "spec/policy.h"

#include <stddef.h>

const char *const spec_policy_names[SCHED_POLICY_COUNT + 1] = {
    [SCHED_CMLFQ] = "cmlfq",
    [SCHED_LOAD_BALANCE] = "load_balance",
    [SCHED_LENGTH_AWARE] = "length_aware",
    [SCHED_LA_MLFQ] = "la_mlfq",
    [SCHED_ORACLE] = "oracle",
    [SCHED_PLAS] = "plas",
    [SCHED_PREDICTOR] = "predictor",
    [SCHED_CMLFQ_H] = "cmlfq_h",
    [SCHED_POLICY_COUNT] = NULL,
};

const char *spec_policy_live_refusal(enum sched_policy p)
{
    if (p != SCHED_ORACLE)
        return NULL;
    return "oracle routes by each trajectory's true remaining tokens, which a live router never "
           "learns (libra route eval and libra sim have them): choose another policy";
}
