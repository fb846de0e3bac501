#ifndef REFENC_HALF_H
#define REFENC_HALF_H

#include <stdint.h>

/* Float conversions used by the converters and by peers that write reduced
 * precision: exact decoding (subnormals, signed zeros, infinities), and
 * encoding with round-to-nearest-even, gradual underflow and overflow to
 * infinity.  NaNs keep their sign and payload: the 16-bit NaN's significand
 * bits are the top bits of the double's, so decode then encode gives back
 * every one of the 65536 encodings; a double NaN whose top bits are all zero
 * encodes as the quiet NaN. */
double refenc_f16_to_double(uint16_t h);
double refenc_bf16_to_double(uint16_t b);
uint16_t refenc_double_to_f16(double x);
uint16_t refenc_double_to_bf16(double x);

/* A binary32 bit pattern to double, exactly; a NaN keeps its sign and
 * payload (built from bits: the hardware conversion would quiet a signalling
 * NaN). */
double refenc_f32_to_double(uint32_t u);

#endif
