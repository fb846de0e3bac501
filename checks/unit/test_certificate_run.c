/* The run-level half of ref/tool/certificate.c, on hand-built case reports:
 * the tally of verdicts, diagnoses and candidates (every variant, the first
 * and the last of the table included), the lowest dtype, the majority that
 * names the most likely bug, the candidates' text at every buffer size
 * (a guard byte past the end), what a run does not rule out, the summary's
 * JSON, and a case's diagnosis, candidates and variants in the certificate.
 * Each expected value is worked out by hand from the rules in certificate.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../../ref/tool/certificate.h"
#include "../../ref/tool/certify.h"
#include "../../ref/tool/variants.h"

#define FIRST ((refenc_variant)0)                      /* layernorm_eps_x10    */
#define LAST ((refenc_variant)(REFENC_VAR_COUNT - 1))  /* embedding_scaled     */

static refenc_output_report outs[4];

/* A case report: verdict, one output per dtype given (status PASS or FAIL
 * by verdict), no variant stored. */
static refenc_case_report report(refenc_verdict verdict, const refenc_st_dtype *dtypes, size_t n)
{
    refenc_case_report rep;
    memset(&rep, 0, sizeof rep);
    memset(outs, 0, sizeof outs);
    snprintf(rep.name, sizeof rep.name, "case");
    rep.verdict = verdict;
    rep.pass = verdict == REFENC_VERDICT_PASS;
    rep.first_divergence = -1;
    for (size_t i = 0; i < n; i++) {
        snprintf(outs[i].name, sizeof outs[i].name, "out.o%zu", i);
        outs[i].status = verdict == REFENC_VERDICT_FAIL ? REFENC_OUT_FAIL : REFENC_OUT_PASS;
        outs[i].dtype = dtypes[i];
    }
    rep.outputs = outs;
    rep.n_outputs = n;
    for (int k = 0; k < REFENC_CASE_MAX_VARIANTS; k++)
        rep.effect[k] = -1;
    return rep;
}

static const refenc_st_dtype F64[] = {REFENC_ST_F64}, F32[] = {REFENC_ST_F32}, F16[] = {REFENC_ST_F16},
                             BF16[] = {REFENC_ST_BF16};

Test(certificate_run, the_tally_counts_verdicts_diagnoses_and_every_candidate)
{
    refenc_certificate_tally t;
    memset(&t, 0, sizeof t);
    const refenc_verdict order[] = {REFENC_VERDICT_PASS, REFENC_VERDICT_XPASS, REFENC_VERDICT_XFAIL,
                                    REFENC_VERDICT_SKIP};
    for (size_t i = 0; i < 4; i++) {
        refenc_case_report rep = report(order[i], F64, 1);
        refenc_certificate_tally_add(&t, &rep);
    }
    cr_expect(t.cases == 4 && t.passed == 1 && t.xpass == 1 && t.xfail == 1 && t.skipped == 1 && t.failed == 0);
    /* a failing case naming the first variant, matching the first and the last */
    refenc_case_report rep = report(REFENC_VERDICT_FAIL, F16, 1);
    snprintf(rep.diagnosis, sizeof rep.diagnosis, "%s", refenc_variant_get(FIRST)->name);
    rep.candidates = refenc_variant_set_of(FIRST, LAST);
    refenc_certificate_tally_add(&t, &rep);
    cr_expect_eq(t.failed, 1);
    cr_expect_eq(t.diagnosed[FIRST], 1);
    cr_expect_eq(t.candidate[FIRST], 1);
    cr_expect_eq(t.candidate[LAST], 1);
    cr_expect_eq(t.ambiguous, 1, "two candidates on one case");
    cr_expect_eq(t.undiagnosed, 0);
    cr_expect_eq(t.low_dtype, 2, "F16");
    /* one candidate is not ambiguous; a diagnosis that names no variant is none */
    rep = report(REFENC_VERDICT_FAIL, F32, 1);
    snprintf(rep.diagnosis, sizeof rep.diagnosis, "not_a_variant");
    rep.candidates = refenc_variant_set_of(LAST, -1);
    refenc_certificate_tally_add(&t, &rep);
    cr_expect_eq(t.ambiguous, 1);
    cr_expect_eq(t.undiagnosed, 1);
    cr_expect_eq(t.candidate[LAST], 2);
    cr_expect_eq(t.low_dtype, 2, "F32 is not lower than F16");
    /* a case without a results file: failed, neither diagnosed nor undiagnosed, not examined */
    rep = report(REFENC_VERDICT_FAIL, BF16, 1);
    rep.results_missing = 1;
    refenc_certificate_tally_add(&t, &rep);
    cr_expect(t.failed == 3 && t.missing == 1 && t.undiagnosed == 1 && t.low_dtype == 2);
    refenc_certificate_tally_error(&t);
    cr_expect(t.failed == 4 && t.errors == 1 && t.undiagnosed == 2 && t.cases == 8);
    cr_expect_eq(refenc_certificate_examined(&t), 2);
}

/* The lowest dtype of the failing cases, over the compared outputs only. */
Test(certificate_run, the_lowest_dtype_counts_compared_outputs_only)
{
    const refenc_st_dtype *dt[] = {F64, F32, F16, BF16};
    for (int k = 0; k < 4; k++) {
        refenc_certificate_tally t;
        memset(&t, 0, sizeof t);
        refenc_case_report rep = report(REFENC_VERDICT_FAIL, dt[k], 1);
        refenc_certificate_tally_add(&t, &rep);
        cr_expect_eq(t.low_dtype, k, "dtype %d", k);
        cr_expect_eq(t.run_dtype, k, "dtype %d", k);
    }
    refenc_certificate_tally t;
    memset(&t, 0, sizeof t);
    const refenc_st_dtype two[] = {REFENC_ST_F32, REFENC_ST_BF16};
    refenc_case_report rep = report(REFENC_VERDICT_FAIL, two, 2);
    outs[1].status = REFENC_OUT_MISSING; /* a dtype nobody compared */
    refenc_certificate_tally_add(&t, &rep);
    cr_expect_eq(t.low_dtype, 1);
    cr_expect_eq(t.run_dtype, 1);
}

/* The variants: stored and compared (effect >= 0), told apart or not, the
 * largest effect of those not told apart; the run's not-ruled-out set. */
Test(certificate_run, what_a_run_does_not_rule_out)
{
    refenc_certificate_tally t;
    memset(&t, 0, sizeof t);
    refenc_case_report rep = report(REFENC_VERDICT_PASS, BF16, 1);
    rep.variants_stored = 3;
    rep.effect[FIRST] = 0.25;
    rep.effect[LAST] = 0.5;
    rep.effect[1] = 7; /* told apart */
    rep.not_ruled_out = refenc_variant_set_of(FIRST, LAST);
    refenc_certificate_tally_add(&t, &rep);
    rep = report(REFENC_VERDICT_PASS, BF16, 1);
    rep.variants_stored = 1;
    rep.effect[FIRST] = 0.125; /* smaller: the largest stays */
    rep.not_ruled_out = refenc_variant_set_of(FIRST, -1);
    refenc_certificate_tally_add(&t, &rep);
    rep = report(REFENC_VERDICT_PASS, F64, 1); /* stores none */
    refenc_certificate_tally_add(&t, &rep);
    rep = report(REFENC_VERDICT_SKIP, F64, 1); /* skipped: not counted */
    rep.variants_stored = 1;
    rep.effect[2] = 0.1;
    rep.not_ruled_out = refenc_variant_set_of(2, -1);
    refenc_certificate_tally_add(&t, &rep);
    cr_expect_eq(t.with_variants, 2);
    cr_expect(t.stored[FIRST] == 2 && t.told_apart[FIRST] == 0 && t.largest_effect[FIRST] == 0.25);
    cr_expect(t.stored[LAST] == 1 && t.largest_effect[LAST] == 0.5);
    cr_expect(t.stored[1] == 1 && t.told_apart[1] == 1 && t.largest_effect[1] == 0);
    cr_expect_eq(t.stored[2], 0);
    cr_expect_eq(t.run_dtype, 3, "BF16");
    cr_expect(refenc_variant_set_equal(refenc_certificate_not_ruled_out(&t), refenc_variant_set_of(FIRST, LAST)));
    json_t *s0 = json_object();
    refenc_certificate_summary_add(s0, &t);
    const json_t *nro0 = json_object_get(s0, "not_ruled_out");
    cr_assert_eq(json_array_size(nro0), 2, "the first variant of the table and the last");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(nro0, 0), "variant")),
                     refenc_variant_get(FIRST)->name);
    cr_expect_eq(json_number_value(json_object_get(json_array_get(nro0, 0), "largest_effect")), 0.25);
    cr_expect_eq(json_integer_value(json_object_get(json_array_get(nro0, 0), "cases")), 2);
    json_decref(s0);
    /* one case telling FIRST apart rules it out for the run */
    rep = report(REFENC_VERDICT_PASS, F64, 1);
    rep.variants_stored = 1;
    rep.effect[FIRST] = 3;
    refenc_certificate_tally_add(&t, &rep);
    cr_expect(refenc_variant_set_equal(refenc_certificate_not_ruled_out(&t), refenc_variant_set_of(LAST, -1)));
    json_t *s = json_object();
    refenc_certificate_summary_add(s, &t);
    const json_t *nro = json_object_get(s, "not_ruled_out");
    cr_expect_eq(json_integer_value(json_object_get(s, "cases_with_variants")), 3);
    cr_assert_eq(json_array_size(nro), 1);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(nro, 0), "variant")),
                     refenc_variant_get(LAST)->name);
    cr_expect_eq(json_number_value(json_object_get(json_array_get(nro, 0), "largest_effect")), 0.5);
    cr_expect_eq(json_integer_value(json_object_get(json_array_get(nro, 0), "cases")), 1);
    json_decref(s);
}

/* The majority from the first variant of the table on, and the tie. */
Test(certificate_run, the_most_likely_bug_from_the_first_variant_on)
{
    refenc_certificate_tally t;
    memset(&t, 0, sizeof t);
    t.failed = 3;
    t.diagnosed[FIRST] = 2;
    t.candidate[FIRST] = 2;
    t.candidate[LAST] = 1;
    cr_expect_str_eq(refenc_certificate_most_likely_bug(&t), refenc_variant_get(FIRST)->name);
    t.candidate[LAST] = 2; /* as many: indistinguishable */
    cr_expect_null(refenc_certificate_most_likely_bug(&t));
    t.candidate[LAST] = 1;
    t.missing = 1; /* 2 of the 2 examined */
    cr_expect_str_eq(refenc_certificate_most_likely_bug(&t), refenc_variant_get(FIRST)->name);
    memset(&t, 0, sizeof t);
    t.failed = 1;
    t.diagnosed[LAST] = t.candidate[LAST] = 1;
    cr_expect_str_eq(refenc_certificate_most_likely_bug(&t), refenc_variant_get(LAST)->name);
    json_t *s = json_object();
    refenc_certificate_summary_add(s, &t);
    cr_expect_str_eq(json_string_value(json_object_get(s, "most_likely_bug")), refenc_variant_get(LAST)->name);
    cr_expect_eq(json_integer_value(json_object_get(s, "failed")), 1);
    json_decref(s);
    t.failed = 0; /* nothing failed: no bug, whatever the counts say */
    s = json_object();
    refenc_certificate_summary_add(s, &t);
    cr_expect(json_is_null(json_object_get(s, "most_likely_bug")));
    json_decref(s);
}

/* The candidates' order (most matched first, then the table's), a variant
 * matched on one case, and the text cut at every size with a guard byte
 * just past the buffer. */
Test(certificate_run, the_candidates_text_in_order_and_within_its_buffer)
{
    refenc_certificate_tally t;
    memset(&t, 0, sizeof t);
    t.candidate[LAST] = 3;
    t.candidate[FIRST] = 1;
    t.candidate[1] = 3;
    t.ambiguous = 1;
    t.low_dtype = 3;
    char want[512], buf[512 + 2];
    snprintf(want, sizeof want, "%s (3 cases) or %s (3 cases) or %s (1 case): indistinguishable in BF16 on these cases",
             refenc_variant_get(1)->name, refenc_variant_get(LAST)->name, refenc_variant_get(FIRST)->name);
    size_t n = 0;
    refenc_certificate_bug_candidates(buf, 512, &n, &t);
    cr_expect_str_eq(buf, want);
    cr_expect_eq(n, 3);
    for (size_t cap = 1; cap <= strlen(want) + 1; cap++) {
        memset(buf, 'x', sizeof buf);
        refenc_certificate_bug_candidates(buf, cap, &n, &t);
        cr_expect(buf[cap] == 'x' && buf[cap + 1] == 'x', "cap %zu: wrote past the buffer", cap);
        cr_expect_eq(strlen(buf), cap - 1, "cap %zu: '%s'", cap, buf);
        cr_expect_eq(strncmp(buf, want, cap - 1), 0, "cap %zu: '%s'", cap, buf);
    }
    /* none: an empty text, whatever the buffer held */
    memset(&t, 0, sizeof t);
    memset(buf, 'x', sizeof buf);
    refenc_certificate_bug_candidates(buf, 512, &n, &t);
    cr_expect_str_eq(buf, "");
    cr_expect_eq(n, 0);
    json_t *s = json_object();
    t.failed = 2;
    t.candidate[FIRST] = 1;
    t.candidate[LAST] = 2;
    refenc_certificate_summary_add(s, &t);
    const json_t *c = json_object_get(s, "bug_candidates");
    cr_assert_eq(json_array_size(c), 2);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(c, 0), "variant")), refenc_variant_get(LAST)->name);
    cr_expect_eq(json_integer_value(json_object_get(json_array_get(c, 1), "cases")), 1);
    json_decref(s);
}

/* A case in the certificate: its diagnosis (a name that is no variant reads
 * as none), its candidates (first and last), the closest variant, the
 * variants not ruled out, the figures of compared outputs only. */
Test(certificate_run, a_case_in_the_certificate)
{
    const refenc_st_dtype three[] = {REFENC_ST_BF16, REFENC_ST_BF16, REFENC_ST_BF16};
    refenc_case_report rep = report(REFENC_VERDICT_FAIL, three, 3);
    outs[1].status = REFENC_OUT_NOT_PROVIDED;
    outs[2].status = REFENC_OUT_MISSING;
    snprintf(rep.diagnosis, sizeof rep.diagnosis, "%s", refenc_variant_get(LAST)->name);
    rep.candidates = refenc_variant_set_of(FIRST, LAST);
    rep.variants_stored = 2;
    snprintf(rep.closest, sizeof rep.closest, "%s", refenc_variant_get(LAST)->name);
    rep.closest_distance = 0.75;
    rep.not_ruled_out = refenc_variant_set_of(FIRST, -1);
    rep.effect[FIRST] = 1.5;
    json_t *c = refenc_certificate_case(&rep);
    const json_t *d = json_object_get(c, "diagnosis"), *cands = json_object_get(d, "candidates");
    cr_expect_str_eq(json_string_value(json_object_get(d, "variant")), refenc_variant_get(LAST)->name);
    cr_assert_eq(json_array_size(cands), 2);
    cr_expect_str_eq(json_string_value(json_array_get(cands, 0)), refenc_variant_get(FIRST)->name);
    cr_expect_str_eq(json_string_value(json_array_get(cands, 1)), refenc_variant_get(LAST)->name);
    const json_t *near = json_object_get(c, "closest_variant");
    cr_expect_eq(json_number_value(json_object_get(near, "distance")), 0.75);
    cr_expect(json_is_true(json_object_get(near, "named")));
    const json_t *nro = json_object_get(c, "not_ruled_out");
    cr_assert_eq(json_array_size(nro), 1);
    cr_expect_eq(json_number_value(json_object_get(json_array_get(nro, 0), "effect")), 1.5);
    const json_t *o = json_object_get(c, "outputs");
    cr_expect_not_null(json_object_get(json_array_get(o, 0), "max_abs_error"), "a compared output has figures");
    cr_expect_null(json_object_get(json_array_get(o, 1), "max_abs_error"), "not provided: no figures");
    cr_expect_null(json_object_get(json_array_get(o, 2), "max_abs_error"), "missing: no figures");
    json_decref(c);
    snprintf(rep.diagnosis, sizeof rep.diagnosis, "not_a_variant");
    rep.candidates = refenc_variant_set_of(-1, -1);
    c = refenc_certificate_case(&rep);
    d = json_object_get(c, "diagnosis");
    cr_expect(json_is_null(json_object_get(d, "variant")));
    cr_expect_str_eq(json_string_value(json_object_get(d, "message")), "no known variant matches");
    cr_expect(json_is_false(json_object_get(json_object_get(c, "closest_variant"), "named")));
    json_decref(c);
    /* a passing case has no diagnosis; one with nothing compared no closest variant */
    rep = report(REFENC_VERDICT_PASS, F64, 1);
    c = refenc_certificate_case(&rep);
    cr_expect_null(json_object_get(c, "diagnosis"));
    cr_expect(json_is_null(json_object_get(c, "closest_variant")));
    cr_expect_eq(json_array_size(json_object_get(c, "not_ruled_out")), 0);
    json_decref(c);
}
