/* ulp_report_write(): dispatches a diff result to the writer of a format. */
#include <errno.h>
#include <string.h>

#include "common/error.h"
#include "report_priv.h"

static const char *const format_names[] = {
    [ULP_REPORT_TABLE] = "table",
    [ULP_REPORT_MARKDOWN] = "markdown",
    [ULP_REPORT_CSV] = "csv",
    [ULP_REPORT_JSON] = "json",
};

int ulp_report_format_from_name(const char *name)
{
    for (size_t i = 0; name && i < sizeof format_names / sizeof format_names[0]; i++)
        if (strcmp(format_names[i], name) == 0)
            return (int)i;
    /* What a bug thread's file is called, and what users type. */
    if (name != NULL && strcmp(name, "md") == 0)
        return ULP_REPORT_MARKDOWN;
    return -1;
}

ulp_status ulp_report_write(const ulp_diff_result *r, ulp_report_format format, FILE *f,
                            unsigned flags, ulp_error *err)
{
    ulp_status st;
    ulp_diff_result *shown = NULL;
    errno = 0;
    if (format == ULP_REPORT_TABLE || format == ULP_REPORT_MARKDOWN) {
        shown = ulp__report_display(r, format == ULP_REPORT_MARKDOWN);
        if (shown == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory writing the report");
    }
    switch (format) {
    case ULP_REPORT_TABLE:
        st = ulp__report_table(shown, f, flags);
        ulp__report_display_free(shown);
        break;
    case ULP_REPORT_MARKDOWN:
        st = ulp__report_markdown(shown, f);
        ulp__report_display_free(shown);
        break;
    case ULP_REPORT_CSV:
        st = ulp__report_csv(r, f);
        break;
    case ULP_REPORT_JSON:
        return ulp__report_json(r, f, err);
    default:
        return ulp__error(err, ULP_EINVAL, "unknown report format %d", (int)format);
    }
    if (st != ULP_OK)
        return ulp__report_write_error(err, st);
    return ULP_OK;
}
