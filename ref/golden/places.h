/* Where a run of refenc golden writes, decided and checked before any work
 * (docs/cli.md, "Files"): the case file (--out-file FILE), or
 * DIR/cases/NAME.safetensors and DIR/manifest.json (--out DIR), or a part
 * DIR/parts/NAME.part-K-of-N.safetensors (--shard K/N --out DIR).  None of
 * them may be one of the run's inputs (its config, catalogue, weights,
 * inputs, or the parts a merge joins), compared as io/same_file.h does. */
#ifndef REFENC_GOLDEN_PLACES_H
#define REFENC_GOLDEN_PLACES_H

#include <stddef.h>

#include "../core/status.h"

/* The outputs of one run. */
typedef struct {
    const char *out_dir, *out_file; /* one of them */
    const char *name;               /* the case's name (a file name: manifest.h) */
    size_t shard_k, shard_n;        /* 0/0: a whole case */
} golden_places;

/* A part's file DIR/parts/NAME.part-K-of-N.safetensors into path (cap
 * bytes), without making anything.  Errors: REFENC_ELIMIT. */
int golden_part_file(char *path, size_t cap, const golden_places *p, refenc_error *err);

/* A part's file under DIR/parts/ (created, never a symbolic link) into path
 * (cap bytes).  Errors: REFENC_EIO (the directories), REFENC_ELIMIT (the
 * path does not fit). */
int golden_part_path(char *path, size_t cap, const golden_places *p, refenc_error *err);

/* REFENC_EINVAL when a file the run writes is one of the n inputs
 * (inputs[i], a `what[i]` in the message; NULL entries are skipped).
 * Errors: also REFENC_ELIMIT (a path over PATH_MAX). */
int golden_refuse_inputs(const golden_places *p, const char *const *inputs, const char *const *what, size_t n,
                         refenc_error *err);

#endif
