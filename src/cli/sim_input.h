/*
 * The simulator's input for a resolved config: the presets it names and, with
 * workload.trace, the trace read into memory once however many configs replay it. Shared by
 * the commands that simulate or plan on the simulator's length sample (sim, plan).
 */
#ifndef CLI_SIM_INPUT_H
#define CLI_SIM_INPUT_H

#include <stdbool.h>
#include <stddef.h>

#include "cli/cli_config.h"
#include "sim/sim.h"

struct cli_loaded_trace;

/* The traces read so far, each once; zero-initialise, free with cli_traces_free. */
struct cli_traces {
    struct cli_loaded_trace *v;
    size_t n;
};

void cli_traces_free(struct cli_traces *ts);

/*
 * Fills *in for cfg (borrowed: it must outlive *in) with the presets of p and the trace cfg
 * names, reading it into ts on first use. Returns 0, or an exit code after printing the
 * trace's error (file:line:col).
 */
int cli_sim_input(const struct cli_presets *p, struct cli_traces *ts,
                  const struct libra_config *cfg, bool perfetto, struct sim_input *in);

#endif
