/* The reference's backward on a golden case (run_backward.h). */
#include "run_backward.h"

#include <stdlib.h>
#include <string.h>

#include "../encoder.h"

int refenc_case_run_backward(const refenc_case *c, const double *dY, const refenc_backward_kernels *k,
                             const refenc_trace *trace, refenc_error *err)
{
    refenc_workspace ws;
    refenc_grad_workspace gws;
    refenc_params grad;
    double *dx = NULL;
    const size_t bld[3] = {c->B, c->L, c->cfg.d_model};
    memset(&ws, 0, sizeof ws);
    memset(&gws, 0, sizeof gws);
    memset(&grad, 0, sizeof grad);
    int st = refenc_workspace_alloc(&ws, &c->cfg, c->B, c->L, err);
    if (st == REFENC_OK)
        st = refenc_grad_workspace_alloc(&gws, &c->cfg, c->B, c->L, err);
    if (st == REFENC_OK)
        st = refenc_params_alloc(&grad, &c->cfg, err);
    if (st == REFENC_OK && c->x != NULL && (dx = calloc(bld[0] * bld[1] * bld[2], sizeof *dx)) == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", c->name);
    const refenc_input in = refenc_case_input(c);
    gws.kernels = k;
    if (st == REFENC_OK)
        st = refenc_encoder_backward_traced(&grad, dx, &gws, &ws, &c->params, &c->cfg, &in, dY, trace, err);
    for (size_t t = 0; st == REFENC_OK && t < grad.n_tensors; t++)
        refenc_trace_emit(trace, grad.tensors[t].name, grad.tensors[t].data, grad.tensors[t].ndim,
                          grad.tensors[t].shape);
    if (st == REFENC_OK && dx != NULL)
        refenc_trace_emit(trace, "x", dx, 3, bld);
    free(dx);
    refenc_params_free(&grad);
    refenc_grad_workspace_free(&gws);
    refenc_workspace_free(&ws);
    return st;
}
