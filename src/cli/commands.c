/* The command table: one line per subcommand (cmd_<name>.c), in the order --help lists them. */
#include "cli/commands.h"

#include "spec/config.h"

const struct cli_command cli_commands[] = {
    {"presets", "list hardware, model and workload presets",
     "libra presets [--json] [--presets FILE] [-o FILE]", cmd_presets, 0, NULL},
    {"config", "show, check or document the experiment config",
     "libra config show [FILE] | check FILE | doc [flags]", cmd_config, 0, NULL},
    {"trace", "validate, summarise, import or generate trajectory traces",
     "libra trace validate|stats|import|gen [FILE...] [flags]", cmd_trace, 0, NULL},
    {"cost", "print the cost model's answers for a hardware and model",
     "libra cost [CONFIG] [flags] | libra cost calibration", cmd_cost, SPEC_READ_COST, NULL},
    {"calibrate", "fit the cost model to your serving benchmarks and trainer logs",
     "libra calibrate INPUT[,OPTION=N...]... [-o PRESETS] [--hardware H] [--model M] [flags]",
     cmd_calibrate, SPEC_READ_CALIBRATE, NULL},
    {"plan", "plan the training/rollout split, layouts and rollout instances",
     "libra plan [CONFIG] [--gpus N] [--mode colocated|async] [--json] [flags]", cmd_plan,
     SPEC_READ_PLAN, NULL},
    {"route", "evaluate turn routers (C-MLFQ and baselines) on a trace",
     "libra route eval TRACE [--policy NAME|all] [--buckets SPEC] [--train-steps K] [flags]",
     cmd_route, SPEC_READ_ROUTE, NULL},
    {"sim", "simulate an RL job under colocated, async and libra resource managers",
     "libra sim [EXPERIMENT] [--json|--jsonl] [--steps N] [--seed S] [--perfetto FILE] "
     "[--timeline A:B]",
     cmd_sim, SPEC_READ_SIM, NULL},
    {"report", "draw the results of sim, plan and route eval as an HTML page and SVG figures",
     "libra report RESULT.json [MORE.json...] [-o FILE] [--svg DIR] [--steps A:B]", cmd_report, 0,
     NULL},
    {"emu", "run emulated SGLang/vLLM engines timed by the engine model",
     "libra emu [EXPERIMENT] [--instances tp1x4,tp2x2,...] [--time-scale F] [flags]", cmd_emu,
     SPEC_READ_EMU, NULL},
    {"load", "play an RL job's rollout side against engines over HTTP",
     "libra load [EXPERIMENT] --engines URL[,URL...] [--time-scale F] [--json] [flags]", cmd_load,
     SPEC_READ_LOAD, NULL},
    {"serve", "run the C-MLFQ gateway in front of vLLM/SGLang engines",
     "libra serve [EXPERIMENT] --engine URL[,tp=N] ... [--listen HOST:PORT] [flags]", cmd_serve,
     SPEC_READ_SERVE, NULL},
    {0},
};
