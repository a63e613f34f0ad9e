/*
 * `ulpprof streams RUN...|DIR`: the generations of many runs (streams.h):
 * per request, the distinct completions and how many runs gave each, the
 * histogram of the steps where runs part from the most common completion,
 * and each completion's parting step with its tokens and margins.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ulpprof/digest.h"
#include "ulpprof/ladder.h"
#include "ulpprof/report.h"
#include "ulpprof/streams.h"

#define STREAMS_USAGE "ulpprof streams [-f table|markdown|json] [--activations] RUN... | DIR"

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
           "With --activations, each other completion's first run is compared with\n"
           "the common one's first run by row digests (a full capture is digested\n"
           "here): for the request, the first position where any capture differs,\n"
           "the first capture in write order differing there and its layer, and\n"
           "the --select spec (that capture's differing positions of the request) to\n"
           "capture in full on a re-run, whose `ulpprof diff` gives the ULP numbers.\n"
           "\n"
           "options:\n"
           "  -f, --format F  table (default), markdown or json\n"
           "  -a, --activations  where the activations part, and what to capture next\n"
           "  -h, --help      show this help\n"
           "\n"
           "Exit status: 0 when every run of each request gave one completion, 1 when\n"
           "some part, 2 on error.\n");
}

/* Where a completion's activations part from the common one's (--activations). */
typedef struct parting {
    int found;
    const char *capture; /* into the digest result */
    int32_t layer;
    int64_t position, first, last;
    uint64_t rows;           /* differing rows of the capture, every request */
    int64_t request, common; /* the request's number in the completion's first run, and
                                in the common completion's first run */
} parting;

typedef struct partings {
    ulp_digest_result **res; /* [request][group] */
    parting *at;
} partings;

/* The first position of `request` where a capture differs, at or before `upto`; at it, the first
 * capture in write order (names are in A's seq order).  Past `upto` the runs were fed different
 * tokens: another computation, which `ulpprof diff` leaves out, so the selection stops there. */
static parting find_parting(const ulp_digest_result *d, int64_t request, int64_t upto)
{
    parting p = {0};
    for (size_t i = 0; d && i < d->nnames; i++) {
        const ulp_digest_name *n = &d->names[i];
        for (size_t k = 0; k < n->nranges; k++) {
            const ulp_digest_range *g = &n->ranges[k];
            if (g->request != request || g->first > upto || (p.found && g->first >= p.position))
                continue;
            int64_t last = g->last < upto ? g->last : upto;
            p = (parting){1, n->name, n->layer, g->first, g->first, last, n->differing, 0, 0};
        }
    }
    return p;
}

/* The position of the logits that emitted the parting token: the group's own, else (the group
 * ended first) the common one's; INT64_MAX when neither has that step. */
static int64_t parting_position(const ulp_streams_group *g, const ulp_streams_group *common)
{
    size_t k = (size_t)g->part_step;
    if (g->part_step >= 0 && k < g->n_tokens && g->positions)
        return g->positions[k];
    if (g->part_step >= 0 && k < common->n_tokens && common->positions)
        return common->positions[k];
    return INT64_MAX;
}

static void print_parting(const parting *p, size_t g, int md)
{
    long long request = (long long)p->request, common = (long long)p->common;
    if (!p->found) {
        printf(md ? "\ncompletion %zu: no activation of request %lld differs\n"
                  : "  completion %zu: no activation of request %lld differs\n",
               g, request);
        return;
    }
    printf(md ? "\ncompletion %zu: activations part at `%s` (layer %d), request %lld, position "
                "%lld; capture next: `--select '%s@%lld:%lld-%lld'`"
              : "  completion %zu: activations part at %s (layer %d), request %lld, position "
                "%lld; capture next: --select '%s@%lld:%lld-%lld'",
           g, p->capture, (int)p->layer, request, (long long)p->position, p->capture, request,
           (long long)p->first, (long long)p->last);
    if (common != request) /* the same prompt, numbered otherwise in the common run */
        printf(md ? " (in the common run: `'%s@%lld:%lld-%lld'`)"
                  : " (in the common run: '%s@%lld:%lld-%lld')",
               p->capture, common, (long long)p->first, (long long)p->last);
    printf("\n");
}

/* Which run numbers the request otherwise, and which runs lack it (the first few of each). */
static void print_identity(const ulp_streams_request *Q, int md)
{
    size_t shown = 0;
    for (size_t k = 0; k < Q->n_runs; k++) {
        if (Q->present_requests[k] == Q->request)
            continue;
        if (shown < 8)
            printf(shown ? ", run %zu: %lld"
                   : md  ? "\nnumbered otherwise: run %zu: %lld"
                         : "  numbered otherwise: run %zu: %lld",
                   Q->present_runs[k], (long long)Q->present_requests[k]);
        shown++;
    }
    if (shown > 8)
        printf(" (and %zu more)", shown - 8);
    if (shown)
        printf("\n");
    if (Q->n_missing == 0)
        return;
    printf(md ? "\nmissing from %zu runs (no completion of this prompt there):"
              : "  missing from %zu runs (no completion of this prompt there):",
           Q->n_missing);
    for (size_t k = 0; k < Q->n_missing && k < 16; k++)
        printf(" %zu", Q->missing_runs[k]);
    printf(Q->n_missing > 16 ? " ...\n" : "\n");
}

static void print_tokens(const ulp_streams_group *g, size_t max)
{
    for (size_t k = 0; k < g->n_tokens && k < max; k++)
        printf("%s%lld", k ? " " : "", (long long)g->tokens[k]);
    if (g->n_tokens > max)
        printf(" ...");
}

static void print_text(const ulp_streams_result *r, const partings *pt, int md)
{
    size_t slot = 0;
    printf(md ? "# ulpprof streams: %zu runs\n" : "ulpprof streams: %zu runs\n", r->n_runs);
    if (r->by_prompt)
        printf(md ? "\nrequests identified by their prompt tokens (`%s`)\n"
                  : "requests identified by their prompt tokens ('%s')\n",
               r->ids_name);
    else
        printf(md ? "\nrequests identified by their number (no run records fed token ids)\n"
                  : "requests identified by their number (no run records fed token ids)\n");
    for (size_t q = 0; q < r->n_requests; q++) {
        const ulp_streams_request *Q = &r->requests[q];
        printf(md ? "\n## request %lld: %zu runs, %zu distinct completions\n\n"
                  : "\nrequest %lld: %zu runs, %zu distinct completions\n",
               (long long)Q->request, Q->n_runs, Q->n_groups);
        print_identity(Q, md);
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
        for (size_t g = 0; pt && g < Q->n_groups; g++, slot++)
            if (!Q->groups[g].common)
                print_parting(&pt->at[slot], g, md);
        if (pt == NULL)
            slot += Q->n_groups;
    }
}

/* "key": v, or null when v is negative (a token past the end, no layer). */
static void key_int_or_null(ulp_json *j, const char *key, int64_t v)
{
    ulp_json_key(j, key);
    if (v < 0)
        ulp_json_null(j);
    else
        ulp_json_int(j, v);
}

static void key_int(ulp_json *j, const char *key, int64_t v)
{
    ulp_json_key(j, key);
    ulp_json_int(j, v);
}

static void parting_json(ulp_json *j, const parting *p)
{
    if (!p->found) {
        ulp_json_null(j);
        return;
    }
    char sel[512], selc[512];
    int64_t request = p->request;
    snprintf(sel, sizeof sel, "%s@%lld:%lld-%lld", p->capture, (long long)request,
             (long long)p->first, (long long)p->last);
    snprintf(selc, sizeof selc, "%s@%lld:%lld-%lld", p->capture, (long long)p->common,
             (long long)p->first, (long long)p->last);
    ulp_json_object(j);
    ulp_json_key(j, "capture");
    ulp_json_string(j, p->capture);
    key_int_or_null(j, "layer", p->layer);
    key_int(j, "request", request);
    key_int(j, "position", p->position);
    key_int(j, "last_position", p->last);
    ulp_json_key(j, "select");
    ulp_json_string(j, sel);
    key_int(j, "request_common", p->common);
    ulp_json_key(j, "select_common");
    ulp_json_string(j, selc);
    ulp_json_end(j);
}

static void group_json(ulp_json *j, const ulp_streams_group *G, const parting *p)
{
    ulp_json_object(j);
    key_int(j, "count", (int64_t)G->n_runs);
    ulp_json_key(j, "runs");
    ulp_json_array(j);
    for (size_t k = 0; k < G->n_runs; k++)
        ulp_json_uint(j, G->runs[k]);
    ulp_json_end(j);
    ulp_json_key(j, "tokens");
    ulp_json_array(j);
    for (size_t k = 0; k < G->n_tokens; k++)
        ulp_json_int(j, G->tokens[k]);
    ulp_json_end(j);
    ulp_json_key(j, "common");
    ulp_json_bool(j, G->common);
    ulp_json_key(j, "part_step");
    if (G->common) {
        ulp_json_null(j);
    } else {
        ulp_json_int(j, G->part_step);
        key_int_or_null(j, "token", G->token);
        key_int_or_null(j, "token_common", G->token_common);
        ulp_json_key(j, "margin");
        ulp_json_real(j, G->margin); /* NaN past the end: null */
        ulp_json_key(j, "margin_common");
        ulp_json_real(j, G->margin_common);
        if (p != NULL) {
            ulp_json_key(j, "activations");
            parting_json(j, p);
        }
    }
    ulp_json_end(j);
}

static void request_json(ulp_json *j, const ulp_streams_request *Q, const partings *pt,
                         size_t *slot)
{
    ulp_json_object(j);
    key_int(j, "request", Q->request);
    key_int(j, "runs", (int64_t)Q->n_runs);
    ulp_json_key(j, "in_runs");
    ulp_json_array(j);
    for (size_t k = 0; k < Q->n_runs; k++) {
        ulp_json_object(j);
        key_int(j, "run", (int64_t)Q->present_runs[k]);
        key_int(j, "request", Q->present_requests[k]);
        ulp_json_end(j);
    }
    ulp_json_end(j);
    ulp_json_key(j, "runs_missing");
    ulp_json_array(j);
    for (size_t k = 0; k < Q->n_missing; k++)
        ulp_json_uint(j, Q->missing_runs[k]);
    ulp_json_end(j);
    ulp_json_key(j, "completions");
    ulp_json_array(j);
    for (size_t g = 0; g < Q->n_groups; g++, (*slot)++)
        group_json(j, &Q->groups[g], pt ? &pt->at[*slot] : NULL);
    ulp_json_end(j);
    ulp_json_key(j, "parting_steps");
    ulp_json_array(j);
    for (size_t s = 0; s < Q->n_hist; s++)
        if (Q->hist[s]) {
            ulp_json_object(j);
            key_int(j, "step", (int64_t)s);
            key_int(j, "runs", (int64_t)Q->hist[s]);
            ulp_json_end(j);
        }
    ulp_json_end(j);
    ulp_json_end(j);
}

/* The report in JSON, through the project's one JSON writer (ulpprof/report.h). */
static int print_json(const ulp_streams_result *r, const partings *pt)
{
    ulp_json *j = ulp_json_open(stdout);
    if (j == NULL)
        return -1;
    size_t slot = 0;
    ulp_json_object(j);
    ulp_json_key(j, "format");
    ulp_json_string(j, "ulpprof-streams");
    key_int(j, "format_version", 1);
    ulp_json_key(j, "runs");
    ulp_json_array(j);
    for (size_t i = 0; i < r->n_runs; i++)
        ulp_json_string(j, r->paths[i]);
    ulp_json_end(j);
    ulp_json_key(j, "requests_by");
    ulp_json_string(j, r->by_prompt ? "prompt" : "number");
    ulp_json_key(j, "ids");
    ulp_json_string(j, r->by_prompt ? r->ids_name : NULL);
    ulp_json_key(j, "requests");
    ulp_json_array(j);
    for (size_t q = 0; q < r->n_requests; q++)
        request_json(j, &r->requests[q], pt, &slot);
    ulp_json_end(j);
    ulp_json_end(j);
    int rc = ulp_json_close(j);
    printf("\n");
    return rc;
}

static size_t n_slots(const ulp_streams_result *r)
{
    size_t n = 0;
    for (size_t q = 0; q < r->n_requests; q++)
        n += r->requests[q].n_groups;
    return n;
}

static void partings_free(partings *pt, const ulp_streams_result *r)
{
    for (size_t k = 0; pt->res && k < n_slots(r); k++)
        ulp_digest_result_free(pt->res[k]);
    free(pt->res);
    free(pt->at);
    pt->res = NULL;
    pt->at = NULL;
}

/* The request's number in run `run` (one that gave tokens for it). */
static int64_t number_in(const ulp_streams_request *Q, size_t run)
{
    for (size_t k = 0; k < Q->n_runs; k++)
        if (Q->present_runs[k] == run)
            return Q->present_requests[k];
    return Q->request;
}

/* Each other completion's first run against the common one's, by row digests (of the
 * request's rows only: in each run under its own number). */
static ulp_status compare_groups(const ulp_streams_result *r, const char *const *files,
                                 partings *pt, ulp_error *err)
{
    size_t n = n_slots(r), slot = 0;
    pt->res = calloc(n + 1, sizeof *pt->res);
    pt->at = calloc(n + 1, sizeof *pt->at);
    if (pt->res == NULL || pt->at == NULL)
        return ULP_ENOMEM;
    for (size_t q = 0; q < r->n_requests; q++) {
        const ulp_streams_request *Q = &r->requests[q];
        size_t common = 0;
        for (size_t g = 0; g < Q->n_groups; g++)
            common = Q->groups[g].common ? g : common;
        for (size_t g = 0; g < Q->n_groups; g++, slot++) {
            if (Q->groups[g].common)
                continue;
            size_t rc = Q->groups[common].runs[0], rg = Q->groups[g].runs[0];
            int64_t qc = number_in(Q, rc), qg = number_in(Q, rg);
            ulp_status st =
                ulp_digest_compare_request(files[rc], qc, files[rg], qg, &pt->res[slot], err);
            if (st != ULP_OK)
                return st;
            pt->at[slot] = find_parting(pt->res[slot], qc,
                                        parting_position(&Q->groups[g], &Q->groups[common]));
            pt->at[slot].request = qg;
            pt->at[slot].common = qc;
        }
    }
    return ULP_OK;
}

int cmd_streams(int argc, char **argv)
{
    static const struct option longopts[] = {{"format", required_argument, NULL, 'f'},
                                             {"activations", no_argument, NULL, 'a'},
                                             {"help", no_argument, NULL, 'h'},
                                             {0}};
    int format = ULP_REPORT_TABLE, c, activations = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "f:ah", longopts, NULL)) != -1) {
        if (c == 'a') {
            activations = 1;
            continue;
        }
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
    partings pt = {0}, *ptp = NULL;
    if (activations) {
        if (compare_groups(r, (const char *const *)files, &pt, &err) != ULP_OK) {
            cli_error("%s", err.msg);
            partings_free(&pt, r);
            goto done;
        }
        ptp = &pt;
    }
    if (format == ULP_REPORT_JSON)
        print_json(r, ptp);
    else
        print_text(r, ptp, format == ULP_REPORT_MARKDOWN);
    partings_free(&pt, r);
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
