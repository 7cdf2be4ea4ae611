/*
 * `libra emu`: inference engines without GPUs. Each emulated instance is an engine/ model
 * (the one the simulator runs) behind its own HTTP port, answering SGLang's and vLLM's own APIs
 * (docs/emu.md lists the endpoints, their semantics and the engine versions followed), driven
 * in wall-clock time scaled by time_scale: with 0.01, one emulated second takes 10 ms.
 *
 * What a request generates is unknowable, so it generates libra.emu.gen_tokens tokens when the
 * request carries libra's request object, else its max_new_tokens / max_tokens; the token ids
 * are drawn from a keyed RNG over (seed, prompt content, position), so equal requests get equal
 * answers. Weight loads, memory release and wake-up take the cost model's times.
 *
 * All instances share one event loop and nothing here blocks; not thread-safe.
 */
#ifndef EMU_EMU_H
#define EMU_EMU_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "net/http.h"

/* Times an instance's lifecycle calls take, emulated seconds (from cost/lifecycle.h). */
struct emu_times {
    double load_disk_s;  /* /update_weights_from_disk: reload the weights from disk */
    double broadcast_s;  /* /update_weights_from_distributed, vLLM /update_weights */
    double group_init_s; /* /init_weights_update_group, vLLM /init_weight_transfer_engine */
    double wake_s;       /* /resume_memory_occupation, vLLM /wake_up */
};

/* A fault to inject into one instance (emulated seconds since the start; < 0: none). */
struct emu_fault {
    double fail_after_s;  /* the instance dies: its port closes, its requests are cut */
    double stall_after_s; /* the instance stops answering anything ... */
    double stall_for_s;   /* ... for this long, then carries on */
};

/* A fault as `libra emu --fail` or `--stall` names it: instance i (>= 0), after after_s (>= 0)
 * and, for a stall, for for_s (> 0) emulated seconds. */
struct emu_fault_flag {
    int instance;
    double after_s, for_s;
    bool stall;
};

/*
 * Parses text, "instance=I,after_s=T" (a stall: ",for_s=D"), items in any order, each once,
 * numbers in [0, 1e9] and I an integer, into *out. Returns 0, or -1 with *out untouched and the
 * reason in why, starting with the key it is about ("after_s: ...") where there is one (size
 * bytes, cut there; it quotes an item of the text, so strlen(text) +
 * PARSE_WHY_EXTRA bytes, util/parse.h, hold it whole).
 */
int emu_fault_parse(const char *text, bool stall, struct emu_fault_flag *out, char *why,
                    size_t size);

struct emu_instance_config {
    int tp;
    int port; /* 0: chosen by the OS */
    struct engine_config engine;
    struct emu_times times;
    struct emu_fault fault;
};

struct emu_config {
    const char *host;         /* address to listen on */
    const char *model;        /* served model name */
    uint32_t vocab;           /* token ids are below it */
    double time_scale;        /* wall seconds per emulated second, > 0 */
    uint64_t seed;            /* of the generated token ids */
    bool dev_mode;            /* vLLM's development-mode endpoints (VLLM_SERVER_DEV_MODE=1) */
    struct net_limits limits; /* of every instance's server */
    const struct emu_instance_config *inst;
    int n_inst;
};

struct emu;

/*
 * Starts every instance on base: each listens and answers once the loop runs. Returns 0, or -1
 * with the reason in err (a port taken, an engine config the model refuses); nothing is left
 * running then.
 */
int emu_new(struct emu **out, struct event_base *base, const struct emu_config *c, char *err,
            size_t err_size);

/* The port instance i listens on. */
int emu_port(const struct emu *e, int i);

/* Stops every instance (their kept requests are dropped) and frees e; e may be NULL. */
void emu_free(struct emu *e);

#endif
