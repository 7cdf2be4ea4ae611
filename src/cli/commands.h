/* Entry points of the subcommands, one per cmd_<name>.c; see cli.h for the contract. */
#ifndef CLI_COMMANDS_H
#define CLI_COMMANDS_H

#include "cli/cli.h"

int cmd_presets(int argc, char **argv); /* cmd_presets.c */
int cmd_config(int argc, char **argv);  /* cmd_config.c */

/* cmd_trace.c; `libra trace gen` is cmd_trace_gen.c (argv[0] is "gen") */
int cmd_trace(int argc, char **argv);
int cmd_trace_gen(const struct cli_command *cmd, int argc, char **argv);

int cmd_cost(int argc, char **argv);      /* cmd_cost.c */
int cmd_calibrate(int argc, char **argv); /* cmd_calibrate.c */
int cmd_plan(int argc, char **argv);      /* cmd_plan.c */
int cmd_route(int argc, char **argv);     /* cmd_route.c */
int cmd_sim(int argc, char **argv);       /* cmd_sim.c */
int cmd_report(int argc, char **argv);    /* cmd_report.c */
int cmd_emu(int argc, char **argv);       /* cmd_emu.c */
int cmd_load(int argc, char **argv);      /* cmd_load.c */
int cmd_serve(int argc, char **argv);     /* cmd_serve.c */

#endif
