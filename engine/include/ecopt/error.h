/*
 * Error codes and the error buffer every engine call that can fail fills in.
 * 0 is success, negative is failure; codes are append-only. This is the
 * engine floor's one error convention (docs/architecture.md, "Errors"):
 * an int code of this table, the sentence in a caller-owned ec_err when
 * the call takes one, and a constructor's NULL with the code in int *err.
 */
#ifndef ECOPT_ERROR_H
#define ECOPT_ERROR_H

#include <stddef.h>

#define EC_ERRORS(X)                                                   \
    X(EC_EINVAL, -1, "invalid argument")                               \
    X(EC_ENOMEM, -2, "out of memory")                                  \
    X(EC_EIO, -3, "input/output error")                                \
    X(EC_EPARSE, -4, "malformed input")                                \
    X(EC_ELIMIT, -5, "input exceeds a limit")                          \
    X(EC_ENUMERIC, -6, "numerical failure")                            \
    X(EC_EPROTO, -7, "protocol error")                                 \
    X(EC_ETIMEOUT, -8, "timed out")                                    \
    X(EC_EPEER, -9, "peer failed")                                     \
    X(EC_ECANCELLED, -10, "cancelled")

enum {
#define EC_ERR_ENUM(name, value, text) name = value,
    EC_ERRORS(EC_ERR_ENUM)
#undef EC_ERR_ENUM
};

/* The name ("EC_EINVAL") and sentence of a code; "unknown error" otherwise. */
const char *ec_err_name(int code);
const char *ec_strerror(int code);

/*
 * A code plus a sentence that names what is wrong (the file and line, the
 * field and its allowed range). Callers own it, usually on the stack.
 */
typedef struct ec_err {
    int code;
    char msg[512];
} ec_err;

/* Fills e (which may be NULL) and returns code, so `return ec_err_set(...)`. */
int ec_err_set(ec_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
