/* Build identity, generated at build time by cmake/version.cmake (`libra --version`). */
#ifndef UTIL_VERSION_H
#define UTIL_VERSION_H

extern const char libra_version_string[]; /* project version, e.g. "0.1.0" */
extern const char libra_git_describe[];   /* `git describe --always --dirty`, or "unknown" */
extern const char libra_build_type[];     /* CMAKE_BUILD_TYPE */
extern const char libra_compiler[];       /* compiler id and version */

#endif
