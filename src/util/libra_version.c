/* The public version entry point (include/libra/libra.h). */
#include "libra/libra.h"
#include "util/version.h"

const char *libra_version(void)
{
    return libra_version_string;
}
