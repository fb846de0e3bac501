/* Where refenc golden writes (places.h). */
#include "places.h"

#include <limits.h>
#include <stdio.h>

#include "../io/file_names.h"
#include "../io/same_file.h"
#include "manifest.h"

int golden_part_file(char *path, size_t cap, const golden_places *p, refenc_error *err)
{
    return refenc_path_format(path, cap, err, "%s/parts/%s.part-%zu-of-%zu.safetensors", p->out_dir, p->name,
                              p->shard_k, p->shard_n);
}

int golden_part_path(char *path, size_t cap, const golden_places *p, refenc_error *err)
{
    int st = golden_part_file(path, cap, p, err);
    if (st == REFENC_OK)
        st = golden_mkdirs(p->out_dir, "parts", err);
    return st;
}

/* Refuses out if it is one of the inputs. */
static int refuse(const char *out, const char *const *inputs, const char *const *what, size_t n,
                  refenc_error *err)
{
    int st = REFENC_OK;
    for (size_t i = 0; i < n && st == REFENC_OK; i++)
        if (inputs[i] != NULL)
            st = refenc_refuse_same_file(out, inputs[i], what[i], err);
    return st;
}

int golden_refuse_inputs(const golden_places *p, const char *const *inputs, const char *const *what, size_t n,
                         refenc_error *err)
{
    char a[PATH_MAX], b[PATH_MAX];
    if (p->out_file != NULL)
        return refuse(p->out_file, inputs, what, n, err);
    int st;
    if (p->shard_n > 0) {
        st = golden_part_file(a, sizeof a, p, err);
        return st == REFENC_OK ? refuse(a, inputs, what, n, err) : st;
    }
    st = refenc_path_format(a, sizeof a, err, "%s/cases/%s.safetensors", p->out_dir, p->name);
    if (st == REFENC_OK)
        st = refenc_path_format(b, sizeof b, err, "%s/manifest.json", p->out_dir);
    if (st == REFENC_OK)
        st = refuse(a, inputs, what, n, err);
    return st == REFENC_OK ? refuse(b, inputs, what, n, err) : st;
}
