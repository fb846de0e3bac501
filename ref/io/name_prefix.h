/* A checkpoint whose every tensor name carries a prefix the loader does not
 * know ("0.auto_model." of a sentence-transformers model, "model." or
 * "bert." of a wrapper): the prefix, found, and named as the problem.
 *
 *   common prefix  the longest prefix ending in '.' that every tensor name
 *                  of the file starts with and that is no whole name */
#ifndef REFENC_NAME_PREFIX_H
#define REFENC_NAME_PREFIX_H

#include <stddef.h>

#include "../core/status.h"
#include "safetensors.h"

/* The length of f's common prefix; 0 when there is none (or no tensor). */
size_t name_prefix_common(const refenc_st_file *f);

/* The refusal: "<path>: all N tensors start with '<prefix>', which <whose>
 * names do not (e.g. '<name>' is '<inner>' without it); strip it ...",
 * with name the first tensor that matched once stripped.  Returns
 * REFENC_EFORMAT. */
int name_prefix_refuse(const refenc_st_file *f, size_t plen, const char *whose, const char *name,
                       refenc_error *err);

#endif
