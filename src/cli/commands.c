/* The command table: one line per subcommand (cmd_<name>.c), in the order --help lists them. */
#include "cli/commands.h"

const struct cli_command cli_commands[] = {
    {0},
};
