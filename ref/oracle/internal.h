/* Helpers shared by the oracle's files; not part of the public API. */
#ifndef REFENC_ORACLE_INTERNAL_H
#define REFENC_ORACLE_INTERNAL_H

#include "oracle.h"

/* A double input converted exactly to MPFR at precision prec (>= 53): NULL
 * on allocation failure or if a conversion was inexact (it cannot be). */
mpfr_ptr refenc_mp_from_d(const double *x, size_t n, mpfr_prec_t prec);

/* Where a twin wants a certified step: the step named name is copied, as
 * doubles, into dst (NULL: not wanted). */
typedef struct {
    const char *name;
    double *dst;
} refenc_mp_output;

/* refenc_mp_certify(eval, ctx, prec, ...) with the steps copied into outs. */
int refenc_mp_run_twin(refenc_mp_eval_fn eval, void *ctx, mpfr_prec_t prec,
                       refenc_mp_report *rep, const refenc_mp_output *outs, size_t n_outs);

/* Ziv's test for one value (ziv.c): is the rounding to nearest double of b,
 * computed at p_hi bits, certified by a, computed at the lower precision?
 * exact: b is known to be exact.  t, u: scratch values of 64 bits. */
int refenc_mp_certified(mpfr_srcptr a, mpfr_srcptr b, mpfr_prec_t p_hi, int exact, mpfr_ptr t,
                        mpfr_ptr u);

/* on != 0: the fixed-point row sums take the portable C code even where
 * x86-64's ADX code would run (dot.c), so that the tests check both on one
 * machine; the sums are the same. */
void refenc_mp_dot_portable(int on);

/* An error for a failed allocation at precision prec. */
int refenc_mp_enomem(refenc_error *err, const char *what, mpfr_prec_t prec);

/* mpfr_mul_ui with an int64 factor in [0, 2^53) (a position or a distance);
 * returns the ternary value. */
int refenc_mp_mul_pos(mpfr_ptr y, mpfr_srcptr x, int64_t pos);

/* refenc_attn_options (doubles) converted exactly; *handle owns the values
 * (free it with refenc_mp_attn_options_free, also after a failure).
 * Returns 1, or 0 on allocation failure. */
int refenc_mp_attn_options_from_d(void **handle, const refenc_mp_attn_options **opt,
                                  const refenc_attn_options *o, size_t H, size_t L);
void refenc_mp_attn_options_free(void *handle);

/* n MPFR numbers at prec, +0, as refenc_mp_alloc makes them but with their
 * limbs in the same block as the structs (ziv.c): a third less memory at
 * 96 to 192 bits.  Such values must never reach mpfr_clear or
 * mpfr_set_prec; mpfr_swap within and between such arrays of one precision
 * is allowed, and then the arrays swapped together are freed together
 * (the engine's lanes and workers: a head's context is swapped into ctx).
 * NULL if n == 0 or on allocation failure. */
mpfr_ptr refenc_mp_block_alloc(size_t n, mpfr_prec_t prec);
void refenc_mp_block_free(mpfr_ptr a);

/* Owns up to 40 MPFR arrays allocated for one evaluation. */
typedef struct {
    struct {
        mpfr_ptr p;
        size_t n;
    } a[40];
    size_t n;
    int failed;
} refenc_mp_arena;

/* n values at prec (n == 0: NULL, not a failure); NULL and failed set on failure. */
mpfr_ptr refenc_mp_arena_alloc(refenc_mp_arena *ar, size_t n, mpfr_prec_t prec);
/* The doubles x converted exactly, at prec. */
mpfr_ptr refenc_mp_arena_from_d(refenc_mp_arena *ar, const double *x, size_t n, mpfr_prec_t prec);
void refenc_mp_arena_free(refenc_mp_arena *ar);

/* An engine run (refenc_mp_encoder_run, whose emit this sets) with its
 * steps gathered into whole tensors (B, ...) (collect.c): each goes to trace
 * in forward order, and into outs[k].dst for the step named outs[k].name.
 * Errors: those of the run, REFENC_ENOMEM. */
int refenc_mp_run_collect(const refenc_mp_run *run, const refenc_trace *trace, refenc_mp_report *rep,
                          const refenc_mp_output *outs, size_t n_outs);

/* A twin's run of one block (mha.c, ffn.c): the steps of outs (those with
 * a dst) certified, starting at prec, copied into outs. */
int refenc_mp_run_block(const refenc_config *cfg, const refenc_params *p, const refenc_input *in,
                        refenc_mp_block block, const double *alibi_slopes, mpfr_prec_t prec,
                        refenc_mp_report *rep, const refenc_mp_output *outs, size_t n_outs);

#endif
