/* The golden files: intact (checksums), reproducible (regeneration gives the
 * same bytes), loadable, and certifying the reference; the certifier rejects a
 * result just outside its tolerance; the golden maker's don't-care masks are
 * the committed files' (a pooled output has none).
 * Paths are relative to REFENC_SRCDIR, else the current directory (make check
 * runs from the top of the tree); the generator is `refenc golden` (REFENC_CLI). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <nettle/sha2.h>

#include "../../ref/golden/file.h"
#include "../../ref/io/golden_names.h"
#include "../../ref/tool/certify.h"
#include "../../ref/core/case.h"
#include "../../ref/io/case_file.h"
#include "../../ref/tool/run_case.h"
#include "../../ref/io/safetensors.h"

#define GOLDEN_MAX_BYTES (20u << 20) /* the catalogue's budget: 20 MiB */

static const char *srcdir(void)
{
    const char *s = getenv("REFENC_SRCDIR");
    return s && *s ? s : ".";
}

static json_t *load_manifest(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/manifest.json", srcdir());
    json_error_t jerr;
    json_t *m = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    cr_assert_not_null(m, "%s: %s", path, jerr.text);
    cr_assert(json_is_array(json_object_get(m, "cases")), "%s: no cases array", path);
    return m;
}

static void case_path(char *buf, size_t n, const char *file)
{
    snprintf(buf, n, "%s/golden/cases/%s", srcdir(), file);
}

static void sha256_hex(char hex[65], const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    unsigned char buf[1 << 16];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        sha256_update(&ctx, k, buf);
    fclose(f);
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

Test(golden, every_file_matches_its_manifest_checksum)
{
    json_t *m = load_manifest();
    size_t i, total = 0;
    json_t *e;
    json_array_foreach(json_object_get(m, "cases"), i, e) {
        const char *file = json_string_value(json_object_get(e, "file"));
        const char *want = json_string_value(json_object_get(e, "sha256"));
        cr_assert(file && want, "manifest entry %zu lacks file or sha256", i);
        char path[4096], hex[65];
        case_path(path, sizeof path, file);
        sha256_hex(hex, path);
        cr_expect_str_eq(hex, want, "%s: SHA-256 %s, manifest says %s (corrupted, or regenerated "
                         "without `make golden`)", path, hex, want);
        struct stat st;
        cr_assert(stat(path, &st) == 0);
        total += (size_t)st.st_size;
    }
    cr_expect(total <= GOLDEN_MAX_BYTES, "golden data is %zu bytes, over the 20 MiB budget", total);

    /* no stray file: everything in golden/cases/ is listed */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/golden/cases", srcdir());
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        int listed = 0;
        json_array_foreach(json_object_get(m, "cases"), i, e)
            listed |= strcmp(json_string_value(json_object_get(e, "file")), de->d_name) == 0;
        cr_expect(listed, "golden/cases/%s is not in golden/manifest.json", de->d_name);
    }
    closedir(d);
    json_decref(m);
}

Test(golden, checksum_check_detects_a_flipped_byte)
{
    /* negative control for the test above: one flipped bit changes the digest */
    json_t *m = load_manifest();
    const json_t *e = json_array_get(json_object_get(m, "cases"), 0);
    char path[4096], tmp[] = "/tmp/refenc-golden-XXXXXX", hex[65];
    case_path(path, sizeof path, json_string_value(json_object_get(e, "file")));
    int fd = mkstemp(tmp);
    cr_assert(fd >= 0);
    FILE *in = fopen(path, "rb"), *out = fdopen(fd, "wb");
    int c, k = 0;
    while ((c = fgetc(in)) != EOF)
        fputc(k++ == 100 ? c ^ 1 : c, out);
    fclose(in);
    fclose(out);
    sha256_hex(hex, tmp);
    cr_expect_str_neq(hex, json_string_value(json_object_get(e, "sha256")));
    unlink(tmp);
    json_decref(m);
}

/* Runs `refenc golden --catalogue CATALOGUE --case CASE --out-file OUT`
 * (the program is REFENC_CLI); returns its exit status. */
static int run_gen(const char *name, const char *out)
{
    const char *cli = getenv("REFENC_CLI");
    cr_assert(cli && *cli, "REFENC_CLI is not set (make check sets it)");
    char cat[4096];
    snprintf(cat, sizeof cat, "%s/golden/catalogue.json", srcdir());
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        execl(cli, cli, "golden", "--catalogue", cat, "--case", name, "--out-file", out, "--quiet",
              (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int same_bytes(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF)
            break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

Test(golden, small_cases_regenerate_byte_for_byte, .timeout = 60)
{
    /* the smallest case of each component kind of the manifest (0.5 s in
     * all): every block of the oracle and every input layout of the golden
     * writer (a RoPE case's (B, H, L, Dh) in.x, a softmax's (B, L) ...) is
     * regenerated; the encoders are left to `make golden-verify` */
    json_t *m = load_manifest();
    const json_t *cases = json_object_get(m, "cases");
    enum { KINDS = 20 };
    int picked[KINDS];
    const char *kind[KINDS];
    int n_kinds = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *e = json_array_get(cases, i);
        const char *comp = json_string_value(json_object_get(e, "component"));
        if (comp == NULL || strcmp(comp, "encoder") == 0)
            continue;
        int k = 0;
        while (k < n_kinds && strcmp(kind[k], comp) != 0)
            k++;
        if (k == n_kinds) {
            cr_assert_lt(n_kinds, KINDS);
            kind[n_kinds] = comp, picked[n_kinds++] = (int)i;
        } else if (json_integer_value(json_object_get(e, "bytes")) <
                   json_integer_value(json_object_get(json_array_get(cases, (size_t)picked[k]), "bytes"))) {
            picked[k] = (int)i;
        }
    }
    cr_assert_geq(n_kinds, 8, "the manifest has %d component kinds besides the encoder", n_kinds);
    /* and: the smallest case whose bug variant has don't-care masks of its
     * own (attention_padding's padding_mask_inverted: its effect, in the
     * metadata, is measured outside the golden's masks and the variant's
     * both); a case whose variant's float32 effect is below one tolerance
     * (layernorm_eps1e-12: the metadata's effect_f32 is the largest over
     * the outputs, from 0); the smallest encoder of token ids with a variant
     * (encoder_pre_learned, 0.2 s: the variant runs on the case's own
     * tokens) */
    const char *const extra[] = {"attention_padding", "layernorm_eps1e-12", "encoder_pre_learned"};
    for (size_t x = 0; x < 3; x++) {
        size_t i = 0;
        while (i < json_array_size(cases) &&
               strcmp(json_string_value(json_object_get(json_array_get(cases, i), "case")), extra[x]) != 0)
            i++;
        cr_assert(i < json_array_size(cases) && n_kinds < KINDS, "%s is not in the manifest", extra[x]);
        picked[n_kinds++] = (int)i;
    }
    char dir[] = "/tmp/refenc-regen-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    for (int p = 0; p < n_kinds; p++) {
        const json_t *e = json_array_get(cases, (size_t)picked[p]);
        const char *name = json_string_value(json_object_get(e, "case"));
        char out[4096], want[4096];
        snprintf(out, sizeof out, "%s/%s.safetensors", dir, name);
        case_path(want, sizeof want, json_string_value(json_object_get(e, "file")));
        cr_assert_eq(run_gen(name, out), 0, "regenerating %s failed", name);
        cr_expect(same_bytes(out, want), "%s regenerates to different bytes than golden/cases", name);
        unlink(out);
    }
    rmdir(dir);
    json_decref(m);
}

/* Collects the reference's outputs of a case as results-file entries. */
typedef struct {
    size_t n;
    char names[128][160];
    double *data[128];
    refenc_st_entry e[128];
    const json_t *wanted;
} results;

static void collect(void *ctx, const char *name, const double *x, size_t ndim, const size_t *shape)
{
    results *r = ctx;
    char out[160];
    snprintf(out, sizeof out, "out.%s", name);
    size_t i, numel = 1;
    json_t *o;
    int wanted = 0;
    json_array_foreach(r->wanted, i, o)
        wanted |= strcmp(json_string_value(json_object_get(o, "name")), out) == 0;
    if (!wanted || r->n == 128)
        return;
    for (size_t d = 0; d < ndim; d++)
        numel *= shape[d];
    snprintf(r->names[r->n], sizeof r->names[0], "%s", out);
    r->data[r->n] = malloc((numel ? numel : 1) * sizeof(double));
    memcpy(r->data[r->n], x, numel * sizeof(double));
    r->e[r->n] = (refenc_st_entry){.name = r->names[r->n], .dtype = REFENC_ST_F64, .ndim = ndim,
                                    .data = r->data[r->n]};
    memcpy(r->e[r->n].shape, shape, ndim * sizeof *shape);
    r->n++;
}

static void free_results(results *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->data[i]);
    r->n = 0;
}

/* Certifies the results entries against the golden file; returns the verdict. */
static int certify(const refenc_st_file *golden, results *r, const char *tmp, refenc_case_report *rep)
{
    refenc_error err;
    refenc_st_file res;
    cr_assert_eq(refenc_st_write(tmp, r->e, r->n, NULL, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_st_read(&res, tmp, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_certify_case(rep, golden, &res, NULL, &err), REFENC_OK, "%s", err.message);
    refenc_st_free(&res);
    unlink(tmp);
    return rep->pass;
}

Test(golden, every_case_loads_and_certifies_the_reference, .timeout = 60)
{
    json_t *m = load_manifest();
    size_t i;
    json_t *e;
    char tmp[] = "/tmp/refenc-results-XXXXXX";
    int fd = mkstemp(tmp);
    cr_assert(fd >= 0);
    close(fd);
    json_array_foreach(json_object_get(m, "cases"), i, e) {
        char path[4096];
        case_path(path, sizeof path, json_string_value(json_object_get(e, "file")));
        refenc_error err;
        refenc_st_file f;
        refenc_case c;
        cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
        cr_assert_eq(refenc_case_from_file(&c, &f, &err), REFENC_OK, "%s", err.message);
        results r = {0};
        r.wanted = json_loads(refenc_st_metadata(&f, "outputs"), 0, NULL);
        const refenc_trace tr = {collect, &r};
        cr_assert_eq(refenc_case_run_reference(&c, &tr, &err), REFENC_OK, "%s", err.message);
        refenc_case_report rep;
        int pass = certify(&f, &r, tmp, &rep);
        cr_expect(pass, "the reference fails golden case %s (first divergence %s)", c.name,
                  rep.first_divergence >= 0 ? rep.outputs[rep.first_divergence].name : "none");
        refenc_case_report_free(&rep);
        free_results(&r);
        json_decref((json_t *)r.wanted);
        refenc_case_free(&c);
        refenc_st_free(&f);
    }
    json_decref(m);
}

Test(golden, certify_rejects_a_result_just_outside_the_float64_tolerance)
{
    /* negative control: the final output of one case, perturbed in one element
     * by 10x the F64 tolerance, FAILs; by 1/10 of it, PASSes; a NaN FAILs */
    json_t *m = load_manifest();
    const json_t *e = json_array_get(json_object_get(m, "cases"), 0);
    char path[4096], tmp[] = "/tmp/refenc-results-XXXXXX";
    case_path(path, sizeof path, json_string_value(json_object_get(e, "file")));
    int fd = mkstemp(tmp);
    cr_assert(fd >= 0);
    close(fd);
    refenc_error err;
    refenc_st_file f;
    refenc_case c;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_case_from_file(&c, &f, &err), REFENC_OK, "%s", err.message);
    refenc_tolerance tol;
    refenc_certify_policy(&tol, REFENC_ST_F64);

    const double factors[3] = {10.0, 0.1, NAN};
    for (int k = 0; k < 3; k++) {
        results r = {0};
        r.wanted = json_loads(refenc_st_metadata(&f, "outputs"), 0, NULL);
        const refenc_trace tr = {collect, &r};
        cr_assert_eq(refenc_case_run_reference(&c, &tr, &err), REFENC_OK);
        /* the golden value itself, so the perturbation is the only error */
        const refenc_st_tensor *g = refenc_st_find(&f, "out.output");
        double *out = NULL;
        for (size_t t = 0; t < r.n; t++)
            if (strcmp(r.names[t], "out.output") == 0)
                out = r.data[t];
        cr_assert(g && out);
        cr_assert_null(refenc_st_find(&f, "dontcare.out.output"), "pick a case without don't-care outputs");
        cr_assert_eq(refenc_st_to_f64(out, &f, g, &err), REFENC_OK);
        const double w = out[0];
        out[0] = isnan(factors[k]) ? NAN : w + factors[k] * (tol.atol + tol.rtol * fabs(w));
        refenc_case_report rep;
        int pass = certify(&f, &r, tmp, &rep);
        if (k == 1)
            cr_expect(pass, "a perturbation of 0.1 tolerance must pass");
        else
            cr_expect(!pass, "a perturbation of %s must fail", k == 0 ? "10 tolerances" : "NaN");
        refenc_case_report_free(&rep);
        free_results(&r);
        json_decref((json_t *)r.wanted);
    }
    refenc_case_free(&c);
    refenc_st_free(&f);
    json_decref(m);
}

/* The output named out_name of the set, or NULL. */
static const golden_output *set_output(const golden_set *s, const char *out_name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->o[i].name, out_name) == 0)
            return &s->o[i];
    return NULL;
}

/* Every output of the set has a don't-care mask exactly when the committed
 * file stores one (dontcare.<output>), and then the same bytes. */
static void expect_masks_as_committed(const golden_set *s, const refenc_st_file *f)
{
    for (size_t i = 0; i < s->n; i++) {
        const golden_output *o = &s->o[i];
        char dname[REFENC_NAME_MAX + 16];
        cr_assert(refenc_name_dontcare(dname, sizeof dname, NULL, o->name));
        const refenc_st_tensor *t = refenc_st_find(f, dname);
        cr_expect_eq(o->dc != NULL, t != NULL, "%s: the golden maker's set %s a don't-care mask, %s %s", o->name,
                     o->dc ? "has" : "has no", f->path, t ? "stores one" : "stores none");
        if (o->dc != NULL && t != NULL)
            cr_expect(t->numel == o->numel && memcmp(t->data, o->dc, o->numel) == 0,
                      "%s: the mask differs from %s's", o->name, f->path);
    }
}

Test(golden, a_pooled_output_has_no_dontcare_mask_while_the_rows_it_pools_have_one)
{
    /* dead_query_elements (ref/golden/file.c) marks the padded query rows of
     * the (B, L, ...) outputs; out.embedding (B, D) has no query-row axis, so
     * no element of it is don't-care, and it must carry no mask at all (not
     * an all-zero one: the file would store a dontcare.out.embedding that the
     * committed golden does not have).  The CLS-pooled case has 2 padded
     * tokens in item 1, no attention mask and no causal mask, so its dead
     * rows are its padded rows exactly. */
    char path[4096];
    case_path(path, sizeof path, "encoder_pool_cls_unnormalized.safetensors");
    refenc_error err;
    refenc_st_file f;
    refenc_case c;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(refenc_case_from_file(&c, &f, &err), REFENC_OK, "%s", err.message);
    cr_assert(c.key_padding_mask != NULL && c.attn_mask == NULL && !c.cfg.causal, "%s: not the case described", path);
    golden_set s;
    cr_assert_eq(golden_set_init(&s, &c, 1, 0, &err), REFENC_OK, "%s", err.message);
    const refenc_trace tr = {golden_set_collect, &s};
    cr_assert_eq(refenc_case_run_reference(&c, &tr, &err), REFENC_OK, "%s", err.message);
    cr_assert(!s.failed);

    const golden_output *emb = set_output(&s, "out.embedding"), *out = set_output(&s, "out.output");
    cr_assert(emb != NULL && out != NULL && emb->ndim == 2 && out->ndim == 3);
    cr_expect_null(emb->dc, "out.embedding (B, D) has no query rows, so no don't-care mask");
    cr_assert_not_null(out->dc, "out.output (B, L, D) of a padded case has a don't-care mask");
    size_t padded = 0;
    for (size_t r = 0; r < c.B * c.L; r++) {
        const int pad = c.key_padding_mask[r] != 0;
        size_t wrong = 0;
        padded += pad;
        for (size_t d = 0; d < out->shape[2]; d++)
            wrong += out->dc[r * out->shape[2] + d] != pad;
        cr_expect_eq(wrong, 0, "out.output item %zu, query %zu (%s): %zu of %zu elements %s don't-care", r / c.L,
                     r % c.L, pad ? "padded" : "a real token", wrong, out->shape[2], pad ? "not" : "marked");
    }
    cr_expect_gt(padded, 0, "%s has no padded token", path);
    expect_masks_as_committed(&s, &f);
    golden_set_free(&s);
    refenc_case_free(&c);
    refenc_st_free(&f);
}
