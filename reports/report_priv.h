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

ulp_status ulp__report_table(const ulp_diff_result *r, FILE *f, unsigned flags);
ulp_status ulp__report_markdown(const ulp_diff_result *r, FILE *f);
ulp_status ulp__report_csv(const ulp_diff_result *r, FILE *f);
ulp_status ulp__report_json(const ulp_diff_result *r, FILE *f, ulp_error *err);

/* report_display.c: a copy of r whose strings are escaped for the table
 * (markdown 0) or Markdown (1); NULL when out of memory.  Free with
 * ulp__report_display_free(). */
ulp_diff_result *ulp__report_display(const ulp_diff_result *r, int markdown);
void ulp__report_display_free(ulp_diff_result *d);

/* report_json_bytes.c: strings that may not be UTF-8, losslessly (\udcXX per bad byte). */
struct json_t *ulp__json_str(const char *s);                            /* NULL: null */
int ulp__json_set(struct json_t *o, const char *key, struct json_t *v); /* any key  */
char *ulp__json_unmark(const char *text); /* the dump with \udcXX; NULL: out of memory */

/* report_text.c: shared sentences of the table and Markdown reports. */
/* Formats a double compactly ("0", "3.906e-03", "inf"). */
void ulp__fmt_num(char *buf, size_t n, double v);
/* "[3,1,7]"; "[]" for a scalar. */
void ulp__fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape);
/* The summary lines (identical / first divergence / amplification / ladder
 * / kernels / logits), each prefixed with `bullet`. */
void ulp__report_summary(const ulp_diff_result *r, FILE *f, const char *bullet, const char *code);

/* The ladder's writers (ulp_ladder_report_write()). */
ulp_status ulp__ladder_report_text(const ulp_ladder_result *r, FILE *f, int markdown);
ulp_status ulp__ladder_report_json(const ulp_ladder_result *r, FILE *f, ulp_error *err);

#endif /* ULPPROF_REPORTS_REPORT_PRIV_H */
