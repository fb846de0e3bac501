/* The number formats an emulated implementation computes in (emulate.h), and
 * the settings of one emulation.
 *
 * One code path, parameterised by two number formats:
 *   value  the inputs, the parameters and the output of every op are rounded
 *          to it (round to nearest even, with subnormals and overflow to
 *          infinity as IEEE does);
 *   acc    accumulations (dot products, sums), the LayerNorm statistics, the
 *          softmax denominators and the PE and RoPE angles are kept in it:
 *          float32 for the tensor-core and fused-CPU model, the value format
 *          itself for the "pure" model.
 * With value = acc = F64 every rounding is the identity.
 *
 * Three knobs model other correct implementations (they leave the formulas
 * unchanged, not the roundings):
 *   reverse_sums     every accumulation runs in the reverse order;
 *   fused            the steps inside one kernel (LayerNorm's normalisation,
 *                    GELU's chain, the attention scores and softmax) stay in
 *                    the acc format and only the kernel's output is rounded;
 *   float_functions  exp, erfc, sin, cos, pow and sqrt are libm's float
 *                    versions (expf, ...) instead of double ones. */
#ifndef REFENC_PRECISION_H
#define REFENC_PRECISION_H

typedef enum {
    REFENC_FMT_F64 = 0, /* binary64: rounding is the identity */
    REFENC_FMT_F32,     /* binary32: 24-bit significand, exponent -126..127 */
    REFENC_FMT_F16,     /* binary16: 11 bits, -14..15                        */
    REFENC_FMT_BF16,    /* bfloat16: 8 bits, -126..127                       */
    REFENC_FMT_COUNT
} refenc_format;

/* "F64", "F32", "F16", "BF16" (the safetensors dtype names). */
const char *refenc_format_name(refenc_format f);

/* x rounded to the nearest value of format f, ties to even; overflow gives
 * an infinity, NaN stays NaN.  Exact: no double rounding. */
double refenc_round(refenc_format f, double x);

typedef struct {
    refenc_format value, acc;
    int reverse_sums, fused, float_functions;
} refenc_emulation;

/* The baseline of a result in format f: values in f, accumulation in float32
 * (or in f when it is wider, i.e. float64). */
refenc_emulation refenc_emulation_baseline(refenc_format f);

/* The pure model: values and accumulation both in f. */
refenc_emulation refenc_emulation_pure(refenc_format f);

#endif
