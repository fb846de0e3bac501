#include "model_sources.h"

#include "run_weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_file.h"
#include "safetensors.h"

int model_case_from_inputs(refenc_case *c, const refenc_config *cfg, const run_input *spec,
                         const char *config_path, const char *path, char **report,
                         refenc_error *err)
{
    return model_case_from_inputs_skip(c, cfg, spec, config_path, path, NULL, report, err);
}

/* f's view without the tensor named skip: a copy of its tensor list (the
 * data stays f's).  Returns 0 when out of memory. */
static int view_without(refenc_st_file *v, const refenc_st_file *f, const char *skip)
{
    *v = *f;
    v->tensors = malloc((f->n_tensors ? f->n_tensors : 1) * sizeof *v->tensors);
    if (v->tensors == NULL)
        return 0;
    v->n_tensors = 0;
    for (size_t i = 0; i < f->n_tensors; i++)
        if (skip == NULL || strcmp(f->tensors[i].name, skip) != 0)
            v->tensors[v->n_tensors++] = f->tensors[i];
    return 1;
}

int model_case_from_inputs_skip(refenc_case *c, const refenc_config *cfg, const run_input *spec,
                                const char *config_path, const char *path, const char *skip,
                                char **report, refenc_error *err)
{
    memset(c, 0, sizeof *c); /* freeable whatever fails, the read included */
    refenc_st_file f, v;
    int st = refenc_st_read(&f, path, err);
    if (st != REFENC_OK)
        return st;
    if (!view_without(&v, &f, skip))
        st = refenc_error_set(err, REFENC_ENOMEM, "%s: out of memory", path);
    else
        st = refenc_case_from_inputs_file(c, cfg, &v, report, err);
    if (v.tensors != f.tensors)
        free(v.tensors);
    refenc_st_free(&f);
    if (st != REFENC_OK || !spec->given)
        return st;
    if (spec->padding != NULL)
        st = refenc_error_set(err, REFENC_EINVAL,
                              "%s: input.padding: the padding comes from %s (in.key_padding_mask); "
                              "remove it from the config", config_path, path);
    else if (spec->batch != c->B || spec->seq_len != c->L)
        st = refenc_error_set(err, REFENC_EINVAL,
                              "%s: input: batch %zu, seq_len %zu, but %s holds batch %zu, seq_len %zu; "
                              "make them agree or remove \"input\" from the config",
                              config_path, spec->batch, spec->seq_len, path, c->B, c->L);
    if (st != REFENC_OK)
        refenc_case_free(c);
    return st;
}

int model_params_from_weights(refenc_params *p, const char *path, char **report, refenc_error *err)
{
    refenc_st_file f;
    int st = refenc_st_read(&f, path, err);
    if (st != REFENC_OK)
        return st;
    st = refenc_params_from_file(p, &f, report, err);
    refenc_st_free(&f);
    return st;
}

int model_params_from_checkpoint(refenc_params *p, const refenc_config *cfg, const char *path, char *summary,
                               size_t cap, char **report, refenc_error *err)
{
    if (cap > 0)
        summary[0] = '\0';
    if (cfg->family != REFENC_FAMILY_VASWANI) /* the family's Hugging Face names */
        return run_load_weights(p, cfg, path, summary, cap, err);
    return model_params_from_weights(p, path, report, err);
}
