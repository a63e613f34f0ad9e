/*
 * Layouts of fused and sharded captures (layouts.h, docs/sites.md
 * "Layouts").
 *
 * q/k/v fused as blocks (ULP__LAYOUT_QKV): the last axis is Hq*D q
 * elements, then Hkv*D k, then Hkv*D v (vLLM's and SGLang's `qkv_proj`,
 * GPT-2's `c_attn`).  k and v have one width, so a part's width and the
 * fused width give the other two.
 *
 * Per KV group (ULP__LAYOUT_QKV_GROUPS): the last axis is `groups` blocks
 * of (Hq/groups + 2)*D, each the group's Hq/groups q heads, then its k
 * head, then its v head -- Megatron-Core's `linear_qkv`, which
 * `get_query_key_value_tensors` (megatron/core/transformer/attention.py)
 * views as [..., ng, (np/ng + 2) * hn] and splits into [np/ng * hn, hn,
 * hn]; GPT-NeoX's `query_key_value` is the same with one q head a group.
 * The head size D is not in the shapes and must be declared.
 *
 * gate/up (ULP__LAYOUT_GATE_UP): the first half of the last axis is the
 * gate, the second the up projection (vLLM's and SGLang's `gate_up_proj`,
 * Megatron-Core's gated `linear_fc1`, whose GLU takes chunk 0 as the gate).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "layouts.h"

static int parse_int(const char *s, int64_t *v)
{
    char *end;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || x <= 0 || x > ((int64_t)1 << 40))
        return -1;
    *v = x;
    return 0;
}

/* `KEY=N` words after the layout's name; 0, or -1 with why. */
static int parse_params(char *rest, ulp__layout *l, int allow_heads, char *why, size_t n)
{
    for (char *w = strtok(rest, " \t"); w != NULL; w = strtok(NULL, " \t")) {
        char *eq = strchr(w, '=');
        int64_t *dst = NULL;
        if (eq != NULL) {
            *eq = '\0';
            if (strcmp(w, "D") == 0)
                dst = &l->d;
            else if (allow_heads && strcmp(w, "Hq") == 0)
                dst = &l->hq;
            else if (allow_heads && strcmp(w, "Hkv") == 0)
                dst = &l->hkv;
        }
        if (dst == NULL || parse_int(eq + 1, dst) != 0) {
            snprintf(why, n, "unknown layout parameter '%s'%s", w,
                     allow_heads ? " (Hq=N, Hkv=N, D=N)" : " (D=N)");
            return -1;
        }
    }
    return 0;
}

int ulp__layout_parse(const char *spec, ulp__layout *out, char *why, size_t n)
{
    char buf[256];
    memset(out, 0, sizeof *out);
    if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf) {
        snprintf(why, n, "layout too long");
        return -1;
    }
    char *p = buf;
    while (*p == ' ' || *p == '\t')
        p++;
    char *rest = p + strcspn(p, " \t");
    if (*rest != '\0')
        *rest++ = '\0';
    if (strcmp(p, "qkv") == 0) {
        out->kind = ULP__LAYOUT_QKV;
        if (parse_params(rest, out, 1, why, n) != 0)
            return -1;
        if ((out->hq || out->hkv || out->d) && !(out->hq && out->hkv && out->d)) {
            snprintf(why, n, "qkv: give all of Hq, Hkv and D, or none");
            return -1;
        }
        return 0;
    }
    if (strcmp(p, "qkv-groups") == 0) {
        out->kind = ULP__LAYOUT_QKV_GROUPS;
        if (parse_params(rest, out, 0, why, n) != 0)
            return -1;
        if (out->d == 0) {
            snprintf(why, n, "qkv-groups needs the head size: D=N");
            return -1;
        }
        return 0;
    }
    if (strcmp(p, "gate_up") == 0) {
        out->kind = ULP__LAYOUT_GATE_UP;
        if (*rest != '\0') {
            snprintf(why, n, "gate_up takes no parameter");
            return -1;
        }
        return 0;
    }
    if (strcmp(p, "shard") == 0) {
        char *w = strtok(rest, " \t"), *mode = w ? strtok(NULL, " \t") : NULL;
        char *slash = w ? strchr(w, '/') : NULL;
        if (w != NULL && strcmp(w, "rank") == 0 && mode == NULL) {
            out->kind = ULP__LAYOUT_SHARD_FILE; /* the rank of the file (tp_join.c) */
            return 0;
        }
        if (mode != NULL && strcmp(mode, "rows") == 0) {
            snprintf(why, n,
                     "row-parallel shards hold partial sums: compare the output after the "
                     "all-reduce");
            return -1;
        }
        if (slash == NULL || (mode != NULL && strcmp(mode, "cols") != 0) ||
            strtok(NULL, " \t") != NULL) {
            snprintf(why, n,
                     "expected 'shard RANK/N [cols]' (RANK a number or \\G, a group) or "
                     "'shard rank' (the file's rank)");
            return -1;
        }
        *slash = '\0';
        out->kind = ULP__LAYOUT_SHARD;
        int64_t g = 0;
        if (parse_int(slash + 1, &out->nranks) != 0 || out->nranks > 4096) {
            snprintf(why, n, "bad shard count '%s'", slash + 1);
            return -1;
        }
        if (w[0] == '\\') {
            if (parse_int(w + 1, &g) != 0 || g > 9) {
                snprintf(why, n, "bad group '%s' (\\1 .. \\9)", w);
                return -1;
            }
            out->rank_group = (int)g;
            return 0;
        }
        if (strcmp(w, "0") == 0)
            out->rank = 0;
        else if (parse_int(w, &out->rank) != 0 || out->rank >= out->nranks) {
            snprintf(why, n, "bad shard rank '%s' of %lld", w, (long long)out->nranks);
            return -1;
        }
        return 0;
    }
    snprintf(why, n, "unknown layout '%s' (qkv, qkv-groups, gate_up, shard)", p);
    return -1;
}

const char *ulp__layout_fused_site(const char *part)
{
    if (strcmp(part, "q") == 0 || strcmp(part, "k") == 0 || strcmp(part, "v") == 0)
        return "qkv";
    if (strcmp(part, "gate") == 0 || strcmp(part, "up") == 0)
        return "gate_up";
    return NULL;
}

static int push(ulp__lruns *o, size_t cap, uint64_t off, uint64_t len, uint64_t base)
{
    if (len == 0)
        return 0;
    if (ULP__GROW(o->v, o->cap, o->n + 1) != 0)
        return -2;
    o->v[o->n++] = (ulp__lrun){cap, off, len, base};
    return 0;
}

/* Leading axes equal, last ones positive; the product of the leading ones in *outer. */
static int leading(int ndim, const int64_t *x, const int64_t *y, uint64_t *outer)
{
    if (ndim < 1)
        return -1;
    *outer = 1;
    for (int k = 0; k + 1 < ndim; k++) {
        if (x[k] != y[k])
            return -1;
        *outer *= (uint64_t)x[k];
    }
    return x[ndim - 1] > 0 && y[ndim - 1] > 0 ? 0 : -1;
}

/* Block offsets within one fused row: *at the part's, *len its width, for
 * q|k|v or gate|up; -1 (why) when the widths do not fit. */
static int blocks(const ulp__layout *l, const char *part, int64_t wp, int64_t wf, int64_t *at,
                  char *why, size_t n)
{
    if (l->kind == ULP__LAYOUT_GATE_UP) {
        if (wf != 2 * wp) {
            snprintf(why, n, "its last axis %lld is not twice %s's %lld (gate | up)", (long long)wf,
                     part, (long long)wp);
            return -1;
        }
        *at = part[0] == 'g' ? 0 : wp;
        return 0;
    }
    int64_t wq, wkv;
    if (l->hq != 0) {
        wq = l->hq * l->d;
        wkv = l->hkv * l->d;
    } else if (part[0] == 'q') {
        wq = wp;
        wkv = (wf - wp) / 2;
    } else {
        wkv = wp;
        wq = wf - 2 * wp;
    }
    if (wq <= 0 || wkv <= 0 || wq + 2 * wkv != wf || wp != (part[0] == 'q' ? wq : wkv)) {
        snprintf(why, n, "its last axis %lld does not hold %s of width %lld as q | k | v%s",
                 (long long)wf, part, (long long)wp,
                 l->hq != 0 ? " with the declared Hq, Hkv, D" : " (k, v of one width)");
        return -1;
    }
    *at = part[0] == 'q' ? 0 : part[0] == 'k' ? wq : wq + wkv;
    return 0;
}

int ulp__layout_split(const ulp__layout *l, const char *part, int ndim, const int64_t *part_shape,
                      const int64_t *fused_shape, size_t cap, ulp__lruns *out, char *why, size_t n)
{
    uint64_t outer;
    if (leading(ndim, part_shape, fused_shape, &outer) != 0) {
        snprintf(why, n, "its leading axes are not %s's", part);
        return -1;
    }
    int64_t wp = part_shape[ndim - 1], wf = fused_shape[ndim - 1];
    if (l->kind == ULP__LAYOUT_QKV || l->kind == ULP__LAYOUT_GATE_UP) {
        int64_t at;
        if (blocks(l, part, wp, wf, &at, why, n) != 0)
            return -1;
        for (uint64_t t = 0; t < outer; t++)
            if (push(out, cap, t * (uint64_t)wf + (uint64_t)at, (uint64_t)wp, t * (uint64_t)wp))
                return -2;
        return 0;
    }
    if (l->kind != ULP__LAYOUT_QKV_GROUPS) {
        snprintf(why, n, "its layout does not hold %s", part);
        return -1;
    }
    /* groups * (qpg + 2) * D = wf; q's width is groups * qpg * D, k's and v's groups * D. */
    int64_t d = l->d, groups = 0, qpg = 0;
    if (part[0] == 'q' && wp % d == 0 && (wf - wp) > 0 && (wf - wp) % (2 * d) == 0) {
        groups = (wf - wp) / (2 * d);
        qpg = wp / d % groups == 0 ? wp / d / groups : 0;
    } else if (part[0] != 'q' && wp % d == 0) {
        groups = wp / d;
        int64_t wq = wf - 2 * wp;
        qpg = wq > 0 && wq % (groups * d) == 0 ? wq / (groups * d) : 0;
    }
    if (groups <= 0 || qpg <= 0 || groups * (qpg + 2) * d != wf) {
        snprintf(why, n,
                 "its last axis %lld does not hold %s of width %lld in groups of (q heads, k, v) "
                 "of D=%lld",
                 (long long)wf, part, (long long)wp, (long long)d);
        return -1;
    }
    uint64_t gw = (uint64_t)((qpg + 2) * d);
    uint64_t at = part[0] == 'q' ? 0 : (uint64_t)(qpg * d) + (part[0] == 'v' ? (uint64_t)d : 0);
    uint64_t len = part[0] == 'q' ? (uint64_t)(qpg * d) : (uint64_t)d;
    for (uint64_t t = 0; t < outer; t++)
        for (uint64_t g = 0; g < (uint64_t)groups; g++)
            if (push(out, cap, t * (uint64_t)wf + g * gw + at, len, t * (uint64_t)wp + g * len))
                return -2;
    return 0;
}

int ulp__layout_concat(int ndim, const int64_t *whole, size_t nranks, const size_t *caps,
                       const int64_t *const *shapes, ulp__lruns *out, char *why, size_t n)
{
    uint64_t outer = 0, sum = 0;
    for (size_t r = 0; r < nranks; r++) {
        if (leading(ndim, whole, shapes[r], &outer) != 0) {
            snprintf(why, n, "shard %zu's leading axes are not the whole tensor's", r);
            return -1;
        }
        sum += (uint64_t)shapes[r][ndim - 1];
    }
    uint64_t w = (uint64_t)whole[ndim - 1];
    if (sum != w) {
        snprintf(why, n, "the %zu shards' last axes add up to %llu, not %llu", nranks,
                 (unsigned long long)sum, (unsigned long long)w);
        return -1;
    }
    for (uint64_t t = 0; t < outer; t++)
        for (size_t r = 0, at = 0; r < nranks; r++) {
            uint64_t wr = (uint64_t)shapes[r][ndim - 1];
            if (push(out, caps[r], t * wr, wr, t * w + at))
                return -2;
            at += wr;
        }
    return 0;
}

void ulp__layout_describe(const ulp__layout *l, const char *part, size_t nranks, char *buf,
                          size_t n)
{
    switch (l->kind) {
    case ULP__LAYOUT_QKV:
        if (l->hq != 0)
            snprintf(buf, n, "%s of qkv q|k|v (Hq=%lld, Hkv=%lld, D=%lld)", part, (long long)l->hq,
                     (long long)l->hkv, (long long)l->d);
        else
            snprintf(buf, n, "%s of qkv q|k|v", part);
        break;
    case ULP__LAYOUT_QKV_GROUPS:
        snprintf(buf, n, "%s of qkv per group (D=%lld)", part, (long long)l->d);
        break;
    case ULP__LAYOUT_GATE_UP:
        snprintf(buf, n, "%s of gate_up gate|up", part);
        break;
    case ULP__LAYOUT_SHARD:
        snprintf(buf, n, "%zu column shards concatenated", nranks);
        break;
    default:
        snprintf(buf, n, "none");
    }
}
