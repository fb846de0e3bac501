#ifndef REFENC_LAYER_H
#define REFENC_LAYER_H

#include <stddef.h>

#include "core/config.h"
#include "mha.h"
#include "core/params.h"
#include "core/trace.h"

/* Buffers one encoder layer writes; the caller owns them. */
typedef struct {
    double *ln;        /* (B, L, D)  LayerNorm output                       */
    double *attn;      /* (B, L, D)  attention block output                 */
    double *resid;     /* (B, L, D)  residual stream inside the layer       */
    double *ffn;       /* (B, L, D)  FFN output                             */
    double *hidden;    /* (B, L, F)  FFN hidden activations                 */
    refenc_mha_work mha;
} refenc_layer_work;

/* One encoder layer, in nn.TransformerEncoderLayer's structure.
 * y, x: (B, L, D); y must not alias x.
 *
 * Pre-LN  (norm_first=True):   h = x + MHA(LN1(x));   y = h + FFN(LN2(h))
 * Post-LN (norm_first=False):  h = LN1(x + MHA(x));   y = LN2(h + FFN(h))
 *
 * opt carries the masks, ALiBi slopes and temperature; rope is NULL unless
 * the positional scheme is RoPE.  Inference only: no dropout.
 * Trace steps, in forward order, with prefix "layers.{index}.":
 *   Pre-LN:  norm1, self_attn.weights, self_attn, norm2, ffn, output
 *   Post-LN: self_attn.weights, self_attn, norm1, ffn, norm2, output
 * (self_attn is the attention block's output after out_proj; ffn is the FFN
 * output after linear2; norm1/norm2 are the LayerNorm outputs.)
 * Never fails. */
void refenc_layer_forward(double *y, refenc_layer_work *work, const double *x,
                          const refenc_layer_params *lp, const refenc_config *cfg,
                          const refenc_attn_options *opt, const refenc_rope_options *rope,
                          size_t B, size_t L, size_t index, const refenc_trace *trace);

#endif
