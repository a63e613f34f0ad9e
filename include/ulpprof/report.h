/*
 * ulpprof reports: renders a diff result (ulpprof/diff.h) or a ladder
 * (ulpprof/ladder.h) as a terminal table, Markdown, CSV or JSON (FORMAT.md
 * "Reports").  The writers read the results' public fields only; they live
 * in the reports library (find_package(ulpprof): ulpprof::reports).
 */
#ifndef ULPPROF_REPORT_H
#define ULPPROF_REPORT_H

#include <stdint.h>
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

/* Parses "table", "markdown" (or "md"), "csv", "json"; -1 when unknown. */
ULP_API int ulp_report_format_from_name(const char *name);

/*
 * The JSON writer the reports are written with, for programs that write
 * JSON beside them (`ulpprof ls --json`, `kernels --json`).  It writes as
 * it goes, to `f`, indented by 2, keys in the order given; it allocates
 * nothing but itself, so a document is never left short by a lack of
 * memory.  Strings and keys are bytes (names, labels, /run keys and
 * values): a byte that is not part of valid UTF-8 comes out as \udcXX,
 * Python's surrogateescape convention, so nothing is dropped or merged;
 * valid UTF-8 as it is.
 *
 * ulp_json_object() / ulp_json_array() open a container, ulp_json_end()
 * closes the innermost one; in an object each value follows its
 * ulp_json_key().  A value given out of place (no key in an object, a
 * second value at the top, an end too many, nesting past 15 levels) is not
 * written, and ulp_json_close() answers -1.
 */
typedef struct ulp_json ulp_json;
/* A writer to f; NULL when out of memory. */
ULP_API ulp_json *ulp_json_open(FILE *f);
ULP_API void ulp_json_object(ulp_json *j);
ULP_API void ulp_json_array(ulp_json *j);
ULP_API void ulp_json_end(ulp_json *j);
ULP_API void ulp_json_key(ulp_json *j, const char *key);
/* A string; null for NULL. */
ULP_API void ulp_json_string(ulp_json *j, const char *s);
ULP_API void ulp_json_int(ulp_json *j, int64_t v);
ULP_API void ulp_json_uint(ulp_json *j, uint64_t v);
/* v as "%.17g" reads it back exactly; null when v is not finite. */
ULP_API void ulp_json_real(ulp_json *j, double v);
ULP_API void ulp_json_bool(ulp_json *j, int v);
ULP_API void ulp_json_null(ulp_json *j);
/* Writes what is buffered of the document and frees j (no newline after
 * the document: the caller writes one when it wants it): 0, or -1 when the document was not whole
 * (a container left open, a value out of place) or f has its error flag set.  NULL is accepted
 * (-1). */
ULP_API int ulp_json_close(ulp_json *j);

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
 * A report of a streamed diff (ulp_diff_stream()), whose memory does not
 * grow with the rows: pass ulp_report_stream_rows as the callback and the
 * stream as its ctx; each batch of rows is formatted into a temporary file
 * (tmpfile(3)) as it comes.  ulp_report_stream_write() then writes the
 * report of the result to `f`: the bytes ulp_report_write() writes for an
 * ulp_diff_run() result of the same snapshots.  Free the stream with
 * ulp_report_stream_free() (NULL is accepted).  ULP_EIO when the
 * temporary file cannot be made or written (ulp_report_stream_rows()
 * flushes it each batch, so that this shows before the report's file is
 * opened), or `f` not written.
 */
typedef struct ulp_report_stream ulp_report_stream;
ULP_API ulp_status ulp_report_stream_open(ulp_report_format format, unsigned flags,
                                          ulp_report_stream **out, ulp_error *err);
/* An ulp_diff_rows_fn; `stream` is the ulp_report_stream. */
ULP_API ulp_status ulp_report_stream_rows(void *stream, const ulp_diff_row *rows, size_t first,
                                          size_t n, ulp_error *err);
ULP_API ulp_status ulp_report_stream_write(ulp_report_stream *s, const ulp_diff_result *r, FILE *f,
                                           ulp_error *err);
/*
 * What joining the sides did (ulp_tp_join(); NULL: that side is one
 * snapshot), known before the first row: the CSV's rows carry it in every
 * row, so that they can be written as they come.  Set before the first
 * ulp_report_stream_rows(), the same the result's tp_join_a / tp_join_b
 * will hold; the caller keeps both alive until the stream is freed.
 */
ULP_API void ulp_report_stream_tp_join(ulp_report_stream *s, const struct ulp_tp_join_info *a,
                                       const struct ulp_tp_join_info *b);
ULP_API void ulp_report_stream_free(ulp_report_stream *s);

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
