/* A golden case file being built (docs/golden-format.md): the case's inputs
 * and parameters, the oracle's outputs with their don't-care masks, the
 * known bug variants' outputs, and the metadata. */
#ifndef REFENC_CLI_GOLDEN_FILE_H
#define REFENC_CLI_GOLDEN_FILE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../core/case.h"
#include "../core/status.h"
#include "../io/golden_names.h"
#include "../io/safetensors.h"
#include "../tool/certify.h"

/* One output of a run of the case: "out.<step>", its values and, when some
 * elements are implementation-defined, its don't-care mask. */
typedef struct {
    char name[REFENC_NAME_MAX];
    size_t ndim, shape[REFENC_ST_MAX_NDIM], numel;
    double *data;
    uint8_t *dc;     /* NULL when every element is compared */
} golden_output;

/* The outputs of one run (the golden's, or a bug variant's), in forward order. */
typedef struct {
    size_t n, cap;
    golden_output *o;
    const refenc_case *c;
    uint8_t *dead;   /* (B, L) query rows that are don't-care, or NULL */
    int final_only;  /* keep the required outputs only */
    int failed;      /* out of memory */
} golden_set;

/* An empty set for case c.  padded_queries: padded query rows are
 * don't-care (the golden's outputs; a bug variant's keep them).
 * Errors: REFENC_ENOMEM. */
int golden_set_init(golden_set *s, const refenc_case *c, int padded_queries, int final_only,
                    refenc_error *err);
void golden_set_free(golden_set *s);

/* The trace function that fills a set (ctx: golden_set): a copy of each
 * step, with its don't-care mask. */
void golden_set_collect(void *ctx, const char *name, const double *data, size_t ndim,
                        const size_t *shape);
/* The same, taking data (malloc'ed) over instead of copying it. */
void golden_set_adopt(golden_set *s, const char *name, double *data, size_t ndim, const size_t *shape);

/* The inputs that leave the case's required output with no element compared
 * (every element don't-care by the rules golden_set_init applies): NULL
 * when it keeps at least one, else "in.key_padding_mask" or "in.attn_mask"
 * (either alone), "in.key_padding_mask and in.attn_mask" (together), or
 * "in.x" (every softmax row -inf).  *failed: out of memory. */
const char *golden_uncompared_inputs(const refenc_case *c, int *failed);

/* Whether an output is required of every implementation (out.output;
 * out.embedding, which only a case with a pooling has; every output of an
 * alibi case). */
int golden_is_required(const refenc_case *c, const char *out_name);

/* The largest |a - b| / (atol + rtol |b|) over elements that are not
 * don't-care in either mask; +inf where a is not finite. */
double golden_excess(const double *a, const double *b, const uint8_t *dc_a, const uint8_t *dc_b,
                     size_t n, refenc_tolerance tol);

/* Which floating dtypes hold every input and parameter of c exactly:
 * "F16,BF16", "F16", "BF16", "F32" or "F64" (the format's input_dtype). */
const char *golden_input_dtype(const refenc_case *c);

/* Everything the file holds. */
typedef struct {
    const refenc_case *c;
    const char *name, *description;
    const json_t *bug_classes;     /* array of strings */
    const json_t *tolerance;       /* object, or NULL for {} */
    const char *float32_hazard;    /* or NULL */
    const char *oracle;            /* how the golden outputs were computed */
    const char *variant_oracle;    /* how the variants' were, or NULL */
    int variants_by_reference;     /* computed by the double reference: the metadata's
                                      variant_engine "reference" and its error */
    double variant_reference_error;/* the reference's on the golden outputs, F64 tolerances */
    const golden_set *golden;
    size_t n_alt;
    const golden_set *alt;         /* (n_alt) the variants' outputs */
    const char *const *alt_names;  /* (n_alt) */
    const int *const *alt_keep;    /* (n_alt) which outputs of each to store */
    const json_t *variants;        /* the "variants" metadata array */
    const json_t *extra_meta;      /* more metadata strings, or NULL */
    size_t n_extra;                /* more tensors (in.layers.{i}.input) */
    const refenc_st_entry *extra;
} golden_file;

/* Writes the case file, atomically.  Inputs and parameters are stored F32
 * when every value of the tensor is a float32, else F64 (never rounded).
 * Errors: REFENC_ENOMEM, those of refenc_st_write. */
int golden_file_write(const golden_file *g, const char *path, refenc_error *err);

/* The same for path relative to the directory descriptor `at`, display in
 * messages (io/atomic_write.h, refenc_atomic_openat). */
int golden_file_write_at(const golden_file *g, int at, const char *path, const char *display,
                         refenc_error *err);

/* The tensors of a file being built, and what they own (names, the F32
 * copies of inputs and parameters). */
typedef struct {
    size_t n, cap;
    refenc_st_entry *e;
    void **owned;
    size_t n_owned, cap_owned;
    int failed;      /* out of memory */
} golden_entries;

/* The case's inputs and parameters, as a case file (and part 1) stores them. */
void golden_entries_add_case(golden_entries *es, const refenc_case *c);
/* One tensor; data borrowed (NULL: a streamed file's, written later). */
void golden_entries_add(golden_entries *es, const char *name, refenc_st_dtype dtype, size_t ndim,
                        const size_t *shape, const void *data);
void golden_entries_free(golden_entries *es);

/* Canonical JSON text (compact, keys sorted; "null" for NULL), or NULL when
 * out of memory; free it. */
char *golden_json_text(const json_t *j);

/* ---- parts of a case computed apart (refenc golden --shard K/N) ----------------- */

#define GOLDEN_PART_FORMAT "refenc-golden-part"
/* The part format's version (the "format_version" of a part file); version 1
 * parts carried neither the plan nor tensors_sha256 and are refused. */
#define GOLDEN_PART_FORMAT_VERSION "2"
#define GOLDEN_SLICE_PREFIX "slice."

/* A contiguous run of batch items of one tensor of the case: items
 * [lo, hi) of "out.<step>" or "in.layers.<i>.input". */
typedef struct {
    char name[REFENC_NAME_MAX];
    size_t lo, hi;
    size_t ndim, shape[4];  /* the slice's: (hi - lo, ...) */
} golden_slice;

typedef struct {
    size_t k, n;                 /* shard k of n                          */
    size_t unit_begin, unit_end, units;
    int per_layer, final_only;
    long prec, prec_check;       /* what the part's oracle run needed     */
    long first_prec;             /* the run's first working precision     */
    /* k, n, units, per_layer, final_only and first_prec make the plan (plan.h) */
    const char *plan_text;       /* its canonical text (golden_plan_text) */
    size_t n_slices;
    const golden_slice *slices;
} golden_part_info;

/* A part file written as its units complete, so that a shard holds one
 * unit's values at a time, whatever its size: the slices under
 * "slice.<name>", and the metadata that lets refenc golden merge check and
 * join the parts (the plan, its fingerprint and the tensors' sha256:
 * plan.h); part 1 also holds the case's inputs, parameters and metadata.
 * The file's layout follows from the case and the slices alone (every
 * item's place is fixed before any unit runs), so its bytes do not depend
 * on the order in which the items come, nor on the threads; they are those
 * of the part written whole from memory (safetensors.h, refenc_st_stream).
 * The file appears at commit, whole (atomic_write.h); a shard ended before
 * leaves none.
 *
 *   open    g (g->golden unused) and pi with its slices (pi->prec and
 *           prec_check: a guess; those of the run are given at commit)
 *   put     item `item` of slice s: its values, n doubles, in any order
 *           (the oracle's emit, from one thread; a value certified again
 *           at a higher precision is put again, to the same place)
 *   commit  checks every item of every slice was put, hashes the tensors
 *           read back, writes the metadata and renames the file
 *   abort   removes the temporary file (safe twice, and after commit) */
typedef struct {
    refenc_st_stream st;
    size_t first;                /* the entry of slice 0: the case's tensors come first */
    size_t n_slices;
    const golden_slice *slices;  /* borrowed from open's pi */
    uint8_t **got;               /* got[s][item - lo]: put */
    int failed;                  /* a put failed: err says why */
    refenc_error err;
} golden_part_writer;

/* Errors: those of refenc_st_stream_open, REFENC_ENOMEM. */
int golden_part_open(golden_part_writer *pf, const golden_file *g, const golden_part_info *pi, const char *path,
                     refenc_error *err);
void golden_part_put(golden_part_writer *pf, size_t s, size_t item, const double *data, size_t n);
/* Errors: a put's (REFENC_EINVAL, REFENC_EIO), REFENC_EINVAL (an item never
 * put), those of refenc_st_stream_commit, REFENC_ENOMEM. */
int golden_part_commit(golden_part_writer *pf, const golden_file *g, const golden_part_info *pi,
                       refenc_error *err);
void golden_part_abort(golden_part_writer *pf);

#endif
