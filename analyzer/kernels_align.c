/*
 * ulp_kernels_align(): the two kernel traces as sequences of symbols (one
 * integer per distinct name, grid and block), the common prefix and suffix
 * trimmed, and Myers' greedy shortest edit script between what is left
 * (E. Myers, "An O(ND) difference algorithm and its variations", 1986).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/strmap.h"
#include "ulpprof/kernels.h"

/* --- symbols: each distinct (name, grid, block) becomes one integer ---------- */

static int *symbols_of(const ulp_snapshot *s, ulp__strmap *syms, size_t *n)
{
    *n = ulp_snapshot_kernel_count(s);
    int *v = malloc((*n ? *n : 1) * sizeof(*v));
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < *n; i++) {
        const ulp_kernel_info *k = ulp_snapshot_kernel(s, i);
        size_t len = strlen(k->name) + 96;
        char *key = malloc(len);
        if (key == NULL) {
            free(v);
            return NULL;
        }
        snprintf(key, len, "%s\x1f%d,%d,%d\x1f%d,%d,%d", k->name, k->grid[0], k->grid[1],
                 k->grid[2], k->block[0], k->block[1], k->block[2]);
        int64_t *id = ulp__strmap_upsert(syms, key, (int64_t)syms->count, NULL);
        free(key);
        if (id == NULL) {
            free(v);
            return NULL;
        }
        v[i] = (int)*id;
    }
    return v;
}

/* --- the edit script --------------------------------------------------------- */

typedef struct script {
    ulp_kernels_step *v;
    size_t n, cap;
} script;

static int script_push(script *s, ulp_kernels_op op, size_t a, size_t b)
{
    if (ULP__GROW(s->v, s->cap, s->n + 1) != 0)
        return -1;
    s->v[s->n].op = op;
    s->v[s->n].a = a;
    s->v[s->n].b = b;
    s->n++;
    return 0;
}

/* Walks back from (N, M) through the saved V arrays, collecting the steps in
 * reverse into `rev`.  0, or -1 when out of memory. */
static int walk_back(int32_t *const *trace, long found, long N, long M, script *rev)
{
    int rc = 0;
    long x = N, y = M;
    for (long d = found; rc == 0 && d >= 0; d--) {
        const int32_t *vd = trace[d] + d + 1; /* vd[k] for k in [-(d+1), d+1] */
        long k = x - y;
        long pk = (k == -d || (k != d && vd[k - 1] < vd[k + 1])) ? k + 1 : k - 1;
        long px = vd[pk];
        long py = px - pk;
        while (x > px && y > py && rc == 0) {
            x--, y--;
            rc = script_push(rev, ULP_KERNELS_SAME, (size_t)x, (size_t)y);
        }
        if (d > 0 && rc == 0) {
            if (x == px)
                rc = script_push(rev, ULP_KERNELS_ONLY_B, 0, (size_t)py); /* b[py] only in B */
            else
                rc = script_push(rev, ULP_KERNELS_ONLY_A, (size_t)px, 0); /* a[px] only in A */
        }
        x = px, y = py;
    }
    return rc;
}

/*
 * Myers' greedy shortest edit script between a[0..n) and b[0..m).  Appends
 * the steps (offset by ao, bo) to `out` in order.  Returns 0, 1 when the
 * distance exceeds ULP_KERNELS_MAX_EDITS (nothing appended), -1 when out of
 * memory.
 */
static int myers(const int *a, size_t n, const int *b, size_t m, size_t ao, size_t bo, script *out)
{
    long N = (long)n, M = (long)m, max = N + M;
    if (max > ULP_KERNELS_MAX_EDITS)
        max = ULP_KERNELS_MAX_EDITS;
    long off = max + 1;
    long *v = calloc((size_t)(2 * max + 3), sizeof(long));
    /* trace[d] holds V[-(d+1) .. d+1] as it stood before step d, for the
     * walk back: about D^2 integers in all. */
    int32_t **trace = calloc((size_t)(max + 1), sizeof(*trace));
    if (v == NULL || trace == NULL) {
        free(v);
        free(trace);
        return -1;
    }
    long found = -1;
    int rc = 0;
    for (long d = 0; d <= max && found < 0; d++) {
        trace[d] = malloc((size_t)(2 * d + 3) * sizeof(int32_t));
        if (trace[d] == NULL) {
            rc = -1;
            break;
        }
        for (long k = -(d + 1); k <= d + 1; k++)
            trace[d][k + d + 1] = (int32_t)v[off + k];
        for (long k = -d; k <= d; k += 2) {
            long x;
            if (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
                x = v[off + k + 1]; /* down: a launch only in B */
            else
                x = v[off + k - 1] + 1; /* right: a launch only in A */
            long y = x - k;
            while (x < N && y < M && a[x] == b[y])
                x++, y++;
            v[off + k] = x;
            if (x >= N && y >= M) {
                found = d;
                break;
            }
        }
    }
    free(v);
    if (rc == 0 && found < 0)
        rc = 1;
    script rev = {NULL, 0, 0};
    if (rc == 0)
        rc = walk_back(trace, found, N, M, &rev);
    for (long d = 0; d <= max; d++)
        free(trace[d]);
    free(trace);
    for (size_t i = rev.n; i-- > 0 && rc == 0;)
        rc = script_push(out, rev.v[i].op, rev.v[i].a + ao, rev.v[i].b + bo);
    free(rev.v);
    return rc;
}

/* --- the alignment ------------------------------------------------------------ */

/* The script of two traces that differ: prefix, Myers in between, suffix.
 * 0, 1 when too far apart, -1 when out of memory. */
static int align(const int *sa, size_t na, const int *sb, size_t nb, size_t pre, size_t suf,
                 script *sc)
{
    for (size_t i = 0; i < pre; i++)
        if (script_push(sc, ULP_KERNELS_SAME, i, i) != 0)
            return -1;
    int m = myers(sa + pre, na - pre - suf, sb + pre, nb - pre - suf, pre, pre, sc);
    if (m != 0)
        return m;
    for (size_t i = 0; i < suf; i++)
        if (script_push(sc, ULP_KERNELS_SAME, na - suf + i, nb - suf + i) != 0)
            return -1;
    return 0;
}

static ulp_status align_symbols(const int *sa, size_t na, const int *sb, size_t nb,
                                ulp_kernels_alignment *al)
{
    size_t pre = 0;
    while (pre < na && pre < nb && sa[pre] == sb[pre])
        pre++;
    size_t suf = 0;
    while (suf < na - pre && suf < nb - pre && sa[na - 1 - suf] == sb[nb - 1 - suf])
        suf++;
    al->launches_a = na;
    al->launches_b = nb;
    al->identical = pre == na && pre == nb;
    al->aligned = 1;
    al->first_divergence = pre;
    al->common = pre + suf;
    if (al->identical)
        return ULP_OK;
    script sc = {NULL, 0, 0};
    int m = align(sa, na, sb, nb, pre, suf, &sc);
    if (m < 0) {
        free(sc.v);
        return ULP_ENOMEM;
    }
    if (m > 0) {
        al->aligned = 0;
        free(sc.v);
        return ULP_OK;
    }
    al->common = 0;
    for (size_t i = 0; i < sc.n; i++) {
        al->common += sc.v[i].op == ULP_KERNELS_SAME;
        al->only_a += sc.v[i].op == ULP_KERNELS_ONLY_A;
        al->only_b += sc.v[i].op == ULP_KERNELS_ONLY_B;
    }
    al->steps = sc.v;
    al->n_steps = sc.n;
    return ULP_OK;
}

ulp_status ulp_kernels_align(const ulp_snapshot *a, const ulp_snapshot *b,
                             ulp_kernels_alignment **out, ulp_error *err)
{
    ulp_status st = ULP_ENOMEM;
    ulp__strmap syms;
    ulp__strmap_init(&syms);
    size_t na = 0, nb = 0;
    *out = NULL;
    ulp_kernels_alignment *al = calloc(1, sizeof *al);
    int *sa = al ? symbols_of(a, &syms, &na) : NULL;
    int *sb = sa ? symbols_of(b, &syms, &nb) : NULL;
    if (sb != NULL)
        st = align_symbols(sa, na, sb, nb, al);
    free(sa);
    free(sb);
    ulp__strmap_release(&syms);
    if (st != ULP_OK) {
        ulp_kernels_alignment_free(al);
        return ulp__error(err, st, "out of memory aligning the kernel traces");
    }
    *out = al;
    return ULP_OK;
}

void ulp_kernels_alignment_free(ulp_kernels_alignment *al)
{
    if (al == NULL)
        return;
    free(al->steps);
    free(al);
}
