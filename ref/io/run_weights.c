#include "run_weights.h"

#include <stdio.h>
#include <stdlib.h>

#include "checkpoint_names.h"
#include "safetensors.h"

int run_load_weights(refenc_params *p, const refenc_config *cfg, const char *path,
                     char *summary, size_t cap, refenc_error *err)
{
    refenc_st_file f;
    int st = refenc_st_read(&f, path, err);
    if (st != REFENC_OK)
        return st;
    refenc_ck_report rep;
    st = refenc_params_from_checkpoint(p, cfg, &f, &rep, NULL, err);
    if (st == REFENC_OK)
        snprintf(summary, cap, "weights: %s, %s checkpoint names%s%s%s: %zu tensors read, %zu "
                 "outside the prefix and %zu buffers ignored", path, refenc_family_name(cfg->family),
                 rep.prefix[0] ? " under '" : "", rep.prefix, rep.prefix[0] ? "'" : "",
                 rep.mapped, rep.ignored_outside, rep.ignored_buffers);
    refenc_st_free(&f);
    return st;
}
