/* A part file written as its units complete (file.h, golden_part_writer).
 *
 * Every tensor's place is fixed at open: the case's inputs and parameters
 * (part 1) and each slice, (hi - lo, ...) F64, item `item` at byte
 * (item - lo) x (the bytes of one item) of its slice.  A put writes one
 * item's values there and keeps nothing; the oracle gives a unit's values
 * step by step, so a shard holds one unit's at a time.  At commit the
 * tensors are hashed read back from the file, in the order of their names
 * (digest.h), and the header takes the metadata: the same bytes as the
 * part written whole from memory. */
#include "file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/version.h"
#include "../io/atomic_write.h"
#include "../io/config_json.h"
#include "../io/manifest.h"
#include "digest.h"

/* The metadata every part carries: the format, its shard and units, the
 * precisions its oracle run needed, its slices, the plan and its hash (the
 * fingerprint), and the hash of its tensors; NULL when out of memory. */
static json_t *part_meta(const golden_file *g, const golden_part_info *pi, const char *slices_s,
                         const char *tensors_sha)
{
    const char *plan_s = pi->plan_text;
    char fp[65], shard[64], units[64], prec[32], check[32];
    if (plan_s != NULL)
        refenc_sha256_hex(fp, plan_s, strlen(plan_s));
    snprintf(shard, sizeof shard, "%zu/%zu", pi->k, pi->n);
    snprintf(units, sizeof units, "%zu-%zu", pi->unit_begin, pi->unit_end);
    snprintf(prec, sizeof prec, "%ld", pi->prec);
    snprintf(check, sizeof check, "%ld", pi->prec_check);
    json_t *meta = slices_s == NULL || plan_s == NULL ? NULL
                   : json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
                               "format", GOLDEN_PART_FORMAT, "format_version", GOLDEN_PART_FORMAT_VERSION,
                               "case", g->name, "component", refenc_component_name(g->c->component),
                               "shard", shard, "units", units, "prec", prec, "prec_check", check,
                               "slices", slices_s, "plan", plan_s, "fingerprint", fp,
                               "tensors_sha256", tensors_sha);
    return meta;
}

/* Adds part 1's metadata of the case itself (config, description, bugs, tolerance); 0 when out of memory. */
static int part_case_meta(json_t *meta, const golden_file *g)
{
    json_t *config = refenc_config_to_json(&g->c->cfg);
    char *cfg_s = golden_json_text(config), *bugs_s = golden_json_text(g->bug_classes);
    char *tol_s = g->tolerance ? golden_json_text(g->tolerance) : strdup("{}");
    const int ok = cfg_s && bugs_s && tol_s;
    if (ok) {
        json_object_set_new(meta, "config", json_string(cfg_s));
        json_object_set_new(meta, "description", json_string(g->description));
        json_object_set_new(meta, "bug_classes", json_string(bugs_s));
        json_object_set_new(meta, "tolerance", json_string(tol_s));
        if (g->float32_hazard != NULL)
            json_object_set_new(meta, "float32_hazard", json_string(g->float32_hazard));
    }
    free(cfg_s);
    free(bugs_s);
    free(tol_s);
    json_decref(config);
    return ok;
}

/* The whole metadata of part pi, with its tensors' hash; NULL when out of memory. */
static json_t *metadata(const golden_file *g, const golden_part_info *pi, const char *tensors_sha)
{
    json_t *slices = json_object();
    for (size_t i = 0; slices != NULL && i < pi->n_slices; i++)
        json_object_set_new(slices, pi->slices[i].name,
                            json_pack("[I, I]", (json_int_t)pi->slices[i].lo, (json_int_t)pi->slices[i].hi));
    char *slices_s = slices != NULL ? golden_json_text(slices) : NULL;
    json_t *meta = part_meta(g, pi, slices_s, tensors_sha);
    if (meta != NULL && pi->k == 1 && !part_case_meta(meta, g)) {
        json_decref(meta);
        meta = NULL;
    }
    free(slices_s);
    json_decref(slices);
    return meta;
}

/* The bytes of one item of slice sl. */
static size_t item_bytes(const golden_slice *sl)
{
    size_t n = sizeof(double);
    for (size_t d = 1; d < sl->ndim; d++)
        n *= sl->shape[d];
    return n;
}

void golden_part_abort(golden_part_writer *pf)
{
    refenc_st_stream_abort(&pf->st);
    for (size_t i = 0; pf->got != NULL && i < pf->n_slices; i++)
        free(pf->got[i]);
    free(pf->got);
    memset(pf, 0, sizeof *pf);
}

int golden_part_open(golden_part_writer *pf, const golden_file *g, const golden_part_info *pi, const char *path,
                     refenc_error *err)
{
    memset(pf, 0, sizeof *pf);
    golden_entries es = {0};
    if (pi->k == 1) /* the case itself */
        golden_entries_add_case(&es, g->c);
    pf->first = es.n;
    pf->n_slices = pi->n_slices;
    pf->slices = pi->slices;
    pf->got = calloc(pi->n_slices ? pi->n_slices : 1, sizeof *pf->got);
    for (size_t i = 0; pf->got != NULL && i < pi->n_slices; i++) {
        char name[REFENC_NAME_MAX + 8];
        snprintf(name, sizeof name, GOLDEN_SLICE_PREFIX "%s", pi->slices[i].name);
        golden_entries_add(&es, name, REFENC_ST_F64, pi->slices[i].ndim, pi->slices[i].shape, NULL);
        if ((pf->got[i] = calloc(pi->slices[i].hi - pi->slices[i].lo + 1, 1)) == NULL)
            es.failed = 1;
    }
    /* the room for the header: this metadata's, the final hash as long as any */
    json_t *guess = metadata(g, pi, "0000000000000000000000000000000000000000000000000000000000000000");
    int st = REFENC_OK;
    if (pf->got == NULL || es.failed || guess == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", g->name);
    else
        st = refenc_st_stream_open(&pf->st, path, es.e, es.n, guess, err);
    json_decref(guess);
    golden_entries_free(&es); /* written: the F32 copies of the case's tensors go */
    if (st != REFENC_OK)
        golden_part_abort(pf);
    return st;
}

void golden_part_put(golden_part_writer *pf, size_t s, size_t item, const double *data, size_t n)
{
    if (pf->failed)
        return;
    const golden_slice *sl = s < pf->n_slices ? &pf->slices[s] : NULL;
    if (sl == NULL || item < sl->lo || item >= sl->hi || n * sizeof(double) != item_bytes(sl)) {
        pf->failed = 1;
        refenc_error_set(&pf->err, REFENC_EINVAL, "part: item %zu of %zu values is not one of slice %zu", item, n,
                         s);
        return;
    }
    const size_t bytes = item_bytes(sl);
    if (refenc_st_stream_put(&pf->st, pf->first + s, (item - sl->lo) * bytes, data, bytes, &pf->err) != REFENC_OK)
        pf->failed = 1;
    else
        pf->got[s][item - sl->lo] = 1;
}

/* Checks that every item of every slice was put. */
static int every_item_put(const golden_part_writer *pf, refenc_error *err)
{
    for (size_t s = 0; s < pf->n_slices; s++)
        for (size_t b = pf->slices[s].lo; b < pf->slices[s].hi; b++)
            if (!pf->got[s][b - pf->slices[s].lo])
                return refenc_error_set(err, REFENC_EINVAL, "%s: item %zu of '%s' was never computed",
                                        pf->st.a->path, b, pf->slices[s].name);
    return REFENC_OK;
}

int golden_part_commit(golden_part_writer *pf, const golden_file *g, const golden_part_info *pi,
                       refenc_error *err)
{
    char tensors_sha[65];
    json_t *meta = NULL;
    int st = REFENC_OK;
    if (pf->failed) {
        *err = pf->err;
        st = pf->err.status != REFENC_OK ? pf->err.status : REFENC_EIO;
    }
    if (st == REFENC_OK)
        st = every_item_put(pf, err);
    if (st == REFENC_OK)
        st = golden_stream_sha256(tensors_sha, &pf->st, err);
    if (st == REFENC_OK && (meta = metadata(g, pi, tensors_sha)) == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", g->name);
    if (st == REFENC_OK)
        st = refenc_st_stream_commit(&pf->st, meta, err);
    json_decref(meta);
    golden_part_abort(pf);
    return st;
}
