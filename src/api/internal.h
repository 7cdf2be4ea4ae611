/*
 * What the files of the public API (include/libra/libra.h) share.
 */
#ifndef API_INTERNAL_H
#define API_INTERNAL_H

#include "libra/libra.h"

/* The error a public function fills: err, or scratch when the caller passed NULL; cleared. */
struct libra_error *api_error_init(struct libra_error *err, struct libra_error *scratch);

#endif
