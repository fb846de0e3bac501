/* Golden cases computed in parts (refenc golden --per-layer, --shard K/N)
 * and joined (refenc golden merge).
 *
 * An encoder case is cut into units: its batch items, or with --per-layer
 * the (layer, item) pairs, unit l B + b (oracle.h).  Shard K of N computes
 * the units [(K-1) U / N, K U / N) and writes a part file; merging the N
 * parts gives, byte for byte, the file the run without --shard gives. */
#ifndef REFENC_CLI_GOLDEN_PARTS_H
#define REFENC_CLI_GOLDEN_PARTS_H

#include <stddef.h>

#include "../core/case.h"
#include "../core/status.h"
#include "engine.h"
#include "file.h"

/* Parses "K/N" (1 <= K <= N); returns 0 if it is not one. */
int golden_parse_shard(const char *s, size_t *k, size_t *n);

/* The units [*begin, *end) of shard k of n over `units`. */
void golden_shard_units(size_t k, size_t n, size_t units, size_t *begin, size_t *end);

/* The layer inputs of a case made per layer: layer i's input is the double
 * reference's value of the stack before layer i (the embedding for i = 0),
 * for the layers [first, last] and the batch items [item_lo, item_hi); the
 * other layers are NULL, the other items of a layer zero.  The reference
 * runs on those items only and stops after layer `last` (its values of an
 * item do not depend on the other items), so a shard pays for its own
 * layers, not the whole stack's.  (N) pointers, each (B, L, D), freed with
 * golden_layer_inputs_free.  Errors: those of refenc_encoder_forward. */
int golden_layer_inputs(double ***inputs, const refenc_case *c, size_t first, size_t last,
                        size_t item_lo, size_t item_hi, refenc_error *err);
void golden_layer_inputs_free(double **inputs, size_t n_layers);

/* The slices a part holds: where each item of each output and layer input
 * of its units goes in the part file (file.h, golden_part_writer). */
typedef struct {
    size_t n, cap;
    golden_slice *slice;
    golden_part_writer *file;  /* where emit and the layer inputs go */
} golden_part_set;

/* The slices of the steps in `steps` and, per layer, of the layer inputs,
 * for the units [begin, end).  Errors: REFENC_ENOMEM. */
int golden_part_set_init(golden_part_set *ps, const refenc_case *c, golden_steps *steps, int per_layer,
                         size_t begin, size_t end, refenc_error *err);
void golden_part_set_free(golden_part_set *ps);
/* Puts the layer inputs' slices (per layer: layer_inputs[l], (B, L, D)) into ps->file. */
void golden_part_set_put_inputs(golden_part_set *ps, const refenc_case *c, const double *const *layer_inputs);
/* The emit of refenc_mp_run (ctx: golden_part_set): each item's values
 * straight into ps->file, kept nowhere. */
void golden_part_set_emit(void *ctx, const char *step, size_t item, const double *data, size_t ndim,
                          const size_t *shape);

/* Whether the file at path is shard k of the plan whose canonical text is
 * plan_text (golden_plan_text), whole and unchanged: it reads as a part of
 * format version 2, its fingerprint and tensors_sha256 are its own (merge's
 * checks of one part), its plan is plan_text's and its shard is k, holding
 * shard k's units.  A rerun skips the work of such a part (docs/cli.md,
 * "Reruns").  REFENC_OK when it is; else why not: REFENC_EFORMAT naming
 * path and the first thing wrong, the reader's error (a truncated or
 * missing file), REFENC_ENOMEM. */
int golden_part_verify(const char *path, const char *plan_text, size_t k, refenc_error *err);

/* Joins part files into the case file (out_file) or into the golden
 * directory out_dir (case and manifest).  Every part must belong to the
 * same case (fingerprint), the shards 1..N present once each, and every
 * value of every output given once.  Errors: REFENC_EFORMAT (what is
 * wrong, naming the files), those of reading and writing. */
int golden_merge(const char *const *parts, size_t n_parts, const char *out_dir, const char *out_file,
                 int quiet, refenc_error *err);

#endif
