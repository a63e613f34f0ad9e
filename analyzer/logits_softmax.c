/*
 * The softmax of one logits row in double, shared by the sampling figures
 * (logits.c) and the whole-distribution measures (logits_dist.c): the
 * row's largest logit is subtracted before the exponentials.
 */
#include <math.h>

#include "diff_priv.h"

void ulp__logits_softmax(const double *z, uint64_t n, double t, double *p)
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
