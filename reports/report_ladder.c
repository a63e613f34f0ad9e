/*
 * `ulpprof ladder` as text: the runs and their groups, the ladder (one line
 * per rung: verdict and where it first breaks), the pairwise matrix and the
 * pairs.  The table and the Markdown share the layout; Markdown escapes `|`
 * and wraps the sections in GitHub tables.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "report_priv.h"
#include "ulpprof/verdict.h"

#define MAX_PAIRS_LISTED  200 /* more: the breaking and deciding pairs only */
#define MAX_MATRIX_RUNS   60  /* wider matrices do not fit a terminal        */
#define MAX_KEYS_PER_LINE 6

typedef struct out {
    FILE *f;
    int md;
} out;

static void text(const out *o, const char *s)
{
    for (; *s; s++) {
        if (o->md && *s == '|')
            fputs("\\|", o->f);
        else if (*s == '\n' || *s == '\r' || *s == '\t')
            fputc(' ', o->f);
        else
            fputc(*s, o->f);
    }
}

static const char *value_of(const ulp_ladder_run *run, const char *key)
{
    for (size_t k = 0; k < run->n_run; k++)
        if (strcmp(run->run[k].key, key) == 0)
            return run->run[k].value;
    return NULL;
}

/* The /run keys (not ignored) whose values differ in some pair, once each, first seen first. */
static size_t varying_keys(const ulp_ladder_result *r, const char **keys, size_t cap)
{
    size_t n = 0;
    for (size_t j = 0; j < r->n_pairs && n < cap; j++) {
        const ulp_ladder_pair *p = ulp_ladder_result_pair(r, j);
        for (size_t k = 0; k < p->n_keys && n < cap; k++) {
            const char *key = p->keys[k].key;
            int ign = 0;
            for (int i = 0; i < r->n_ignore; i++)
                ign |= strcmp(r->ignore[i], key) == 0;
            if (ign)
                continue; /* a description, not a condition: the JSON has it */
            size_t q = 0;
            while (q < n && strcmp(keys[q], key) != 0)
                q++;
            if (q == n)
                keys[n++] = key;
        }
    }
    return n;
}

static void print_runs(const out *o, const ulp_ladder_result *r)
{
    const char *keys[64];
    size_t nk = varying_keys(r, keys, 64);
    if (o->md)
        fputs("\n| run | label | group | path | conditions that vary |\n|--:|---|--:|---|---|\n",
              o->f);
    else
        fputs("\nruns (group: runs that are bitwise identical)\n", o->f);
    for (size_t i = 0; i < r->n_runs; i++) {
        const ulp_ladder_run *run = &r->runs[i];
        if (o->md)
            fprintf(o->f, "| %zu | ", i);
        else
            fprintf(o->f, "  %3zu  %-12s group %-3zu ", i, run->label, run->group);
        if (o->md) {
            text(o, run->label);
            fprintf(o->f, " | %zu | `", run->group);
            text(o, run->path);
            fputs("` | ", o->f);
        }
        for (size_t k = 0; k < nk; k++) {
            const char *v = value_of(run, keys[k]);
            fprintf(o->f, "%s", k ? " " : "");
            text(o, keys[k]);
            fputc('=', o->f);
            text(o, v ? v : "(none)");
        }
        if (run->n_files > 1)
            fprintf(o->f, "%s[%zu ranks]", nk ? " " : "", run->n_files);
        if (!o->md) {
            fputs("  ", o->f);
            text(o, run->path);
        }
        fputs(o->md ? " |\n" : "\n", o->f);
    }
}

/* Whether run `run` has a file of rank `rank`. */
static int has_rank(const ulp_ladder_run *run, int rank)
{
    for (size_t f = 0; f < run->n_files; f++)
        if (run->files[f].rank == rank)
            return 1;
    return 0;
}

/* "rank 1 only in A, rank 3 only in B": the ranks of one run the other lacks. */
static void print_missing_ranks(const out *o, const ulp_ladder_result *r, const ulp_ladder_pair *p)
{
    const char *sep = "";
    for (int side = 0; side < 2; side++) {
        const ulp_ladder_run *run = &r->runs[side ? p->b : p->a];
        const ulp_ladder_run *other = &r->runs[side ? p->a : p->b];
        for (size_t f = 0; f < run->n_files; f++)
            if (!has_rank(other, run->files[f].rank)) {
                fprintf(o->f, "%srank %d only in %s", sep, run->files[f].rank, side ? "B" : "A");
                sep = ", ";
            }
    }
}

/* "token streams part at request 0, position 12 (step 7 in A): A fed 34, B fed 51 (margins
 * 0.0123 in A, 0.0456 in B at produced token 6); before it: " */
static void print_part(const out *o, const ulp_ladder_pair *p)
{
    const ulp_digest_part *s = &p->part;
    fprintf(o->f, "token streams part at request %" PRId64 ", position %" PRId64, s->request,
            s->position);
    if (s->step_a >= 0)
        fprintf(o->f, " (step %" PRId64 " in A)", s->step_a);
    if (p->n_ranks > 1 || p->part_rank > 0)
        fprintf(o->f, ", rank %d", p->part_rank);
    fprintf(o->f, ": A fed %" PRId64 ", B fed %" PRId64, s->token_a, s->token_b);
    if (s->produced_step >= 0)
        fprintf(o->f, " (produced token %" PRId64 ", margin %.6g in A, %.6g in B)",
                s->produced_step, s->margin_a, s->margin_b);
    if (p->parted_requests > 1)
        fprintf(o->f, " [%zu requests part]", p->parted_requests);
    fputs(p->has_first ? "; before it: " : "; no activation differs before it", o->f);
}

/* "model.layers.0.mlp_out (layer 0) row 3, rank 1; 2 flips" */
static void print_first(const out *o, const ulp_ladder_result *r, const ulp_ladder_pair *p)
{
    int missing = p->ranks_only_a > 0 || p->ranks_only_b > 0;
    if (p->streams_part) {
        print_part(o, p);
        if (!p->has_first)
            return;
    }
    if (!p->has_first) {
        if (missing)
            print_missing_ranks(o, r, p);
        else
            fputs(p->identical ? "-" : "captures only one run has", o->f);
        return;
    }
    const ulp_ladder_divergence *d = &p->first;
    fputs(o->md ? "`" : "", o->f);
    text(o, d->capture);
    fputs(o->md ? "`" : "", o->f);
    if (d->occurrence > 0)
        fprintf(o->f, "#%" PRId64, d->occurrence);
    if (d->layer >= 0)
        fprintf(o->f, " (layer %d)", d->layer);
    if (d->status != ULP_DIFF_DIFFERS)
        fprintf(o->f, " %s", ulp_diff_status_name(d->status));
    else if (d->position >= 0)
        fprintf(o->f, " position %" PRId64, d->position);
    else if (d->row >= 0)
        fprintf(o->f, " row %" PRId64, d->row);
    if (p->n_ranks > 1 || d->rank > 0)
        fprintf(o->f, ", rank %d", d->rank);
    if (missing) {
        fputs("; ", o->f);
        print_missing_ranks(o, r, p);
    }
}

static void print_rungs(const out *o, const ulp_ladder_result *r)
{
    if (o->md)
        fputs("\n| rung | | keys | verdict | pairs that differ | first break |\n"
              "|--:|---|---|---|--:|---|\n",
              o->f);
    else
        fprintf(o->f, "\nladder\n  %-4s %-14s %-22s %-9s %-8s %s\n", "rung", "", "keys", "verdict",
                "differ", "first break");
    for (int level = 0; level < ULP_LADDER_RUNGS; level++) {
        const ulp_ladder_rung *g = &r->rungs[level];
        char keys[160] = "-";
        size_t at = 0;
        for (size_t k = 0; k < g->n_keys && at < sizeof keys; k++)
            at += (size_t)snprintf(keys + at, sizeof keys - at, "%s%s", k ? "," : "", g->keys[k]);
        char verdict[40];
        snprintf(verdict, sizeof verdict, "%s", ulp_ladder_verdict_name(g->verdict));
        char pairs[48];
        snprintf(pairs, sizeof pairs, "%zu of %zu", g->n_breaking, g->n_deciding);
        if (o->md) {
            fprintf(o->f, "| %d | %s | ", level, g->name);
            text(o, keys);
            fprintf(o->f, " | **%s** | %s | ", verdict, pairs);
        } else {
            fprintf(o->f, "  %-4d %-14s ", level, g->name);
            text(o, keys);
            fprintf(o->f, "%*s %-9s %-8s ", (int)(22 - (strlen(keys) < 22 ? strlen(keys) : 22)), "",
                    verdict, pairs);
        }
        if (g->has_first_break) {
            const ulp_ladder_pair *p = ulp_ladder_result_pair(r, g->first_break);
            fprintf(o->f, "%s vs %s: %s", r->runs[p->a].label, r->runs[p->b].label,
                    p->streams_part ? "found by tokens: " : "");
            print_first(o, r, p);
            if (p->logits_rows)
                fprintf(o->f, "; %" PRIu64 " of %" PRIu64 " logits rows flip", p->argmax_flips,
                        p->logits_rows);
            if (r->rung_parted[level] > 0)
                fprintf(o->f, "; the token streams part in %zu of the %zu pairs that differ",
                        r->rung_parted[level], g->n_breaking);
        } else if (g->verdict == ULP_LADDER_UNTESTED) {
            fputs(!g->varied         ? "not varied"
                  : g->n_mixed       ? "only varied together with another rung or key"
                  : g->n_empty       ? "nothing compared: every capture of its pairs is empty"
                  : g->n_unwitnessed ? "its pairs do not test the cache rung: no side took a "
                                       "position from its cache"
                                     : "",
                  o->f);
        }
        fputs(o->md ? " |\n" : "\n", o->f);
    }
}

static void print_matrix(const out *o, const ulp_ladder_result *r)
{
    if (r->n_runs > MAX_MATRIX_RUNS)
        return;
    fputs(o->md ? "\n```\n" : "\n", o->f);
    fputs("pairwise (= bitwise identical; the digit: the rung a differing pair decides;\n"
          "x: differs, several rungs or keys)\n      ",
          o->f);
    for (size_t b = 0; b < r->n_runs; b++)
        fprintf(o->f, "%zu", b % 10);
    fputc('\n', o->f);
    for (size_t a = 0; a < r->n_runs; a++) {
        fprintf(o->f, "  %3zu ", a);
        for (size_t b = 0; b < r->n_runs; b++) {
            if (a == b) {
                fputc('.', o->f);
                continue;
            }
            const ulp_ladder_pair *p =
                ulp_ladder_result_pair(r, ulp_ladder_pair_index(r->n_runs, a, b));
            fputc(p->identical ? '=' : p->rung >= 0 ? '0' + p->rung : 'x', o->f);
        }
        fputs("  ", o->f);
        text(o, r->runs[a].label);
        fputc('\n', o->f);
    }
    if (o->md)
        fputs("```\n", o->f);
}

static void print_keys(const out *o, const ulp_ladder_pair *p, const ulp_ladder_result *r)
{
    if (p->n_keys == 0) {
        fputs("-", o->f);
        return;
    }
    for (size_t k = 0; k < p->n_keys && k < MAX_KEYS_PER_LINE; k++) {
        const ulp_diff_run_key *key = &p->keys[k];
        int ign = 0;
        for (int i = 0; i < r->n_ignore; i++)
            ign |= strcmp(r->ignore[i], key->key) == 0;
        fputs(k ? "," : "", o->f);
        text(o, key->key);
        if (ign)
            fputs("(ignored)", o->f);
    }
    if (p->n_keys > MAX_KEYS_PER_LINE)
        fprintf(o->f, ",+%zu", p->n_keys - MAX_KEYS_PER_LINE);
}

static void print_pairs(const out *o, const ulp_ladder_result *r)
{
    int all = r->n_pairs <= MAX_PAIRS_LISTED;
    if (o->md)
        fputs("\n| a | b | identical | decides | differing keys | first divergence | flips |\n"
              "|---|---|---|---|---|---|--:|\n",
              o->f);
    else
        fprintf(o->f, "\npairs%s\n", all ? "" : " (those that decide a rung; JSON has them all)");
    for (size_t j = 0; j < r->n_pairs; j++) {
        const ulp_ladder_pair *p = ulp_ladder_result_pair(r, j);
        if (!all && p->rung < 0)
            continue;
        char decides[40];
        if (p->rung >= 0)
            snprintf(decides, sizeof decides, "%d %s", p->rung, ulp_diff_ladder_name(p->rung));
        else
            snprintf(decides, sizeof decides, "%s",
                     p->identical && p->elements_compared == 0 ? "none (nothing compared)"
                     : p->cache_witness == ULP_WITNESS_NONE    ? "none (no cache witness)"
                     : p->uncontrolled                         ? "none (key without rung)"
                     /* Several keys of one rung, and the runs are identical (ladder.h). */
                     : p->rungs != 0 && (p->rungs & (p->rungs - 1)) == 0
                         ? "none (several keys, same bits)"
                         : "none (several rungs)");
        if (o->md) {
            fputs("| ", o->f);
            text(o, r->runs[p->a].label);
            fputs(" | ", o->f);
            text(o, r->runs[p->b].label);
            fprintf(o->f, " | %s | %s | ", p->identical ? "yes" : "no", decides);
        } else {
            fprintf(o->f, "  %3zu %-10s %3zu %-10s %-3s %-24s ", p->a, r->runs[p->a].label, p->b,
                    r->runs[p->b].label, p->identical ? "=" : "x", decides);
        }
        print_keys(o, p, r);
        fputs(o->md ? " | " : "  ", o->f);
        print_first(o, r, p);
        const char *vk = p->identical ? NULL : ulp_verdict_kind_name((ulp_verdict_kind)p->verdict);
        if (o->md) {
            fprintf(o->f, " | %" PRIu64 "%s%s", p->argmax_flips, vk ? "; " : "", vk ? vk : "");
            if (p->contract_word) {
                fprintf(o->f, "; contract: **%s** (", p->contract_word);
                text(o, p->contract_text);
                fputc(')', o->f);
            }
            fputs(" |\n", o->f);
        } else {
            if (p->logits_rows)
                fprintf(o->f, "  %" PRIu64 " flips%s%s", p->argmax_flips, vk ? "; " : "",
                        vk ? vk : "");
            else
                fprintf(o->f, "%s%s", vk ? "  " : "", vk ? vk : "");
            if (p->contract_word)
                fprintf(o->f, "  contract: %s (%s)", p->contract_word, p->contract_text);
            fputc('\n', o->f);
        }
    }
}

ulp_status ulp__ladder_report_text(const ulp_ladder_result *r, FILE *f, int markdown)
{
    out o = {f, markdown};
    if (markdown)
        fputs("## ulpprof ladder\n\n", f);
    fprintf(f, "%s%zu runs, %zu pairs, %zu group%s of bitwise-identical runs\n",
            markdown ? "" : "ulpprof ladder: ", r->n_runs, r->n_pairs, r->n_groups,
            r->n_groups == 1 ? "" : "s");
    if (r->n_ignore > 0) {
        fputs(markdown ? "\nignored keys (they describe, they do not set a condition): "
                       : "ignored keys (they describe, they do not set a condition): ",
              f);
        for (int i = 0; i < r->n_ignore; i++) {
            fputs(i ? ", " : "", f);
            text(&o, r->ignore[i]);
        }
        fputc('\n', f);
    }
    print_rungs(&o, r);
    print_runs(&o, r);
    print_matrix(&o, r);
    print_pairs(&o, r);
    return ferror(f) ? ULP_EIO : ULP_OK;
}

ulp_status ulp_ladder_report_write(const ulp_ladder_result *r, ulp_report_format format, FILE *f,
                                   unsigned flags, ulp_error *err)
{
    (void)flags;
    ulp_status st;
    switch (format) {
    case ULP_REPORT_TABLE:
    case ULP_REPORT_MARKDOWN:
        st = ulp__ladder_report_text(r, f, format == ULP_REPORT_MARKDOWN);
        break;
    case ULP_REPORT_JSON:
        return ulp__ladder_report_json(r, f, err);
    default:
        return ulp__error(err, ULP_EINVAL, "the ladder has no %s report",
                          format == ULP_REPORT_CSV ? "CSV" : "such");
    }
    return st == ULP_OK ? ULP_OK : ulp__error(err, st, "cannot write the ladder report");
}
