/*
 * `libra load --trainer`: the trainer's side of the elastic pool's handshake with a `libra
 * serve` gateway (docs/serve.md "The elastic pool"), so that lends and reclaims run on `libra
 * emu` without GPUs.
 *
 * The trainer watches the gateway's pool with a long poll (GET /libra/v1/pool?after=N), reports
 * each of its steps (POST /libra/v1/pool/step, begin and end) and, between steps (from a step's
 * end, with the version it reached, to the next one's begin), acts on the requests as they are
 * ready: a lend frees the replica's GPUs (release_s of emulated time, during which the trainer
 * starts no step) and is then confirmed `released`; a reclaim is confirmed `retaken` at once
 * (before the GPUs are touched), and the replica then takes retake_s to start its trainers and
 * fetch the state (a lend of it waits until then). Its calls
 * go one at a time, in the order made, so the gateway sees them in the trainer's order; training
 * never waits for their answers. A refused confirmation (the request was cancelled or expired)
 * is counted, and the trainer keeps (or gives back) the GPUs as the gateway's state says; a
 * call refused for a reason no retry changes (401, 403, 400, 404) stops the trainer (hooks).
 *
 * At start it reads the pool first and numbers its steps after the gateway's last (ending one
 * left open by a trainer that stopped), so a restarted trainer carries on.
 *
 * Threading: the caller's event loop; not thread-safe.
 */
#ifndef LOAD_TRAINER_H
#define LOAD_TRAINER_H

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/client.h"

struct load_trainer_config {
    const char *url;         /* the gateway's base URL */
    const char *admin_token; /* the pool's calls are admin calls; NULL: none (they get 401) */
    double release_s;        /* emulated seconds to free a lent replica's GPUs */
    double retake_s;         /* ... for a reclaimed replica to train again (trainers, state) */
    double time_scale;       /* wall seconds per emulated second */
};

/* What the trainer did, for the report. */
struct load_trainer_counts {
    int64_t released, retaken; /* confirmations accepted */
    int64_t refused;           /* confirmations and step reports refused, or failed */
    int64_t steps;             /* step reports accepted */
};

struct load_trainer;

/* What the trainer tells its caller: boundary_done(arg) when a release the trainer waited for
 * is over; failed(arg, why) when the gateway has no pool to play the trainer of (its GET
 * /libra/v1/pool answers 404: a plain engine, or a gateway without --pool-replica) or refuses
 * a pool call for a reason no retry changes (401 or 403: the admin token; 400, 404): the
 * trainer then sends nothing more, and the caller stops the run. */
struct load_trainer_hooks {
    void (*boundary_done)(void *arg);
    void (*failed)(void *arg, const char *why);
    void *arg;
};

/* Starts watching the gateway at c->url (borrowed strings must outlive it). */
struct load_trainer *load_trainer_new(struct event_base *base, struct net_client *client,
                                      const struct load_trainer_config *c,
                                      const struct load_trainer_hooks *hooks);

/* Reports that step `version` (the trainer's batches trained so far) begins or ended; an end
 * carries train_s, the wall seconds the step trained (the steering signal's T_train). */
void load_trainer_step(struct load_trainer *t, bool begin, int64_t version, double train_s);

/* The hybrid replicas the trainer trains on beside its core now: those the gateway's pool had
 * active or activating when the trainer started (a step's begin makes activating ones active),
 * then those it retook (unless the retake was refused), once retake_s has passed, and has not
 * lent since. */
int load_trainer_active(const struct load_trainer *t);

/* Whether a release is under way: the caller starts no step until boundary_done. */
bool load_trainer_releasing(const struct load_trainer *t);

/* Runs base until every call made has been answered (at most limit_s wall seconds). */
void load_trainer_flush(struct load_trainer *t, double limit_s);

void load_trainer_counts(const struct load_trainer *t, struct load_trainer_counts *out);

void load_trainer_free(struct load_trainer *t);

/* s wall seconds (0 when not above 0) as a libevent timeout. */
struct timeval load_wall_tv(double s);

#endif
