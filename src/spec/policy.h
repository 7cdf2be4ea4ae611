/*
 * The turn routers (libra-spec §4), as a plain enum with their names.
 *
 * Why here and not in sched/: the config (sched.policy) must name and parse the policies, and
 * spec/ may not include sched/ (sched includes spec). Shared plain data types live in the
 * lowest module that needs them (DESIGN.md "Layers"), so this is the one definition: the
 * config stores an enum sched_policy and the router takes it as it is. What each policy does
 * is the router's (sched/router.h, docs/routing.md).
 */
#ifndef SPEC_POLICY_H
#define SPEC_POLICY_H

enum sched_policy {
    SCHED_CMLFQ,        /* C-MLFQ: prefix trees of tool-return states */
    SCHED_LOAD_BALANCE, /* least connections, bucket-agnostic */
    SCHED_LENGTH_AWARE, /* the bucket of the next request's context length */
    SCHED_LA_MLFQ,      /* one bucket longer per quantum of generated tokens */
    SCHED_ORACLE,       /* the bucket of the true remaining tokens (simulator and evaluator) */
    SCHED_PLAS,         /* program-level least attained service */
    SCHED_PREDICTOR,    /* C-MLFQ's rule over a regression instead of the trees */
    SCHED_CMLFQ_H,      /* C-MLFQ's successor: attempts, attained service and the trees, by cost */
};
#define SCHED_POLICY_COUNT 8

/* The policies' names ("cmlfq", "load_balance", ...), indexed by enum sched_policy and
 * NULL-terminated (a names table of spec/schema.h): what the config, the CLI and JSON say. */
extern const char *const spec_policy_names[SCHED_POLICY_COUNT + 1];

/* Why policy p cannot route live turns (the gateway's, a client library's), or NULL where it
 * can: the one reason every live entry point gives. */
const char *spec_policy_live_refusal(enum sched_policy p);

#endif
