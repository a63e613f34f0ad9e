/*
 * Joining a tensor-parallel run directory into one snapshot (ulp_tp_join,
 * ulpprof/sites.h; docs/sites.md "Tensor-parallel runs").
 *
 * A column-parallel linear layer's rank r holds columns [r*W/N, (r+1)*W/N)
 * of its output; joined on the last axis in rank order they are the
 * unsharded output.  A fused one holds its own slice of each part: vLLM's
 * QKVParallelLinear rank r outputs q_r | k_r | v_r (Hq/N q heads, Hkv/N
 * kv heads), MergedColumnParallelLinear gate_r | up_r, so each part is
 * joined on its own and the parts laid out again (q_0 .. q_N-1 | k_0 ..
 * | v_0 ..).  Megatron-Core's per-group qkv puts whole KV groups on each
 * rank: joining the ranks as they are gives the groups in order.  A
 * row-parallel layer's ranks hold partial sums until the all-reduce, after
 * which every rank holds the whole output: that one is taken from rank 0,
 * and the other ranks are compared with it bit for bit.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "format/writer.h"
#include "sites_priv.h"
#include "ulpprof/format.h"
#include "ulpprof/ladder.h"
#include "ulpprof/snapshot.h"

/* Sites whose tensor-parallel outputs are column shards (heads, or MLP columns). */
static int column_site(const char *site)
{
    static const char *const cols[] = {"q", "k", "v", "attn_core", "gate", "up", "act"};
    for (size_t i = 0; site != NULL && i < sizeof cols / sizeof cols[0]; i++)
        if (strcmp(site, cols[i]) == 0)
            return 1;
    return 0;
}

typedef struct joiner {
    const char *dir;
    ulp_snapshot **s;
    size_t n;
    ulp_site_map *map;
    ulp__writer *w;
    void **buf; /* [n] one capture's bytes of each rank */
    unsigned char *out;
    ulp_tp_join_info *info;
} joiner;

/* Parts of one rank's last axis: `np` widths, in order (one part: the whole axis). */
static ulp_status parts_of(const joiner *j, const ulp_capture_info *c, const char *site,
                           const ulp__layout *lay, int64_t w, int64_t *widths, int *np,
                           ulp_error *err)
{
    const char *path = ulp_snapshot_path(j->s[0]);
    int64_t n = (int64_t)j->n;
    *np = 1;
    widths[0] = w;
    if (site == NULL || lay->kind == ULP__LAYOUT_SHARD_FILE || lay->kind == ULP__LAYOUT_QKV_GROUPS)
        return ULP_OK;
    if (strcmp(site, "gate_up") == 0) {
        if (w % 2 != 0)
            return ulp__error(err, ULP_EINVAL,
                              "'%s': capture '%s' (gate_up) has an odd last axis %lld", path,
                              c->name, (long long)w);
        *np = 2;
        widths[0] = widths[1] = w / 2;
        return ULP_OK;
    }
    if (strcmp(site, "qkv") != 0)
        return ULP_OK;
    if (lay->hq == 0)
        return ulp__error(err, ULP_EINVAL,
                          "'%s': capture '%s' (qkv, q|k|v on each rank) cannot be joined without "
                          "its head counts: declare them in a map file (PATTERN qkv [qkv Hq=N "
                          "Hkv=N D=N])",
                          path, c->name);
    if (lay->hq % n != 0 || lay->hkv % n != 0)
        return ulp__error(err, ULP_EINVAL,
                          "'%s': capture '%s': Hq=%lld and Hkv=%lld do not split over %lld ranks "
                          "(replicated kv heads are not joined)",
                          path, c->name, (long long)lay->hq, (long long)lay->hkv, (long long)n);
    *np = 3;
    widths[0] = lay->hq / n * lay->d;
    widths[1] = widths[2] = lay->hkv / n * lay->d;
    if (widths[0] + 2 * widths[1] != w)
        return ulp__error(err, ULP_EINVAL,
                          "'%s': capture '%s' has a last axis of %lld, not (Hq + 2 Hkv) * D / %lld "
                          "= %lld",
                          path, c->name, (long long)w, (long long)n,
                          (long long)(widths[0] + 2 * widths[1]));
    return ULP_OK;
}

/* Capture k of rank r must be capture c0's shard: its dtype, axes, rows. */
static ulp_status check_shard(const joiner *j, size_t r, const ulp_capture_info *c0,
                              const ulp_capture_info *c, int whole, ulp_error *err)
{
    const char *why = NULL;
    if (c->dtype != c0->dtype)
        why = "another dtype";
    else if (c->ndim != c0->ndim || c0->ndim < 1)
        why = c0->ndim < 1 ? "no axis to join" : "another number of axes";
    else
        for (int k = 0; k < c0->ndim && why == NULL; k++)
            if (c->shape[k] != c0->shape[k] && (whole || k + 1 < c0->ndim))
                why = whole ? "another shape (a capture that is not column-parallel is joined "
                              "only when every rank holds it whole)"
                            : "other leading axes";
    if (why == NULL && (c->row_rank != c0->row_rank || c->rows != c0->rows ||
                        (c0->positions != NULL &&
                         memcmp(c->positions, c0->positions, c0->rows * sizeof(int64_t)) != 0) ||
                        ((c0->requests != NULL) != (c->requests != NULL)) ||
                        (c0->requests != NULL &&
                         memcmp(c->requests, c0->requests, c0->rows * sizeof(int64_t)) != 0)))
        why = "other positions or requests";
    if (why == NULL)
        return ULP_OK;
    return ulp__error(err, ULP_EINVAL, "'%s': capture '%s' #%lld has %s than rank 0's",
                      ulp_snapshot_path(j->s[r]), c->name, (long long)c->occurrence, why);
}

/* Rank r's bits against rank 0's: elements that differ. */
static uint64_t differing(const void *x, const void *y, uint64_t n, size_t sz)
{
    uint64_t d = 0;
    for (uint64_t e = 0; e < n; e++)
        d += memcmp((const char *)x + e * sz, (const char *)y + e * sz, sz) != 0;
    return d;
}

static ulp_status write_capture(joiner *j, const ulp_capture_info *c0, const int64_t *shape,
                                const void *data, size_t nbytes, ulp_error *err)
{
    ulp__desc d;
    ulp__desc_init(&d);
    d.name = c0->name;
    d.dtype = c0->dtype;
    d.ndim = c0->ndim;
    d.shape = shape;
    d.layer = c0->layer;
    int role = ulp_role_from_name(c0->role);
    d.role = role < 0 ? ULP_ROLE_ACTIVATION : (ulp_role)role;
    d.step = c0->has_step ? c0->step : ULP_STEP_NONE;
    d.time_ns = c0->time_ns;
    d.positions = c0->positions;
    d.requests = c0->requests;
    d.row_rank = c0->positions != NULL ? c0->row_rank : 0;
    d.n_inputs = (int32_t)c0->n_inputs;
    d.inputs = c0->inputs;
    return ulp__writer_add(j->w, &d, data, nbytes, NULL, err);
}

/* Capture i of rank 0 and its shards, joined or taken whole, written. */
static ulp_status join_one(joiner *j, size_t i, ulp_error *err)
{
    const ulp_capture_info *c0 = ulp_snapshot_capture(j->s[0], i);
    if (c0 == NULL)
        return ulp__error(err, ULP_EIO, "'%s': a capture cannot be described again",
                          ulp_snapshot_path(j->s[0]));
    int32_t layer = -1;
    ulp__layout lay;
    const char *site = ulp__site_lookup_layout(j->map, c0->name, c0->layer, &layer, &lay);
    int column = column_site(site) || lay.kind == ULP__LAYOUT_SHARD_FILE ||
                 (site != NULL && (strcmp(site, "qkv") == 0 || strcmp(site, "gate_up") == 0));
    size_t sz = ulp_dtype_size(c0->dtype);
    int64_t shape[ULP_SNAPSHOT_MAX_RANK];
    memcpy(shape, c0->shape, sizeof shape);
    const ulp_capture_info *cs[4096];
    if (j->n > sizeof cs / sizeof cs[0])
        return ulp__error(err, ULP_EINVAL, "'%s': more than 4096 ranks", j->dir);
    uint64_t total = 0;
    ulp_status st;
    for (size_t r = 0; r < j->n; r++) {
        ptrdiff_t k = r == 0 ? (ptrdiff_t)i : ulp_snapshot_find(j->s[r], c0->name, c0->occurrence);
        if (k < 0)
            return ulp__error(err, ULP_EINVAL,
                              "'%s': no capture '%s' #%lld, which rank 0 has: a rank's file "
                              "must hold every capture of the run",
                              ulp_snapshot_path(j->s[r]), c0->name, (long long)c0->occurrence);
        cs[r] = ulp_snapshot_capture(j->s[r], (size_t)k);
        if (cs[r] == NULL)
            return ulp__error(err, ULP_EIO, "'%s': a capture cannot be described again",
                              ulp_snapshot_path(j->s[r]));
        if ((st = check_shard(j, r, c0, cs[r], !column, err)) != ULP_OK)
            return st;
        free(j->buf[r]);
        j->buf[r] = malloc(cs[r]->elements * sz + 1);
        if (j->buf[r] == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        if ((st = ulp_snapshot_read(j->s[r], (size_t)k, 0, cs[r]->elements, j->buf[r], err)) !=
            ULP_OK)
            return st;
        total += cs[r]->elements;
    }
    if (!column) {
        j->info->replicated++;
        for (size_t r = 1; r < j->n; r++) {
            uint64_t d = differing(j->buf[0], j->buf[r], c0->elements, sz);
            if (d == 0)
                continue;
            if (j->info->disagree++ == 0) {
                snprintf(j->info->first_disagree, sizeof j->info->first_disagree, "%s", c0->name);
                j->info->first_disagree_occurrence = c0->occurrence;
                j->info->first_disagree_rank = r;
                j->info->first_disagree_elements = d;
                j->info->first_disagree_of = c0->elements;
            }
            break;
        }
        return write_capture(j, c0, shape, j->buf[0], c0->elements * sz, err);
    }
    int np = 1;
    for (size_t r = 0; r < j->n; r++) {
        int64_t wr[3];
        if ((st = parts_of(j, cs[r], site, &lay, cs[r]->shape[c0->ndim - 1], wr, &np, err)) !=
            ULP_OK)
            return st;
    }
    uint64_t outer = c0->ndim > 0 ? c0->elements / (uint64_t)c0->shape[c0->ndim - 1] : 1;
    uint64_t wtot = outer > 0 ? total / outer : 0;
    shape[c0->ndim - 1] = (int64_t)wtot;
    free(j->out);
    j->out = malloc(total * sz + 1);
    if (j->out == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    unsigned char *o = j->out;
    for (uint64_t t = 0; t < outer; t++)
        for (int p = 0; p < np; p++)
            for (size_t r = 0; r < j->n; r++) {
                int64_t wr[3], w = cs[r]->shape[c0->ndim - 1], at = 0;
                int nr;
                parts_of(j, cs[r], site, &lay, w, wr, &nr, err);
                for (int q = 0; q < p; q++)
                    at += wr[q];
                memcpy(o, (const unsigned char *)j->buf[r] + (t * (uint64_t)w + (uint64_t)at) * sz,
                       (size_t)wr[p] * sz);
                o += (size_t)wr[p] * sz;
            }
    j->info->joined++;
    return write_capture(j, c0, shape, j->out, total * sz, err);
}

/* Rank 0's /run keys, and tp_join=N. */
static ulp_status copy_run(joiner *j, ulp_error *err)
{
    ulp_status st = ULP_OK;
    for (size_t k = 0; st == ULP_OK && k < ulp_snapshot_run_count(j->s[0]); k++) {
        const ulp_kv *kv = ulp_snapshot_run(j->s[0], k);
        st = ulp__writer_set_attr(j->w, ULP__WRITER_RUN, kv->key, kv->value, err);
    }
    char n[32];
    snprintf(n, sizeof n, "%zu", j->n);
    return st != ULP_OK ? st : ulp__writer_set_attr(j->w, ULP__WRITER_RUN, "tp_join", n, err);
}

ulp_status ulp_tp_join(const char *dir, const char *site_map, const char *out,
                       ulp_tp_join_info **info_out, ulp_error *err)
{
    *info_out = NULL;
    ulp_tp_join_info *info = calloc(1, sizeof *info);
    if (info == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    ulp_ladder_file *files = NULL;
    size_t n = 0;
    joiner j = {dir, NULL, 0, NULL, NULL, NULL, NULL, info};
    ulp_status st = ulp_ladder_run_files(dir, &files, &n, err);
    if (st != ULP_OK)
        return st;
    for (size_t r = 0; r < n && st == ULP_OK; r++)
        if (files[r].rank != (int)r)
            st = ulp__error(err, ULP_EINVAL,
                            "'%s': its files' ranks are not 0..%zu (file '%s' is rank %d)", dir,
                            n - 1, files[r].path, files[r].rank);
    if (st == ULP_OK && n == 0)
        st = ulp__error(err, ULP_EINVAL, "'%s': no snapshot file to join", dir);
    j.s = calloc(n + 1, sizeof *j.s);
    j.buf = calloc(n + 1, sizeof *j.buf);
    if (st == ULP_OK && (j.s == NULL || j.buf == NULL))
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t r = 0; r < n && st == ULP_OK; r++, j.n++)
        st = ulp_snapshot_open(files[r].path, &j.s[r], err);
    if (st == ULP_OK)
        st = ulp_site_map_open(site_map, &j.map, err);
    if (st == ULP_OK)
        st = ulp__writer_create(out, ulp_snapshot_label(j.s[0]), "ulpprof tp-join", 0, &j.w, err);
    if (st == ULP_OK) {
        ulp__writer_set_link_batch(j.w, 64);
        st = copy_run(&j, err);
    }
    info->ranks = n;
    size_t nc = st == ULP_OK ? ulp_snapshot_capture_count(j.s[0]) : 0;
    for (size_t r = 1; r < j.n && st == ULP_OK; r++)
        if (ulp_snapshot_capture_count(j.s[r]) != nc)
            st = ulp__error(err, ULP_EINVAL, "'%s' holds %zu captures, rank 0's file %zu",
                            ulp_snapshot_path(j.s[r]), ulp_snapshot_capture_count(j.s[r]), nc);
    for (size_t i = 0; i < nc && st == ULP_OK; i++)
        st = join_one(&j, i, err);
    if (j.w != NULL) {
        ulp_error e2;
        ulp_status cs = ulp__writer_close(j.w, st == ULP_OK ? err : &e2);
        st = st == ULP_OK ? cs : st;
    }
    for (size_t r = 0; r < j.n; r++) {
        ulp_snapshot_close(j.s[r]);
        if (j.buf != NULL)
            free(j.buf[r]);
    }
    free(j.s);
    free(j.buf);
    free(j.out);
    ulp_site_map_free(j.map);
    ulp_ladder_files_free(files, n);
    if (st == ULP_OK)
        *info_out = info;
    else
        free(info);
    return st;
}

void ulp_tp_join_info_free(ulp_tp_join_info *info)
{
    free(info);
}
