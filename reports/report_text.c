/*
 * What the human-readable reports (table, Markdown) say in sentences: the
 * verdict, the first divergence, the amplification, the kernels behind the
 * first divergence, the ladder rung and the logits.  Shared so that the
 * terminal and the bug report never tell two stories.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "report_priv.h"

void ulp__fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape)
{
    /* Without snprintf (two calls a row in the CSV report): the whole text,
     * then as much of it as snprintf would have kept. */
    char t[2 + ULP_MAX_RANK * 21];
    size_t w = 0;
    t[w++] = '[';
    for (int k = 0; k < ndim && k < ULP_MAX_RANK; k++) {
        if (k)
            t[w++] = ',';
        w += ulp__fmt_i64(t + w, shape[k]);
    }
    t[w++] = ']';
    if (n == 0)
        return;
    if (w > n - 1)
        w = n - 1;
    memcpy(buf, t, w);
    buf[w] = '\0';
}

/* "12 of 4096 (0.29%)" */
static void fmt_frac(char *buf, size_t n, uint64_t k, uint64_t total)
{
    double pct = total ? 100.0 * (double)k / (double)total : 0.0;
    snprintf(buf, n, "%" PRIu64 " of %" PRIu64 " (%.3g%%)", k, total, pct);
}

/* A row's name; paired by site, "site (A's name = B's name)". */
static void fmt_row_name(char *buf, size_t n, const ulp_diff_row *row)
{
    char site[64] = "";
    if (row->site != NULL && row->layer >= 0)
        snprintf(site, sizeof site, "%s@%d ", row->site, (int)row->layer);
    else if (row->site != NULL)
        snprintf(site, sizeof site, "%s ", row->site);
    char lay[200] = "";
    if (row->layout != NULL)
        snprintf(lay, sizeof lay, " [%s: %s]", row->layout_side ? "B" : "A", row->layout);
    if (row->name_b != NULL && strcmp(row->name_b, row->name) != 0)
        snprintf(buf, n, "%s(%s = %s)%s", site, row->name, row->name_b, lay);
    else if (row->site != NULL)
        snprintf(buf, n, "%s(%s)", site, row->name);
    else if (row->occurrence)
        snprintf(buf, n, "%s#%" PRId64, row->name, row->occurrence);
    else
        snprintf(buf, n, "%s", row->name);
}

static void kernel_str(char *buf, size_t n, const ulp_diff_kernel *k)
{
    snprintf(buf, n, "%s grid(%d,%d,%d) block(%d,%d,%d)", k->name, k->grid[0], k->grid[1],
             k->grid[2], k->block[0], k->block[1], k->block[2]);
}

static int same_kernel(const ulp_diff_kernel *x, const ulp_diff_kernel *y)
{
    return strcmp(x->name, y->name) == 0 && memcmp(x->grid, y->grid, sizeof x->grid) == 0 &&
           memcmp(x->block, y->block, sizeof x->block) == 0;
}

static void summary_kernels(const ulp_diff_row *row, FILE *f, const char *bullet, const char *code)
{
    char name[300], ka[600], kb[600];
    if (!row->has_kernels_a && !row->has_kernels_b)
        return;
    fmt_row_name(name, sizeof name, row);
    size_t n = row->n_kernels_a < row->n_kernels_b ? row->n_kernels_a : row->n_kernels_b;
    size_t k = 0;
    while (k < n && same_kernel(&row->kernels_a[k], &row->kernels_b[k]))
        k++;
    const char *label = row->layer >= 0 ? "layer" : "capture";
    char where[340];
    if (row->layer >= 0)
        snprintf(where, sizeof where, "%s %d", label, row->layer);
    else
        snprintf(where, sizeof where, "%s %s%s%s", label, code, name, code);
    if (k == n && row->n_kernels_a == row->n_kernels_b) {
        fprintf(f, "%skernels at %s: the same in A and B (%zu)\n", bullet, where, n);
        return;
    }
    if (k < n) {
        kernel_str(ka, sizeof ka, &row->kernels_a[k]);
        kernel_str(kb, sizeof kb, &row->kernels_b[k]);
        fprintf(f, "%s%s: A ran %s%s%s; B ran %s%s%s", bullet, where, code, ka, code, code, kb,
                code);
        if (n > 1 || row->n_kernels_a != row->n_kernels_b)
            fprintf(f, " (kernel %zu of %zu in A, %zu in B)", k + 1, row->n_kernels_a,
                    row->n_kernels_b);
        fputc('\n', f);
        return;
    }
    fprintf(f, "%s%s: A ran %zu kernels, B ran %zu (the first %zu are the same)\n", bullet, where,
            row->n_kernels_a, row->n_kernels_b, n);
}

/* "layer 3" or "capture `name`": where a row is, for the summary lines. */
static void row_where(char *where, size_t n, const ulp_diff_row *row, const char *code)
{
    char name[300];
    fmt_row_name(name, sizeof name, row);
    if (row->layer >= 0)
        snprintf(where, n, "layer %d", row->layer);
    else
        snprintf(where, n, "capture %s%s%s", code, name, code);
}

static void summary_ladder(const ulp_diff_result *r, FILE *f, const char *bullet, const char *code)
{
    const ulp_diff_ladder *l = &r->ladder;
    char tail[400];
    if (r->identical && r->elements_compared == 0) {
        snprintf(tail, sizeof tail, "no verdict: every capture compared is empty (0 elements)");
    } else if (r->identical) {
        snprintf(tail, sizeof tail, "holds: bitwise identical");
    } else if (r->has_first_divergence) {
        char name[300];
        fmt_row_name(name, sizeof name, ulp_diff_result_row(r, r->first_divergence));
        snprintf(tail, sizeof tail, "NOT invariant, first divergence at %s%s%s", code, name, code);
    } else {
        snprintf(tail, sizeof tail, "NOT invariant: the runs captured different tensors");
    }
    if (l->level == ULP_DIFF_LADDER_NONE && l->n_keys == 0) {
        fprintf(f, "%sladder: neither run records /run conditions; pair %s\n", bullet, tail);
        return;
    }
    if (l->n_keys == 0) {
        fprintf(f, "%spair tests level 0 (repeat: same /run conditions): %s\n", bullet, tail);
        return;
    }
    if (l->level == ULP_DIFF_LADDER_NONE)
        fprintf(f, "%spair tests no ladder rung (", bullet);
    else
        fprintf(f, "%spair tests level %d (", bullet, l->level);
    /* The keys with a rung first, then the others. */
    int first = 1;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < l->n_keys; i++) {
            const ulp_diff_run_key *k = &l->keys[i];
            if ((pass == 0) != (k->level != ULP_DIFF_LADDER_NONE))
                continue;
            fprintf(f, "%s%s: %s vs %s", first ? "" : ", ", k->key,
                    k->value_a ? k->value_a : "(unset)", k->value_b ? k->value_b : "(unset)");
            first = 0;
        }
    }
    fprintf(f, "): %s\n", tail);
}

/* "max M (row R), mean E" of a per-row measure. */
static void fmt_stat(char *buf, size_t n, const ulp_diff_dist_stat *s)
{
    char m[40], e[40];
    snprintf(m, sizeof m, "%.3g", s->max);
    snprintf(e, sizeof e, "%.3g", s->mean);
    if (s->max_row >= 0)
        snprintf(buf, n, "max %s (row %" PRId64 "), mean %s", m, s->max_row, e);
    else
        snprintf(buf, n, "no rows");
}

/* The whole-distribution measures of a logits pair (--dist). */
static void summary_dist(const ulp_diff_logits *lg, FILE *f, const char *sub)
{
    const ulp_diff_dist *d = &lg->dist;
    char s1[120], s2[120], s3[120], s4[120], s5[120];
    fmt_stat(s1, sizeof s1, &d->kl_ab_s);
    fmt_stat(s2, sizeof s2, &d->kl_ba_s);
    fmt_stat(s3, sizeof s3, &d->dlogp_top_s);
    fmt_stat(s4, sizeof s4, &d->mean_abs_s);
    fmt_stat(s5, sizeof s5, &d->rel_diff_s);
    fprintf(f, "%sdistributions (softmax at T=1, float64): KL(A||B) nats %s; KL(B||A) %s\n", sub,
            s1, s2);
    fprintf(f, "%s|delta log p| at A's top token %s; same top token in %.4g%% of rows\n", sub, s3,
            100.0 * d->same_top_fraction);
    fprintf(f, "%stop-k overlap", sub);
    for (int q = 0; q < d->n_topk; q++)
        fprintf(f, "%s k=%d mean %.4g, min %.4g (row %" PRId64 ")", q ? ";" : "", d->topk[q],
                d->topk_mean[q], d->topk_min[q], d->topk_min_row[q]);
    fputc('\n', f);
    fprintf(f,
            "%smean |a-b| %s; rel_diff (SGLang's 1 - 2 sum(ab)/sum(a^2+b^2), 0 below ~1e-8) %s\n",
            sub, s4, s5);
}

static void summary_logits(const ulp_diff_result *r, FILE *f, const char *bullet, const char *code,
                           size_t max_flips)
{
    char b1[40], b2[40], b3[40], b4[40], b5[40], b6[40];
    /* Sub-items: a nested list item in Markdown, an indent on the terminal. */
    const char *sub = bullet[0] ? "  - " : "  ";
    for (size_t i = 0; i < r->n_logits; i++) {
        const ulp_diff_logits *lg = &r->logits[i];
        const ulp_diff_row *row = ulp_diff_result_row(r, lg->row_index);
        char name[300];
        fmt_row_name(name, sizeof name, row);
        fprintf(f, "%slogits %s%s%s: %" PRIu64 " of %" PRIu64 " rows flip argmax", bullet, code,
                name, code, lg->argmax_flips, lg->rows);
        if (lg->rows_at_risk)
            fprintf(f, ", %" PRIu64 " more at risk (margin below the row's largest perturbation)",
                    lg->rows_at_risk);
        if (lg->argmax_ties)
            fprintf(f,
                    "; %" PRIu64 " of the flips %s a tie (one run's top two tokens are equal "
                    "and it emits the lower index)",
                    lg->argmax_ties, lg->argmax_ties > 1 ? "are" : "is");
        fputc('\n', f);
        for (size_t k = 0; k < lg->n_flips && k < max_flips; k++) {
            const ulp_diff_flip *fl = &lg->flips[k];
            ulp__fmt_num(b1, sizeof b1, fl->gap_a);
            ulp__fmt_num(b2, sizeof b2, fl->gap_b);
            ulp__fmt_num(b3, sizeof b3, fl->gap_perturbation);
            ulp__fmt_num(b4, sizeof b4, fl->gap_perturbation_ulps);
            ulp__fmt_num(b5, sizeof b5, fl->magnitude);
            ulp__fmt_num(b6, sizeof b6, fl->margin_a);
            char key[80] = "", tie[80] = "";
            if (fl->position >= 0)
                snprintf(key, sizeof key, " (request %" PRId64 ", position %" PRId64 ")",
                         fl->request, fl->position);
            if (fl->tied_a || fl->tied_b)
                snprintf(tie, sizeof tie, " (%s tied: its top two are equal)",
                         fl->tied_a && fl->tied_b ? "A and B"
                         : fl->tied_a             ? "A"
                                                  : "B");
            fprintf(f,
                    "%srow %" PRIu64 "%s: token %" PRId64 " -> %" PRId64 "%s; margin %s in A; gap "
                    "%s in A, %s in B; perturbation %s = %s ULP of %s at %s\n",
                    sub, fl->row, key, fl->argmax_a, fl->argmax_b, tie, b6, b1, b2, b3, b4,
                    ulp_dtype_name(lg->dtype), b5);
        }
        if (lg->n_flips > max_flips)
            fprintf(f, "%s... and %zu more flipped rows\n", sub, lg->n_flips - max_flips);
        for (int k = 0; k < lg->n_sampling; k++) {
            const ulp_diff_sampling *s = &lg->sampling[k];
            ulp__fmt_num(b1, sizeof b1, s->temperature);
            snprintf(b2, sizeof b2, "%.3g", s->tv_mean);
            snprintf(b3, sizeof b3, "%.3g", s->tv_max);
            snprintf(b4, sizeof b4, "%.3g", s->p_differ_mean);
            snprintf(b5, sizeof b5, "%.3g", s->p_differ_max);
            fprintf(f,
                    "%sT=%s: total variation mean %s, max %s; P(same-draw sample differs) "
                    "mean %s, max %s\n",
                    sub, b1, b2, b3, b4, b5);
        }
        if (lg->has_dist)
            summary_dist(lg, f, sub);
    }
}

/* Where a row is: "layer 3 `name`" or "`name`". */
static void fmt_where(char *buf, size_t n, const ulp_diff_row *row, const char *code)
{
    char name[300];
    fmt_row_name(name, sizeof name, row);
    if (row->aligned)
        snprintf(name, sizeof name, "%s", row->name); /* all its occurrences */
    if (row->layer >= 0)
        snprintf(buf, n, "layer %d %s%s%s", row->layer, code, name, code);
    else
        snprintf(buf, n, "%s%s%s", code, name, code);
}

/* Whether the worst pair of a float row has opposite signs (its ULP distance crosses zero). */
static int crosses_zero(const ulp_diff_row *row)
{
    const ulp_dtype_info *di = ulp_dtype_get(ulp__row_dtype(row));
    if (di == NULL || !di->is_float || row->m.worst_flat < 0)
        return 0;
    unsigned bits = 8u * (unsigned)ulp_dtype_size(ulp__row_dtype(row));
    uint64_t sign = (uint64_t)1 << (bits - 1);
    return ((row->m.worst_bits_a ^ row->m.worst_bits_b) & sign) != 0 && isfinite(row->m.worst_a) &&
           isfinite(row->m.worst_b);
}

void ulp__first_divergence_text(const ulp_diff_result *r, char *buf, size_t n, const char *code)
{
    const ulp_diff_row *row = ulp_diff_result_row(r, r->first_divergence);
    char where[400], b1[80], b2[80], b3[80], b4[80], b5[80];
    size_t w = 0;
    fmt_where(where, sizeof where, row, code);
    if (row->status != ULP_DIFF_DIFFERS) {
        char sa[120], sb[120];
        fmt_row_name(b5, sizeof b5, row);
        ulp__fmt_shape(sa, sizeof sa, row->ndim_a, row->shape_a);
        ulp__fmt_shape(sb, sizeof sb, row->ndim_b, row->shape_b);
        w = (size_t)snprintf(buf, n, "%s%s%s: %s, A %s %s vs B %s %s", code, b5, code,
                             ulp_diff_status_name(row->status), ulp_dtype_name(row->dtype_a), sa,
                             ulp_dtype_name(row->dtype_b), sb);
        if (row->hint != NULL && w < n)
            snprintf(buf + w, n - w, "; %s", row->hint);
        return;
    }
    const ulp_diff_metrics *m = &row->m;
    ulp__fmt_num(b1, sizeof b1, m->max_abs_diff_ulps_at_max);
    ulp__fmt_num(b2, sizeof b2, m->max_abs_diff);
    ulp__fmt_num(b3, sizeof b3, m->max_abs);
    w += (size_t)snprintf(buf + w, n - w, "%s ulp@max (max |diff| %s, values up to %s) at %s", b1,
                          b2, b3, where);
    if (row->rounded && w < n)
        w += (size_t)snprintf(buf + w, n - w, " (compared in %s: %s's %s rounded to nearest even)",
                              ulp_dtype_name(row->compared_dtype), row->rounded_side ? "B" : "A",
                              ulp_dtype_name(row->rounded_side ? row->dtype_b : row->dtype_a));
    if (row->aligned && w < n) {
        ulp__key_run run;
        size_t k = 0;
        char list[400];
        if (ulp__fmt_runs(list, sizeof list, row, &k, 0, 3, &run))
            w += (size_t)snprintf(buf + w, n - w, ", %s", list);
        if (w < n)
            w += (size_t)snprintf(buf + w, n - w,
                                  " (%" PRIu64 " of %" PRIu64 " positions compared differ)",
                                  row->positions_differing, row->positions_compared);
    }
    if (w < n) {
        char frac[80];
        fmt_frac(frac, sizeof frac, m->differing, row->elements);
        w += (size_t)snprintf(buf + w, n - w, ": %s elements differ, max %" PRIu64 " ULP", frac,
                              m->max_ulp);
    }
    if (crosses_zero(row) && w < n)
        w += (size_t)snprintf(buf + w, n - w,
                              " (that many only because the values crossed zero: the worst pair "
                              "has opposite signs)");
    if (m->worst_flat >= 0 && w < n) {
        ulp__fmt_shape(b4, sizeof b4, row->ndim_a, m->worst_index);
        ulp__fmt_value(b1, sizeof b1, ulp__row_dtype(row), m->worst_bits_a, m->worst_a);
        ulp__fmt_value(b2, sizeof b2, ulp__row_dtype(row), m->worst_bits_b, m->worst_b);
        if (row->aligned && row->worst_position >= 0)
            w += (size_t)snprintf(buf + w, n - w,
                                  "; worst at request %" PRId64 ", position %" PRId64
                                  " (index %s): %s vs %s",
                                  row->worst_request, row->worst_position, b4, b1, b2);
        else
            w += (size_t)snprintf(buf + w, n - w, "; worst at %s: %s vs %s", b4, b1, b2);
    }
    (void)w;
}

/* Rows of two dtypes: how they were compared, and what the rounding hid. */
static void summary_rounded(const ulp__tally *t, FILE *f, const char *bullet, const char *code)
{
    if (t->n_rounded == 0)
        return;
    char b1[40], b2[40];
    if (t->rounded_mixed)
        fprintf(f,
                "%s%zu captures of two dtypes compared in the coarser one, the finer side "
                "rounded to nearest even (JSON compared_in, rounded_side)",
                bullet, t->n_rounded);
    else
        fprintf(f,
                "%scompared in %s: %s side rounded to nearest even (%s's %s against %s's %s) for "
                "%zu capture%s",
                bullet, ulp_dtype_name(t->rounded_coarse), ulp_dtype_name(t->rounded_fine),
                t->rounded_side ? "B" : "A", ulp_dtype_name(t->rounded_fine),
                t->rounded_side ? "A" : "B", ulp_dtype_name(t->rounded_coarse), t->n_rounded,
                t->n_rounded > 1 ? "s" : "");
    double eq = t->rounded_equal_min;
    if (eq >= 1)
        snprintf(b1, sizeof b1, "100%%");
    else if (eq >= 0.9999)
        snprintf(b1, sizeof b1, ">99.99%%");
    else
        snprintf(b1, sizeof b1, "%.4g%%", 100.0 * eq);
    fprintf(f, "; rounded values equal the other side's: at least %s", b1);
    if (eq < 1 && t->rounded_equal_name != NULL)
        fprintf(f, " (least at %s%s%s)", code, t->rounded_equal_name, code);
    ulp__fmt_num(b2, sizeof b2, t->rounded_fine_max);
    fprintf(f, "; max |a - b| before rounding %s", b2);
    if (t->rounded_fine_name != NULL)
        fprintf(f, " (at %s%s%s)", code, t->rounded_fine_name, code);
    fputc('\n', f);
}

/* Rows compared by occurrence although one side has positions, or with a hint. */
static void summary_notes(const ulp__tally *t, FILE *f, const char *bullet, const char *code)
{
    size_t only = t->positions_only, sliced = t->sliced;
    if (only)
        fprintf(f,
                "%spositions only in %s for %zu capture%s (first %s%s%s): compared by "
                "occurrence; capture positions on both sides to compare the same tokens\n",
                bullet, strcmp(t->positions_side, "a") == 0 ? "A" : "B", only, only > 1 ? "s" : "",
                code, t->positions_first ? t->positions_first : "", code);
    if (sliced)
        fprintf(f, "%s--rows: %zu capture%s compared on a slice of the token axis\n", bullet,
                sliced, sliced > 1 ? "s" : "");
    /* Aligned rows: the keys they compared, as one range over the captures. */
    size_t aligned = t->aligned;
    if (aligned) {
        char r[3][48];
        for (int k = 0; k < 3; k++) {
            if (t->lo[k] == t->hi[k])
                snprintf(r[k], sizeof r[k], "%" PRIu64, t->lo[k]);
            else
                snprintf(r[k], sizeof r[k], "%" PRIu64 "-%" PRIu64, t->lo[k], t->hi[k]);
        }
        fprintf(f,
                "%stokens: %zu capture%s compared on (request, position): %s positions in both "
                "runs, %s only in A, %s only in B%s\n",
                bullet, aligned, aligned > 1 ? "s" : "", r[0], r[1], r[2],
                aligned > 1 ? " (per capture)" : "");
    }
}

/* B's requests renumbered onto A's by their recorded tokens. */
static void summary_requests(const ulp_diff_result *r, FILE *f, const char *bullet)
{
    size_t paired = 0, apart = 0;
    for (size_t k = 0; k < r->n_request_pairs; k++)
        paired += r->request_pairs[k].paired != 0;
    apart = r->n_request_pairs - paired;
    if (paired > 0) {
        fprintf(f, "%srequests paired by tokens:", bullet);
        for (size_t k = 0, m = 0; k < r->n_request_pairs; k++) {
            const ulp_diff_request_pair *p = &r->request_pairs[k];
            if (p->paired)
                fprintf(f, "%s B's %" PRId64 " is A's %" PRId64, m++ ? "," : "", p->b, p->a);
        }
        fputc('\n', f);
    }
    if (apart > 0) {
        fprintf(f, "%srequests of B with no request of A's tokens, kept apart:", bullet);
        for (size_t k = 0, m = 0; k < r->n_request_pairs; k++)
            if (!r->request_pairs[k].paired)
                fprintf(f, "%s %" PRId64, m++ ? "," : "", r->request_pairs[k].b);
        fputc('\n', f);
    }
}

/* Where the token streams part: the position, the tokens fed, the logits before. */
static void summary_parts(const ulp_diff_result *r, FILE *f, const char *bullet, const char *code)
{
    for (size_t k = 0; k < r->n_parts; k++) {
        const ulp_diff_part *p = &r->parts[k];
        char ma[40], mb[40], step[40] = "";
        fprintf(f,
                "%stoken streams part at request %" PRId64 ", position %" PRId64
                ": A fed token %" PRId64 ", B fed token %" PRId64,
                bullet, p->request, p->position, p->token_a, p->token_b);
        if (p->from_ids)
            fprintf(f, " (recorded in %s%s%s)", code, p->source, code);
        else
            fprintf(f, " (the argmax before it; %s%s%s differs there)", code, p->source, code);
        if (p->has_logits) {
            ulp__fmt_num(ma, sizeof ma, p->margin_a);
            ulp__fmt_num(mb, sizeof mb, p->margin_b);
            if (p->step >= 0)
                snprintf(step, sizeof step, ", step %" PRId64, p->step);
            fprintf(f,
                    "; at position %" PRId64 "%s %s%s%s emitted %" PRId64
                    " in A (margin %s), %" PRId64 " in B (margin %s)",
                    p->position - 1, step, code, p->logits, code, p->argmax_a, ma, p->argmax_b, mb);
        }
        fprintf(f,
                "; position %" PRId64 " and the %" PRIu64
                " after it follow another token's stream: not compared\n",
                p->position, p->positions_parted > 0 ? p->positions_parted - 1 : 0);
    }
}

void ulp__report_summary(const ulp_diff_result *r, const ulp__tally *t, FILE *f, const char *bullet,
                         const char *code)
{
    char b1[80], b3[40], b4[40], name[300];
    size_t ndiff = t->ndiff, nshape = t->nshape, ndtype = t->ndtype;
    if (r->n_rows == 0) {
        fprintf(f, "%sno captures to compare (none in either snapshot, or none selected)\n",
                bullet);
    } else if (r->n_shared == 0) {
        fprintf(f,
                "%sthe snapshots share no capture: %zu only in A, %zu only in B; nothing was "
                "compared\n",
                bullet, r->n_only_a, r->n_only_b);
    } else if (r->identical && r->elements_compared == 0) {
        fprintf(f, "%sidentical: all %zu captures are empty on both sides; no element compared\n",
                bullet, r->n_shared);
    } else if (r->identical) {
        fprintf(f, "%sidentical: all %zu captures are bitwise identical\n", bullet, r->n_shared);
    } else {
        fprintf(f, "%sdiffers: %zu of %zu shared captures differ", bullet, ndiff, r->n_shared);
        if (nshape)
            fprintf(f, ", %zu shape mismatch%s", nshape, nshape > 1 ? "es" : "");
        if (ndtype)
            fprintf(f, ", %zu dtype mismatch%s", ndtype, ndtype > 1 ? "es" : "");
        if (r->n_only_a)
            fprintf(f, ", %zu only in A", r->n_only_a);
        if (r->n_only_b)
            fprintf(f, ", %zu only in B", r->n_only_b);
        fputc('\n', f);
    }
    ulp__report_tp_join_text(r, f, bullet, code);
    summary_requests(r, f, bullet);
    summary_parts(r, f, bullet, code);
    if (r->has_first_divergence) {
        const ulp_diff_row *row = ulp_diff_result_row(r, r->first_divergence);
        char text[2048];
        ulp__first_divergence_text(r, text, sizeof text, code);
        fprintf(f, "%sfirst divergence: %s\n", bullet, text);
        if (row->aligned && row->positions_differing > 0) {
            /* One line per origin: the runs it covers, then where they came from. */
            ulp__key_run run;
            size_t k = 0;
            const char *sub = bullet[0] ? "  - " : "  ";
            char list[400];
            for (int groups = 0;
                 groups < 4 && ulp__fmt_runs(list, sizeof list, row, &k, 1, 6, &run); groups++) {
                ulp__fmt_origin(text, sizeof text, row, &run);
                fprintf(f, "%s%s: %s\n", sub, list, text);
            }
            if (row->capture_next != NULL)
                fprintf(f,
                        "%snext: capture %s%s%s with positions on both sides (request %" PRId64
                        ", positions %" PRId64 "-%" PRId64 ")\n",
                        sub, code, row->capture_next, code, row->capture_request,
                        row->capture_first, row->capture_last);
        }
        summary_kernels(row, f, bullet, code);
        char where[340];
        row_where(where, sizeof where, row, code);
        ulp__report_summary_gemms(row, f, bullet, code, where);
    }
    summary_notes(t, f, bullet, code);
    summary_rounded(t, f, bullet, code);
    if (r->amp.valid && r->amp.last_row != r->amp.first_row) {
        const ulp_diff_amplification *a = &r->amp;
        char nl[300], f1[40], f2[40], f3[40];
        fmt_row_name(name, sizeof name, ulp_diff_result_row(r, a->first_row));
        fmt_row_name(nl, sizeof nl, ulp_diff_result_row(r, a->last_row));
        if (ulp_diff_result_row(r, a->last_row)->status == ULP_DIFF_IDENTICAL) {
            fprintf(f,
                    "%samplification %s%s%s -> %s%s%s: none, the last activation is identical "
                    "again\n",
                    bullet, code, name, code, code, nl, code);
        } else {
            ulp__fmt_num(b3, sizeof b3, a->abs_first);
            ulp__fmt_num(b4, sizeof b4, a->abs_last);
            snprintf(f1, sizeof f1, "%.3g%%", 100.0 * a->frac_first);
            snprintf(f2, sizeof f2, "%.3g%%", 100.0 * a->frac_last);
            ulp__fmt_num(f3, sizeof f3, a->frac_factor);
            ulp__fmt_num(b1, sizeof b1, a->abs_factor);
            fprintf(f,
                    "%samplification %s%s%s -> %s%s%s: differing %s -> %s (x%s), max |diff| %s "
                    "-> %s (x%s)\n",
                    bullet, code, name, code, code, nl, code, f1, f2, f3, b3, b4, b1);
        }
    }
    summary_ladder(r, f, bullet, code);
    summary_logits(r, f, bullet, code, 10);
    if (r->verdict)
        ulp__report_verdict_text(r->verdict, f, bullet);
}

ulp_status ulp__report_write_error(ulp_error *err, ulp_status st)
{
    int e = errno;
    return ulp__error(err, st, "cannot write the report: %s", e != 0 ? strerror(e) : "write error");
}
