/* Gated FFN properties (glu.h), each with a negative control that is run.
 *
 *  - the halves: the gate first and the gate second are different functions
 *    unless the two halves of linear1 are equal (then bit for bit the same:
 *    the same operations on the same numbers);
 *  - SwiGLU with a zero gate (Wg = 0, bg = 0) gives h = silu(0) b = 0 and
 *    y = b2 exactly, whatever b;
 *  - with the up half constant 1 (Wu = 0, bu = 1) the gated FFN is the MLP on
 *    the gate half, bit for bit (act(a) * 1 is exact); the operands swapped,
 *    act(b) * a = act(1) a, is not;
 *  - the operands act(a) * b and act(b) * a are different functions.
 * Comparisons are bitwise (same operations on the same numbers) or, where the
 * functions differ, a check that they differ by more than the sum of their
 * derived bounds (bnd_glu), so that the difference is not rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "../../ref/ffn.h"
#include "../../ref/glu.h"
#include "../common/testutil.h"
#include "../oracle/bounds.h"

typedef struct {
    size_t N, D, F;
    double *x, *W1, *b1, *W2, *b2, *y, *y2, *h, *E, *E2, *hb;
} glu_case;

static double *fresh(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    cr_assert_not_null(p);
    return p;
}

static void glu_case_init(glu_case *c, size_t N, size_t D, size_t F, gsl_rng *r)
{
    c->N = N, c->D = D, c->F = F;
    c->x = fresh(N * D), c->W1 = fresh(2 * F * D), c->b1 = fresh(2 * F);
    c->W2 = fresh(D * F), c->b2 = fresh(D), c->y = fresh(N * D), c->y2 = fresh(N * D);
    c->h = fresh(2 * N * F), c->E = fresh(N * D), c->E2 = fresh(N * D), c->hb = fresh(N * F);
    test_fill_gaussian(c->x, N * D, 0.1, 1.3, r);
    test_fill_gaussian(c->W1, 2 * F * D, 0.0, 1.0 / sqrt((double)D), r);
    test_fill_gaussian(c->b1, 2 * F, 0.0, 0.1, r);
    test_fill_gaussian(c->W2, D * F, 0.0, 1.0 / sqrt((double)F), r);
    test_fill_gaussian(c->b2, D, 0.0, 0.1, r);
}

static void glu_case_free(glu_case *c)
{
    free(c->x), free(c->W1), free(c->b1), free(c->W2), free(c->b2), free(c->y), free(c->y2);
    free(c->h), free(c->E), free(c->E2), free(c->hb);
}

/* y (and its bound E) of the gated FFN with that gate on c's linear1 */
static void run(glu_case *c, double *y, double *E, refenc_glu_gate gate, refenc_activation act)
{
    const double *Wg, *bg, *Wu, *bu;
    refenc_glu_halves(&Wg, &bg, &Wu, &bu, c->W1, c->b1, c->D, c->F, gate);
    refenc_glu_forward(y, c->h, c->h + c->N * c->F, c->x, Wg, bg, Wu, bu, c->W2, c->b2, c->N, c->D,
                       c->F, act);
    double *yb = fresh(c->N * c->D);
    bnd_glu(E, yb, c->hb, c->x, NULL, Wg, bg, Wu, bu, c->W2, c->b2, c->N, c->D, c->F, act);
    free(yb);
}

/* 1 when some entry differs by more than E1 + E2 (a real difference) */
static int differs(const double *a, const double *b, const double *E1, const double *E2, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fabs(a[i] - b[i]) > E1[i] + E2[i])
            return 1;
    return 0;
}

static const refenc_activation ACTS[] = {REFENC_ACT_GELU, REFENC_ACT_GELU_TANH, REFENC_ACT_SILU};

Test(glu, swapping_the_halves_changes_the_output_unless_they_are_equal)
{
    gsl_rng *r = test_rng(811);
    const size_t Ds[] = {3, 16, 33}, Fs[] = {5, 24, 7};
    for (size_t k = 0; k < 3; k++)
        for (size_t a = 0; a < 3; a++) {
            glu_case c;
            glu_case_init(&c, 4, Ds[k], Fs[k], r);
            const size_t n = c.N * c.D, FD = c.F * c.D;
            run(&c, c.y, c.E, REFENC_GLU_GATE_FIRST, ACTS[a]);
            run(&c, c.y2, c.E2, REFENC_GLU_GATE_SECOND, ACTS[a]);
            cr_expect(differs(c.y, c.y2, c.E, c.E2, n), "seed %lu, D %zu, act %d: the halves swapped "
                      "went unseen", test_seed(), c.D, (int)ACTS[a]);
            /* the control: equal halves (a == b) make the swap a no-op, bit for bit */
            memcpy(c.W1 + FD, c.W1, FD * sizeof(double));
            memcpy(c.b1 + c.F, c.b1, c.F * sizeof(double));
            run(&c, c.y, c.E, REFENC_GLU_GATE_FIRST, ACTS[a]);
            run(&c, c.y2, c.E2, REFENC_GLU_GATE_SECOND, ACTS[a]);
            cr_expect(memcmp(c.y, c.y2, n * sizeof(double)) == 0,
                      "seed %lu, D %zu: equal halves, and still the gate order mattered", test_seed(), c.D);
            glu_case_free(&c);
        }
    gsl_rng_free(r);
}

Test(glu, swiglu_with_a_zero_gate_gives_the_output_bias)
{
    gsl_rng *r = test_rng(812);
    glu_case c;
    glu_case_init(&c, 3, 12, 20, r);
    const size_t n = c.N * c.D, FD = c.F * c.D;
    memset(c.W1, 0, FD * sizeof(double)); /* the gate rows (first): a = 0 */
    memset(c.b1, 0, c.F * sizeof(double));
    run(&c, c.y, c.E, REFENC_GLU_GATE_FIRST, REFENC_ACT_SILU);
    for (size_t i = 0; i < n; i++)
        cr_expect(c.y[i] == c.b2[i % c.D], "y[%zu] = %.17g, not b2 = %.17g", i, c.y[i], c.b2[i % c.D]);
    /* negative control: the gate ignored (h = b, the MLP without activation on the up
     * half) does not give b2 */
    double *b = fresh(c.N * c.F);
    refenc_ffn_forward(c.y2, b, c.x, c.W1 + FD, c.b1 + c.F, c.W2, c.b2, c.N, c.D, c.F, REFENC_ACT_RELU);
    int any = 0;
    for (size_t i = 0; i < n; i++)
        any |= c.y2[i] != c.b2[i % c.D];
    cr_expect(any, "negative control: a kernel without the gate also gave b2");
    free(b);
    glu_case_free(&c);
    gsl_rng_free(r);
}

Test(glu, unit_up_half_is_the_mlp_on_the_gate_and_operands_are_not_symmetric)
{
    gsl_rng *r = test_rng(813);
    for (size_t a = 0; a < 3; a++)
        for (int gate = 0; gate < 2; gate++) {
            glu_case c;
            glu_case_init(&c, 4, 16, 24, r);
            const size_t n = c.N * c.D, FD = c.F * c.D;
            const size_t up = gate == REFENC_GLU_GATE_FIRST ? c.F : 0, g = c.F - up;
            memset(c.W1 + up * c.D, 0, FD * sizeof(double)); /* b = 1 */
            for (size_t f = 0; f < c.F; f++)
                c.b1[up + f] = 1.0;
            run(&c, c.y, c.E, (refenc_glu_gate)gate, ACTS[a]);
            double *hid = fresh(c.N * c.F);
            refenc_ffn_forward(c.y2, hid, c.x, c.W1 + g * c.D, c.b1 + g, c.W2, c.b2, c.N, c.D, c.F, ACTS[a]);
            cr_expect(memcmp(c.y, c.y2, n * sizeof(double)) == 0,
                      "seed %lu, act %d, gate %d: act(a) * 1 is not the MLP", test_seed(), (int)ACTS[a], gate);
            /* negative control: the operands swapped, act(b) * a = act(1) a, runs the
             * gated kernel with the halves' roles exchanged */
            run(&c, c.y2, c.E2, gate == 0 ? REFENC_GLU_GATE_SECOND : REFENC_GLU_GATE_FIRST, ACTS[a]);
            cr_expect(differs(c.y, c.y2, c.E, c.E2, n), "negative control, act %d: operands swapped unseen",
                      (int)ACTS[a]);
            free(hid);
            glu_case_free(&c);
        }
    gsl_rng_free(r);
}
