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

/* report_text.c: shared sentences of the table and Markdown reports. */
/* Formats a double compactly ("0", "3.906e-03", "inf"). */
void ulp__fmt_num(char *buf, size_t n, double v);
/* "[3,1,7]"; "[]" for a scalar. */
void ulp__fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape);
/* The summary lines (identical / first divergence / amplification / ladder
 * / kernels / logits), each prefixed with `bullet`. */
void ulp__report_summary(const ulp_diff_result *r, FILE *f, const char *bullet, const char *code);

#endif /* ULPPROF_REPORTS_REPORT_PRIV_H */
