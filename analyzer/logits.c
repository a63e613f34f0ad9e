/*
 * Logits analysis (FORMAT.md: role = logits, the last axis is the
 * vocabulary, every other index is one row).
 *
 * Per row: argmax in A and B (ties to the lowest index; NaN is never a
 * candidate), top-1 minus top-2 margin, the largest |z_A - z_B|, whether
 * the argmax flipped and, for flipped rows, why: the gap between the two
 * candidate tokens in A and in B, its perturbation, and that perturbation
 * in ULPs of the logits' format.  With temperatures: the total-variation
 * distance between the two softmax distributions and the probability that
 * inverse-CDF sampling driven by the same uniform draw picks different
 * tokens (exactly: the measure of u in [0, 1) whose tokens differ).
 *
 * Rows are read a few at a time (at least one whole row), so memory is
 * bounded by the chunk size or one row, whichever is larger.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"

static void top2(const double *z, uint64_t n, int64_t *arg, double *margin)
{
    int64_t best = -1;
    double bv = 0, sv = 0;
    int has2 = 0;
    for (uint64_t i = 0; i < n; i++) {
        double v = z[i];
        if (isnan(v))
            continue;
        if (best < 0) {
            best = (int64_t)i;
            bv = v;
        } else if (v > bv) {
            sv = bv;
            has2 = 1;
            best = (int64_t)i;
            bv = v;
        } else if (!has2 || v > sv) {
            sv = v;
            has2 = 1;
        }
    }
    *arg = best;
    if (best < 0)
        *margin = (double)NAN;
    else if (!has2)
        *margin = HUGE_VAL;
    else
        *margin = bv == sv ? 0.0 : bv - sv; /* inf - inf is a tie, not NaN */
}

void ulp__logits_row_stats(const double *za, const double *zb, uint64_t vocab, ulp__logits_row *out)
{
    top2(za, vocab, &out->argmax_a, &out->margin_a);
    top2(zb, vocab, &out->argmax_b, &out->margin_b);
    double m = 0;
    for (uint64_t i = 0; i < vocab; i++) {
        if (!isfinite(za[i]) || !isfinite(zb[i]))
            continue;
        double d = fabs(za[i] - zb[i]);
        m = d > m ? d : m;
    }
    out->max_perturbation = m;
}

/* softmax(z / t) into p; NaN logits get probability 0. */
static void softmax(const double *z, uint64_t n, double t, double *p)
{
    double m = -HUGE_VAL;
    uint64_t ninf = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!isnan(z[i]) && z[i] > m)
            m = z[i];
        ninf += z[i] == HUGE_VAL;
    }
    if (m == -HUGE_VAL || m == HUGE_VAL) {
        /* All -inf/NaN: uniform over the non-NaN entries (or all); +inf: over the infs. */
        uint64_t cnt = 0;
        for (uint64_t i = 0; i < n; i++)
            cnt += m == HUGE_VAL ? z[i] == HUGE_VAL : !isnan(z[i]);
        for (uint64_t i = 0; i < n; i++) {
            int in = m == HUGE_VAL ? z[i] == HUGE_VAL : !isnan(z[i]);
            p[i] = cnt ? (in ? 1.0 / (double)cnt : 0.0) : 1.0 / (double)n;
        }
        (void)ninf;
        return;
    }
    double s = 0;
    for (uint64_t i = 0; i < n; i++) {
        p[i] = isnan(z[i]) ? 0.0 : exp((z[i] - m) / t);
        s += p[i];
    }
    for (uint64_t i = 0; i < n; i++)
        p[i] /= s;
}

void ulp__logits_sampling(const double *za, const double *zb, uint64_t vocab, double t,
                          double *work, double *tv, double *p_differ)
{
    double *pa = work, *pb = work + vocab;
    if (vocab == 0) {
        *tv = 0;
        *p_differ = 0;
        return;
    }
    softmax(za, vocab, t, pa);
    softmax(zb, vocab, t, pb);
    double d = 0;
    for (uint64_t i = 0; i < vocab; i++)
        d += fabs(pa[i] - pb[i]);
    *tv = 0.5 * d;
    /*
     * Token i is drawn for u in [F(i-1), F(i)).  The draws agree on the
     * overlap of A's and B's intervals for the same token; the last
     * boundary is 1 on both sides whatever the rounding of the sums.
     */
    double fa = 0, fb = 0, same = 0;
    for (uint64_t i = 0; i < vocab; i++) {
        double fa1 = i + 1 == vocab ? 1.0 : fa + pa[i];
        double fb1 = i + 1 == vocab ? 1.0 : fb + pb[i];
        double lo = fa > fb ? fa : fb, hi = fa1 < fb1 ? fa1 : fb1;
        if (hi > lo)
            same += hi - lo;
        fa = fa1;
        fb = fb1;
    }
    double p = 1.0 - same;
    *p_differ = p > 0 ? p : 0.0;
}

void ulp__logits_free(ulp_diff_logits *lg)
{
    free(lg->argmax_a);
    free(lg->argmax_b);
    free(lg->margin_a);
    free(lg->margin_b);
    free(lg->max_perturbation);
    free(lg->flipped);
    free(lg->at_risk);
    free(lg->flips);
    for (int k = 0; k < lg->n_sampling; k++) {
        free(lg->sampling[k].tv);
        free(lg->sampling[k].p_differ);
    }
    memset(lg, 0, sizeof *lg);
}

static void explain(const ulp_diff_logits *lg, const double *za, const double *zb, uint64_t row,
                    ulp_diff_flip *f)
{
    f->row = row;
    f->argmax_a = lg->argmax_a[row];
    f->argmax_b = lg->argmax_b[row];
    f->margin_a = lg->margin_a[row];
    f->margin_b = lg->margin_b[row];
    if (f->argmax_a < 0 || f->argmax_b < 0) {
        f->gap_a = f->gap_b = f->gap_perturbation = f->magnitude = (double)NAN;
        f->gap_perturbation_ulps = (double)NAN;
        return;
    }
    double a1 = za[f->argmax_a], a2 = za[f->argmax_b];
    double b1 = zb[f->argmax_a], b2 = zb[f->argmax_b];
    f->gap_a = a1 - a2;
    f->gap_b = b1 - b2;
    f->gap_perturbation = f->gap_b - f->gap_a;
    double mag = fabs(a1);
    mag = fabs(a2) > mag ? fabs(a2) : mag;
    mag = fabs(b1) > mag ? fabs(b1) : mag;
    mag = fabs(b2) > mag ? fabs(b2) : mag;
    f->magnitude = mag;
    f->gap_perturbation_ulps = fabs(f->gap_perturbation) / ulp_dtype_ulp_at(lg->dtype, mag);
}

ulp_status ulp__logits_run(const ulp_snapshot *a, size_t ia, const ulp_snapshot *b, size_t ib,
                           const ulp_diff_options *opts, ulp_diff_logits *lg, ulp_error *err)
{
    const ulp_capture_info *c = ulp_snapshot_capture(a, ia);
    ulp_status st = ULP_OK;
    unsigned char *ra = NULL, *rb = NULL;
    double *za = NULL, *zb = NULL, *work = NULL;
    size_t sz = ulp_dtype_size(c->dtype);

    lg->dtype = c->dtype;
    lg->vocab = c->ndim ? (uint64_t)c->shape[c->ndim - 1] : 1;
    lg->rows = 1;
    for (int k = 0; k + 1 < c->ndim; k++)
        lg->rows *= (uint64_t)c->shape[k];
    uint64_t R = lg->rows, V = lg->vocab;
    lg->argmax_a = calloc(R + 1, sizeof *lg->argmax_a);
    lg->argmax_b = calloc(R + 1, sizeof *lg->argmax_b);
    lg->margin_a = calloc(R + 1, sizeof *lg->margin_a);
    lg->margin_b = calloc(R + 1, sizeof *lg->margin_b);
    lg->max_perturbation = calloc(R + 1, sizeof *lg->max_perturbation);
    lg->flipped = calloc(R + 1, 1);
    lg->at_risk = calloc(R + 1, 1);
    if (!lg->argmax_a || !lg->argmax_b || !lg->margin_a || !lg->margin_b || !lg->max_perturbation ||
        !lg->flipped || !lg->at_risk)
        goto oom;
    lg->n_sampling = opts->n_temperatures;
    for (int k = 0; k < lg->n_sampling; k++) {
        lg->sampling[k].temperature = opts->temperatures[k];
        lg->sampling[k].tv = calloc(R + 1, sizeof(double));
        lg->sampling[k].p_differ = calloc(R + 1, sizeof(double));
        if (!lg->sampling[k].tv || !lg->sampling[k].p_differ)
            goto oom;
    }

    uint64_t per = V ? opts->chunk_elements / V : 1;
    if (per == 0)
        per = 1;
    if (per > R)
        per = R ? R : 1;
    ra = malloc(per * V * sz + 1);
    rb = malloc(per * V * sz + 1);
    za = malloc((V + 1) * sizeof *za);
    zb = malloc((V + 1) * sizeof *zb);
    work = malloc((2 * V + 1) * sizeof *work);
    if (!ra || !rb || !za || !zb || !work)
        goto oom;

    size_t cap_flips = 0;
    for (uint64_t r0 = 0; r0 < R; r0 += per) {
        uint64_t nr = R - r0 < per ? R - r0 : per;
        if (V > 0) {
            st = ulp_snapshot_read(a, ia, r0 * V, nr * V, ra, err);
            if (st == ULP_OK)
                st = ulp_snapshot_read(b, ib, r0 * V, nr * V, rb, err);
            if (st != ULP_OK)
                goto cleanup;
        }
        for (uint64_t q = 0; q < nr; q++) {
            uint64_t row = r0 + q;
            for (uint64_t i = 0; i < V; i++) {
                size_t off = (size_t)((q * V + i) * sz);
                za[i] = ulp_dtype_to_double(c->dtype, ulp_dtype_load_bits(c->dtype, ra + off));
                zb[i] = ulp_dtype_to_double(c->dtype, ulp_dtype_load_bits(c->dtype, rb + off));
            }
            ulp__logits_row rs;
            ulp__logits_row_stats(za, zb, V, &rs);
            lg->argmax_a[row] = rs.argmax_a;
            lg->argmax_b[row] = rs.argmax_b;
            lg->margin_a[row] = rs.margin_a;
            lg->margin_b[row] = rs.margin_b;
            lg->max_perturbation[row] = rs.max_perturbation;
            lg->flipped[row] = rs.argmax_a != rs.argmax_b;
            double mm = rs.margin_a < rs.margin_b ? rs.margin_a : rs.margin_b;
            lg->at_risk[row] = !lg->flipped[row] && mm < rs.max_perturbation;
            lg->rows_at_risk += lg->at_risk[row];
            if (lg->flipped[row]) {
                lg->argmax_flips++;
                if (lg->n_flips == cap_flips) {
                    size_t nc = cap_flips ? 2 * cap_flips : 8;
                    ulp_diff_flip *nf = realloc(lg->flips, nc * sizeof *nf);
                    if (nf == NULL)
                        goto oom;
                    lg->flips = nf;
                    cap_flips = nc;
                }
                explain(lg, za, zb, row, &lg->flips[lg->n_flips++]);
            }
            for (int k = 0; k < lg->n_sampling; k++) {
                ulp_diff_sampling *s = &lg->sampling[k];
                ulp__logits_sampling(za, zb, V, s->temperature, work, &s->tv[row],
                                     &s->p_differ[row]);
            }
        }
    }
    for (int k = 0; k < lg->n_sampling; k++) {
        ulp_diff_sampling *s = &lg->sampling[k];
        double st_tv = 0, st_p = 0;
        for (uint64_t row = 0; row < R; row++) {
            st_tv += s->tv[row];
            st_p += s->p_differ[row];
            s->tv_max = s->tv[row] > s->tv_max ? s->tv[row] : s->tv_max;
            s->p_differ_max =
                s->p_differ[row] > s->p_differ_max ? s->p_differ[row] : s->p_differ_max;
        }
        s->tv_mean = R ? st_tv / (double)R : 0.0;
        s->p_differ_mean = R ? st_p / (double)R : 0.0;
    }
    goto cleanup;

oom:
    st = ulp__error(err, ULP_ENOMEM, "out of memory for the logits of '%s'", c->name);
cleanup:
    free(ra);
    free(rb);
    free(za);
    free(zb);
    free(work);
    return st;
}
