/* Where a model's parameters and inputs come from, for `refenc run
 * --config` and `refenc golden`: the user's own files (--weights,
 * --inputs; io/model_file.h), checked against the config. */
#ifndef REFENC_IO_MODEL_SOURCES_H
#define REFENC_IO_MODEL_SOURCES_H

#include "../core/case.h"
#include "../core/status.h"
#include "run_config.h"

/* Allocates an encoder case for cfg from the inputs file at path.  The
 * config file's "input" object (spec, from config_path), when it is given,
 * must agree with the file on batch and seq_len and give no padding (the
 * file's key padding mask says which positions are padding).  *report as in
 * io/model_file.h.  On any error *c is left empty (all zero: refenc_case_free
 * may be called on it).  Errors: those of refenc_case_from_inputs_file,
 * REFENC_EIO, REFENC_EINVAL (a disagreement). */
int model_case_from_inputs(refenc_case *c, const refenc_config *cfg, const run_input *spec,
                         const char *config_path, const char *path, char **report,
                         refenc_error *err);

/* The same, the file's tensor named skip (not NULL) left out: read by its
 * own reader (refenc golden --grad reads in.grad.dY, golden/grad.h). */
int model_case_from_inputs_skip(refenc_case *c, const refenc_config *cfg, const run_input *spec,
                                const char *config_path, const char *path, const char *skip,
                                char **report, refenc_error *err);

/* Fills p (allocated for its config) from the weights file at path.
 * Errors: those of refenc_params_from_file, REFENC_EIO. */
int model_params_from_weights(refenc_params *p, const char *path, char **report, refenc_error *err);

/* The parameters from a checkpoint: for the vaswani family under refenc's
 * names (model_params_from_weights), for any other family as its Hugging Face
 * checkpoint holds them (run_weights.h, docs/families.md); summary (cap
 * bytes) then says what was read.  Errors: as those two. */
int model_params_from_checkpoint(refenc_params *p, const refenc_config *cfg, const char *path, char *summary,
                               size_t cap, char **report, refenc_error *err);

#endif
