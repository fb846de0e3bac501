/* Out of memory, everywhere it can happen in the library: each allocation of
 * a call made to fail in turn (fault.h).  Every run either succeeds with the
 * result of a run without failure, or returns REFENC_ENOMEM with a message
 * that names the file — never a crash, another error, or a result that is
 * wrong.  Under `make sanitize` LeakSanitizer checks that every failed run
 * frees what it had allocated. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../../ref/tool/certify.h"
#include "../../ref/io/config_json.h"
#include "../../ref/core/case.h"
#include "../../ref/io/case_file.h"
#include "../../ref/tool/run_case.h"
#include "../../ref/io/safetensors.h"
#include "fault.h"
#include "robust.h"

static void expect_enomem(int status, const refenc_error *err, const char *name, const char *what, long n)
{
    cr_expect_eq(status, REFENC_ENOMEM, "%s, allocation %ld fails: status %d (%s): %s", what, n, status,
                 refenc_status_name(status), err->message);
    cr_expect(strstr(err->message, name) != NULL, "%s: the message does not name %s: %s", what, name,
              err->message);
}

/* ---- the safetensors reader and writer ------------------------------------------ */

typedef struct {
    const unsigned char *buf;
    size_t size;
    const char *path;
    refenc_st_file f;
    refenc_error err;
    size_t n_tensors; /* of the run without failure */
    long run;
} parse_ctx;

static int parse_call(void *p)
{
    parse_ctx *c = p;
    return c->buf ? refenc_st_parse(&c->f, c->buf, c->size, c->path, &c->err)
                  : refenc_st_read(&c->f, c->path, &c->err);
}

static void parse_check(void *p, int st, int failed)
{
    parse_ctx *c = p;
    c->run++;
    if (failed) {
        expect_enomem(st, &c->err, c->path, "parse", c->run);
        cr_expect(c->f.n_tensors == 0 && c->f.tensors == NULL && c->f.metadata == NULL && c->f.buf == NULL,
                  "allocation %ld: the file is not empty after the error", c->run);
    } else {
        cr_expect_eq(st, REFENC_OK, "%s", c->err.message);
        cr_expect_eq(c->f.n_tensors, c->n_tensors);
    }
    refenc_st_free(&c->f);
}

Test(out_of_memory, safetensors_reader)
{
    const char *cases[] = {"act_gelu", "encoder_pre_rope"};
    for (size_t i = 0; i < 2; i++) {
        char path[RB_PATH_MAX];
        rb_fixture_case(path, cases[i]);
        parse_ctx c = {.path = path};
        refenc_st_file f;
        cr_assert_eq(refenc_st_read(&f, path, &c.err), REFENC_OK);
        c.n_tensors = f.n_tensors;
        refenc_st_free(&f);
        const long n_read = fault_run(parse_call, parse_check, &c, 0); /* refenc_st_read */
        c.buf = rb_read_file(path, &c.size);
        c.run = 0;
        const long n_parse = fault_run(parse_call, parse_check, &c, 0); /* refenc_st_parse */
        cr_expect(n_read > n_parse && n_parse > 0, "reading allocates the buffer: %ld, parsing %ld", n_read, n_parse);
        free((void *)c.buf);
    }
}

typedef struct {
    char dir[RB_PATH_MAX], path[RB_PATH_MAX + 32];
    refenc_st_entry e[3];
    json_t *meta;
    refenc_error err;
    long run;
} write_ctx;

static int write_call(void *p)
{
    write_ctx *c = p;
    return refenc_st_write(c->path, c->e, 3, c->meta, &c->err);
}

static void write_check(void *p, int st, int failed)
{
    write_ctx *c = p;
    c->run++;
    if (failed) {
        expect_enomem(st, &c->err, c->path, "write", c->run);
        cr_expect(!rb_exists(c->path), "allocation %ld: %s exists after the error", c->run, c->path);
    } else {
        cr_expect_eq(st, REFENC_OK, "%s", c->err.message);
        cr_expect(rb_exists(c->path));
    }
    cr_expect(!rb_has_temporary_file(c->dir), "allocation %ld: a temporary file is left", c->run);
    unlink(c->path);
}

Test(out_of_memory, safetensors_writer)
{
    write_ctx c = {0};
    rb_tmpdir(c.dir);
    snprintf(c.path, sizeof c.path, "%s/w.safetensors", c.dir);
    const double a[6] = {1.5, -2.25, 3.125, 0.5, 8, 9};
    const int64_t b[2] = {7, -3};
    const uint8_t m[4] = {0, 1, 1, 0};
    c.e[0] = (refenc_st_entry){"out.a", REFENC_ST_F64, 2, {2, 3}, a};
    c.e[1] = (refenc_st_entry){"in.b", REFENC_ST_I64, 1, {2}, b};
    c.e[2] = (refenc_st_entry){"dontcare.out.a", REFENC_ST_BOOL, 2, {2, 2}, m};
    c.meta = json_pack("{s:s, s:s}", "case", "w", "outputs", "[]");
    cr_expect_gt(fault_run(write_call, write_check, &c, 1), 10);
    json_decref(c.meta);
    rb_tmpdir_remove(c.dir);
}

/* ---- golden cases: loading, the reference, certification ---------------------------- */

typedef struct {
    refenc_st_file golden, results;
    refenc_case c;
    refenc_case_report rep, want;
    refenc_error err;
    long run;
} case_ctx;

static int load_call(void *p)
{
    case_ctx *c = p;
    return refenc_case_from_file(&c->c, &c->golden, &c->err);
}

static void load_check(void *p, int st, int failed)
{
    case_ctx *c = p;
    c->run++;
    if (failed) {
        expect_enomem(st, &c->err, c->golden.path, "load a case", c->run);
        cr_expect(c->c.x == NULL && c->c.params.block == NULL, "allocation %ld: the case is not freed", c->run);
    } else {
        cr_expect_eq(st, REFENC_OK, "%s", c->err.message);
    }
    refenc_case_free(&c->c);
}

static void count_step(void *ctx, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    (void)name, (void)data, (void)ndim, (void)shape;
    ++*(size_t *)ctx;
}

static size_t steps;

static int reference_call(void *p)
{
    case_ctx *c = p;
    steps = 0;
    const refenc_trace tr = {count_step, &steps};
    return refenc_case_run_reference(&c->c, &tr, &c->err);
}

static void reference_check(void *p, int st, int failed)
{
    case_ctx *c = p;
    c->run++;
    if (failed) {
        cr_expect_eq(st, REFENC_ENOMEM, "the reference, allocation %ld: status %d: %s", c->run, st, c->err.message);
        cr_expect_eq(steps, 0, "allocation %ld: %zu steps reported before the error", c->run, steps);
    } else {
        cr_expect_eq(st, REFENC_OK, "%s", c->err.message);
        cr_expect_gt(steps, 0);
    }
}

static int certify_call(void *p)
{
    case_ctx *c = p;
    return refenc_certify_case(&c->rep, &c->golden, &c->results, NULL, &c->err);
}

static void certify_check(void *p, int st, int failed)
{
    case_ctx *c = p;
    c->run++;
    if (failed) {
        expect_enomem(st, &c->err, "safetensors", "certify", c->run);
    } else {
        cr_expect_eq(st, REFENC_OK, "%s", c->err.message);
        cr_expect_eq(c->rep.pass, c->want.pass);
        cr_expect_eq(c->rep.n_outputs, c->want.n_outputs);
        for (size_t i = 0; i < c->rep.n_outputs && i < c->want.n_outputs; i++) {
            cr_expect_eq(c->rep.outputs[i].status, c->want.outputs[i].status);
            cr_expect(c->rep.outputs[i].tol.rtol == c->want.outputs[i].tol.rtol, "%s: rtol %g, want %g",
                      c->rep.outputs[i].name, c->rep.outputs[i].tol.rtol, c->want.outputs[i].tol.rtol);
        }
    }
    refenc_case_report_free(&c->rep);
}

static void golden_case_under_faults(const char *name)
{
    case_ctx c;
    memset(&c, 0, sizeof c);
    char path[RB_PATH_MAX], dir[RB_PATH_MAX], rpath[RB_PATH_MAX + 32];
    rb_fixture_case(path, name);
    cr_assert_eq(refenc_st_read(&c.golden, path, &c.err), REFENC_OK, "%s", c.err.message);

    cr_expect_gt(fault_run(load_call, load_check, &c, 0), 0, "loading %s allocates nothing", name);

    cr_assert_eq(refenc_case_from_file(&c.c, &c.golden, &c.err), REFENC_OK);
    c.run = 0;
    cr_expect_gt(fault_run(reference_call, reference_check, &c, 0), 0, "the reference allocates nothing");

    rb_tmpdir(dir);
    snprintf(rpath, sizeof rpath, "%s/%s.safetensors", dir, name);
    rb_reference_results(name, rpath);
    cr_assert_eq(refenc_st_read(&c.results, rpath, &c.err), REFENC_OK);
    cr_assert_eq(refenc_certify_case(&c.want, &c.golden, &c.results, NULL, &c.err), REFENC_OK);
    cr_assert(c.want.pass);
    c.run = 0;
    cr_expect_gt(fault_run(certify_call, certify_check, &c, 0), 0, "certify allocates nothing");

    refenc_case_report_free(&c.want);
    refenc_case_free(&c.c);
    refenc_st_free(&c.results);
    refenc_st_free(&c.golden);
    rb_tmpdir_remove(dir);
}

Test(out_of_memory, encoder_case)
{
    golden_case_under_faults("encoder_pre_rope");
}

Test(out_of_memory, component_cases)
{
    const char *names[] = {"attention_basic", "alibi_12", "pe_large", "softmax_masked", "layernorm_small_variance",
                           "ffn_gelu_tanh", "rope_interleaved"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        golden_case_under_faults(names[i]);
}

/* certify of a bfloat16 result: its budget runs the emulated baseline of the
 * case, whose allocations fail in turn too; the emulation's message names
 * the case (which the file's name holds) rather than the file. */
static const char *lowprec_case;

static void lowprec_check(void *p, int st, int failed)
{
    case_ctx *c = p;
    c->run++;
    if (failed) {
        expect_enomem(st, &c->err, lowprec_case, "certify in bfloat16", c->run);
    } else {
        cr_expect_eq(st, REFENC_OK, "%s", c->err.message);
        cr_expect_eq(c->rep.verdict, c->want.verdict);
        cr_expect_eq(c->rep.n_outputs, c->want.n_outputs);
        for (size_t i = 0; i < c->rep.n_outputs && i < c->want.n_outputs; i++)
            cr_expect(c->rep.outputs[i].status == c->want.outputs[i].status &&
                          c->rep.outputs[i].budget_max_abs == c->want.outputs[i].budget_max_abs,
                      "%s", c->rep.outputs[i].name);
    }
    refenc_case_report_free(&c->rep);
}

Test(out_of_memory, certify_a_bfloat16_result)
{
    const char *names[] = {"softmax_masked", "act_gelu"}; /* with and without a don't-care mask */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        case_ctx c;
        memset(&c, 0, sizeof c);
        char path[RB_PATH_MAX], dir[RB_PATH_MAX], rpath[RB_PATH_MAX + 32];
        rb_fixture_case(path, names[i]);
        rb_tmpdir(dir);
        snprintf(rpath, sizeof rpath, "%s/%s.safetensors", dir, names[i]);
        const char *args[] = {"refenc", "run", "--case", path, "--out", rpath, "--emulate", "bf16", NULL};
        rb_result r = rb_run(args);
        cr_assert_eq(r.status, 0, "%s: %s", names[i], r.err);
        rb_result_free(&r);
        cr_assert_eq(refenc_st_read(&c.golden, path, &c.err), REFENC_OK, "%s", c.err.message);
        cr_assert_eq(refenc_st_read(&c.results, rpath, &c.err), REFENC_OK, "%s", c.err.message);
        cr_assert_eq(refenc_certify_case(&c.want, &c.golden, &c.results, NULL, &c.err), REFENC_OK, "%s",
                     c.err.message);
        cr_assert(c.want.pass, "%s in bfloat16 does not pass", names[i]);
        lowprec_case = names[i];
        cr_expect_gt(fault_run(certify_call, lowprec_check, &c, 0), 0, "certify allocates nothing");
        refenc_case_report_free(&c.want);
        refenc_st_free(&c.results);
        refenc_st_free(&c.golden);
        rb_tmpdir_remove(dir);
    }
}

static int missing_call(void *p)
{
    case_ctx *c = p;
    return refenc_certify_missing(&c->rep, &c->golden, "no results file x", &c->err);
}

static void missing_check(void *p, int st, int failed)
{
    case_ctx *c = p;
    c->run++;
    if (failed)
        expect_enomem(st, &c->err, c->golden.path, "certify a missing file", c->run);
    else
        cr_expect(st == REFENC_OK && !c->rep.pass, "%s", c->err.message);
    refenc_case_report_free(&c->rep);
}

Test(out_of_memory, certify_a_missing_results_file)
{
    case_ctx c;
    memset(&c, 0, sizeof c);
    char path[RB_PATH_MAX];
    rb_fixture_case(path, "encoder_post_alibi6");
    cr_assert_eq(refenc_st_read(&c.golden, path, &c.err), REFENC_OK);
    cr_expect_gt(fault_run(missing_call, missing_check, &c, 0), 0);
    refenc_st_free(&c.golden);
}

static int to_json_call(void *p)
{
    json_t **j = p;
    refenc_config cfg;
    refenc_config_default(&cfg);
    *j = refenc_config_to_json(&cfg);
    return *j != NULL ? REFENC_OK : REFENC_ENOMEM;
}

static void to_json_check(void *p, int st, int failed)
{
    json_t **j = p;
    cr_expect(failed ? st == REFENC_ENOMEM : st == REFENC_OK && json_object_size(*j) == 16,
              "refenc_config_to_json: status %d", st);
    json_decref(*j);
}

Test(out_of_memory, config_to_json)
{
    json_t *j = NULL;
    cr_expect_gt(fault_run(to_json_call, to_json_check, &j, 1), 0);
}

/* ---- the oracle, as the golden generator runs it ------------------------------------ */

#include "../../ref/oracle/oracle.h"

#define MAX_ORACLE_VALUES 4096

typedef struct {
    refenc_case c;
    int certify;
    refenc_mp_report rep;
    size_t n_values;
    double values[MAX_ORACLE_VALUES]; /* every output, in order, as emitted */
    double want[MAX_ORACLE_VALUES];
    size_t n_want;
    long run;
} oracle_ctx;

static void oracle_collect(void *p, const char *name, const double *data, size_t ndim, const size_t *shape)
{
    oracle_ctx *o = p;
    (void)name;
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    for (size_t i = 0; i < n && o->n_values < MAX_ORACLE_VALUES; i++)
        o->values[o->n_values++] = data[i];
}

static int oracle_call(void *p)
{
    oracle_ctx *o = p;
    o->n_values = 0;
    const refenc_trace tr = {oracle_collect, o};
    return refenc_mp_case_run(&o->c, NULL, o->certify, &tr, o->certify ? REFENC_MP_PREC_DEFAULT : 128, &o->rep);
}

static void oracle_check(void *p, int st, int failed)
{
    oracle_ctx *o = p;
    o->run++;
    if (failed) {
        cr_expect_eq(st, REFENC_ENOMEM, "%s, oracle, allocation %ld: status %d: %s", o->c.name, o->run, st,
                     o->rep.error.message);
        cr_expect(o->rep.error.message[0] != '\0', "%s, allocation %ld: no message", o->c.name, o->run);
        /* steps already emitted (an evaluation emits as it goes) are the right ones */
        cr_expect(o->n_values <= o->n_want && memcmp(o->values, o->want, o->n_values * sizeof(double)) == 0,
                  "%s, allocation %ld: the %zu values emitted before the error are not the outputs' first ones",
                  o->c.name, o->run, o->n_values);
    } else {
        cr_expect_eq(st, REFENC_OK, "%s: %s", o->c.name, o->rep.error.message);
        cr_expect(o->n_values == o->n_want && memcmp(o->values, o->want, o->n_want * sizeof(double)) == 0,
                  "%s: the oracle's outputs differ after the failed runs", o->c.name);
    }
}

/* The oracle's case runner (ref/oracle/golden_case.c), certified (Ziv's loop)
 * and in one evaluation (bug variants), on a small case of each component:
 * out of memory at any allocation gives REFENC_ENOMEM, having emitted at most
 * the first outputs, right, and the runs around it give the same outputs bit
 * for bit.  (MPFR's own
 * allocations go through GMP, which aborts when out of memory: only refenc's
 * are failed.) */
Test(out_of_memory, oracle_on_every_component, .timeout = 600)
{
    const char *names[] = {"act_gelu", "softmax_masked", "layernorm_small_variance", "rope_interleaved", "alibi_12",
                           "pe_large", "ffn_gelu_tanh", "attention_rope_causal", "encoder_causal_learned"};
    static oracle_ctx o; /* large: not on the stack */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        for (int certify = 1; certify >= 0; certify--) {
            memset(&o, 0, sizeof o);
            char path[RB_PATH_MAX];
            rb_fixture_case(path, names[i]);
            refenc_st_file f;
            refenc_error err;
            cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
            cr_assert_eq(refenc_case_from_file(&o.c, &f, &err), REFENC_OK, "%s", err.message);
            refenc_st_free(&f);
            o.certify = certify;
            cr_assert_eq(oracle_call(&o), REFENC_OK, "%s: %s", names[i], o.rep.error.message);
            cr_assert_lt(o.n_values, (size_t)MAX_ORACLE_VALUES, "%s: too many values for the test", names[i]);
            memcpy(o.want, o.values, o.n_values * sizeof(double));
            o.n_want = o.n_values;
            cr_expect_gt(fault_run(oracle_call, oracle_check, &o, 0), 0, "%s: the oracle allocates nothing", names[i]);
            refenc_case_free(&o.c);
        }
    }
}

/* ---- what the golden maker allocates ------------------------------------------------- */

#include "../../ref/golden/parts.h"

/* The input of layer 0 (the embedding) for a per-layer golden takes the
 * reference's embedding, not a whole layer's workspace: its largest
 * allocation stays far below the (B, H, L, L) attention weights embed never
 * touches (2 MiB here), while layer 1's input, which runs layer 0, needs
 * them (the negative control). */
Test(out_of_memory, the_embedding_layer_input_allocates_no_attention_buffer)
{
    refenc_config cfg;
    refenc_config_default(&cfg);
    cfg.d_model = 8, cfg.n_heads = 4, cfg.d_ff = 8, cfg.n_layers = 2;
    refenc_case c;
    refenc_error err;
    const size_t B = 1, L = 256, weights = B * cfg.n_heads * L * L * sizeof(double);
    cr_assert_eq(refenc_case_alloc(&c, REFENC_COMP_ENCODER, &cfg, B, L, 0, 0, 0, &err), REFENC_OK, "%s",
                 err.message);
    double **inputs = NULL;
    fault_largest_reset();
    cr_assert_eq(golden_layer_inputs(&inputs, &c, 0, 0, 0, B, &err), REFENC_OK, "%s", err.message);
    const size_t embed_largest = fault_largest();
    golden_layer_inputs_free(inputs, cfg.n_layers);
    fault_largest_reset();
    cr_assert_eq(golden_layer_inputs(&inputs, &c, 1, 1, 0, B, &err), REFENC_OK, "%s", err.message);
    const size_t layer_largest = fault_largest();
    golden_layer_inputs_free(inputs, cfg.n_layers);
    cr_expect_lt(embed_largest, weights, "the embedding's input allocated %zu bytes at once", embed_largest);
    cr_expect_geq(layer_largest, weights, "layer 1's input allocated %zu bytes at most", layer_largest);
    refenc_case_free(&c);
}

/* The sha256 of a part's tensors, as `golden --shard` records it
 * (golden_entries_sha256) and as merge checks it (golden_file_sha256):
 * when the one allocation of either fails it returns 0 and leaves the
 * digest alone (merge then says "out of memory"); otherwise both give the
 * same digest.  (A digest claimed on a failed allocation sorts a NULL
 * array: a crash, or a part refused as altered.) */
#include "../../ref/golden/digest.h"

typedef struct {
    const refenc_st_entry *e;
    const refenc_st_file *f;
    size_t n;
    char hex[65];
    const char *want;
} digest_ctx;

static int digest_call(void *p)
{
    digest_ctx *c = p;
    memset(c->hex, 'u', 64), c->hex[64] = '\0';
    return c->e != NULL ? golden_entries_sha256(c->hex, c->e, c->n) : golden_file_sha256(c->hex, c->f);
}

static void digest_check(void *p, int ok, int failed)
{
    digest_ctx *c = p;
    if (failed) {
        cr_expect_eq(ok, 0, "a digest claimed on a failed allocation");
        cr_expect(strspn(c->hex, "u") == 64, "the digest was written on a failed allocation: %s", c->hex);
    } else {
        cr_expect_eq(ok, 1);
        cr_expect_str_eq(c->hex, c->want);
    }
}

Test(out_of_memory, golden_part_digests)
{
    const double x[6] = {1, -2, 3.5, 0, 1e-300, 7};
    const int64_t t[2] = {3, 1};
    const refenc_st_entry e[2] = {{"out.y", REFENC_ST_F64, 2, {2, 3}, x}, {"in.tokens", REFENC_ST_I64, 1, {2}, t}};
    char dir[RB_PATH_MAX], path[RB_PATH_MAX + 32], want[65];
    rb_tmpdir(dir);
    snprintf(path, sizeof path, "%s/part.safetensors", dir);
    refenc_error err;
    cr_assert_eq(refenc_st_write(path, e, 2, NULL, &err), REFENC_OK, "%s", err.message);
    refenc_st_file f;
    cr_assert_eq(refenc_st_read(&f, path, &err), REFENC_OK, "%s", err.message);
    cr_assert_eq(golden_entries_sha256(want, e, 2), 1);
    digest_ctx c = {e, NULL, 2, "", want};
    cr_expect_eq(fault_run(digest_call, digest_check, &c, 0), 1, "the entries' digest allocates once");
    c = (digest_ctx){NULL, &f, 0, "", want};
    cr_expect_eq(fault_run(digest_call, digest_check, &c, 0), 1, "the file's digest allocates once");
    refenc_st_free(&f);
    rb_tmpdir_remove(dir);
}
