/* Qwen3's per-head q/k RMSNorm (qk_norm.h): the RMSNorm kernel on rows of
 * the head width. */
#include "qk_norm.h"

#include "rmsnorm.h"

const refenc_qk_norm *refenc_qk_norm_of(refenc_qk_norm *n, const refenc_config *cfg,
                                        const refenc_layer_params *lp)
{
    if (cfg->qk_norm != REFENC_QKNORM_RMS)
        return NULL;
    n->q_weight = lp->q_norm_weight;
    n->k_weight = lp->k_norm_weight;
    n->eps = cfg->layer_norm_eps;
    n->offset = cfg->rmsnorm_offset;
    return n;
}

void refenc_qk_norm_forward(double *q, double *k, const refenc_qk_norm *n, size_t BL, size_t H,
                            size_t Hkv, size_t Dh)
{
    refenc_qk_norm_rows_forward(q, k, n, BL, BL, H, Hkv, Dh);
}

void refenc_qk_norm_rows_forward(double *q, double *k, const refenc_qk_norm *n, size_t BLq, size_t BL,
                                 size_t H, size_t Hkv, size_t Dh)
{
    /* q[bl, h Dh : (h+1) Dh] is row bl H + h of (BL H, Dh): every head's own rms */
    refenc_rmsnorm_forward(q, q, n->q_weight, BLq * H, Dh, n->eps, n->offset);
    refenc_rmsnorm_forward(k, k, n->k_weight, BL * Hkv, Dh, n->eps, n->offset);
}
