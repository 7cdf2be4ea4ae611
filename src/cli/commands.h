/* Entry points of the subcommands, one per cmd_<name>.c; see cli.h for the contract. */
#ifndef CLI_COMMANDS_H
#define CLI_COMMANDS_H

#include "cli/cli.h"

int cmd_presets(int argc, char **argv); /* cmd_presets.c */
int cmd_config(int argc, char **argv);  /* cmd_config.c */

int cmd_cost(int argc, char **argv); /* cmd_cost.c */

#endif
