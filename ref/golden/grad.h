/* A gradient case's backward tensors (docs/golden-format.md, "Gradients"):
 * the upstream gradient in.grad.dY (seeded, or the user's) and the oracle's
 * correctly rounded gradients grad.* of the encoder case, in backward order,
 * to be written with the case (golden_file.extra, .extra_meta). */
#ifndef REFENC_GOLDEN_GRAD_H
#define REFENC_GOLDEN_GRAD_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../core/case.h"
#include "../core/status.h"
#include "../io/golden_names.h"
#include "../io/safetensors.h"

/* The format version of a case that holds gradients (a forward-only case
 * stays at REFENC_GOLDEN_FORMAT_VERSION). */
#define GOLDEN_GRAD_FORMAT_VERSION "2"

typedef struct {
    size_t n;                        /* entries: in.grad.dY, then grad.* in backward order */
    refenc_st_entry *e;
    char (*names)[REFENC_NAME_MAX];
    double **data;                   /* (n) owned */
    json_t *meta;                    /* format_version, grad_outputs, grad_dY, grad_seed, grad_oracle */
} golden_grad;

/* The seeded upstream gradient (B, L, D): N(0, 1) by GSL's Ziggurat from
 * MT19937 seeded with seed, each value rounded to 8 significant bits
 * (exact in float16 and bfloat16), 0 at padded positions (key padding mask
 * 1), as a training loss that masks them.  0 when its generator cannot be
 * allocated (dY untouched), else 1. */
int golden_grad_seeded_dy(double *dY, const refenc_case *c, uint64_t seed);

/* The upstream gradient from the user's inputs file: its tensor in.grad.dY,
 * floating, of shape (B, L, D), every value finite.  *dY (malloc'ed) stays
 * NULL when the file has no in.grad.dY.  Errors (REFENC_EINVAL, naming the
 * file, the tensor, and the element or the shape): a wrong dtype or shape,
 * a NaN or an infinity; those of reading the file. */
int golden_grad_read_dy(double **dY, const refenc_case *c, const char *path, refenc_error *err);

/* The oracle's backward of the encoder case c at dY (seeded from seed when
 * dY is NULL), every gradient certified, starting at prec bits.  Configs
 * the oracle's backward does not compute (RMSNorm, the gated FFN, bias-free
 * blocks, RoPE scaling) are refused with REFENC_EINVAL naming the key.
 * The oracle's backward on threads threads (>= 1; the same file for any).
 * Progress on stderr unless quiet.  Errors: REFENC_EINVAL, REFENC_ENOMEM,
 * REFENC_ELIMIT. */
int golden_grad_make(golden_grad *g, const refenc_case *c, const double *dY, uint64_t seed, long prec,
                     int threads, int quiet, refenc_error *err);
void golden_grad_free(golden_grad *g);

/* The named backward bugs' gradients (tool/backward_bugs.h), each computed
 * by the double reference's backward with the bug's kernels at g's dY:
 * every backward variant that applies to c and moves some gradient by at
 * least 100 F64 gradient bounds (certify.h: REFENC_GRAD_RTOL, _ATOL) is
 * stored as alt.<variant>.grad.<name>, the gradients it moves by more than
 * one bound, appended to g's entries, and recorded in variants (the case's
 * "variants" metadata array: name, outputs, first_divergence, effect_f64).
 * The reference's own error on g's gradients, in those bounds, goes into
 * g->meta (grad_variant_engine "reference", grad_variant_reference_error_f64),
 * with a warning on stderr (even when quiet) above 0.1.  Says on stderr,
 * unless quiet, which variants are not stored.  The reference's runs go
 * threads at a time (>= 1; the same results and messages for any).
 * Errors: those of the reference's backward, REFENC_ENOMEM. */
int golden_grad_variants(golden_grad *g, const refenc_case *c, json_t *variants, int threads, int quiet,
                         refenc_error *err);

#endif
