/* refenc run --config C --weights FILE: the parameters from a checkpoint of
 * the config's family instead of the seeded random ones (docs/families.md). */
#ifndef REFENC_CLI_RUN_WEIGHTS_H
#define REFENC_CLI_RUN_WEIGHTS_H

#include <stddef.h>

#include "../core/config.h"
#include "../core/params.h"
#include "../core/status.h"

/* Reads the safetensors file at path into p (allocated for cfg), through the
 * family's checkpoint names (io/checkpoint_names.h); summary (cap bytes)
 * receives one line saying what was read and what ignored.  Messages start
 * with the path.
 * Errors: REFENC_EIO, REFENC_EFORMAT (a tensor that does not fit, named
 * with its shape and the expected one), REFENC_ENOMEM. */
int run_load_weights(refenc_params *p, const refenc_config *cfg, const char *path,
                     char *summary, size_t cap, refenc_error *err);

#endif
