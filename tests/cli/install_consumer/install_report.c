/* Compares a snapshot with itself, writes the CSV report and aligns its
 * (empty) kernel trace with itself, through an installed analyzer and
 * reports library (ulpprof::reports). */
#include <stdio.h>
#include <ulpprof/diff.h>
#include <ulpprof/kernels.h>
#include <ulpprof/report.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    ulp_error err = {0};
    ulp_snapshot *s = NULL;
    ulp_diff_result *r = NULL;
    ulp_kernels_alignment *al = NULL;
    ulp_status st = ulp_snapshot_open(argv[1], &s, &err);
    if (st == ULP_OK)
        st = ulp_diff_run(s, s, NULL, &r, &err);
    if (st == ULP_OK)
        st = ulp_report_write(r, (ulp_report_format)ulp_report_format_from_name("csv"), stdout, 0,
                              &err);
    if (st == ULP_OK)
        st = ulp_kernels_align(s, s, &al, &err);
    if (st != ULP_OK)
        fprintf(stderr, "%s\n", err.msg);
    int identical = st == ULP_OK && r->identical && al->identical && al->launches_a == 0;
    ulp_kernels_alignment_free(al);
    ulp_diff_result_free(r);
    ulp_snapshot_close(s);
    return identical ? 0 : 1;
}
