/* Error budgets of low-precision results (docs/verdict.md derives every
 * constant below).
 *
 * F16 and BF16 results: an output passes when
 *     max |got - want|  <= BUDGET_C      * max |base - want|  + BUDGET_FLOOR_ULPS ulp(max |want|)
 *     nmse(got)         <= BUDGET_C^2    * nmse(base)         + (BUDGET_FLOOR_ULPS u)^2
 * where base is the emulated baseline of the result's dtype (emulate.h:
 * values in the dtype, accumulation in float32), ulp and u = 2^-p those of
 * the dtype, and nmse(x) = sum (x - want)^2 / sum want^2 over the elements
 * that are not don't-care.
 *
 * F32 results keep the float32 policy (certify.h) as their floor and add
 * BUDGET_C times the emulated float32 baseline's largest error, which grows
 * with the model's depth where the policy does not (refenc_budget_f32), and,
 * for the outputs that hold a sinusoidal PE or a RoPE rotation, what forming
 * the angle pos * omega in float32 may cost (refenc_angle_allowance). */
#ifndef REFENC_BUDGET_H
#define REFENC_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "../io/golden_names.h"
#include "../io/safetensors.h"
#include "../core/rope_scaling.h"
#include "../core/status.h"
#include "emulate.h"

/* The factor on the baseline's error: an implementation may place its
 * roundings differently (at most twice the squared error, a factor sqrt 2)
 * and its realisation of them may land higher than the baseline's (another
 * sqrt 2 for the maximum of an output's errors). */
#define REFENC_BUDGET_C 2.0
/* The floor, in ulps of the dtype at the output's largest |want|: the last
 * two roundings before an output (its own and the op that feeds it, half an
 * ulp each at the output's scale, twice for the realisation), which no
 * baseline predicts; it also keeps the budget above 0 where the baseline
 * happens to be exact. */
#define REFENC_BUDGET_FLOOR_ULPS 2.0

/* The emulated baseline's error on one output of a case. */
typedef struct {
    char name[REFENC_NAME_MAX];
    double max_abs;   /* max |base - want| over the compared elements           */
    double nmse;      /* sum (base - want)^2 / sum want^2 (sum want^2 = 0: the sum) */
    int finite;       /* 0: the baseline overflowed (inf or NaN) somewhere        */
    double growth;    /* a parameter gradient's: max over its elements of the sum   *
                       * over the B L tokens of k |t_n| (emulate_backward.h); else 0 */
} refenc_baseline_error;

typedef struct {
    refenc_format format;
    size_t n;
    refenc_baseline_error *outputs; /* in the order the emulation reports them */
    const char *unsupported;        /* a gradient baseline: the config key the emulated backward
                                     * does not model (no outputs then), else NULL */
} refenc_baseline;

/* Runs the golden case (its inputs and parameters rounded to f, or to F32
 * when the case says its inputs need float32) in the emulation
 * refenc_emulation_baseline(f) and measures every output against the
 * golden's out.* tensors, skipping don't-care elements.
 * Errors: those of reading the case from the golden (REFENC_EFORMAT, ...),
 * REFENC_ENOMEM.  On error *b is empty (safe to free). */
int refenc_baseline_measure(refenc_baseline *b, const refenc_st_file *golden, refenc_format f,
                            refenc_error *err);

/* The same with the inputs and parameters rounded to `inputs` whatever the
 * case's input_dtype says: with inputs = f, what an implementation in f
 * computes from inputs f cannot hold (the baseline of the input hazard,
 * certify.h). */
int refenc_baseline_measure_inputs(refenc_baseline *b, const refenc_st_file *golden, refenc_format f,
                                   refenc_format inputs, refenc_error *err);
void refenc_baseline_free(refenc_baseline *b);

/* The output's baseline error, or NULL if the emulation has no such output. */
const refenc_baseline_error *refenc_baseline_find(const refenc_baseline *b, const char *name);

/* The budget of an output in format f whose largest |want| is max_want:
 * the bounds on max |got - want| and on the nmse (formulas above). */
void refenc_budget(double *max_abs, double *nmse, const refenc_baseline_error *base, refenc_format f,
                   double max_want);

/* The F32 result's allowance for the roundings of the layers before an
 * output: BUDGET_C * max |base - want| of the float32 baseline (0 where it
 * overflows or is absent), added to every element's policy bound. */
double refenc_budget_f32(const refenc_baseline_error *base);

/* ---- gradients (docs/gradients.md, "Budgets of F32, F16 and BF16 gradients") ----
 *
 * The baseline of a gradient golden's grad.* tensors: the emulated backward
 * (emulate_backward.h) of the case in format f at its in.grad.dY, measured
 * as refenc_baseline_measure measures the forward's outputs (names
 * "grad.<name>"), each parameter gradient with its growth term.
 * Errors: as refenc_baseline_measure, and those of reading in.grad.dY
 * (REFENC_EINVAL, REFENC_EFORMAT). */
int refenc_grad_baseline_measure(refenc_baseline *b, const refenc_st_file *golden, refenc_format f,
                                 refenc_error *err);

/* A parameter gradient P = sum_n t_n over the N = B L tokens: the roundings
 * no baseline predicts are the last ones before the sum, those of the k
 * stored tensors each term is formed from (dy_n and the layer's input, for a
 * weight), half an ulp each, u |.| relative, twice for the realisation (the
 * floor's argument, budget.h).  They are not at the scale of |P| but of the
 * terms, which cancel in the sum:
 *     G = REFENC_BUDGET_FLOOR_ULPS u max_e sum_n k |t_n,e|,   u = 2^-p,
 * which grows linearly with N (for terms of one size, N times one term's).
 * 0 for a gradient that is not a parameter's (its floor is the forward's). */
double refenc_grad_growth(const refenc_baseline_error *base, refenc_format f);

/* The budget of a gradient in format f (F16, BF16): refenc_budget's, plus G
 * on the largest error and, on the NMSE, the NMSE of an error of G at every
 * element, G^2 / mean(want^2) (mean_sq_want = 0: G^2). */
void refenc_grad_budget(double *max_abs, double *nmse, const refenc_baseline_error *base, refenc_format f,
                        double max_want, double mean_sq_want);

/* The precision p (bits of significand) of a format, and ulp_f(x): the
 * spacing of f's values in x's binade (subnormal binades included). */
int refenc_format_precision(refenc_format f);
double refenc_format_ulp(refenc_format f, double x);

/* ---- float32 angles ----------------------------------------------------------------
 * The relative error, in units u32 = 2^-24, that a float32 implementation
 * may make in the angle pos * omega_i of the frequency omega_i =
 * base^(-2i/D) = exp(-(2i/D) ln base):  2 (2i/D) ln(base) + 4
 * (docs/certify.md). */
double refenc_angle_error_units(size_t two_i, size_t width, double base);

/* The same for pair j < R/2 of a RoPE of rotary dim R with the scaling s
 * (NULL: none) at sequence length S, whose frequency is
 * refenc_rope_scaled_frequency's: the unscaled bound at the base the
 * frequency is a power of, plus what the scaling's own float32 operations
 * add (linear, longrope: one division; dynamic: the new base's error times
 * 2j/R; yarn: 7 + 2 factor; llama3 between its bands: 5 + (factor - 1) dm,
 * dm the band position's error; ntk: at the base s, plus 2j/R + 1, or with
 * mixed_b (6 + 1/ln s) x + 3, x = ln s ((j + 1)/(R/2))^b; docs/certify.md,
 * "Float32 angles"). */
double refenc_angle_scaled_units(size_t j, size_t R, double base, const refenc_rope_scaling *s, int64_t S);

/* Per element of an output of a golden case, the extra absolute error a
 * float32 implementation may make through its PE or RoPE angles, written to
 * allow[0..numel): sinusoidal_pe's out.output and an encoder's out.embed with
 * the sinusoidal PE (|delta sin| <= |delta angle|), rope's out.output (the
 * rotated pair (a', b') moves by |b'| and |a'| times the angle's error).
 * *applies = 0, and allow untouched, for any other output.
 * want: the golden values of the output; shape as in the golden.
 * Errors: those of reading the case (refenc_case_from_file), REFENC_ENOMEM. */
int refenc_angle_allowance(int *applies, double *allow, const refenc_st_file *golden, const char *output,
                           const double *want, size_t numel, refenc_error *err);

#endif
