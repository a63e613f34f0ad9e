/*
 * `ulpprof diff A B` where A or B is a run directory of per-rank files
 * (`ulpprof record -o run/%r.h5`, ladder.h): rank r of A is compared with
 * rank r of B, for every rank both have, each with the report `diff` gives
 * two files; ranks only one run has are named and not compared, and make
 * the runs differ (exit 1), as a capture only one file has does.  JSON is
 * one document: {format "ulpprof-diff-ranks", a, b, identical, ranks[{rank,
 * a, b, report}], ranks_only_a, ranks_only_b}.  Each rank's report carries
 * the verdict the two-file diff gives (ulpprof/verdict.h).  The whole
 * report is built in memory and printed only when every rank was compared:
 * an error at a later rank leaves stdout empty (one stderr line, exit 2).
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ulpprof/digest.h"
#include "ulpprof/ladder.h"
#include "ulpprof/plot.h"
#include "ulpprof/report.h"
#include "ulpprof/verdict.h"

int cli_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int has_h5_suffix(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, ".h5") == 0 && name[0] != '.';
}

int cli_check_run(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        ulp_snapshot *s = cli_open_snapshot(path);
        ulp_snapshot_close(s);
        return s ? 0 : -1;
    }
    DIR *d = opendir(path);
    if (d == NULL) {
        cli_error("cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (!has_h5_suffix(e->d_name))
            continue;
        char file[4096];
        snprintf(file, sizeof file, "%s/%s", path, e->d_name);
        ulp_snapshot *s = cli_open_snapshot(file);
        rc = s ? 0 : -1;
        ulp_snapshot_close(s);
    }
    closedir(d);
    return rc;
}

/*
 * A JSON string literal of `s`, a path: bytes that are not UTF-8 as \udcXX,
 * as the rank reports write theirs.  -1 (said) when out of memory.
 */
static int json_str(FILE *f, const char *s)
{
    ulp_json *j = ulp_json_open(f);
    if (j == NULL) {
        cli_error("out of memory writing the JSON report");
        return -1;
    }
    ulp_json_string(j, s); /* a document of one string */
    ulp_json_close(j);
    return 0;
}

static int plot_rank(const ulp_diff_result *res, const char *dir, int rank)
{
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/rank%d", dir, rank);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        cli_error("cannot create '%s': %s", dir, strerror(errno));
        return -1;
    }
    ulp_plot_options po;
    ulp_plot_options_init(&po);
    po.dir = sub;
    ulp_error err;
    ulp_status ps = ulp_plot_write(res, &po, NULL, &err);
    if (ps == ULP_EUNSUPPORTED)
        fprintf(stderr, "ulpprof: %s\n", err.msg);
    else if (ps != ULP_OK) {
        cli_error("%s", err.msg);
        return -1;
    }
    return 0;
}

/* What goes before a rank pair's report: its JSON element's opening, or its heading. */
static int print_header(const cli_diff_ranks_args *x, const ulp_ladder_file *fa,
                        const ulp_ladder_file *fb, FILE *out, int first)
{
    if (x->format == ULP_REPORT_JSON) {
        fprintf(out, "%s    {\"rank\": %d, \"a\": ", first ? "" : ",\n", fa->rank);
        if (json_str(out, fa->path) != 0)
            return -1;
        fputs(", \"b\": ", out);
        if (json_str(out, fb->path) != 0)
            return -1;
        fputs(", \"report\":\n", out);
    } else {
        fprintf(out,
                x->format == ULP_REPORT_MARKDOWN ? "\n### rank %d: `%s` vs `%s`\n\n"
                                                 : "\n=== rank %d: %s vs %s\n\n",
                fa->rank, fa->path, fb->path);
    }
    return 0;
}

/*
 * Compares one rank pair and prints its report (JSON: as one element of the
 * "ranks" array, `first` saying whether a comma goes before it).
 * Returns 0 identical, 1 differs, -1 error.
 */
static int diff_rank(const cli_diff_ranks_args *x, const ulp_ladder_file *fa,
                     const ulp_ladder_file *fb, FILE *out, int first)
{
    ulp_snapshot *a = NULL, *b = NULL;
    ulp_diff_result *res = NULL;
    ulp_diff_verdict *v = NULL;
    ulp_error err;
    int rc = -1;
    /* A side of row digests only: the pair's report is the digest diff's, as for two files. */
    if (ulp_digest_only(fa->path) || ulp_digest_only(fb->path)) {
        if (print_header(x, fa, fb, out, first) != 0)
            return -1;
        int d = cli_diff_digests(fa->path, fb->path, x->format == ULP_REPORT_JSON, out);
        if (d == CLI_EXIT_ERROR)
            return -1;
        if (x->format == ULP_REPORT_JSON)
            fputs("    }", out);
        return d == CLI_EXIT_DIFFER;
    }
    if (cli_open_pair(fa->path, fb->path, &a, &b, 0) < 0)
        goto done;
    if (ulp_diff_run(a, b, x->opts, &res, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        goto done;
    }
    /* The verdict of a pair that differs, as `diff A B` of the two files gives it. */
    if (!res->identical) {
        if (ulp_diff_verdict_compute(a, b, res, &v, &err) != ULP_OK) {
            cli_error("%s", err.msg);
            goto done;
        }
        res->verdict = v;
    }
    if (print_header(x, fa, fb, out, first) != 0)
        goto done;
    if (ulp_report_write(res, x->format, out, x->flags, &err) != ULP_OK) {
        cli_error("cannot write the report: %s", err.msg);
        goto done;
    }
    if (x->format == ULP_REPORT_JSON)
        fputs("    }", out);
    if (x->plot_dir && plot_rank(res, x->plot_dir, fa->rank) != 0)
        goto done;
    rc = res->identical ? 0 : 1;
done:
    ulp_diff_result_free(res);
    ulp_diff_verdict_free(v);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
    return rc;
}

static void json_ranks(FILE *out, const char *key, const ulp_ladder_file *f, size_t n,
                       const ulp_ladder_file *g, size_t m)
{
    fprintf(out, ",\n  \"%s\": [", key);
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < m && g[k].rank != f[i].rank)
            k++;
        if (k == m) {
            fprintf(out, "%s%d", first ? "" : ", ", f[i].rank);
            first = 0;
        }
    }
    fputc(']', out);
}

/* The closing line of the table and Markdown: what was compared, and the ranks that were not. */
static void summary_line(FILE *out, int compared, int any_differs, size_t only_a, size_t only_b)
{
    fprintf(out, "\n%d rank pair%s compared: %s", compared, compared == 1 ? "" : "s",
            any_differs ? "some differ" : "all bitwise identical");
    if (only_a + only_b > 0)
        fprintf(out, "; %zu rank%s only in A, %zu only in B: the runs differ", only_a,
                only_a == 1 ? "" : "s", only_b);
    fputc('\n', out);
}

static int diff_ranks_to(const cli_diff_ranks_args *x, FILE *out);

int cli_diff_ranks(const cli_diff_ranks_args *x, FILE *out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *buf = open_memstream(&text, &len);
    if (buf == NULL) {
        cli_error("out of memory writing the report");
        return CLI_EXIT_ERROR;
    }
    int rc = diff_ranks_to(x, buf);
    if (fclose(buf) != 0 && rc != CLI_EXIT_ERROR) {
        cli_error("out of memory writing the report");
        rc = CLI_EXIT_ERROR;
    }
    if (rc != CLI_EXIT_ERROR && (fwrite(text, 1, len, out) != len || fflush(out) != 0)) {
        cli_error("cannot write the report");
        rc = CLI_EXIT_ERROR;
    }
    free(text);
    return rc;
}

/* The report of cli_diff_ranks() into `out` (a memory stream). */
static int diff_ranks_to(const cli_diff_ranks_args *x, FILE *out)
{
    if (x->format == ULP_REPORT_CSV) {
        fprintf(stderr, "ulpprof diff: run directories have no CSV report; use json\n");
        return CLI_EXIT_ERROR;
    }
    ulp_ladder_file *fa = NULL, *fb = NULL;
    size_t na = 0, nb = 0;
    ulp_error err;
    int rc = CLI_EXIT_ERROR, any_differs = 0, compared = 0, json = x->format == ULP_REPORT_JSON;
    if (cli_check_run(x->a) != 0 || cli_check_run(x->b) != 0)
        goto done;
    if (ulp_ladder_run_files(x->a, &fa, &na, &err) != ULP_OK ||
        ulp_ladder_run_files(x->b, &fb, &nb, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        goto done;
    }
    /* Before any output: a pair of runs with no rank in common is an error, not a report. */
    for (size_t i = 0; i < na; i++)
        for (size_t k = 0; k < nb; k++)
            compared += fa[i].rank == fb[k].rank;
    if (compared == 0) {
        cli_error("'%s' and '%s' have no rank in common", x->a, x->b);
        goto done;
    }
    if (json) {
        fputs("{\n  \"format\": \"ulpprof-diff-ranks\",\n  \"format_version\": 1,\n  \"a\": ", out);
        if (json_str(out, x->a) != 0)
            goto done;
        fputs(",\n  \"b\": ", out);
        if (json_str(out, x->b) != 0)
            goto done;
        fputs(",\n  \"ranks\": [\n", out);
    } else {
        fprintf(out, "ulpprof diff: run %s (%zu rank%s) vs run %s (%zu rank%s), rank by rank\n",
                x->a, na, na == 1 ? "" : "s", x->b, nb, nb == 1 ? "" : "s");
    }
    int first = 1;
    size_t only_a = 0, only_b = 0;
    for (size_t i = 0, k = 0; i < na || k < nb;) {
        int ra = i < na ? fa[i].rank : INT32_MAX, rb = k < nb ? fb[k].rank : INT32_MAX;
        if (ra != rb) {
            const ulp_ladder_file *f = ra < rb ? &fa[i++] : &fb[k++];
            *(ra < rb ? &only_a : &only_b) += 1;
            if (!json)
                fprintf(out,
                        x->format == ULP_REPORT_MARKDOWN
                            ? "\n### rank %d: only in %s (`%s`), not compared\n"
                            : "\nrank %d: only in %s (%s), not compared\n",
                        f->rank, ra < rb ? "A" : "B", f->path);
            continue;
        }
        int r = diff_rank(x, &fa[i++], &fb[k++], out, first);
        if (r < 0)
            goto done;
        any_differs |= r;
        first = 0;
    }
    if (json) {
        fputs("\n  ]", out);
        json_ranks(out, "ranks_only_a", fa, na, fb, nb);
        json_ranks(out, "ranks_only_b", fb, nb, fa, na);
    }
    /* A rank only one run has is a difference, never "identical". */
    int differ = any_differs || only_a + only_b > 0;
    if (json)
        fprintf(out, ",\n  \"identical\": %s\n}\n", differ ? "false" : "true");
    else
        summary_line(out, compared, any_differs, only_a, only_b);
    rc = ferror(out) ? CLI_EXIT_ERROR : differ ? CLI_EXIT_DIFFER : CLI_EXIT_OK;
    if (rc == CLI_EXIT_ERROR)
        cli_error("cannot write the report");
done:
    ulp_ladder_files_free(fa, na);
    ulp_ladder_files_free(fb, nb);
    return rc;
}
