/*
 * `ulpprof kernels A.h5 B.h5`: shows where the two kernel traces part, as
 * ulp_kernels_align() (ulpprof/kernels.h) aligns them, in text or JSON.
 * Exit status as diff(1): 0 same sequence, 1 they differ, 2 error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ulpprof/kernels.h"
#include "ulpprof/report.h"

#define KERNELS_USAGE "ulpprof kernels [--json] [--max-hunks N] [--context N] A.h5 B.h5"

static void kernels_help(void)
{
    printf("usage: " KERNELS_USAGE "\n"
           "\n"
           "Aligns the kernel launches of two snapshots (recorded by `ulpprof record`\n"
           "on a CUDA program) and shows where the sequences part.  Two launches\n"
           "match when name, grid and block are equal.  Prints the counts, the first\n"
           "divergence with the capture each side belongs to, then the differing\n"
           "stretches ('-' only in A, '+' only in B, ' ' common context).\n"
           "\n"
           "options:\n"
           "      --json          one JSON object instead of text\n"
           "      --max-hunks N   differing stretches to print (default 10, 0: all)\n"
           "      --context N     common launches shown around each (default 2)\n"
           "  -h, --help          show this help\n"
           "\n"
           "Exit status: 0 same sequence, 1 the sequences differ, 2 error.\n");
}

/* --- output ---------------------------------------------------------------------- */

/* Where row r of a snapshot's trace falls: the capture it was attributed to,
 * or else the next capture after it.  NULL when no capture has `kernels`. */
static const ulp_capture_info *capture_of(const ulp_snapshot *s, size_t r, int *inside)
{
    const ulp_capture_info *after = NULL;
    for (size_t i = 0; i < ulp_snapshot_capture_count(s); i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (!c->has_kernels)
            continue;
        if ((int64_t)r >= c->kernels[0] && (int64_t)r < c->kernels[1]) {
            *inside = 1;
            return c;
        }
        if (after == NULL && c->kernels[0] > (int64_t)r)
            after = c;
    }
    *inside = 0;
    return after;
}

static void print_kernel(char tag, const char *side, const ulp_snapshot *s, size_t i)
{
    const ulp_kernel_info *k = ulp_snapshot_kernel(s, i);
    printf("%c %s #%zu  ", tag, side, i);
    cli_print_escaped(stdout, k->name);
    printf("  grid=(%d,%d,%d) block=(%d,%d,%d)", k->grid[0], k->grid[1], k->grid[2], k->block[0],
           k->block[1], k->block[2]);
    /* The GEMM call behind the kernel, when /trace/gemms names it. */
    const ulp_gemm_info *g = ulp_snapshot_kernel_gemm(s, i);
    if (g != NULL) {
        char buf[400];
        ulp_gemm_format(g, buf, sizeof buf);
        printf("  GEMM ");
        cli_print_escaped(stdout, buf);
    }
    printf("\n");
}

static void print_where(const char *side, const ulp_snapshot *s, size_t r)
{
    int inside;
    const ulp_capture_info *c = capture_of(s, r, &inside);
    if (c == NULL)
        return;
    printf("  %s #%zu %s capture %s/%" PRId64, side, r, inside ? "belongs to" : "precedes", c->name,
           c->occurrence);
    if (c->layer >= 0)
        printf(" (layer %d)", c->layer);
    printf("\n");
}

static void kint(ulp_json *j, const char *key, int64_t v)
{
    ulp_json_key(j, key);
    ulp_json_int(j, v);
}

static void kstr(ulp_json *j, const char *key, const char *v)
{
    ulp_json_key(j, key);
    ulp_json_string(j, v);
}

static void kdim3(ulp_json *j, const char *key, const int32_t *v)
{
    ulp_json_key(j, key);
    ulp_json_array(j);
    for (int k = 0; k < 3; k++)
        ulp_json_int(j, v[k]);
    ulp_json_end(j);
}

static void kernel_json(ulp_json *j, const char *key, const ulp_snapshot *s, size_t i, size_t n)
{
    ulp_json_key(j, key);
    if (i >= n) {
        ulp_json_null(j);
        return;
    }
    const ulp_kernel_info *k = ulp_snapshot_kernel(s, i);
    ulp_json_object(j);
    kint(j, "index", (int64_t)i);
    kstr(j, "name", k->name);
    kdim3(j, "grid", k->grid);
    kdim3(j, "block", k->block);
    const ulp_gemm_info *g = ulp_snapshot_kernel_gemm(s, i);
    if (g != NULL) {
        char buf[400];
        ulp_gemm_format(g, buf, sizeof buf);
        kstr(j, "gemm", buf);
    }
    ulp_json_end(j);
}

static void side_json(ulp_json *j, const char *key, const ulp_snapshot *s, size_t launches)
{
    ulp_json_key(j, key);
    ulp_json_object(j);
    kstr(j, "path", ulp_snapshot_path(s));
    kstr(j, "label", ulp_snapshot_label(s));
    kint(j, "launches", (int64_t)launches);
    ulp_json_end(j);
}

typedef struct kernels_opts {
    int as_json;
    long max_hunks, context;
    const char *path_a, *path_b;
} kernels_opts;

/* Fills `o` from the command line: -1 to go on, else the exit status. */
static int kernels_parse(int argc, char **argv, kernels_opts *o)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"max-hunks", required_argument, NULL, 'm'},
        {"context", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    o->as_json = 0;
    o->max_hunks = 10;
    o->context = 2;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'j':
            o->as_json = 1;
            break;
        case 'm':
        case 'c': {
            errno = 0;
            long v = strtol(optarg, &end, 10);
            /* Beyond a million, a value is a typo, and 2 * context would overflow. */
            if (end == optarg || *end != '\0' || v < 0 || v > 1000000 || errno) {
                cli_error("kernels: --%s needs an integer from 0 to 1000000, not '%s'",
                          c == 'm' ? "max-hunks" : "context", optarg);
                return CLI_EXIT_ERROR;
            }
            if (c == 'm')
                o->max_hunks = v;
            else
                o->context = v;
            break;
        }
        case 'h':
            kernels_help();
            return CLI_EXIT_OK;
        default:
            return cli_bad_option("kernels", KERNELS_USAGE, argv, c);
        }
    }
    if (argc - optind != 2) {
        cli_error("kernels: expected two snapshots; usage: " KERNELS_USAGE);
        return CLI_EXIT_ERROR;
    }
    o->path_a = argv[optind];
    o->path_b = argv[optind + 1];
    return -1;
}

/* The JSON document; 0, or -1 when out of memory or not written. */
static int kernels_print_json(const ulp_snapshot *A, const ulp_snapshot *B,
                              const ulp_kernels_alignment *al)
{
    size_t na = al->launches_a, nb = al->launches_b, pre = al->first_divergence;
    ulp_json *j = ulp_json_open(stdout);
    if (j == NULL)
        return -1;
    ulp_json_object(j);
    kstr(j, "format", "ulpprof-kernels");
    kint(j, "format_version", 1);
    side_json(j, "a", A, na);
    side_json(j, "b", B, nb);
    ulp_json_key(j, "identical");
    ulp_json_bool(j, al->identical);
    ulp_json_key(j, "aligned");
    ulp_json_bool(j, al->aligned);
    if (al->aligned) {
        kint(j, "common", (int64_t)al->common);
        kint(j, "only_in_a", (int64_t)al->only_a);
        kint(j, "only_in_b", (int64_t)al->only_b);
    }
    ulp_json_key(j, "first_divergence");
    if (al->identical) {
        ulp_json_null(j);
    } else {
        ulp_json_object(j);
        kint(j, "a_index", (int64_t)pre);
        kint(j, "b_index", (int64_t)pre);
        kernel_json(j, "a", A, pre, na);
        kernel_json(j, "b", B, pre, nb);
        ulp_json_end(j);
    }
    if (al->aligned && !al->identical) {
        ulp_json_key(j, "edits");
        ulp_json_array(j);
        for (size_t i = 0; i < al->n_steps; i++) {
            const ulp_kernels_step *st = &al->steps[i];
            if (st->op == ULP_KERNELS_SAME)
                continue;
            ulp_json_object(j);
            kstr(j, "op", st->op == ULP_KERNELS_ONLY_A ? "only_a" : "only_b");
            kint(j, "index", (int64_t)(st->op == ULP_KERNELS_ONLY_A ? st->a : st->b));
            ulp_json_end(j);
        }
        ulp_json_end(j);
    }
    ulp_json_end(j);
    int rc = ulp_json_close(j);
    return rc == 0 && putchar('\n') != EOF ? 0 : -1;
}

/* The end of the hunk that starts at edit `start`: runs of edits merged while
 * the common steps between them are at most 2 * context. */
static size_t hunk_end(const ulp_kernels_alignment *al, size_t start, long context)
{
    const ulp_kernels_step *v = al->steps;
    size_t n = al->n_steps, end = start;
    for (;;) {
        while (end < n && v[end].op != ULP_KERNELS_SAME)
            end++;
        size_t gap = end;
        while (gap < n && v[gap].op == ULP_KERNELS_SAME)
            gap++;
        if (gap < n && (long)(gap - end) <= 2 * context)
            end = gap;
        else
            return end;
    }
}

/* Hunks: runs of edits with `context` common steps around them. */
static void print_hunks(const ulp_snapshot *A, const ulp_snapshot *B,
                        const ulp_kernels_alignment *al, const kernels_opts *o)
{
    const ulp_kernels_step *v = al->steps;
    size_t n = al->n_steps;
    long hunks = 0;
    size_t i = 0;
    while (i < n) {
        if (v[i].op == ULP_KERNELS_SAME) {
            i++;
            continue;
        }
        if (o->max_hunks > 0 && hunks == o->max_hunks) {
            size_t left = 0;
            for (size_t j = i; j < n; j++)
                left += v[j].op != ULP_KERNELS_SAME && (j == 0 || v[j - 1].op == ULP_KERNELS_SAME);
            printf("... %zu more differing stretch%s (--max-hunks 0 shows all)\n", left,
                   left == 1 ? "" : "es");
            break;
        }
        size_t start = i, end = hunk_end(al, i, o->context);
        size_t from = start > (size_t)o->context ? start - (size_t)o->context : 0;
        size_t to = end + (size_t)o->context < n ? end + (size_t)o->context : n;
        printf("@@ stretch %ld @@\n", hunks + 1);
        for (size_t j = from; j < to; j++) {
            const ulp_kernels_step *st = &v[j];
            if (st->op == ULP_KERNELS_SAME)
                print_kernel(' ', "A", A, st->a);
            else if (st->op == ULP_KERNELS_ONLY_A)
                print_kernel('-', "A", A, st->a);
            else
                print_kernel('+', "B", B, st->b);
        }
        hunks++;
        i = end;
    }
}

static void kernels_print_text(const ulp_snapshot *A, const ulp_snapshot *B,
                               const ulp_kernels_alignment *al, const kernels_opts *o)
{
    size_t na = al->launches_a, nb = al->launches_b, pre = al->first_divergence;
    printf("A: %s (label %s): %zu kernel launches\n", ulp_snapshot_path(A), ulp_snapshot_label(A),
           na);
    printf("B: %s (label %s): %zu kernel launches\n", ulp_snapshot_path(B), ulp_snapshot_label(B),
           nb);
    if (al->identical) {
        printf("identical: the same %zu launches (name, grid, block) in the same order\n", na);
        return;
    }
    if (al->aligned)
        printf("common: %zu launches in both, in order; %zu only in A, %zu only in B\n", al->common,
               al->only_a, al->only_b);
    else
        printf("common: more than %d edits apart after the first %zu launches; no alignment\n",
               ULP_KERNELS_MAX_EDITS, pre);
    printf("first divergence: A #%zu, B #%zu (after %zu common launches)\n", pre, pre, pre);
    if (pre < na)
        print_kernel('-', "A", A, pre);
    else
        printf("- A ends here\n");
    if (pre < nb)
        print_kernel('+', "B", B, pre);
    else
        printf("+ B ends here\n");
    if (pre < na)
        print_where("A", A, pre);
    if (pre < nb)
        print_where("B", B, pre);
    if (al->aligned)
        print_hunks(A, B, al, o);
}

int cmd_kernels(int argc, char **argv)
{
    kernels_opts o = {0};
    int rc = kernels_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    rc = CLI_EXIT_ERROR;
    ulp_kernels_alignment *al = NULL;
    ulp_snapshot *A = NULL, *B = NULL;
    if (cli_open_pair(o.path_a, o.path_b, &A, &B, 0) < 0)
        goto cleanup;
    ulp_error err;
    ulp_error_clear(&err);
    if (ulp_kernels_align(A, B, &al, &err) != ULP_OK) {
        cli_error("kernels: out of memory");
        goto cleanup;
    }
    /* Without a trace, or without a launch on either side, there is nothing
     * to compare: an error, never "identical: 0 launches". */
    for (int i = 0; i < 2; i++) {
        const ulp_snapshot *s = i ? B : A;
        if (!ulp_snapshot_has_kernel_trace(s)) {
            cli_error("kernels: '%s' has no kernel trace (record a CUDA program with "
                      "'ulpprof record')",
                      ulp_snapshot_path(s));
            goto cleanup;
        }
    }
    if (ulp_snapshot_kernel_count(A) == 0 && ulp_snapshot_kernel_count(B) == 0) {
        cli_error("kernels: neither '%s' nor '%s' recorded a kernel launch: nothing to compare",
                  ulp_snapshot_path(A), ulp_snapshot_path(B));
        goto cleanup;
    }
    if (o.as_json) {
        if (kernels_print_json(A, B, al) != 0) {
            cli_error("kernels: out of memory");
            goto cleanup;
        }
    } else {
        kernels_print_text(A, B, al, &o);
    }
    rc = al->identical ? CLI_EXIT_OK : CLI_EXIT_DIFFER;
cleanup:
    ulp_kernels_alignment_free(al);
    ulp_snapshot_close(B);
    ulp_snapshot_close(A);
    return rc;
}
