/*
 * libra — public API.
 *
 * libra is a resource manager for agentic RL post-training of LLMs: a planner that shapes the
 * cluster, a scheduler that routes every turn of a trajectory, and an elastic pool between
 * training and rollout. This header is the only installed interface; it stays small and
 * JSON-in/JSON-out so that it is easy to call from ctypes. Module headers under src/ are
 * internal and may change between versions.
 */
#ifndef LIBRA_LIBRA_H
#define LIBRA_LIBRA_H

#ifdef __cplusplus
extern "C" {
#endif

#define LIBRA_API __attribute__((visibility("default")))

/* Error codes: functions return 0 or one of these (negative). */
enum {
    LIBRA_OK = 0,
    LIBRA_EINVAL = -1,   /* bad input: malformed, out of range, unknown key */
    LIBRA_ENOENT = -2,   /* a named thing (preset, file, key) does not exist */
    LIBRA_EIO = -3,      /* reading or writing failed */
    LIBRA_ENOMEM = -4,   /* a configured cap was reached (allocation itself aborts) */
    LIBRA_EINFEAS = -5,  /* a well-formed problem has no feasible answer */
    LIBRA_EINTERNAL = -6 /* a bug: an invariant did not hold */
};

/* Process exit codes of the `libra` tool (docs/cli.md). */
enum {
    LIBRA_EXIT_OK = 0,
    LIBRA_EXIT_NEGATIVE = 1, /* no feasible plan; validate/check found the input invalid */
    LIBRA_EXIT_USAGE = 2,    /* usage error or bad input */
    LIBRA_EXIT_IO = 3,
    LIBRA_EXIT_INTERNAL = 4,
    LIBRA_EXIT_INTERRUPTED = 130
};

/*
 * Where and why parsing failed. line and col are 1-based; 0 when unknown (for instance a
 * semantic error reported by field name only). msg is lower case, without a full stop.
 */
struct libra_error {
    char file[256];
    int line;
    int col;
    char msg[512];
};

/* The library version, e.g. "0.1.0". Static storage. */
LIBRA_API const char *libra_version(void);

#ifdef __cplusplus
}
#endif
#endif
