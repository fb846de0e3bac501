/* Pooled sentence embeddings in MPFR, from the formulas of pooling.h,
 * written apart from the double kernel (one item at a time):
 *   mean:       e_d = (sum over the unpadded rows l of y[l,d]) / n, the sum
 *               correctly rounded (mpfr_sum), then one division
 *   cls:        e = y[0,:]                   (exact)
 *   last_token: e = y[l*,:], l* the unpadded row no later unpadded row follows
 *   normalize:  e_d / max(sqrt(sum_d e_d^2), 1e-12), the sum of squares one
 *               correctly rounded dot product (refenc_mp_dot)
 * Ziv's loop certifies the result as every other step's. */
#include "internal.h"

/* torch.nn.functional.normalize's eps (pooling.h's REFENC_POOLING_NORM_EPS,
 * restated: the oracle includes no double kernel) */
static const double NORM_EPS = 1e-12;

/* The row last_token reads: scanning forward, the last row that is not
 * padding (m NULL, or every row padding: L - 1, never reached for a
 * validated input but kept in range). */
static size_t last_unpadded(const uint8_t *m, size_t L)
{
    size_t last = L - 1;
    int seen = 0;
    for (size_t l = 0; m != NULL && l < L; l++)
        if (!m[l]) {
            last = l;
            seen = 1;
        }
    return seen || m == NULL ? last : L - 1;
}

/* e (D) = the mean of y's unpadded rows (m NULL: every row) */
static void mean_rows(mpfr_ptr e, mpfr_srcptr y, const uint8_t *m, size_t L, size_t D, refenc_mp_ws *ws)
{
    for (size_t d = 0; d < D; d++) {
        size_t n = 0;
        for (size_t l = 0; l < L; l++)
            if (m == NULL || !m[l])
                ws->pa[n++] = (mpfr_ptr)(y + l * D + d); /* mpfr_sum reads, never writes */
        mpfr_sum(e + d, (const mpfr_ptr *)ws->pa, (unsigned long)n, MPFR_RNDN);
        mpfr_div_ui(e + d, e + d, (unsigned long)n, MPFR_RNDN);
    }
}

void refenc_mpk_pooling_forward(mpfr_ptr e, mpfr_srcptr y, const uint8_t *m, size_t L, size_t D,
                                refenc_pooling mode, int normalize, refenc_mp_ws *ws)
{
    if (mode == REFENC_POOL_MEAN) {
        mean_rows(e, y, m, L, D, ws);
    } else {
        const size_t row = mode == REFENC_POOL_CLS ? 0 : last_unpadded(m, L);
        for (size_t d = 0; d < D; d++)
            mpfr_set(e + d, y + row * D + d, MPFR_RNDN);
    }
    if (!normalize)
        return;
    mpfr_ptr r = ws->tmp;
    refenc_mp_dot(r, e, 1, e, 1, D, NULL, ws);
    mpfr_sqrt(r, r, MPFR_RNDN);
    if (mpfr_cmp_d(r, NORM_EPS) < 0) /* F.normalize's floor */
        mpfr_set_d(r, NORM_EPS, MPFR_RNDN);
    for (size_t d = 0; d < D; d++)
        mpfr_div(e + d, e + d, r, MPFR_RNDN);
}
