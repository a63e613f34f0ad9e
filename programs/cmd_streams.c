/*
 * `ulpprof streams RUN...|DIR`: the generations of many runs (streams.h):
 * per request, the distinct completions and how many runs gave each, the
 * histogram of the steps where runs part from the most common completion,
 * and each completion's parting step with its tokens and margins.
 */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ulpprof/ladder.h"
#include "ulpprof/streams.h"

#define STREAMS_USAGE "ulpprof streams [-f table|markdown|json] RUN... | DIR"

static void streams_help(void)
{
    printf("usage: " STREAMS_USAGE "\n"
           "\n"
           "Groups the runs' generations (their 'tokens' captures: the token each\n"
           "step produced and its top-1 minus top-2 margin) per request: the\n"
           "distinct completions and how many runs gave each, the histogram of the\n"
           "steps where runs part from the most common completion, and where each\n"
           "other completion parts from it (step, its token and the common one's,\n"
           "both margins).  RUN: a snapshot, or a directory of per-rank files (its\n"
           "first rank is read); DIR: a directory of runs, as `ulpprof ladder` takes.\n"
           "\n"
           "options:\n"
           "  -f, --format F  table (default), markdown or json\n"
           "  -h, --help      show this help\n"
           "\n"
           "Exit status: 0 when every run of each request gave one completion, 1 when\n"
           "some part, 2 on error.\n");
}

static void print_tokens(const ulp_streams_group *g, size_t max)
{
    for (size_t k = 0; k < g->n_tokens && k < max; k++)
        printf("%s%lld", k ? " " : "", (long long)g->tokens[k]);
    if (g->n_tokens > max)
        printf(" ...");
}

static void print_text(const ulp_streams_result *r, int md)
{
    printf(md ? "# ulpprof streams: %zu runs\n" : "ulpprof streams: %zu runs\n", r->n_runs);
    for (size_t q = 0; q < r->n_requests; q++) {
        const ulp_streams_request *Q = &r->requests[q];
        printf(md ? "\n## request %lld: %zu runs, %zu distinct completions\n\n"
                  : "\nrequest %lld: %zu runs, %zu distinct completions\n",
               (long long)Q->request, Q->n_runs, Q->n_groups);
        if (md)
            printf("| completion | runs | first run | parts at step | token | common token | "
                   "margin | common margin | tokens |\n|---|---|---|---|---|---|---|---|---|\n");
        else
            printf("  %-10s %6s  %-9s %-13s %-8s %-12s %-10s %-13s tokens\n", "completion", "runs",
                   "first run", "parts at step", "token", "common token", "margin",
                   "common margin");
        for (size_t g = 0; g < Q->n_groups; g++) {
            const ulp_streams_group *G = &Q->groups[g];
            printf(md ? "| %zu%s | %zu | %zu | " : "  %-3zu%-7s %6zu  %-9zu ", g,
                   G->common ? " (common)" : "", G->n_runs, G->runs[0]);
            if (G->common)
                printf(md ? "- | - | - | - | - | " : "%-13s %-8s %-12s %-10s %-13s ", "-", "-", "-",
                       "-", "-");
            else {
                char t[32], tc[32], m[32], mc[32];
                snprintf(t, sizeof t, G->token < 0 ? "(end)" : "%lld", (long long)G->token);
                snprintf(tc, sizeof tc, G->token_common < 0 ? "(end)" : "%lld",
                         (long long)G->token_common);
                snprintf(m, sizeof m, isnan(G->margin) ? "-" : "%.6g", G->margin);
                snprintf(mc, sizeof mc, isnan(G->margin_common) ? "-" : "%.6g", G->margin_common);
                printf(md ? "%lld | %s | %s | %s | %s | " : "%-13lld %-8s %-12s %-10s %-13s ",
                       (long long)G->part_step, t, tc, m, mc);
            }
            print_tokens(G, 24);
            printf(md ? " |\n" : "\n");
        }
        printf(md ? "\nparting steps (runs vs the common completion):" : "  parting steps:");
        int any = 0;
        for (size_t s = 0; s < Q->n_hist; s++)
            if (Q->hist[s]) {
                printf(" %zu: %zu", s, Q->hist[s]);
                any = 1;
            }
        printf(any ? "\n" : " none\n");
    }
}

static json_t *num_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

static int print_json(const ulp_streams_result *r)
{
    json_t *root = json_object(), *runs = json_array(), *reqs = json_array();
    json_object_set_new(root, "format", json_string("ulpprof-streams"));
    json_object_set_new(root, "format_version", json_integer(1));
    for (size_t i = 0; i < r->n_runs; i++)
        json_array_append_new(runs, json_string(r->paths[i]));
    json_object_set_new(root, "runs", runs);
    for (size_t q = 0; q < r->n_requests; q++) {
        const ulp_streams_request *Q = &r->requests[q];
        json_t *o = json_object(), *groups = json_array(), *hist = json_array();
        json_object_set_new(o, "request", json_integer(Q->request));
        json_object_set_new(o, "runs", json_integer((json_int_t)Q->n_runs));
        for (size_t g = 0; g < Q->n_groups; g++) {
            const ulp_streams_group *G = &Q->groups[g];
            json_t *go = json_object(), *gr = json_array(), *tk = json_array();
            for (size_t k = 0; k < G->n_runs; k++)
                json_array_append_new(gr, json_integer((json_int_t)G->runs[k]));
            for (size_t k = 0; k < G->n_tokens; k++)
                json_array_append_new(tk, json_integer(G->tokens[k]));
            json_object_set_new(go, "count", json_integer((json_int_t)G->n_runs));
            json_object_set_new(go, "runs", gr);
            json_object_set_new(go, "tokens", tk);
            json_object_set_new(go, "common", json_boolean(G->common));
            if (G->common) {
                json_object_set_new(go, "part_step", json_null());
            } else {
                json_object_set_new(go, "part_step", json_integer(G->part_step));
                json_object_set_new(go, "token",
                                    G->token < 0 ? json_null() : json_integer(G->token));
                json_object_set_new(go, "token_common",
                                    G->token_common < 0 ? json_null()
                                                        : json_integer(G->token_common));
                json_object_set_new(go, "margin", num_or_null(G->margin));
                json_object_set_new(go, "margin_common", num_or_null(G->margin_common));
            }
            json_array_append_new(groups, go);
        }
        for (size_t s = 0; s < Q->n_hist; s++)
            if (Q->hist[s]) {
                json_t *h = json_object();
                json_object_set_new(h, "step", json_integer((json_int_t)s));
                json_object_set_new(h, "runs", json_integer((json_int_t)Q->hist[s]));
                json_array_append_new(hist, h);
            }
        json_object_set_new(o, "completions", groups);
        json_object_set_new(o, "parting_steps", hist);
        json_array_append_new(reqs, o);
    }
    json_object_set_new(root, "requests", reqs);
    int rc = json_dumpf(root, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    printf("\n");
    json_decref(root);
    return rc;
}

int cmd_streams(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'}, {0}};
    int format = ULP_REPORT_TABLE, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "f:h", longopts, NULL)) != -1) {
        if (c == 'h') {
            streams_help();
            return CLI_EXIT_OK;
        }
        if (c == 'f') {
            format = ulp_report_format_from_name(optarg);
            if (format != ULP_REPORT_TABLE && format != ULP_REPORT_MARKDOWN &&
                format != ULP_REPORT_JSON) {
                cli_error("streams: unknown format '%s' (table, markdown or json)", optarg);
                return CLI_EXIT_ERROR;
            }
            continue;
        }
        fprintf(stderr, "usage: " STREAMS_USAGE "\n");
        return CLI_EXIT_ERROR;
    }
    size_t n = (size_t)(argc - optind);
    if (n == 0) {
        fprintf(stderr, "usage: " STREAMS_USAGE "\n");
        return CLI_EXIT_ERROR;
    }
    ulp_error err;
    ulp_error_clear(&err);
    char **listed = NULL;
    const char *const *given = (const char *const *)(argv + optind);
    struct stat st;
    if (n == 1 && stat(given[0], &st) == 0 && S_ISDIR(st.st_mode)) {
        if (ulp_ladder_list_dir(given[0], &listed, &n, &err) != ULP_OK) {
            cli_error("%s", err.msg);
            return CLI_EXIT_ERROR;
        }
        given = (const char *const *)listed;
    }
    int rc = CLI_EXIT_ERROR;
    char **files = calloc(n + 1, sizeof *files);
    ulp_streams_result *r = NULL;
    for (size_t i = 0; files && i < n; i++) {
        ulp_ladder_file *f = NULL;
        size_t nf = 0;
        if (ulp_ladder_run_files(given[i], &f, &nf, &err) != ULP_OK) {
            cli_error("%s", err.msg);
            goto done;
        }
        files[i] = strdup(f[0].path);
        ulp_ladder_files_free(f, nf);
        if (files[i] == NULL)
            goto done;
    }
    if (files == NULL ||
        ulp_streams_group_runs((const char *const *)files, n, &r, &err) != ULP_OK) {
        cli_error("%s", files ? err.msg : "out of memory");
        goto done;
    }
    if (format == ULP_REPORT_JSON)
        print_json(r);
    else
        print_text(r, format == ULP_REPORT_MARKDOWN);
    rc = CLI_EXIT_OK;
    for (size_t q = 0; q < r->n_requests; q++)
        if (r->requests[q].n_groups > 1)
            rc = CLI_EXIT_DIFFER;
done:
    ulp_streams_result_free(r);
    for (size_t i = 0; files && i < n; i++)
        free(files[i]);
    free(files);
    for (size_t i = 0; listed && i < n; i++)
        free(listed[i]);
    free(listed);
    return rc;
}
