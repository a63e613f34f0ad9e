/* Status codes and their messages, from the one X-macro in status.h. */
#include <string.h>

#include "ulpprof/status.h"

const char *ulp_status_str(ulp_status status)
{
    switch (status) {
#define ULP__STATUS_STR(name, code, msg)                                                           \
    case ULP_##name:                                                                               \
        return msg;
        ULP_STATUS_MAP(ULP__STATUS_STR)
#undef ULP__STATUS_STR
    }
    return "unknown status";
}

const char *ulp_status_name(ulp_status status)
{
    switch (status) {
#define ULP__STATUS_NAME(name, code, msg)                                                          \
    case ULP_##name:                                                                               \
        return "ULP_" #name;
        ULP_STATUS_MAP(ULP__STATUS_NAME)
#undef ULP__STATUS_NAME
    }
    return "ULP_UNKNOWN";
}

void ulp_error_clear(ulp_error *err)
{
    if (err == NULL)
        return;
    err->status = ULP_OK;
    err->msg[0] = '\0';
}
