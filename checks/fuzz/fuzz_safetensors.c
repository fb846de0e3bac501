/* libFuzzer target: the safetensors reader, refenc_st_parse, on any bytes.
 *
 * Beyond what the sanitizers catch (out-of-bounds access, leaks, undefined
 * behaviour), it checks the reader's contract (ref/io/safetensors.h):
 *   - on error: the file is empty, the status is REFENC_EFORMAT (or
 *     REFENC_ENOMEM), the message is one line that names the buffer;
 *   - on success: the tensors lie after the header and inside the buffer,
 *     sorted, tiling the data exactly; numel and nbytes agree with the shape
 *     and dtype; every name is found by refenc_st_find;
 *   - the converters read every tensor of their class, and refuse the other
 *     class with a message naming the tensor. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../ref/io/safetensors.h"
#include "fuzz_check.h"

static int is_float(refenc_st_dtype d)
{
    return d == REFENC_ST_F64 || d == REFENC_ST_F32 || d == REFENC_ST_F16 || d == REFENC_ST_BF16;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    refenc_st_file f;
    refenc_error err;
    refenc_error_clear(&err);
    const int st = refenc_st_parse(&f, data, size, "fuzz.safetensors", &err);
    if (st != REFENC_OK) {
        FUZZ_CHECK(st == REFENC_EFORMAT || st == REFENC_ENOMEM, "status %d", st);
        FUZZ_CHECK(err.status == st, "err.status %d, returned %d", err.status, st);
        FUZZ_CHECK(f.n_tensors == 0 && f.tensors == NULL && f.metadata == NULL && f.path == NULL,
                   "a failed parse left state behind");
        FUZZ_CHECK(strncmp(err.message, "fuzz.safetensors: ", 18) == 0, "message: %s", err.message);
        FUZZ_CHECK(fuzz_message_ok(err.message), "message not one clean line: %s", err.message);
        refenc_st_free(&f);
        return 0;
    }

    uint64_t N = 0;
    for (int i = 7; i >= 0; i--)
        N = N << 8 | data[i];
    const size_t data_start = 8 + (size_t)N;
    size_t at = data_start;
    for (size_t i = 0; i < f.n_tensors; i++) {
        const refenc_st_tensor *t = &f.tensors[i];
        size_t numel = 1;
        for (size_t d = 0; d < t->ndim; d++)
            numel *= t->shape[d]; /* cannot overflow: the reader checked it */
        FUZZ_CHECK(t->ndim <= REFENC_ST_MAX_NDIM, "ndim %zu", t->ndim);
        FUZZ_CHECK(numel == t->numel, "numel %zu, shape product %zu", t->numel, numel);
        FUZZ_CHECK(t->nbytes == numel * refenc_st_dtype_size(t->dtype), "nbytes %zu", t->nbytes);
        FUZZ_CHECK(t->file_offset == at || t->nbytes == 0, "tensor %zu at %zu, expected %zu", i,
                   t->file_offset, at);
        FUZZ_CHECK(t->file_offset >= data_start && t->file_offset + t->nbytes <= size,
                   "tensor %zu outside the data", i);
        FUZZ_CHECK(t->data == data + t->file_offset, "data pointer");
        FUZZ_CHECK(t->name[0] != '\0', "empty name");
        FUZZ_CHECK(refenc_st_find(&f, t->name) == t, "refenc_st_find(%s)", t->name);
        at += t->nbytes;

        refenc_error cerr;
        refenc_error_clear(&cerr);
        if (is_float(t->dtype)) {
            double *out = malloc(t->numel ? t->numel * sizeof *out : 1);
            FUZZ_CHECK(out != NULL, "out of memory");
            FUZZ_CHECK(refenc_st_to_f64(out, &f, t, &cerr) == REFENC_OK, "%s", cerr.message);
            int64_t dummy;
            FUZZ_CHECK(t->numel == 0 || refenc_st_to_i64(&dummy, &f, t, &cerr) == REFENC_EFORMAT,
                       "a floating tensor read as integers");
            free(out);
        } else {
            int64_t *out = malloc(t->numel ? t->numel * sizeof *out : 1);
            FUZZ_CHECK(out != NULL, "out of memory");
            const int cst = refenc_st_to_i64(out, &f, t, &cerr);
            FUZZ_CHECK(cst == REFENC_OK || (t->dtype == REFENC_ST_BOOL && cst == REFENC_EFORMAT),
                       "%s", cerr.message);
            double dummy;
            FUZZ_CHECK(t->numel == 0 || refenc_st_to_f64(&dummy, &f, t, &cerr) == REFENC_EFORMAT,
                       "an integer tensor read as doubles");
            free(out);
        }
        if (cerr.status != REFENC_OK)
            FUZZ_CHECK(fuzz_message_ok(cerr.message), "converter message: %s", cerr.message);
    }
    FUZZ_CHECK(at == size, "the tensors end at %zu, the file at %zu", at, size);
    refenc_st_free(&f);
    return 0;
}
