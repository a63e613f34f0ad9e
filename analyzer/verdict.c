/*
 * Rounding or not (docs/verdicts.md).  Reduction-order rounding -- the
 * same sum in another order, as a GEMM's tile, split-K or M changes it --
 * moves a result by at most a few ULPs of the accumulation format times
 * the operands' scale, at the first capture it touches, and the
 * difference then grows layer by layer.  A divergence that starts far
 * beyond that bound, that is NaN or inf on one side only, or whose worst
 * element is a value one side never computed, is no rounding: a defect.
 * The logits add the near-tie density (how many rows a perturbation of
 * the observed size can flip) and jumps far above the margins at some
 * positions only; a pair on the cache rung gets the witness of a side
 * that really took positions from its cache.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "ulpprof/verdict.h"

/* The bound: OUT_ULPS storage ULPs (each GEMM of the captured block rounds
 * its output once, and the block may chain two: gate/up then down) plus
 * C * K * u_acc * S (two summation orders, each off by at most K * u_acc
 * times the sum of |terms|, taken as the capture's max |value| S). */
#define VERDICT_OUT_ULPS 2.0
#define VERDICT_C        2.0
#define VERDICT_FAR      16.0 /* "far beyond": this many times the bound */
#define VERDICT_K_DEF    4096 /* K when nothing tells it                  */

static const char *const kind_names[] = {"identical", "rounding", "defect", "unknown"};
static const char *const witness_names[] = {"not_cache", "taken", "none", "unknown"};

const char *ulp_verdict_kind_name(ulp_verdict_kind k)
{
    return (unsigned)k < 4 ? kind_names[k] : "?";
}

const char *ulp_cache_witness_name(ulp_cache_witness w)
{
    return (unsigned)w < 4 ? witness_names[w] : "?";
}

static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        va_start(ap, f);
        vsnprintf(s, (size_t)n + 1, f, ap);
        va_end(ap);
    }
    return s;
}

static int add_evidence(ulp_diff_verdict *v, char *s)
{
    char **e = realloc(v->evidence, (v->n_evidence + 1) * sizeof *e);
    if (!s || !e) {
        free(s);
        if (e)
            v->evidence = e;
        return -1;
    }
    v->evidence = e;
    e[v->n_evidence++] = s;
    return 0;
}

/* The accumulation format of a cuBLAS compute type ("CUBLAS_COMPUTE_32F", "32F_FAST_TF32"). */
static void acc_of(const char *compute, ulp_diff_verdict *v)
{
    v->acc = "fp32";
    v->u_acc = ldexp(1.0, -24);
    if (!compute || !*compute)
        return;
    if (strstr(compute, "64F")) {
        v->acc = "fp64";
        v->u_acc = ldexp(1.0, -53);
    } else if (strstr(compute, "TF32") || strstr(compute, "tf32")) {
        v->acc = "tf32";
        v->u_acc = ldexp(1.0, -11);
    } else if (strstr(compute, "16BF")) {
        v->acc = "bf16";
        v->u_acc = ldexp(1.0, -8);
    } else if (strstr(compute, "16F")) {
        v->acc = "fp16";
        v->u_acc = ldexp(1.0, -11);
    }
}

/* The largest of hidden, mlp and heads * head_dim in a /run model_shape, or 0. */
static int64_t shape_k(const ulp_snapshot *s)
{
    const char *t = s ? ulp_snapshot_run_get(s, "model_shape") : NULL;
    if (!t)
        return 0;
    long long best = 0, heads = 0, hd = 0, x;
    const char *p;
    if ((p = strstr(t, "hidden=")) && sscanf(p + 7, "%lld", &x) == 1 && x > best)
        best = x;
    if ((p = strstr(t, "mlp=")) && sscanf(p + 4, "%lld", &x) == 1 && x > best)
        best = x;
    if ((p = strstr(t, " heads=")) && sscanf(p + 7, "%lld", &x) == 1)
        heads = x;
    if ((p = strstr(t, "head_dim=")) && sscanf(p + 9, "%lld", &x) == 1)
        hd = x;
    if (heads * hd > best)
        best = heads * hd;
    return best;
}

static void bound_at(const ulp_snapshot *a, const ulp_diff_row *row, ulp_diff_verdict *v)
{
    v->has_bound = 1;
    v->layer = row->layer;
    v->max_abs_diff = row->m.max_abs_diff;
    v->scale = row->m.max_abs;
    v->k = 0;
    const char *compute = NULL;
    for (size_t i = 0; i < row->n_gemms_a; i++) {
        if (row->gemms_a[i].k > v->k)
            v->k = row->gemms_a[i].k;
        if (!compute && row->gemms_a[i].compute[0])
            compute = row->gemms_a[i].compute;
    }
    v->k_from = "gemms";
    if (v->k <= 0 && (v->k = shape_k(a)) > 0)
        v->k_from = "model_shape";
    if (v->k <= 0 && row->ndim_a > 0 && row->shape_a[row->ndim_a - 1] > 1) {
        v->k = row->shape_a[row->ndim_a - 1];
        v->k_from = "last_axis";
    }
    if (v->k <= 0) {
        v->k = VERDICT_K_DEF;
        v->k_from = "default";
    }
    acc_of(compute, v);
    v->ulp_out = ulp_dtype_ulp_at(row->dtype_a, v->scale);
    v->bound = VERDICT_OUT_ULPS * v->ulp_out + VERDICT_C * (double)v->k * v->u_acc * v->scale;
    v->ratio = v->bound > 0 ? v->max_abs_diff / v->bound : (double)INFINITY;
}

static int is_tiny(double x)
{
    return x == 0 || fabs(x) < 1.1754943508222875e-38;
}

/* Evidence at the first divergence: far beyond the bound, NaN/inf, a value one side never computed.
 */
static int first_evidence(const ulp_diff_row *row, ulp_diff_verdict *v)
{
    const char *nm = row->name;
    if (row->m.nonfinite_mismatch > 0 &&
        add_evidence(v, fmt("NaN or inf on one side only at %s: %llu elements", nm,
                            (unsigned long long)row->m.nonfinite_mismatch)))
        return -1;
    if (v->ratio > VERDICT_FAR &&
        add_evidence(v, fmt("introduced at %s with |a-b| = %.3g, %.3g times the rounding bound "
                            "%.3g (%g ULPs of %s at S = %.3g plus %g*K*u with K = %lld, u = 2^%d)",
                            nm, v->max_abs_diff, v->ratio, v->bound, VERDICT_OUT_ULPS,
                            ulp_dtype_name(row->dtype_a), v->scale, VERDICT_C, (long long)v->k,
                            (int)lround(log2(v->u_acc)))))
        return -1;
    double wa = fabs(row->m.worst_a), wb = fabs(row->m.worst_b);
    if (v->ratio > 1 && row->m.worst_flat >= 0 && isfinite(wa) && isfinite(wb)) {
        double lo = wa < wb ? wa : wb, hi = wa < wb ? wb : wa;
        int zero_vs_value = is_tiny(lo) && hi > v->bound;
        if ((zero_vs_value || (lo > 0 && hi / lo > 1024.0)) &&
            add_evidence(v, fmt("a value one side never computed at %s: %.4g vs %.4g at the "
                                "worst element (%s)",
                                nm, row->m.worst_a, row->m.worst_b,
                                zero_vs_value ? "exact zero or denormal against a value"
                                              : "magnitudes over 1024x apart")))
            return -1;
    }
    return 0;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Near-tie density and jumps over every logits capture. */
static int logits_evidence(const ulp_diff_result *r, ulp_diff_verdict *v)
{
    for (size_t q = 0; q < r->n_logits; q++) {
        const ulp_diff_logits *lg = &r->logits[q];
        v->has_logits = 1;
        v->logits_rows += lg->rows;
        for (uint64_t i = 0; i < lg->rows; i++)
            if (isfinite(lg->max_perturbation[i]) && lg->max_perturbation[i] > v->perturbation)
                v->perturbation = lg->max_perturbation[i];
    }
    for (size_t q = 0; q < r->n_logits; q++) {
        const ulp_diff_logits *lg = &r->logits[q];
        double *nz = malloc((lg->rows ? lg->rows : 1) * sizeof *nz);
        if (!nz)
            return -1;
        size_t n_nz = 0;
        for (uint64_t i = 0; i < lg->rows; i++) {
            double ma = lg->margin_a[i], mb = lg->margin_b[i], p = lg->max_perturbation[i];
            int near = ma < 2 * v->perturbation;
            v->near_ties += (uint64_t)near;
            v->exact_ties += (uint64_t)(ma == 0 || mb == 0);
            v->flips += lg->flipped[i];
            v->flips_near += (uint64_t)(lg->flipped[i] && near);
            if (p > 0 && isfinite(p))
                nz[n_nz++] = p;
        }
        if (n_nz > 0) {
            qsort(nz, n_nz, sizeof *nz, cmp_double);
            double med = nz[n_nz / 2];
            uint64_t jumps = 0;
            for (uint64_t i = 0; i < lg->rows; i++) {
                double p = lg->max_perturbation[i];
                double mx = lg->margin_a[i] > lg->margin_b[i] ? lg->margin_a[i] : lg->margin_b[i];
                jumps += (uint64_t)(p > 16 * med && p > mx);
            }
            if (jumps > 0 && jumps < lg->rows) {
                v->jump_rows += jumps;
                if (add_evidence(v, fmt("a logits jump at %s: %llu of %llu rows move by more "
                                        "than their top-2 margins and 16x the median "
                                        "perturbation %.3g, the others do not",
                                        lg->name, (unsigned long long)jumps,
                                        (unsigned long long)lg->rows, med))) {
                    free(nz);
                    return -1;
                }
            }
        }
        free(nz);
    }
    return 0;
}

/* The last pass of side `s`: the positions of the request holding the highest
 * position, as the first non-logits capture holding it computed them.  *lo is
 * the lowest of them, *hi the highest; 0 when no capture has positions. */
static int last_pass(const ulp_snapshot *s, int64_t *req, int64_t *lo, int64_t *hi)
{
    size_t n = ulp_snapshot_capture_count(s);
    int64_t best = -1, breq = 0;
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        for (uint64_t k = 0; c->positions && k < c->rows; k++)
            if (c->positions[k] > best) {
                best = c->positions[k];
                breq = c->requests ? c->requests[k] : 0;
            }
    }
    if (best < 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (!c->positions || (c->role && strcmp(c->role, "logits") == 0))
            continue;
        int64_t l = INT64_MAX;
        int has = 0;
        for (uint64_t k = 0; k < c->rows; k++) {
            if ((c->requests ? c->requests[k] : 0) != breq)
                continue;
            has |= c->positions[k] == best;
            if (c->positions[k] < l)
                l = c->positions[k];
        }
        if (has) {
            *req = breq;
            *lo = l;
            *hi = best;
            return 1;
        }
    }
    return 0;
}

static int witness(const ulp_snapshot *a, const ulp_snapshot *b, const ulp_diff_result *r,
                   ulp_diff_verdict *v)
{
    int cache_pair = 0;
    for (size_t i = 0; i < r->ladder.n_keys; i++)
        cache_pair |= strcmp(r->ladder.keys[i].key, "cache") == 0 ||
                      strcmp(r->ladder.keys[i].key, "split") == 0;
    if (!cache_pair || !a || !b) {
        v->witness = ULP_WITNESS_NOT_CACHE;
        return 0;
    }
    int64_t rq[2], lo[2], hi[2];
    int has[2] = {last_pass(a, &rq[0], &lo[0], &hi[0]), last_pass(b, &rq[1], &lo[1], &hi[1])};
    const char *lab[2] = {r->label_a ? r->label_a : "A", r->label_b ? r->label_b : "B"};
    if (!has[0] && !has[1]) {
        v->witness = ULP_WITNESS_UNKNOWN;
        v->witness_text = fmt("no capture records positions: whether a side took positions from "
                              "its cache cannot be read");
        return v->witness_text ? 0 : -1;
    }
    for (int s = 0; s < 2; s++)
        if (has[s] && lo[s] > 0) {
            v->witness = ULP_WITNESS_TAKEN;
            v->witness_text = fmt("%s (%s) took positions 0..%lld of request %lld from its "
                                  "cache: the pass that computed position %lld computed only "
                                  "%lld..%lld",
                                  s ? "B" : "A", lab[s], (long long)lo[s] - 1, (long long)rq[s],
                                  (long long)hi[s], (long long)lo[s], (long long)hi[s]);
            return v->witness_text ? 0 : -1;
        }
    v->witness = ULP_WITNESS_NONE;
    v->witness_text = fmt("this pair does not test the cache rung: each side's last pass "
                          "computed every position from 0 (none came from a cache)");
    return v->witness_text ? 0 : -1;
}

static int summarize(const ulp_diff_result *r, ulp_diff_verdict *v)
{
    if (r->identical) {
        v->kind = ULP_VERDICT_IDENTICAL;
        v->summary = fmt("identical: nothing to judge");
    } else if (v->n_evidence > 0) {
        v->kind = ULP_VERDICT_DEFECT;
        v->summary = fmt("not rounding: looks like a defect: %s", v->evidence[0]);
    } else if (v->has_bound) {
        v->kind = ULP_VERDICT_ROUNDING;
        char grow[96] = "";
        if (v->has_growth)
            snprintf(grow, sizeof grow, ", then growing %.3gx to the last activation", v->growth);
        v->summary = fmt("rounding: introduced at %s with |a-b| = %.3g, within the rounding bound "
                         "%.3g (%.2g of it; K = %lld from %s, %s accumulation)%s",
                         v->site, v->max_abs_diff, v->bound, v->ratio, (long long)v->k, v->k_from,
                         v->acc, grow);
    } else {
        v->kind = ULP_VERDICT_UNKNOWN;
        v->summary = fmt("unknown: the first divergence is no pair of finite values a bound "
                         "applies to");
    }
    return v->summary ? 0 : -1;
}

ulp_status ulp_diff_verdict_compute(const ulp_snapshot *a, const ulp_snapshot *b,
                                    const ulp_diff_result *r, ulp_diff_verdict **out,
                                    ulp_error *err)
{
    *out = NULL;
    ulp_diff_verdict *v = calloc(1, sizeof *v);
    if (!v)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    v->layer = -1;
    int bad = 0;
    const ulp_diff_row *fd =
        r->has_first_divergence ? ulp_diff_result_row(r, r->first_divergence) : NULL;
    if (fd && fd->status == ULP_DIFF_DIFFERS) {
        bad |= !(v->site = strdup(fd->name));
        bound_at(a, fd, v);
        bad |= first_evidence(fd, v) != 0;
    }
    if (r->amp.valid && isfinite(r->amp.abs_factor)) {
        v->has_growth = 1;
        v->growth = r->amp.abs_factor;
    }
    bad |= logits_evidence(r, v) != 0;
    bad |= witness(a, b, r, v) != 0;
    bad |= summarize(r, v) != 0;
    if (bad) {
        ulp_diff_verdict_free(v);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    *out = v;
    return ULP_OK;
}

void ulp_diff_verdict_free(ulp_diff_verdict *v)
{
    if (!v)
        return;
    free(v->summary);
    free(v->site);
    for (size_t i = 0; i < v->n_evidence; i++)
        free(v->evidence[i]);
    free(v->evidence);
    free(v->witness_text);
    free(v->contract_verdict);
    free(v->contract_text);
    free(v);
}
