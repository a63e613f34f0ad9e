/*
 * Whole distributions at the logits (FORMAT.md "Logits distributions"):
 * equal argmaxes do not make equal distributions, so per row, in double:
 * KL(A||B) and KL(B||A) in nats from log-softmax at temperature 1 (the
 * largest logit subtracted before the exponentials), |delta log p| at A's
 * top token, the top-k overlaps, mean |z_A - z_B|, and the rel_diff that
 * SGLang's tensor comparison prints, 1 - 2 sum(xy) / sum(x^2 + y^2) (a
 * cosine-like figure that rounds to 0 in double for differences below
 * about 1e-8 of the values: it is a coarse figure, not a ULP one).  Then
 * their max (and its row) and mean over the rows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diff_priv.h"

int ulp__logits_dist_kmax(const ulp_diff_options *opts)
{
    int k = 0;
    for (int i = 0; opts->distributions && i < opts->n_topk; i++)
        k = opts->topk[i] > k ? opts->topk[i] : k;
    return k;
}

ulp_status ulp__logits_dist_alloc(ulp_diff_logits *lg, const ulp_diff_options *opts)
{
    ulp_diff_dist *d = &lg->dist;
    size_t n = (size_t)lg->rows + 1;
    lg->has_dist = 1;
    d->kl_ab = calloc(n, sizeof(double));
    d->kl_ba = calloc(n, sizeof(double));
    d->dlogp_top = calloc(n, sizeof(double));
    d->mean_abs = calloc(n, sizeof(double));
    d->rel_diff = calloc(n, sizeof(double));
    if (!d->kl_ab || !d->kl_ba || !d->dlogp_top || !d->mean_abs || !d->rel_diff)
        return ULP_ENOMEM;
    d->n_topk = opts->n_topk;
    for (int k = 0; k < d->n_topk; k++) {
        d->topk[k] = opts->topk[k];
        if ((d->topk_overlap[k] = calloc(n, sizeof(double))) == NULL)
            return ULP_ENOMEM;
    }
    return ULP_OK;
}

void ulp__logits_dist_free(ulp_diff_dist *d)
{
    free(d->kl_ab);
    free(d->kl_ba);
    free(d->dlogp_top);
    free(d->mean_abs);
    free(d->rel_diff);
    for (int k = 0; k < d->n_topk; k++)
        free(d->topk_overlap[k]);
    memset(d, 0, sizeof *d);
}

/* log softmax(z) into lp, stable; NaN logits: log 0. */
static void log_softmax(const double *z, uint64_t n, double *lp)
{
    double m = -HUGE_VAL;
    for (uint64_t i = 0; i < n; i++)
        if (!isnan(z[i]) && z[i] > m)
            m = z[i];
    if (isinf(m)) {
        /* All -inf/NaN, or some +inf: the uniform cases of the softmax. */
        ulp__logits_softmax(z, n, 1.0, lp);
        for (uint64_t i = 0; i < n; i++)
            lp[i] = log(lp[i]);
        return;
    }
    double s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += isnan(z[i]) ? 0.0 : exp(z[i] - m);
    double ls = log(s);
    for (uint64_t i = 0; i < n; i++)
        lp[i] = isnan(z[i]) ? -HUGE_VAL : (z[i] - m) - ls;
}

/* KL(P||Q) from log-probabilities: sum over p > 0 of p (log p - log q). */
static double kl(const double *lp, const double *lq, uint64_t n)
{
    double s = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (lp[i] == -HUGE_VAL)
            continue; /* p = 0 adds nothing */
        s += exp(lp[i]) * (lp[i] - lq[i]);
    }
    return s;
}

/* The k largest non-NaN logits' indices, by value, ties to the lowest index: *got of them. */
static void top_k(const double *z, uint64_t n, int k, int64_t *out, int *got)
{
    int c = 0;
    for (uint64_t i = 0; k > 0 && i < n; i++) {
        double v = z[i];
        if (isnan(v) || (c == k && !(v > z[out[c - 1]])))
            continue;
        int at = c < k ? c++ : k - 1;
        while (at > 0 && v > z[out[at - 1]]) {
            out[at] = out[at - 1];
            at--;
        }
        out[at] = (int64_t)i;
    }
    *got = c;
}

void ulp__logits_dist_row(ulp_diff_logits *lg, const double *za, const double *zb, int64_t argmax_a,
                          double *work, int64_t *kwork, uint64_t row)
{
    ulp_diff_dist *d = &lg->dist;
    uint64_t V = lg->vocab;
    double *la = work, *lb = work + V;
    log_softmax(za, V, la);
    log_softmax(zb, V, lb);
    d->kl_ab[row] = kl(la, lb, V);
    d->kl_ba[row] = kl(lb, la, V);
    d->dlogp_top[row] = argmax_a >= 0 ? fabs(la[argmax_a] - lb[argmax_a]) : (double)NAN;
    double sabs = 0, sxy = 0, sq = 0;
    uint64_t nfin = 0;
    for (uint64_t i = 0; i < V; i++) {
        double x = za[i], y = zb[i];
        if (!isfinite(x) || !isfinite(y))
            continue;
        sabs += fabs(x - y);
        sxy += x * y;
        sq += x * x + y * y;
        nfin++;
    }
    d->mean_abs[row] = nfin ? sabs / (double)nfin : 0.0;
    d->rel_diff[row] = sq > 0 ? 1.0 - 2.0 * sxy / sq : 0.0;
    for (int q = 0; q < d->n_topk; q++) {
        int k = (uint64_t)d->topk[q] < V ? d->topk[q] : (int)V;
        int ga, gb, same = 0;
        int64_t *ta = kwork, *tb = kwork + k;
        top_k(za, V, k, ta, &ga);
        top_k(zb, V, k, tb, &gb);
        for (int i = 0; i < ga; i++)
            for (int j = 0; j < gb; j++)
                same += ta[i] == tb[j];
        d->topk_overlap[q][row] = k > 0 ? (double)same / (double)k : 1.0;
    }
}

static void stat(const double *v, uint64_t n, ulp_diff_dist_stat *s)
{
    double sum = 0;
    uint64_t cnt = 0;
    s->max = 0;
    s->mean = 0;
    s->max_row = -1;
    for (uint64_t i = 0; i < n; i++) {
        if (isnan(v[i]))
            continue;
        if (s->max_row < 0 || v[i] > s->max) {
            s->max = v[i];
            s->max_row = (int64_t)i;
        }
        sum += v[i];
        cnt++;
    }
    s->mean = cnt ? sum / (double)cnt : 0.0;
}

void ulp__logits_dist_summarize(ulp_diff_logits *lg)
{
    ulp_diff_dist *d = &lg->dist;
    uint64_t R = lg->rows;
    stat(d->kl_ab, R, &d->kl_ab_s);
    stat(d->kl_ba, R, &d->kl_ba_s);
    stat(d->dlogp_top, R, &d->dlogp_top_s);
    stat(d->mean_abs, R, &d->mean_abs_s);
    stat(d->rel_diff, R, &d->rel_diff_s);
    for (int q = 0; q < d->n_topk; q++) {
        double sum = 0, mn = 1;
        int64_t at = -1;
        for (uint64_t i = 0; i < R; i++) {
            double v = d->topk_overlap[q][i];
            sum += v;
            if (at < 0 || v < mn) {
                mn = v;
                at = (int64_t)i;
            }
        }
        d->topk_mean[q] = R ? sum / (double)R : 1.0;
        d->topk_min[q] = R ? mn : 1.0;
        d->topk_min_row[q] = at;
    }
    d->same_top_fraction = R ? (double)(R - lg->argmax_flips) / (double)R : 1.0;
}
