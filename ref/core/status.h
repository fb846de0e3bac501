/* Status codes and error messages for everything at refenc's boundary:
 * config validation, model allocation, input validation, file reading.
 * Numeric kernels never fail and never use these. */
#ifndef REFENC_STATUS_H
#define REFENC_STATUS_H

typedef enum {
    REFENC_OK = 0,
    REFENC_EINVAL = 1,  /* a value or combination of values is invalid      */
    REFENC_ELIMIT = 2,  /* a size overflows or exceeds a documented limit    */
    REFENC_ENOMEM = 3,  /* an allocation failed                              */
    REFENC_EFORMAT = 4, /* a file is malformed                               */
    REFENC_EIO = 5      /* a file cannot be opened, read or written          */
} refenc_status;

#define REFENC_ERRMSG_MAX 512

/* The first error met: its status and one message naming the field, the file
 * and the offset concerned. */
typedef struct {
    int status;
    char message[REFENC_ERRMSG_MAX];
} refenc_error;

/* Every error in refenc is built here, so a debugger can stop on it.
 * Fills err (if not NULL) and returns status.  The message is one line of
 * valid UTF-8 whatever the arguments quote from the input: control
 * characters and bytes that are not UTF-8 are written \xNN, and a message
 * longer than REFENC_ERRMSG_MAX - 1 bytes keeps its head and its tail (where
 * the reason usually is) around " [... N bytes ...] ", each cut between two
 * characters.
 * err->status == REFENC_OK after refenc_error_clear. */
int refenc_error_set(refenc_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void refenc_error_clear(refenc_error *err);

/* "ok", "invalid value", ...: a short name for a status. */
const char *refenc_status_name(int status);

#endif
