/*
 * Internals of the report writers (report_*.c): one writer per format and
 * the sentences the table and Markdown reports share.  Not installed.
 */
#ifndef ULPPROF_REPORTS_REPORT_PRIV_H
#define ULPPROF_REPORTS_REPORT_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ulpprof/report.h"

/* The dtype a compared row's metrics and worst bits are in: the coarser
 * one for a row of two dtypes (`rounded`), else A's. */
static inline ulp_dtype ulp__row_dtype(const ulp_diff_row *row)
{
    return row->rounded ? row->compared_dtype : row->dtype_a;
}

ulp_status ulp__report_table(const ulp_diff_result *r, FILE *f, unsigned flags);
ulp_status ulp__report_markdown(const ulp_diff_result *r, FILE *f);
ulp_status ulp__report_csv(const ulp_diff_result *r, FILE *f);
ulp_status ulp__report_json(const ulp_diff_result *r, FILE *f, ulp_error *err);

/* report_display.c: a copy of r whose strings are escaped for the table
 * (markdown 0) or Markdown (1); NULL when out of memory.  Free with
 * ulp__report_display_free(). */
ulp_diff_result *ulp__report_display(const ulp_diff_result *r, int markdown);
void ulp__report_display_free(ulp_diff_result *d);

/* report_num.c: numbers without printf where the value allows, byte for byte
 * what the printf format named prints. */
/* A double compactly: "0", integers below 1e7 ("%.0f"), else "%.3g"; "nan", "inf". */
void ulp__fmt_num(char *buf, size_t n, double v);
/* "%.2f" of v. */
void ulp__fmt_fixed2(char *buf, size_t n, double v);
/* "%" PRIu64 / PRId64 of v into buf (21 bytes); the length. */
size_t ulp__fmt_u64(char *buf, uint64_t v);
size_t ulp__fmt_i64(char *buf, int64_t v);
/* "%.17g" of the finite v into buf (32 bytes); its length.  With `json`,
 * jansson's text of the real v instead (JSON_REAL_PRECISION(17)): ".0"
 * after an integer's digits, "1e300" and "1e-5" for "1e+300" and "1e-05",
 * '.' whatever the locale. */
size_t ulp__fmt_g17(char *buf, double v, int json);

/* report_tally.c: what the sentences need of all the rows, row by row. */
#define ULP__FULL_NAME 320 /* bytes of a "name#occurrence" the table shows  */
typedef struct ulp__detail {
    char *name; /* "name#occurrence"                                       */
    uint64_t nonfinite, signs;
} ulp__detail;
typedef struct ulp__tally {
    size_t rows, ndiff, nshape, ndtype, nident; /* rows by status              */
    size_t positions_only;                      /* rows with positions_in      */
    const char *positions_side;                 /* the first one's             */
    char *positions_first;                      /* its name                    */
    size_t sliced, aligned;
    uint64_t lo[3], hi[3]; /* aligned rows: positions compared, only in A, B */
    size_t name_width;     /* longest "name#occurrence", at least 7          */
    size_t n_sign;         /* rows with sign changes                         */
    uint64_t worst_sign;   /* the most, and the first row with them:         */
    char *worst_sign_name;
    ulp__detail *details; /* rows the table's details list, in row order      */
    size_t n_details, cap_details;
    int oom;
    /* Rows of two dtypes compared in the coarser one (`rounded`). */
    size_t n_rounded;
    int rounded_mixed; /* not all of one (fine, coarse, side)          */
    ulp_dtype rounded_fine, rounded_coarse;
    int rounded_side;         /* of the first such row: 0 A rounded, 1 B     */
    double rounded_equal_min; /* the least fraction of elements that round equal */
    char *rounded_equal_name; /* its row                                     */
    double rounded_fine_max;  /* the largest max_abs_diff_fine               */
    char *rounded_fine_name;  /* its row; NULL while every one is 0          */
} ulp__tally;
void ulp__tally_init(ulp__tally *t);
void ulp__tally_rows(ulp__tally *t, const ulp_diff_row *rows, size_t n);
void ulp__tally_release(ulp__tally *t);
/* A tally of a whole result's rows: ULP_OK, or ULP_ENOMEM with `t` released. */
ulp_status ulp__tally_result(ulp__tally *t, const ulp_diff_result *r);
/* "name" or "name#occurrence", cut to size - 1 bytes as snprintf(3) cuts it; its length. */
size_t ulp__full_name(char *buf, size_t size, const ulp_diff_row *row);

/* report_table.c, in parts (report_stream.c writes the rows before the head). */
#define ULP__TABLE_LINE 1024 /* bytes of a table line at most               */
/* The name column's width for rows of tally t. */
size_t ulp__table_width(const ulp__tally *t);
void ulp__table_head(const ulp_diff_result *r, size_t wname, FILE *f);
/* A row's line after its name column, newline included, into buf
 * (ULP__TABLE_LINE bytes); its length. */
size_t ulp__table_rest(const ulp_diff_row *row, int color, char *buf);
/* The line of a row of full name full[0, nf) whose rest is rest[0, n), into
 * out (ULP__TABLE_LINE bytes); its length. */
size_t ulp__table_line(char *out, const char *full, size_t nf, size_t wname, const char *rest,
                       size_t n);
ulp_status ulp__table_tail(const ulp_diff_result *r, const ulp__tally *t, FILE *f);

/* report_markdown.c, in parts. */
void ulp__markdown_head(const ulp_diff_result *r, const ulp__tally *t, FILE *f);
void ulp__markdown_rows(const ulp_diff_row *rows, size_t n, FILE *f);
ulp_status ulp__markdown_tail(const ulp_diff_result *r, FILE *f);
/* report_csv.c, in parts (no tail). */
void ulp__csv_head(FILE *f);
void ulp__csv_rows(const ulp_diff_row *rows, size_t n, const struct ulp_tp_join_info *tp_a,
                   const struct ulp_tp_join_info *tp_b, FILE *f);

/* report_spool.c: a streamed report's rows, written to s->f, kept in memory
 * up to a bound (2 MiB; ULPPROF_SPOOL_KB), then in a temporary file. */
typedef struct ulp__spool {
    FILE *f;   /* the writers' stream                               */
    char *mem; /* the rows while in memory                          */
    size_t len, cap, most;
    FILE *tmp;  /* the temporary file once they spilled, else NULL   */
    FILE *back; /* the rows in memory as a stream to read            */
    int failed; /* errno of a failed write: every later one fails    */
} ulp__spool;
/* 0, or -1 with errno. */
int ulp__spool_open(ulp__spool *s);
/* What was written to s->f, to memory or the file: 0, or -1 with errno
 * (the file could not be made or take them). */
int ulp__spool_flush(ulp__spool *s);
/* After the last write: a stream over the rows from the first (NULL after
 * an error, errno set); *mem, *len: the same rows when in memory, else NULL. */
FILE *ulp__spool_rewind(ulp__spool *s, const char **mem, size_t *len);
void ulp__spool_close(ulp__spool *s);

/* report_json.c, in parts: rows [first, first + n) of the array (-1 when
 * out of memory), its end; the document around them is
 * ulp__json_head() and ulp__json_tail() (report_json_out.h). */
int ulp__json_rows(const ulp_diff_row *rows, size_t n, size_t first, FILE *f);
void ulp__json_rows_end(size_t total, FILE *f);
/* report_json_spool.c: rows as records in a streamed report's temporary file
 * (-1 when out of memory), and all of them back as ulp__json_rows() writes
 * them from the first (-1 when the file does not hold such records, -2 when
 * out of memory). */
int ulp__json_spool_rows(const ulp_diff_row *rows, size_t n, FILE *spool);
int ulp__json_unspool(FILE *spool, FILE *f);

/* report_text.c: shared sentences of the table and Markdown reports. */
/* "[3,1,7]"; "[]" for a scalar. */
void ulp__fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape);
/* The summary lines (identical / first divergence / amplification / ladder
 * / kernels / logits), each prefixed with `bullet`. */
void ulp__report_summary(const ulp_diff_result *r, const ulp__tally *t, FILE *f, const char *bullet,
                         const char *code);
/* A failed report write as an error, with the reason errno holds (the
 * writer clears it first) or "write error". */
ulp_status ulp__report_write_error(ulp_error *err, ulp_status st);

/* report_verdict.c: the verdict (ulpprof/verdict.h) as summary lines and as JSON. */
struct ulp_diff_verdict;
/* report_tp.c: the sides joined from tensor-parallel run directories. */
void ulp__report_tp_join_text(const ulp_diff_result *r, FILE *f, const char *bullet,
                              const char *code);
void ulp__report_verdict_text(const struct ulp_diff_verdict *v, FILE *f, const char *bullet);
struct ulp__jw;
struct ulp_tp_join_info;
void ulp__report_tp_join_json(struct ulp__jw *w, const struct ulp_tp_join_info *t);
void ulp__report_verdict_json(struct ulp__jw *w, const struct ulp_diff_verdict *v);

/* report_gemm.c: the GEMM calls of a capture. */
/* "gemms at <where>: A ran ...; B ran ..." when the row has GEMM calls. */
void ulp__report_summary_gemms(const ulp_diff_row *row, FILE *f, const char *bullet,
                               const char *code, const char *where);

/* The ladder's writers (ulp_ladder_report_write()). */
ulp_status ulp__ladder_report_text(const ulp_ladder_result *r, FILE *f, int markdown);
ulp_status ulp__ladder_report_json(const ulp_ladder_result *r, FILE *f, ulp_error *err);

/* The first divergence in one line (without the "first divergence: " lead). */
void ulp__first_divergence_text(const ulp_diff_result *r, char *buf, size_t n, const char *code);

/* report_keys.c: runs of differing keys of an aligned row, and their words. */
typedef struct ulp__key_run {
    int64_t request, first, last; /* positions first..last, consecutive           */
    ulp_diff_origin origin;
    int input;     /* index into the row's inputs, or -1                */
    size_t k0, k1; /* keys [k0, k1) of the row                          */
} ulp__key_run;
/* The next run of differing keys from key *k on (advancing *k); 0 when none. */
int ulp__next_run(const ulp_diff_row *row, size_t *k, ulp__key_run *run);
/* "positions 88-95" or "request 2, position 7". */
void ulp__fmt_run(char *buf, size_t n, const ulp_diff_row *row, const ulp__key_run *run);
/*
 * The runs of differing keys from key *k on as one list ("positions 24-25,
 * 30-31 and 12 more runs"), at most `max` of them written; with
 * `same_origin`, only those with the first run's origin and input.  *first
 * gets the first run and *k moves past the runs listed.  0 when none.
 */
int ulp__fmt_runs(char *buf, size_t n, const ulp_diff_row *row, size_t *k, int same_origin,
                  size_t max, ulp__key_run *first);
/* Where the run's difference came from, in words. */
void ulp__fmt_origin(char *buf, size_t n, const ulp_diff_row *row, const ulp__key_run *run);
/* The shortest digits that read back as the same value of `dt`. */
void ulp__fmt_value(char *buf, size_t n, ulp_dtype dt, uint64_t bits, double v);

#endif /* ULPPROF_REPORTS_REPORT_PRIV_H */
