/* refenc golden's generator (docs/cli.md, docs/certify.md): the case from a
 * config or a catalogue entry, with seeded or the user's own weights and
 * inputs; the oracle's outputs, whole or as a part (--per-layer, --shard);
 * the bug variants; the case file and the directory's manifest.
 * Generation is deterministic: the same sources give byte-identical files. */
#include "make.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "../core/alloc.h"
#include "../core/text.h"
#include "../io/config_json.h"
#include "../io/manifest.h"
#include "../io/file_names.h"
#include "../io/model_sources.h"
#include "../io/run_config.h"
#include "../oracle/oracle.h"
#include "../tool/variants.h"
#include "alt.h"
#include "catalogue.h"
#include "engine.h"
#include "file.h"
#include "manifest.h"
#include "parts.h"
#include "plan.h"
#include "validate.h"
#include "places.h"
#include "grad.h"
#include "../oracle/backward.h"

#define DEFAULT_SEED 20240521u

/* ---- the case: config or catalogue entry, seeded or the user's files ------------ */

typedef struct {
    refenc_case c;
    char name[128];
    char *description;        /* owned */
    json_t *doc;              /* the catalogue, or the entry built for a config */
    const json_t *bug_classes, *tolerance;
    const char *hazard;
    int all_variants;         /* a config: every variant that applies */
    int variants_ref;         /* the variants from the double reference, not the oracle */
    int grad;                 /* --grad, or the catalogue entry's "grad" */
    uint64_t seed;            /* the case's seed (the seeded dY's) */
    int final_only; /* the catalogue entry's "outputs": "final" */
} golden_source;

static void source_free(golden_source *s)
{
    refenc_case_free(&s->c);
    free(s->description);
    json_decref(s->doc);
    memset(s, 0, sizeof *s);
}

/* A case name is also its file name, NAME.safetensors: both must be names
 * certify accepts (refenc_manifest_name_ok, the one rule for both). */
static int valid_name(const char *n)
{
    char file[REFENC_CASE_NAME_MAX + 16];
    snprintf(file, sizeof file, "%s.safetensors", n);
    return refenc_manifest_name_ok(n) && refenc_manifest_name_ok(file);
}

static int name_refused(const char *n, refenc_error *err)
{
    return refenc_error_set(err, REFENC_EINVAL,
                            "--name: '%s' is not a case name certify accepts (1 to %zu characters of "
                            "letters, digits, '.', '_', '-'; not starting with '.'; no '..')", n,
                            (size_t)REFENC_CASE_NAME_MAX - 1 - strlen(".safetensors"));
}

/* The catalogue entry that describes a config file's case. */
static json_t *entry_for_config(const refenc_config *cfg, const run_input *spec, const char *name,
                                uint64_t seed)
{
    json_t *model = refenc_config_to_json(cfg);
    json_t *input = json_pack("{s:I, s:I}", "batch", (json_int_t)spec->batch, "seq_len",
                              (json_int_t)spec->seq_len);
    if (input != NULL && spec->padding != NULL) {
        json_t *pad = json_array();
        for (size_t b = 0; b < spec->batch; b++)
            json_array_append_new(pad, json_integer((json_int_t)spec->padding[b]));
        json_object_set_new(input, "padding", pad);
    }
    if (input != NULL && spec->rows != NULL) { /* the last layer's query rows, read again by the catalogue */
        json_t *rows = json_array();
        for (size_t r = 0; r < spec->n_rows; r++)
            json_array_append_new(rows, json_integer((json_int_t)spec->rows[r]));
        json_object_set_new(input, "rows", rows);
    }
    if (model == NULL || input == NULL) {
        json_decref(model);
        json_decref(input);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:I, s:[]}", "case", name, "component", "encoder",
                     "description", "", "model", model, "input", input, "seed", (json_int_t)seed,
                     "bug_classes");
}

static char *describe_config(const refenc_config *c, const golden_request *a, uint64_t seed)
{
    /* file names are bytes: quoted as valid UTF-8 (\xNN), cut between characters, for the JSON
     * metadata; the parts fit buf whole */
    char buf[1200], w[300], in[300], base[280], qw[280], qi[280];
    const char *b = strrchr(a->config_path, '/') ? strrchr(a->config_path, '/') + 1 : a->config_path;
    refenc_text_escape(base, sizeof base, b);
    refenc_text_escape(qw, sizeof qw, a->weights_path ? a->weights_path : "");
    refenc_text_escape(qi, sizeof qi, a->inputs_path ? a->inputs_path : "");
    if (a->weights_path)
        snprintf(w, sizeof w, "weights from %s", qw);
    else
        snprintf(w, sizeof w, "seeded weights (seed %" PRIu64 ")", seed);
    if (a->inputs_path)
        snprintf(in, sizeof in, "inputs from %s", qi);
    else
        snprintf(in, sizeof in, "seeded inputs");
    snprintf(buf, sizeof buf,
             "%s: %zu layer%s, %s-LN, d_model %zu, %zu heads, d_ff %zu, %s, positional %s; %s; %s.",
             base, c->n_layers, c->n_layers == 1 ? "" : "s", c->norm == REFENC_NORM_PRE ? "Pre" : "Post",
             c->d_model, c->n_heads, c->d_ff, refenc_activation_name(c->activation),
             refenc_positional_name(c->positional), w, in);
    return strdup(buf);
}

/* The case, built from the sources the arguments name.  *report as in
 * model_sources.h. */
/* The source from a catalogue entry: its name, description, bug classes, tolerance and hazard. */
static int source_from_catalogue(golden_source *s, const golden_request *a, catalogue_case *cc, refenc_error *err)
{
    int st;
    if ((s->doc = catalogue_load(a->catalogue_path, err)) == NULL)
        return REFENC_EINVAL;
    if ((st = catalogue_find(cc, s->doc, a->case_name, err)) != REFENC_OK)
        return st;
    if (a->have_seed)
        cc->seed = (unsigned long)a->seed;
    s->seed = cc->seed;
    s->grad = a->grad || cc->grad;
    s->final_only = cc->final_only;
    snprintf(s->name, sizeof s->name, "%s", a->name ? a->name : cc->name);
    s->description = strdup(a->description ? a->description : cc->description);
    /* none given: none exposed, [] in the case file as in every case's */
    if (json_object_get(cc->entry, "bug_classes") == NULL &&
        json_object_set_new((json_t *)cc->entry, "bug_classes", json_array()) != 0)
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    s->bug_classes = json_object_get(cc->entry, "bug_classes");
    s->tolerance = json_object_get(cc->entry, "tolerance");
    if (json_object_size(s->tolerance) == 0) /* {} is the default policy, as no key */
        s->tolerance = NULL;
    s->hazard = json_string_value(json_object_get(cc->entry, "float32_hazard"));
    s->variants_ref = a->variants_engine == GOLDEN_VARIANTS_REFERENCE;
    return REFENC_OK;
}

/* The source from a config: the catalogue entry built for it, named after the file by default. */
static int source_from_config(golden_source *s, const golden_request *a, catalogue_case *cc, run_input *spec,
                              refenc_error *err)
{
    refenc_config cfg;
    int st;
    if ((st = run_config_load(&cfg, spec, a->config_path, err)) != REFENC_OK)
        return st;
    if (a->name != NULL) {
        snprintf(s->name, sizeof s->name, "%s", a->name);
    } else {
        const char *base = strrchr(a->config_path, '/');
        snprintf(s->name, sizeof s->name, "%s", base ? base + 1 : a->config_path);
        char *dot = strrchr(s->name, '.');
        if (dot != NULL && strcmp(dot, ".json") == 0)
            *dot = '\0';
    }
    if (!valid_name(s->name)) /* before it goes into JSON, which takes UTF-8 only */
        return name_refused(s->name, err);
    const uint64_t seed = a->have_seed ? a->seed : DEFAULT_SEED;
    s->doc = entry_for_config(&cfg, spec, s->name, seed);
    s->description = a->description ? strdup(a->description) : describe_config(&cfg, a, seed);
    s->bug_classes = json_object_get(s->doc, "bug_classes");
    /* by default every variant, from the reference (in parts too: merge computes them) */
    s->all_variants = !a->no_variants;
    s->variants_ref = a->variants_engine != GOLDEN_VARIANTS_ORACLE;
    s->seed = seed;
    s->grad = a->grad;
    if (s->doc == NULL)
        return refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    *cc = (catalogue_case){.entry = s->doc, .name = s->name, .description = "",
                           .component = REFENC_COMP_ENCODER, .seed = (unsigned long)seed,
                           .input_bits = 8};
    return REFENC_OK;
}

/* The user's inputs file replaces the seeded inputs, keeping the case's parameters and name. */
static int source_inputs(golden_source *s, const golden_request *a, const run_input *spec, char **report,
                         refenc_error *err)
{
    if (s->c.component != REFENC_COMP_ENCODER)
        return refenc_error_set(err, REFENC_EINVAL, "--inputs: case %s is a %s case; only encoder "
                                "cases take an inputs file", s->name, refenc_component_name(s->c.component));
    refenc_case k;
    /* with gradients, the file's in.grad.dY is dY (grad.h reads it) */
    int st = model_case_from_inputs_skip(&k, &s->c.cfg, spec, a->config_path ? a->config_path : a->catalogue_path,
                                         a->inputs_path, s->grad ? REFENC_NAME_GRAD_DY : NULL, report, err);
    if (st == REFENC_OK) {
        memcpy(k.params.block, s->c.params.block, s->c.params.n_values * sizeof(double));
        memcpy(k.name, s->c.name, sizeof k.name);
        k.rows = s->c.rows, k.R = s->c.R; /* the config's input.rows, for the file's inputs */
        s->c.rows = NULL;
        refenc_case_free(&s->c);
        s->c = k;
        if (k.rows != NULL)
            st = refenc_case_validate(&s->c, err);
    }
    return st;
}

/* Builds the case to make: config or catalogue entry, then the user's own inputs and weights. */
static int source_build(golden_source *s, const golden_request *a, char **report, refenc_error *err)
{
    memset(s, 0, sizeof *s);
    catalogue_case cc;
    run_input spec = {0};
    int st = a->catalogue_path != NULL ? source_from_catalogue(s, a, &cc, err)
                                       : source_from_config(s, a, &cc, &spec, err);
    if (st != REFENC_OK) {
        free(spec.padding);
        free(spec.rows);
        return st;
    }
    if (!valid_name(s->name))
        st = name_refused(s->name, err);
    else if (s->description == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    else
        st = catalogue_build(&s->c, &cc, err);
    if (st == REFENC_OK)
        snprintf(s->c.name, sizeof s->c.name, "%s", s->name);

    /* the user's own files replace what the seed gave */
    if (st == REFENC_OK && a->inputs_path != NULL)
        st = source_inputs(s, a, &spec, report, err);
    char summary[1024];
    if (st == REFENC_OK && a->weights_path != NULL)
        st = model_params_from_checkpoint(&s->c.params, &s->c.cfg, a->weights_path, summary, sizeof summary,
                                        report, err);
    if (st == REFENC_OK && a->weights_path != NULL && summary[0] != '\0' && !a->quiet)
        fprintf(stderr, "%s\n", summary);
    free(spec.padding);
    free(spec.rows);
    return st;
}

/* ---- gen ------------------------------------------------------------------------ */

/* --outputs final: the oracle certifies the final output only, and the
 * pooled embedding (required too, when the case pools) */
static int final_step(void *ctx, const char *step)
{
    (void)ctx;
    return strcmp(step, "output") == 0 || strcmp(step, "embedding") == 0;
}

/* The per-layer file's extra tensors: in.layers.{i}.input, F64. */
typedef struct {
    refenc_st_entry *e;
    char (*names)[REFENC_NAME_MAX];
} layer_entries;

static int layer_entries_make(layer_entries *le, const refenc_case *c, double *const *inputs)
{
    const size_t N = c->cfg.n_layers;
    le->e = calloc(N, sizeof *le->e);
    le->names = calloc(N, sizeof *le->names);
    if (le->e == NULL || le->names == NULL)
        return 0;
    for (size_t l = 0; l < N; l++) {
        refenc_name_layer_input(le->names[l], sizeof le->names[l], l);
        le->e[l] = (refenc_st_entry){.name = le->names[l], .dtype = REFENC_ST_F64, .ndim = 3,
                                     .shape = {c->B, c->L, c->cfg.d_model}, .data = inputs[l]};
    }
    return 1;
}

/* Where a run writes (places.h). */
static golden_places places_of(const golden_request *a, const char *name)
{
    return (golden_places){.out_dir = a->out_dir, .out_file = a->out_file, .name = name,
                           .shard_k = a->shard_k, .shard_n = a->shard_n};
}

/* Where a part goes: the --out-file, or DIR/parts/<case>.part-K-of-N.safetensors. */
static int part_path(char *path, size_t n, const golden_request *a, const char *name, refenc_error *err)
{
    if (a->out_file != NULL)
        return refenc_path_format(path, n, err, "%s", a->out_file);
    const golden_places p = places_of(a, name);
    return golden_part_path(path, n, &p, err);
}

/* No file the run writes may be one of its inputs. */
static int refuse_inputs(const golden_request *a, const char *name, refenc_error *err)
{
    const char *const inputs[] = {a->config_path, a->catalogue_path, a->weights_path, a->inputs_path};
    static const char *const what[] = {"--config", "--catalogue", "--weights", "--inputs"};
    const golden_places p = places_of(a, name);
    return golden_refuse_inputs(&p, inputs, what, 4, err);
}

/* Everything one run of refenc golden makes, freed together. */
typedef struct {
    golden_source s;
    golden_set golden;
    golden_alt v;
    golden_steps steps;
    golden_part_set ps;
    layer_entries le;
    golden_grad grad;          /* the gradients (--grad), or empty */
    double *dY;                /* the user's in.grad.dY, or NULL (seeded) */
    double **inputs;
    char engine_desc[256];
    int in_parts;              /* --per-layer or --shard */
    size_t units, begin, end;  /* the case's units, and those this run computes */
} golden_run;

/* The bug variants this run stores: every one that applies (a config's), or
 * a catalogue entry's bug classes' unless --no-variants. */
static int wants_variants(const golden_source *s, const golden_request *a)
{
    return s->all_variants || (a->catalogue_path != NULL && !a->no_variants && json_array_size(s->bug_classes) > 0);
}

/* What a shard's plan says of the variants merge computes: NULL (none), "all" or "bug_classes". */
static const char *plan_variants(const golden_source *s, const golden_request *a)
{
    return !wants_variants(s, a) ? NULL : s->all_variants ? "all" : "bug_classes";
}

/* Refuses what cannot be made in parts, and finds the units this run computes. */
static int plan_units(golden_run *r, const golden_request *a, refenc_error *err)
{
    const golden_source *s = &r->s;
    int st = REFENC_OK;
    r->in_parts = a->per_layer || a->shard_n > 0;
    r->units = refenc_mp_encoder_units(&s->c.cfg, s->c.B, a->per_layer);
    r->begin = 0, r->end = r->units;
    if (r->in_parts && s->c.component != REFENC_COMP_ENCODER)
        st = refenc_error_set(err, REFENC_EINVAL, "--per-layer and --shard: case %s is a %s case; only "
                              "encoder cases are made in parts", s->name, refenc_component_name(s->c.component));
    else if (a->shard_n > 0 && wants_variants(s, a) && !s->variants_ref)
        st = refenc_error_set(err, REFENC_EINVAL, "--shard makes no oracle bug variants (merge computes the "
                              "double reference's): give --variants=reference, or --no-variants%s",
                              a->catalogue_path != NULL ? " for a catalogue entry with bug classes" : "");
    else if (a->shard_n > r->units)
        st = refenc_error_set(err, REFENC_EINVAL, "--shard %zu/%zu: case %s has only %zu unit%s (%s); "
                              "give at most %zu shards", a->shard_k, a->shard_n, s->name, r->units,
                              r->units == 1 ? "" : "s", a->per_layer ? "layers x batch items" :
                              "batch items; --per-layer makes layers x batch items", r->units);
    if (st == REFENC_OK && a->shard_n > 0)
        golden_shard_units(a->shard_k, a->shard_n, r->units, &r->begin, &r->end);
    return st;
}

/* Per layer: the layers' stored inputs, from the double reference. */
static int stored_layer_inputs(golden_run *r, const golden_request *a, refenc_error *err)
{
    const refenc_case *c = &r->s.c;
    const size_t first = r->begin / c->B, last = r->end > r->begin ? (r->end - 1) / c->B : first;
    /* a shard's units are (layer, item) pairs from `begin` on, layer by
     * layer: within one layer, only its items need the reference */
    const int one_layer = a->shard_n > 0 && first == last && r->end > r->begin;
    return golden_layer_inputs(&r->inputs, c, a->shard_n > 0 ? first : 0,
                               a->shard_n > 0 ? last : c->cfg.n_layers - 1,
                               one_layer ? r->begin - first * c->B : 0, one_layer ? r->end - first * c->B : c->B,
                               err);
}

/* The case as a part file describes it: no outputs (the slices hold them). */
static golden_file part_case(const golden_source *s)
{
    return (golden_file){.c = &s->c, .name = s->name, .description = s->description,
                         .bug_classes = s->bug_classes, .tolerance = s->tolerance, .float32_hazard = s->hazard};
}

/* The canonical text of the plan every part of this run shares (plan.h);
 * NULL when out of memory. */
static char *run_plan_text(const golden_run *r, const golden_request *a)
{
    const golden_file g = part_case(&r->s);
    json_t *plan = golden_plan_make(&g, a->per_layer, a->final_only, (long)a->prec, r->units, a->shard_n,
                                    plan_variants(&r->s, a));
    char *text = plan != NULL ? golden_plan_text(plan) : NULL;
    json_decref(plan);
    return text;
}

/* A rerun (docs/cli.md, "Reruns"): when the file this shard writes is there
 * already, a regular file that is this plan's shard K whole and unchanged
 * (golden_part_verify), *done and nothing is computed: the bytes it holds
 * are those the run would write.  Anything else there (truncated, changed,
 * of another plan or shard, not a part) is said on stderr and computed
 * again; the write replaces it whole (atomic_write.h).  Errors: those of
 * the path, REFENC_ENOMEM. */
static int part_done(const golden_run *r, const golden_request *a, golden_outcome *out, int *done,
                     refenc_error *err)
{
    char path[PATH_MAX];
    const golden_places p = places_of(a, r->s.name);
    struct stat sb;
    *done = 0;
    int st = a->out_file != NULL ? refenc_path_format(path, sizeof path, err, "%s", a->out_file)
                                 : golden_part_file(path, sizeof path, &p, err);
    if (st != REFENC_OK || lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return st; /* nothing there (or not a file: the write says what) */
    char *plan_text = run_plan_text(r, a);
    refenc_error why = {0};
    if (plan_text == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    else if (golden_part_verify(path, plan_text, a->shard_k, &why) == REFENC_OK)
        *done = 1;
    else /* even with --quiet: a file of the user's is being replaced */
        fprintf(stderr, "refenc golden: %s; computing shard %zu/%zu again\n", why.message, a->shard_k,
                a->shard_n);
    if (*done)
        snprintf(out->summary, sizeof out->summary, "case %s: shard %zu/%zu (units %zu to %zu of %zu) is "
                 "already in %s, whole and of this plan: nothing computed", r->s.name, a->shard_k, a->shard_n,
                 r->begin, r->end, r->units, path);
    free(plan_text);
    return st;
}

/* The precisions a shard's oracle run needs unless a unit is evaluated
 * again (engine.c, Ziv's loop): its first pair; none without units.  The
 * part file's header is sized for them (golden_part_open). */
static void first_precisions(const golden_run *r, const golden_request *a, long *prec, long *prec_check)
{
    const mpfr_prec_t p = a->prec > 0 ? (mpfr_prec_t)a->prec : REFENC_MP_PREC_DEFAULT;
    *prec = r->end > r->begin ? (long)p : 0;
    *prec_check = r->end > r->begin ? (long)refenc_mp_next_prec(p, 0) : 0;
}

/* A part: opens the part file, puts the layer inputs, computes the units,
 * each item's values written as they come (golden_part_set_emit), and
 * commits the file with the precisions the run needed. */
static int make_part(golden_run *r, const golden_request *a, golden_outcome *out, refenc_error *err)
{
    const golden_source *s = &r->s;
    char tmp[PATH_MAX] = "";
    golden_part_writer pf;
    memset(&pf, 0, sizeof pf);
    int st = golden_part_set_init(&r->ps, &s->c, &r->steps, a->per_layer, r->begin, r->end, err);
    const golden_run_options ro = {.threads = (int)a->threads, .quiet = a->quiet,
                                   .layer_inputs = (const double *const *)r->inputs,
                                   .unit_begin = r->begin, .unit_end = r->end, .prec = (long)a->prec};
    const golden_file g = part_case(s);
    char *plan_text = run_plan_text(r, a);
    golden_part_info pi = {.k = a->shard_k, .n = a->shard_n, .unit_begin = r->begin, .unit_end = r->end,
                           .units = r->units, .per_layer = a->per_layer, .final_only = a->final_only,
                           .first_prec = (long)a->prec, /* golden_default_prec unless --prec */
                           .plan_text = plan_text, .n_slices = r->ps.n, .slices = r->ps.slice};
    first_precisions(r, a, &pi.prec, &pi.prec_check);
    if (st == REFENC_OK && plan_text == NULL)
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    if (st == REFENC_OK)
        st = part_path(tmp, sizeof tmp, a, s->name, err);
    if (st == REFENC_OK && (st = golden_part_open(&pf, &g, &pi, tmp, err)) == REFENC_OK) {
        r->ps.file = &pf;
        if (a->per_layer)
            golden_part_set_put_inputs(&r->ps, &s->c, (const double *const *)r->inputs);
    }
    if (st == REFENC_OK && r->end > r->begin)
        st = golden_encoder_run(&s->c, &ro, &r->steps, golden_part_set_emit, &r->ps, r->engine_desc,
                                sizeof r->engine_desc, &pi.prec, &pi.prec_check, err);
    if (st == REFENC_OK)
        st = golden_part_commit(&pf, &g, &pi, err);
    golden_part_abort(&pf); /* after an error: no part, no temporary file */
    free(plan_text);
    if (st == REFENC_OK)
        snprintf(out->summary, sizeof out->summary, "case %s: shard %zu/%zu (units %zu to %zu of %zu) written to %s", s->name,
               a->shard_k, a->shard_n, r->begin, r->end, r->units, tmp);
    return st;
}

/* An encoder case: the oracle's steps become the case's outputs (taken over, not copied). */
static int encoder_outputs(golden_run *r, const golden_request *a, refenc_error *err)
{
    const refenc_case *c = &r->s.c;
    int st = REFENC_OK;
    if (!a->per_layer)
        st = golden_steps_init(&r->steps, c, a->final_only ? final_step : NULL, NULL, 1);
    const golden_run_options ro = {.threads = (int)a->threads, .quiet = a->quiet,
                                   .layer_inputs = (const double *const *)r->inputs, .prec = (long)a->prec};
    if (st == REFENC_OK)
        st = golden_encoder_run(c, &ro, &r->steps, NULL, NULL, r->engine_desc, sizeof r->engine_desc, NULL,
                                NULL, err);
    for (size_t i = 0; i < r->steps.n && st == REFENC_OK; i++) {
        golden_step *gs = &r->steps.step[i];
        golden_set_adopt(&r->golden, gs->name, gs->data, gs->ndim, gs->shape);
        gs->data = NULL;
    }
    if (st == REFENC_OK && a->per_layer && !layer_entries_make(&r->le, c, r->inputs))
        st = refenc_error_set(err, REFENC_ENOMEM, "out of memory");
    return st;
}

/* The case's outputs from the oracle: the encoder's steps, or a component's trace. */
static int case_outputs(golden_run *r, const golden_request *a, refenc_error *err)
{
    int st = golden_set_init(&r->golden, &r->s.c, 1, a->final_only, err);
    if (st == REFENC_OK && r->s.c.component == REFENC_COMP_ENCODER) {
        st = encoder_outputs(r, a, err);
    } else if (st == REFENC_OK) {
        const refenc_trace tr = {golden_set_collect, &r->golden};
        const golden_engine_options eo = {.threads = (int)a->threads, .quiet = a->quiet,
                                          .wanted = a->final_only ? final_step : NULL};
        st = golden_engine_run(&r->s.c, NULL, 1, &eo, &tr, r->engine_desc, sizeof r->engine_desc, err);
    }
    if (st == REFENC_OK && r->golden.failed)
        st = refenc_error_set(err, REFENC_ENOMEM, "case %s: out of memory", r->s.name);
    return st;
}

/* Writes the case file (and adds it to the directory's manifest) and reports it unless quiet. */
static int write_case(golden_run *r, const golden_request *a, golden_outcome *out, refenc_error *err)
{
    const golden_source *s = &r->s;
    const golden_alt *v = &r->v;
    int st;
    json_t *per_layer_meta = a->per_layer ? json_pack("{s:s}", "per_layer", "true") : NULL;
    const golden_file g = {
        .c = &s->c, .name = s->name, .description = s->description,
        .bug_classes = s->all_variants ? v->classes : s->bug_classes, .tolerance = s->tolerance,
        .float32_hazard = s->hazard, .oracle = r->engine_desc,
        .variant_oracle = v->n > 0 ? v->desc : NULL, .golden = &r->golden, .n_alt = v->n,
        .variants_by_reference = v->n > 0 && v->by_reference, .variant_reference_error = v->ref_error,
        .alt = v->set, .alt_names = v->names, .alt_keep = (const int *const *)v->keep,
        .variants = v->meta ? v->meta : json_array(),
        .extra_meta = s->grad ? r->grad.meta : per_layer_meta,
        .n_extra = s->grad ? r->grad.n : a->per_layer ? s->c.cfg.n_layers : 0,
        .extra = s->grad ? r->grad.e : r->le.e};
    if (a->out_file != NULL)
        st = golden_file_write(&g, a->out_file, err);
    else
        st = golden_dir_add(a->out_dir, &g, err);
    if (v->meta == NULL)
        json_decref((json_t *)g.variants);
    json_decref(per_layer_meta);
    if (st == REFENC_OK)
        snprintf(out->summary, sizeof out->summary, "case %s: %zu outputs%s%s, %s; written to %s%s%s%s", s->name,
               r->golden.n, s->grad ? " and their gradients" : "", v->n ? " and bug variants" : "", r->engine_desc,
               a->out_file ? a->out_file : a->out_dir, a->out_file ? "" : "/cases/",
               a->out_file ? "" : s->name, a->out_file ? "" : ".safetensors");
    return st;
}

/* What --grad cannot make, refused before any work: a component case, a
 * block the oracle's backward does not compute (named by its key), parts. */
static int grad_refused(const golden_source *s, const golden_request *a, refenc_error *err)
{
    refenc_error why = {0};
    if (s->c.component != REFENC_COMP_ENCODER)
        return refenc_error_set(err, REFENC_EINVAL, "--grad: case %s is a %s case; gradients are made for "
                                "encoder cases", s->name, refenc_component_name(s->c.component));
    if (refenc_mp_backward_supported(&s->c.cfg, &why) != REFENC_OK)
        return refenc_error_set(err, REFENC_EINVAL, "--grad: case %s: %s", s->name, why.message);
    if (s->c.rows != NULL)
        return refenc_error_set(err, REFENC_EINVAL, "--grad: case %s: input.rows selects query rows; the "
                                "gradients are of the whole sequence: drop input.rows", s->name);
    if (a->per_layer || a->shard_n > 0)
        return refenc_error_set(err, REFENC_EINVAL, "--grad: case %s: gradients are not made in parts yet "
                                "(--per-layer, --shard): the oracle's backward certifies the whole stack in "
                                "one run; drop --per-layer and --shard", s->name);
    return REFENC_OK;
}

/* The gradients: dY the inputs file's in.grad.dY (read by grad_refused), else seeded. */
static int case_gradients(golden_run *r, const golden_request *a, refenc_error *err)
{
    const int threads = a->threads > 0 ? (int)a->threads : golden_default_threads();
    return golden_grad_make(&r->grad, &r->s.c, r->dY, r->s.seed, (long)a->prec, threads, a->quiet, err);
}

/* Frees everything a run made, its source last. */
static void golden_run_free(golden_run *r)
{
    free(r->le.e);
    free(r->le.names);
    golden_grad_free(&r->grad);
    free(r->dY);
    golden_part_set_free(&r->ps);
    golden_steps_free(&r->steps);
    golden_layer_inputs_free(r->inputs, r->s.c.cfg.n_layers);
    golden_alt_free(&r->v);
    golden_set_free(&r->golden);
    source_free(&r->s);
}

uint64_t golden_prec_max(void)
{
    return (uint64_t)REFENC_MP_PREC_MAX - 64; /* Ziv's check runs at P + 64 */
}

uint64_t golden_default_prec(const golden_request *a)
{
    return a->config_path != NULL ? GOLDEN_CONFIG_PREC : (uint64_t)REFENC_MP_PREC_DEFAULT;
}

/* The whole case: its outputs, its bug variants, its gradients and their
 * backward bugs' (grad.h), then the file. */
static int make_whole(golden_run *r, const golden_request *a, golden_outcome *out, refenc_error *err)
{
    int st = case_outputs(r, a, err);
    if (st == REFENC_OK && (r->s.all_variants || (a->catalogue_path != NULL && !a->no_variants)))
        st = golden_alt_make(&r->v, &(golden_alt_request){.c = &r->s.c, .name = r->s.name,
                             .bug_classes = r->s.bug_classes, .all = r->s.all_variants,
                             .by_reference = r->s.variants_ref, .threads = (int)a->threads,
                             .quiet = a->quiet}, &r->golden, err);
    if (st == REFENC_OK && r->s.grad)
        st = case_gradients(r, a, err);
    if (st == REFENC_OK && r->s.grad && !a->no_variants) {
        if (r->v.meta == NULL && (r->v.meta = json_array()) == NULL)
            st = refenc_error_set(err, REFENC_ENOMEM, "out of memory");
        if (st == REFENC_OK)
            st = golden_grad_variants(&r->grad, &r->s.c, r->v.meta,
                                      a->threads > 0 ? (int)a->threads : golden_default_threads(), a->quiet, err);
    }
    return st == REFENC_OK ? write_case(r, a, out, err) : st;
}

/* Makes the case, or one part of it, and writes it (make.h). */
int golden_make(const golden_request *a, golden_outcome *out, char **report, refenc_error *err)
{
    golden_run r;
    memset(&r, 0, sizeof r);
    memset(out, 0, sizeof *out);
    *report = NULL;

    /* --out-file is refused before any input is read; the files under --out
     * DIR are named after the case, known once its source is */
    int st = a->out_file != NULL ? refuse_inputs(a, NULL, err) : REFENC_OK;
    if (st == REFENC_OK)
        st = source_build(&r.s, a, report, err);
    /* ground truth from good input only, before any work (validate.h) */
    const golden_sources src = {a->inputs_path, a->weights_path,
                                a->config_path ? a->config_path : a->catalogue_path};
    if (st == REFENC_OK)
        st = golden_validate_case(&r.s.c, r.s.name, &src, err);
    if (st != REFENC_OK) {
        source_free(&r.s);
        return st;
    }
    golden_request final_request; /* the entry's "outputs": "final" is --outputs final */
    if (r.s.final_only && !a->final_only) {
        final_request = *a;
        final_request.final_only = 1;
        a = &final_request;
    }
    if (a->out_file == NULL)
        st = refuse_inputs(a, r.s.name, err);
    int done = 0;
    if (st == REFENC_OK && r.s.grad)
        st = grad_refused(&r.s, a, err);
    if (st == REFENC_OK && r.s.grad && a->inputs_path != NULL) /* bad dY: refused before any work */
        st = golden_grad_read_dy(&r.dY, &r.s.c, a->inputs_path, err);
    if (st == REFENC_OK)
        st = plan_units(&r, a, err);
    if (st == REFENC_OK && a->shard_n > 0)
        st = part_done(&r, a, out, &done, err);
    if (st == REFENC_OK && a->per_layer && !done)
        st = stored_layer_inputs(&r, a, err);
    if (st == REFENC_OK && r.in_parts && !done)
        st = golden_steps_init(&r.steps, &r.s.c, a->final_only ? final_step : NULL, NULL, a->shard_n == 0);
    if (st == REFENC_OK && a->shard_n > 0) {
        st = done ? REFENC_OK : make_part(&r, a, out, err);
    } else if (st == REFENC_OK) {
        st = make_whole(&r, a, out, err);
    }
    golden_run_free(&r);
    return st;
}

