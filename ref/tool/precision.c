/* The number formats and the emulation's settings (precision.h). */
#include "precision.h"

#include "../io/half.h"

const char *refenc_format_name(refenc_format f)
{
    static const char *const names[REFENC_FMT_COUNT] = {"F64", "F32", "F16", "BF16"};
    return (unsigned)f < REFENC_FMT_COUNT ? names[f] : "?";
}

double refenc_round(refenc_format f, double x)
{
    switch (f) {
    case REFENC_FMT_F32: return (double)(float)x; /* C's conversion: round to nearest even */
    case REFENC_FMT_F16: return refenc_f16_to_double(refenc_double_to_f16(x));
    case REFENC_FMT_BF16: return refenc_bf16_to_double(refenc_double_to_bf16(x));
    default: return x;
    }
}

refenc_emulation refenc_emulation_baseline(refenc_format f)
{
    return (refenc_emulation){.value = f, .acc = f == REFENC_FMT_F64 ? REFENC_FMT_F64 : REFENC_FMT_F32};
}

refenc_emulation refenc_emulation_pure(refenc_format f)
{
    return (refenc_emulation){.value = f, .acc = f};
}
