/*
 * ulpprof reports: renders a diff result (ulpprof/diff.h) or a ladder
 * (ulpprof/ladder.h) as a terminal table, Markdown, CSV or JSON (FORMAT.md
 * "Reports").  The writers read the results' public fields only; they live
 * in the reports library (find_package(ulpprof): ulpprof::reports).
 */
#ifndef ULPPROF_REPORT_H
#define ULPPROF_REPORT_H

#include <stdio.h>

#include "ulpprof/diff.h"
#include "ulpprof/export.h"
#include "ulpprof/ladder.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ulp_report_format {
    ULP_REPORT_TABLE = 0,
    ULP_REPORT_MARKDOWN,
    ULP_REPORT_CSV,
    ULP_REPORT_JSON
} ulp_report_format;

/* Parses "table", "markdown", "csv", "json"; -1 when unknown. */
ULP_API int ulp_report_format_from_name(const char *name);

/*
 * One GEMM call in words, into buf (n bytes, truncated):
 * "M=127 N=64 K=96 split-K 1 tile 128x128 stages 64x3 [cublasLtMatmul TN
 * bf16 bf16->bf16, 32F]"; what is unknown is left out.
 */
ULP_API void ulp_gemm_format(const ulp_gemm_info *g, char *buf, size_t n);

#define ULP_REPORT_COLOR 1u /* ANSI colours (table only)                         */

/*
 * Writes a result to `f`.  ULP_EIO when writing fails, ULP_ENOMEM when the
 * JSON document cannot be built.
 */
ULP_API ulp_status ulp_report_write(const ulp_diff_result *r, ulp_report_format format, FILE *f,
                                    unsigned flags, ulp_error *err);

/*
 * Writes a ladder as a table, Markdown or JSON (FORMAT.md "ulpprof ladder");
 * ULP_EINVAL for CSV.  ULP_EIO when writing fails.
 */
ULP_API ulp_status ulp_ladder_report_write(const ulp_ladder_result *r, ulp_report_format format,
                                           FILE *f, unsigned flags, ulp_error *err);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_REPORT_H */
