/*
 * The live elastic pool's records: what a trainer or an operator posts to /libra/v1/pool/...
 * and what the gateway journals in its state dir for each change of the pool (docs/serve.md
 * "The elastic pool"). One shape serves both, so that a change is journalled exactly as it was
 * accepted and a restart replays it through the same code (server/pool.c).
 *
 * A record is a JSON object of these members, each optional here (each route, and the replay,
 * checks the ones it needs):
 *
 *   op          journal only: "reclaim", "lend", "released", "retaken", "step", "expire", "tick"
 *   t           journal only: the pool's clock, seconds (>= 0, finite)
 *   replica     the hybrid replica, 0 .. GW_POOL_REPLICAS_MAX - 1
 *   request     a request's id, >= 1
 *   generation  the replica's generation a confirmation belongs to, >= 0
 *   step        a trainer's step number, >= 0
 *   version     the trainer's state version (batches trained), 0 .. GW_POOL_VERSION_MAX
 *   phase       "begin" or "end" (a step report)
 *   event       "released" or "retaken" (a confirmation)
 *   reason      free text of at most GW_POOL_REASON_MAX - 1 bytes, no control character
 *   train_s     a step's end: the seconds the trainer spent training it (> 0, finite)
 *   rollout_s   journal only, a step's end: the rollout's busy share of the step times the step
 *               as the gateway measured it (>= 0)
 *   pressure    journal only, a step's end: live trajectories over those admission allows (>= 0)
 *   rollout_gpus  journal only, a step's end: GPUs of the engines serving rollout (>= 0)
 *
 * Pure: no I/O; reentrant.
 */
#ifndef SERVER_POOL_REC_H
#define SERVER_POOL_REC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GW_POOL_REPLICAS_MAX 64             /* --pool-replica flags at most */
#define GW_POOL_REASON_MAX 128              /* bytes of a reason, with its NUL */
#define GW_POOL_VERSION_MAX (INT64_MAX / 2) /* a version a call names at most */

enum gw_pool_op {
    GW_POOL_OP_NONE,
    GW_POOL_OP_RECLAIM,  /* an operator asks the trainer to take a replica back */
    GW_POOL_OP_LEND,     /* ... to lend one to rollout (or cancels a reclaim not yet taken) */
    GW_POOL_OP_RELEASED, /* the trainer let a lent replica's GPUs go */
    GW_POOL_OP_RETAKEN,  /* the trainer took a reclaimed replica's GPUs */
    GW_POOL_OP_STEP,     /* the trainer's step began or ended */
    GW_POOL_OP_EXPIRE,   /* a lend not confirmed in time was cancelled */
    GW_POOL_OP_TICK,     /* time passed: joins past their deadline failed */
};

struct gw_pool_rec {
    enum gw_pool_op op; /* GW_POOL_OP_NONE when absent */
    double t_s;         /* -1 when absent */
    int replica;        /* -1 when absent */
    int64_t request;    /* -1 when absent */
    int64_t generation; /* -1 when absent */
    int64_t step;       /* -1 when absent */
    int64_t version;    /* -1 when absent */
    int phase;          /* 0 absent, 1 begin, 2 end */
    int event;          /* 0 absent, GW_POOL_OP_RELEASED or GW_POOL_OP_RETAKEN */
    char reason[GW_POOL_REASON_MAX];
    double train_s;       /* -1 when absent */
    double rollout_s;     /* -1 when absent */
    double pressure;      /* -1 when absent */
    int64_t rollout_gpus; /* -1 when absent */
};

/* A record of op at t_s (-1: absent) with every other member absent. */
struct gw_pool_rec gw_pool_rec_absent(enum gw_pool_op op, double t_s);

/*
 * Reads the record of len bytes at text into *out (every member absent first). Returns 0, or
 * -1 with err naming the member and what was expected (a body that is not one JSON object, a
 * duplicate or unknown member, a value of the wrong type or out of range).
 */
int gw_pool_rec_parse(const char *text, size_t len, struct gw_pool_rec *out, char *err,
                      size_t err_size);

/* The record r as a journal line (a JSON object, only the members set), malloc'd. */
char *gw_pool_rec_text(const struct gw_pool_rec *r);

/* The name of op ("reclaim", ...; "" for NONE). */
const char *gw_pool_op_name(enum gw_pool_op op);

#endif
