/* The plan of a case made in parts (docs/golden-format.md, "Parts"), and the
 * checksums that let refenc golden merge verify each part instead of
 * trusting what it says of itself.
 *
 * The plan is what every part of one run must agree on, a JSON object
 * written as canonical text (compact, keys sorted):
 *   case, component       the case's name and component
 *   config                the model config (refenc_config_to_json)
 *   weights_sha256        of the parameter tensors as used (names, shapes,
 *                         the doubles): seeded or from a weights file alike
 *   inputs_sha256         of the input tensors as used (B, L, in.x, token
 *                         ids and types, padding mask, positions, attn mask)
 *   case_meta_sha256      of the description, bug classes, tolerance, hazard
 *   refenc_version        REFENC_VERSION of the run that made the part
 *   per_layer, outputs    --per-layer; "all" or "final"
 *   first_prec            the oracle's first working precision
 *   units, shards         the case's units and the number of shards N
 *   variants              only when merge computes the bug variants (the
 *                         double reference's, alt.h): "all" or "bug_classes"
 * The part's fingerprint is the sha256 of that text; its own shard K/N and
 * units [begin, end) are in its metadata beside it, and tensors_sha256 is
 * the sha256 of every tensor the part holds (golden_entries_sha256, digest.h).
 *
 * What this proves (docs/verdict.md, the trust model): that the parts were
 * made by one plan and not changed since, against accidents and mix-ups.  It
 * is unkeyed: whoever rewrites a part can recompute every hash. */
#ifndef REFENC_GOLDEN_PLAN_H
#define REFENC_GOLDEN_PLAN_H

#include <stddef.h>

#include <jansson.h>

#include "../core/case.h"
#include "../core/status.h"
#include "../io/safetensors.h"
#include "file.h"

/* The plan of case g made in `shards` parts of `units` units, with the bug
 * variants merge computes (NULL: none; "all", "bug_classes"); NULL when out
 * of memory. */
json_t *golden_plan_make(const golden_file *g, int per_layer, int final_only, long first_prec, size_t units,
                         size_t shards, const char *variants);

/* The plan's canonical text (free it); NULL when out of memory. */
char *golden_plan_text(const json_t *plan);

/* Checks that a plan read from the part at path has every field, of its
 * type, and a case name certify accepts.  Errors: REFENC_EFORMAT, naming
 * path and the field. */
int golden_plan_check(const json_t *plan, const char *path, refenc_error *err);

/* The first field, in the plan's order of importance (refenc_version first),
 * where plans a and b differ; NULL when they are equal. */
const char *golden_plan_differs(const json_t *a, const json_t *b);

/* Checks that the case g (read back from part 1 at path) is the one the
 * plan describes: its config, its weights, its inputs and its metadata.
 * Errors: REFENC_EFORMAT, naming path and the field, REFENC_ENOMEM. */
int golden_plan_verify_case(const json_t *plan, const golden_file *g, const char *path, refenc_error *err);

#endif
