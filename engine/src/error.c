/* The error table's names and sentences, and the error buffer helper. */
#include "ecopt/error.h"

#include <stdarg.h>
#include <stdio.h>

const char *ec_err_name(int code)
{
    switch (code) {
#define EC_ERR_NAME(name, value, text) \
    case value:                        \
        return #name;
        EC_ERRORS(EC_ERR_NAME)
#undef EC_ERR_NAME
    }
    return "EC_EUNKNOWN";
}

const char *ec_strerror(int code)
{
    switch (code) {
#define EC_ERR_TEXT(name, value, text) \
    case value:                        \
        return text;
        EC_ERRORS(EC_ERR_TEXT)
#undef EC_ERR_TEXT
    }
    return "unknown error";
}

int ec_err_set(ec_err *e, int code, const char *fmt, ...)
{
    va_list ap;

    if (!e)
        return code;
    e->code = code;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return code;
}
