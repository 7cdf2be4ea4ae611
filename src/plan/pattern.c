/* The plan.tp_pattern parser (see pattern.h). */
#include "plan/pattern.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "util/error.h"

static const char *skip_spaces(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

static int fail(const char *text, const char *at, const char *name, struct libra_error *err,
                const char *msg)
{
    return error_set(err, name, 1, (int)(at - text) + 1, "plan.tp_pattern: %s", msg);
}

int plan_pattern_parse(const char *text, const char *name, int counts[PLAN_NTP], int *gpus,
                       struct libra_error *err)
{
    memset(counts, 0, PLAN_NTP * sizeof *counts);
    *gpus = 0;
    const char *s = skip_spaces(text);
    if (!*s)
        return 0;
    for (int n = 0;; n++) {
        if (n == PLAN_PATTERN_MAX)
            return error_set(err, name, 1, (int)(s - text) + 1,
                             "plan.tp_pattern: more than %d instances on one node",
                             PLAN_PATTERN_MAX);
        const char *tok = s;
        if (strncasecmp(s, "tp", 2) == 0)
            s += 2;
        int t = -1;
        if (*s >= '1' && *s <= '8' && !isdigit((unsigned char)s[1]))
            for (int k = 0; k < PLAN_NTP; k++)
                if (*s - '0' == 1 << k)
                    t = k;
        if (t < 0)
            return fail(text, tok, name, err, "expected a TP size: 1, 2, 4 or 8");
        counts[t]++;
        *gpus += 1 << t;
        s = skip_spaces(s + 1);
        if (!*s)
            return 0;
        if (*s != ',')
            return fail(text, s, name, err, "expected ',' between TP sizes");
        s = skip_spaces(s + 1);
    }
}
