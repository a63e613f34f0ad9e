/*
 * `ulpprof diff A B` when a side holds row digests only (FORMAT.md,
 * "Digests"): which (capture, request, position) rows differ, the first
 * in the order A wrote its captures, the selection to capture in full, and
 * where the token streams part: all from ulp_digest_compare(), printed here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ulpprof/digest.h"

static void selection(FILE *out, const ulp_digest_name *n)
{
    for (size_t k = 0; k < n->nranges; k++)
        fprintf(out, "%s%s@%lld:%lld-%lld", k ? "," : "", n->name, (long long)n->ranges[k].request,
                (long long)n->ranges[k].first, (long long)n->ranges[k].last);
}

static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(out, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

/* B's requests renumbered onto A's (JSON keys only when some are, as the output was before). */
static void json_requests(FILE *out, const ulp_digest_result *r)
{
    if (r->n_request_pairs == 0)
        return;
    fprintf(out, ", \"requests_paired\": [");
    for (size_t k = 0, m = 0; k < r->n_request_pairs; k++)
        if (r->request_pairs[k].paired)
            fprintf(out, "%s{\"b\": %lld, \"a\": %lld}", m++ ? ", " : "",
                    (long long)r->request_pairs[k].b, (long long)r->request_pairs[k].a);
    fprintf(out, "], \"requests_apart_b\": [");
    for (size_t k = 0, m = 0; k < r->n_request_pairs; k++)
        if (!r->request_pairs[k].paired)
            fprintf(out, "%s%lld", m++ ? ", " : "", (long long)r->request_pairs[k].b);
    fprintf(out, "]");
}

static void json_step(FILE *out, int64_t step)
{
    if (step >= 0)
        fprintf(out, "%lld", (long long)step);
    else
        fprintf(out, "null");
}

static void print_json(FILE *out, const char *a, const char *b, const ulp_digest_result *r)
{
    fprintf(out, "{\"format\": \"ulpprof-digest-diff\", \"format_version\": 1, \"a\": ");
    json_str(out, a);
    fprintf(out, ", \"b\": ");
    json_str(out, b);
    fprintf(out, ", \"digests_a\": %s, \"digests_b\": %s, \"identical\": %s, \"captures\": [",
            r->digests_a ? "true" : "false", r->digests_b ? "true" : "false",
            r->identical ? "true" : "false");
    for (size_t i = 0; i < r->nnames; i++) {
        const ulp_digest_name *n = &r->names[i];
        fprintf(out, "%s{\"name\": ", i ? ", " : "");
        json_str(out, n->name);
        fprintf(out,
                ", \"rows_compared\": %llu, \"rows_differing\": %llu, \"only_in_a\": %llu, "
                "\"only_in_b\": %llu, \"first_differing\": ",
                (unsigned long long)n->compared, (unsigned long long)n->differing,
                (unsigned long long)n->only_a, (unsigned long long)n->only_b);
        if (n->has_first)
            fprintf(out, "{\"request\": %lld, \"position\": %lld}", (long long)n->first_request,
                    (long long)n->first_position);
        else
            fprintf(out, "null");
        fprintf(out, ", \"differing\": [");
        for (size_t k = 0; k < n->nranges; k++)
            fprintf(out, "%s{\"request\": %lld, \"first\": %lld, \"last\": %lld}", k ? ", " : "",
                    (long long)n->ranges[k].request, (long long)n->ranges[k].first,
                    (long long)n->ranges[k].last);
        fprintf(out, "]}");
    }
    fprintf(out, "], \"streams_part\": [");
    for (size_t k = 0; k < r->nparts; k++) {
        const ulp_digest_part *x = &r->parts[k];
        fprintf(out, "%s{\"source\": ", k ? ", " : "");
        json_str(out, x->source);
        fprintf(out,
                ", \"request\": %lld, \"position\": %lld, \"token_a\": %lld, "
                "\"token_b\": %lld, \"step_a\": ",
                (long long)x->request, (long long)x->position, (long long)x->token_a,
                (long long)x->token_b);
        json_step(out, x->step_a);
        fprintf(out, ", \"step_b\": ");
        json_step(out, x->step_b);
        fprintf(out, "}");
    }
    fprintf(out, "]");
    json_requests(out, r);
    fprintf(out, ", \"first_divergence\": ");
    if (r->first >= 0) {
        const ulp_digest_name *n = &r->names[r->first];
        fprintf(out, "{\"capture\": ");
        json_str(out, n->name);
        fprintf(out, ", \"request\": %lld, \"position\": %lld}, \"capture_next\": \"",
                (long long)n->first_request, (long long)n->first_position);
        selection(out, n);
        fprintf(out, "\"}\n");
    } else {
        fprintf(out, "null, \"capture_next\": null}\n");
    }
}

static void print_parts(FILE *out, const ulp_digest_result *r)
{
    size_t paired = 0;
    for (size_t k = 0; k < r->n_request_pairs; k++)
        paired += r->request_pairs[k].paired != 0;
    if (paired > 0) {
        fprintf(out, "requests paired by tokens:");
        for (size_t k = 0, m = 0; k < r->n_request_pairs; k++)
            if (r->request_pairs[k].paired)
                fprintf(out, "%s B's %lld is A's %lld", m++ ? "," : "",
                        (long long)r->request_pairs[k].b, (long long)r->request_pairs[k].a);
        fputc('\n', out);
    }
    if (paired < r->n_request_pairs) {
        fprintf(out, "requests of B with no request of A's tokens, kept apart:");
        for (size_t k = 0, m = 0; k < r->n_request_pairs; k++)
            if (!r->request_pairs[k].paired)
                fprintf(out, "%s %lld", m++ ? "," : "", (long long)r->request_pairs[k].b);
        fputc('\n', out);
    }
    for (size_t k = 0; k < r->nparts; k++) {
        const ulp_digest_part *x = &r->parts[k];
        fprintf(out, "token streams part at request %lld, position %lld", (long long)x->request,
                (long long)x->position);
        if (x->step_a >= 0)
            fprintf(out, " (step %lld in A)", (long long)x->step_a);
        fprintf(out, ": A fed token %lld, B fed token %lld (recorded in %s)\n",
                (long long)x->token_a, (long long)x->token_b, x->source);
    }
}

static void print_table(FILE *out, const char *a, const char *b, const ulp_digest_result *r)
{
    fprintf(out, "digest comparison: A %s (%s) vs B %s (%s)\n", a,
            r->digests_a ? "digests" : "data", b, r->digests_b ? "digests" : "data");
    fprintf(out, "%-40s %10s %10s %8s %8s  %s\n", "capture", "rows", "differing", "only_a",
            "only_b", "first (request, position)");
    for (size_t i = 0; i < r->nnames; i++) {
        const ulp_digest_name *n = &r->names[i];
        fprintf(out, "%-40s %10llu %10llu %8llu %8llu  ", n->name, (unsigned long long)n->compared,
                (unsigned long long)n->differing, (unsigned long long)n->only_a,
                (unsigned long long)n->only_b);
        if (n->has_first)
            fprintf(out, "(%lld, %lld)\n", (long long)n->first_request,
                    (long long)n->first_position);
        else
            fprintf(out, "-\n");
    }
    print_parts(out, r);
    if (r->first < 0) {
        fprintf(out, r->identical ? "identical: every row's digest is equal\n"
                                  : "no compared row differs; some rows are on one side only\n");
        return;
    }
    const ulp_digest_name *n = &r->names[r->first];
    fprintf(out,
            "first difference: capture '%s', request %lld, position %lld (%llu of %llu "
            "rows differ)\n",
            n->name, (long long)n->first_request, (long long)n->first_position,
            (unsigned long long)n->differing, (unsigned long long)n->compared);
    fprintf(out, "capture next: --select '");
    selection(out, n);
    fprintf(out, "'\n");
}

int cli_diff_digests(const char *a, const char *b, int json, FILE *out)
{
    ulp_error err;
    ulp_digest_result *r = NULL;
    if (ulp_digest_compare(a, b, &r, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        return CLI_EXIT_ERROR;
    }
    if (json)
        print_json(out, a, b, r);
    else
        print_table(out, a, b, r);
    int rc = r->identical && r->nparts == 0 ? CLI_EXIT_OK : CLI_EXIT_DIFFER;
    ulp_digest_result_free(r);
    return rc;
}
