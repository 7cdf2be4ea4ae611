/*
 * libra — entry point: dispatches `libra <command>` through the command table and handles the
 * tool-wide flags (--help, --version).
 */
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/experiment.h"
#include "cli/cli.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/version.h"

void cli_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("libra: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "libra: %s: ", cmd->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nusage: %s (see libra %s --help)\n", cmd->usage, cmd->name);
    va_end(ap);
    return LIBRA_EXIT_USAGE;
}

int cli_parse_int(const struct cli_command *cmd, const char *flag, const char *arg, int64_t lo,
                  int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno || end == arg || *end || v < lo || v > hi)
        return cli_usage_error(cmd, "%s: expected an integer in [%lld, %lld], not '%s'", flag,
                               (long long)lo, (long long)hi, arg);
    *out = v;
    return 0;
}

int cli_parse_double(const struct cli_command *cmd, const char *flag, const char *arg, double lo,
                     double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= lo && v <= hi))
        return cli_usage_error(cmd, "%s: expected a number in [%g, %g], not '%s'", flag, lo, hi,
                               arg);
    *out = v;
    return 0;
}

int cli_report_error(const struct libra_error *err)
{
    char buf[1024];
    cli_errorf("%s", error_format(err, buf, sizeof buf));
    return LIBRA_EXIT_USAGE;
}

int cli_report(int rc, const struct libra_error *err)
{
    cli_report_error(err);
    return rc == LIBRA_EIO         ? LIBRA_EXIT_IO
           : rc == LIBRA_EINTERNAL ? LIBRA_EXIT_INTERNAL
           : rc == LIBRA_EINFEAS   ? LIBRA_EXIT_NEGATIVE
                                   : LIBRA_EXIT_USAGE;
}

const struct cli_command *cli_find(const char *name)
{
    for (const struct cli_command *c = cli_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

/* The element of argv that held the long option getopt_long just returned. */
static const char *long_option_text(char **argv)
{
    bool separate = optarg && optind >= 2 && argv[optind - 1] == optarg;
    return argv[optind - (separate ? 2 : 1)];
}

int cli_getopt(const struct cli_command *cmd, int argc, char **argv, const char *shortopts,
               const struct option *longopts)
{
    opterr = 0;
    int index = -1;
    int c = getopt_long(argc, argv, shortopts, longopts, &index);
    if (index >= 0) {
        /* getopt_long takes any unambiguous prefix ("--gpu" for "--gpus"); a flag is spelled
         * whole, so that a typo or a future flag sharing the prefix cannot change a run */
        const char *typed = long_option_text(argv) + 2, *name = longopts[index].name;
        size_t len = strcspn(typed, "=");
        if (len != strlen(name) || strncmp(typed, name, len) != 0) {
            cli_usage_error(cmd, "unknown flag '--%.*s' (did you mean --%s?)", (int)len, typed,
                            name);
            return '?';
        }
    }
    if (c == '?' || c == ':') {
        const char *arg = argv[optind - 1];
        if (optopt && optopt != '?' && c == ':')
            cli_usage_error(cmd, "flag '-%c' needs a value", optopt);
        else if (strchr(arg, '=') || !optopt)
            cli_usage_error(cmd, "unknown or malformed flag '%s'", arg);
        else
            cli_usage_error(cmd, "flag '%s' is unknown or needs a value", arg);
        return '?';
    }
    return c;
}

int cli_read_file(const char *path, char **text, size_t *len)
{
    struct libra_error err = {0};
    int rc = api_read_file(path, text, len, &err);
    return rc ? cli_report(rc, &err) : 0;
}

int cli_write_output(const char *path, const char *text)
{
    bool to_stdout = !path || strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "wb");
    if (!f) {
        cli_errorf("cannot write '%s': %s", path, error_strerror(errno));
        return LIBRA_EXIT_IO;
    }
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    ok = (to_stdout ? fflush(f) : fclose(f)) == 0 && ok;
    if (!ok) {
        cli_errorf("cannot write '%s': %s", to_stdout ? "<stdout>" : path, error_strerror(errno));
        return LIBRA_EXIT_IO;
    }
    return 0;
}

int cli_write_output_whole(const char *path, const char *text)
{
    if (!path || strcmp(path, "-") == 0)
        return cli_write_output(path, text);
    size_t n = strlen(path) + sizeof ".tmp";
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    size_t len = strlen(text);
    bool ok = f && fwrite(text, 1, len, f) == len;
    ok = f && fclose(f) == 0 && ok;
    ok = ok && rename(tmp, path) == 0;
    if (!ok) {
        cli_errorf("cannot write '%s': %s", path, error_strerror(errno));
        if (f)
            remove(tmp);
    }
    free(tmp);
    return ok ? 0 : LIBRA_EXIT_IO;
}

static void print_help(FILE *out)
{
    fprintf(out, "usage: libra <command> [input] [flags]\n"
                 "       libra --version | --help\n\n"
                 "libra plans, routes and simulates agentic RL post-training on GPU clusters.\n\n"
                 "commands:\n");
    for (const struct cli_command *c = cli_commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fprintf(out, "\n'libra <command> --help' describes a command; docs/cli.md lists exit codes.\n");
}

static void print_version(void)
{
    printf("libra %s\n", libra_version_string);
    printf("git: %s\nbuild: %s\ncompiler: %s\n", libra_git_describe, libra_build_type,
           libra_compiler);
    printf("jansson: %s\nlibevent: %s\n", jansson_version_str(), event_get_version());
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_help(stderr);
        return LIBRA_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        print_help(stdout);
        return LIBRA_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        print_version();
        return LIBRA_EXIT_OK;
    }
    const struct cli_command *cmd = cli_find(name);
    if (!cmd) {
        cli_errorf("unknown command '%s'", name);
        fprintf(stderr, "usage: libra <command> [input] [flags] (see libra --help)\n");
        return LIBRA_EXIT_USAGE;
    }
    return cmd->run(argc - 1, argv + 1);
}
