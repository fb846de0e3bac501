/* refenc run --case: the reference as a peer.  Reads a golden case's inputs
 * and parameters, runs the double-precision reference on them, and writes a
 * results file with every output the case lists, for `refenc certify`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../refenc.h"
#include "cli.h"
#include "results.h"

int run_case(const char *case_path, const char *out_path)
{
    refenc_error err;
    refenc_error_clear(&err);
    refenc_st_file f;
    refenc_case c;
    results col;
    memset(&col, 0, sizeof col);
    memset(&c, 0, sizeof c);
    json_t *wanted = NULL;

    int st = refenc_st_read(&f, case_path, &err);
    if (st == REFENC_OK)
        st = refenc_case_from_file(&c, &f, &err);
    if (st == REFENC_OK) {
        const char *outs = refenc_st_metadata(&f, "outputs");
        wanted = outs ? json_loads(outs, 0, NULL) : NULL;
        if (!json_is_array(wanted))
            st = refenc_error_set(&err, REFENC_EFORMAT, "%s: __metadata__.outputs is not a JSON array",
                                  case_path);
        col.wanted = wanted;
    }
    if (st == REFENC_OK) {
        const refenc_trace tr = {results_collect, &col};
        st = refenc_case_run_reference(&c, &tr, &err);
    }
    if (st == REFENC_OK) {
        json_t *meta = json_pack("{s:s, s:s}", "implementation", "refenc reference " REFENC_VERSION " (double)",
                                 "case", c.name);
        st = results_write(&col, out_path, meta, &err);
        json_decref(meta);
        if (st == REFENC_OK)
            printf("refenc run: case %s: %zu outputs written to %s\n", c.name, col.n, out_path);
    }

    results_free(&col);
    json_decref(wanted);
    refenc_case_free(&c);
    refenc_st_free(&f);
    return st == REFENC_OK ? REFENC_EXIT_OK : cli_error("run", "%s", err.message);
}
