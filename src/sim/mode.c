/*
 * The modes' table: the one place that says what each resource manager the simulator runs is
 * (its name and config bit, the callbacks that drive it, whether rollout is a stream, whether
 * it trains, whether its GPUs are time-shared, how its layout is chosen and made). Everything
 * else asks the table instead of comparing a mode with each of the others, so a mode is added
 * by a row here, its callbacks and its layout function.
 */
#include "sim/internal.h"

static const struct sim_mode_desc modes[SIM_MODES] = {
    [SIM_COLOCATED] = {.name = "colocated",
                       .bit = SPEC_SIM_COLOCATED,
                       .ops = &sim_mode_sync_ops,
                       .trains = true,
                       .colocated = true,
                       .tune = SIM_TUNE_TP,
                       .layout = sim_layout_colocated},
    [SIM_ASYNC] = {.name = "async",
                   .bit = SPEC_SIM_ASYNC,
                   .ops = &sim_mode_async_ops,
                   .streams = true,
                   .trains = true,
                   .tune = SIM_TUNE_SPLIT_TP,
                   .layout = sim_layout_async},
    [SIM_LIBRA] = {.name = "libra",
                   .bit = SPEC_SIM_LIBRA,
                   .ops = &sim_mode_async_ops,
                   .streams = true,
                   .trains = true,
                   .routed = true,
                   .layout = sim_layout_libra},
    [SIM_ROLLOUT] = {.name = "rollout",
                     .bit = SPEC_SIM_ROLLOUT,
                     .ops = &sim_mode_sync_ops,
                     .routed = true,
                     .layout = sim_layout_rollout},
};

const struct sim_mode_desc *sim_mode_desc(enum sim_mode m)
{
    return &modes[m];
}

const char *sim_mode_name(enum sim_mode m)
{
    return (unsigned)m < SIM_MODES ? modes[m].name : "unknown";
}
