/* The reference evaluated in emulated low precision: what a straightforward
 * float32, float16 or bfloat16 implementation of the same formulas computes.
 * `refenc certify` measures this baseline's error against the golden to set
 * the budget of a low-precision result (certify.h, docs/verdict.md).
 *
 * Everything is computed in double and rounded explicitly after each
 * operation, in the order the reference kernels compute it (ref/<kernel>.c),
 * in the formats and with the knobs of a refenc_emulation (precision.h): with
 * value = acc = F64 the outputs are the reference's, bit for bit.
 *
 * The layers of the emulation, each using only the ones below it:
 *   emulate.h          a case run (this file; emulate.c)
 *   emulate_kernels.h  the reference's kernels with their roundings
 *   precision.h        the number formats, refenc_round, the settings */
#ifndef REFENC_EMULATE_H
#define REFENC_EMULATE_H

#include "../core/case.h"
#include "../encoder.h"
#include "../core/status.h"
#include "../core/trace.h"
#include "precision.h"
#include "variants.h"

/* Rounds the case's inputs (x, attn_mask) and parameters to f, in place:
 * what an implementation computing in f reads. */
void refenc_emulation_round_case(refenc_case *c, refenc_format f);

/* Runs the case (as refenc_case_run_reference, tool/run_case.h) with the
 * roundings of e, reporting each output through trace under the same names.
 * hooks: NULL, or a bug variant's (variants.h).  The inputs are used as they
 * are: round them first with refenc_emulation_round_case.
 * Errors: REFENC_EINVAL (the case's inputs do not validate), REFENC_ENOMEM. */
int refenc_emulation_run_case(const refenc_case *c, const refenc_emulation *e,
                              const refenc_variant_hooks *hooks, const refenc_trace *trace,
                              refenc_error *err);

/* What the emulated backward recomputes (emulate_backward.h), with the
 * forward's roundings and without a trace: the embedding path's sum before
 * its norm into h (B, L, D); layer i of the case's stack on x into y, leaving
 * its stored activations in w as refenc_layer_forward does. */
void refenc_emulation_embed_sum(const refenc_emulation *e, double *h, refenc_workspace *ws, const refenc_case *c);
void refenc_emulation_layer_forward(const refenc_emulation *e, double *y, refenc_layer_work *w, const double *x,
                                    const refenc_case *c, const refenc_attn_options *opt,
                                    const refenc_rope_options *rope, size_t i);

#endif
