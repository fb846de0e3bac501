/* The golden catalogue (golden/catalogue.json): designed cases, each turned
 * into a refenc_case with deterministic, exactly representable inputs. */
#ifndef REFENC_GOLDEN_CATALOGUE_H
#define REFENC_GOLDEN_CATALOGUE_H

#include <jansson.h>

#include "../core/case.h"
#include "../io/case_file.h"
#include "../tool/run_case.h"
#include "../core/status.h"

/* A case of the catalogue, as read. */
typedef struct {
    const json_t *entry;      /* borrowed from the catalogue document        */
    const char *name, *description;
    refenc_component component;
    unsigned long seed;
    int input_bits;           /* significant bits of inputs and parameters    */
    int grad;                 /* "grad": true: the case holds gradients        */
    int final_only;           /* "outputs": "final": the required outputs only */
} catalogue_case;

/* Reads a catalogue such as golden/catalogue.json (checked: a "cases" array of objects, each with a
 * "case" name; unknown keys are errors). */
json_t *catalogue_load(const char *path, refenc_error *err);

/* The name of the catalogue's i-th case (in its order), or NULL past the last. */
const char *catalogue_case_name(const json_t *catalogue, size_t i);

/* The entry for name.  Errors: REFENC_EINVAL (absent or malformed). */
int catalogue_find(catalogue_case *cc, const json_t *catalogue, const char *name, refenc_error *err);

/* Builds the case: config, shape, parameters and inputs from the seed,
 * rounded to cc->input_bits significant bits within float16's normal range
 * (or zero) when input_bits <= 8, so float16 and bfloat16 hold them exactly.
 * On failure c holds nothing: no allocation is left to free. */
int catalogue_build(refenc_case *c, const catalogue_case *cc, refenc_error *err);

/* x rounded to `bits` significant bits, to nearest (ties to even); with
 * bits <= 8, magnitudes below 2^-14 (float16's smallest normal) become 0 and
 * magnitudes are capped at 65504 (float16's largest). */
double catalogue_round(double x, int bits);

#endif
