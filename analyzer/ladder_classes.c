/*
 * Runs that are bitwise identical are compared once (ladder_priv.h).
 *
 * A ladder's runs are mostly repeats and conditions that change nothing:
 * of 200 runs there may be 6 distinct results, and comparing every pair
 * (19,900) reads each file 199 times.  So each run's contents are hashed
 * first (every capture's name, occurrence, dtype, shape and bytes, rank by
 * rank); a run whose hash matches a class's is compared with that class's
 * first run, and joins it when the compare finds them identical (a hash
 * never decides by itself).  Then one compare per ordered pair of classes
 * that some pair of runs needs, and every pair of runs is read from its
 * classes' compare, with its own /run keys (ladder_view.c), so that the
 * result keeps O(runs + classes^2) summaries, not one per pair of runs.  If
 * A and A' are bitwise
 * identical -- the same captures, names, shapes and bits -- every compare
 * of A' with B gives what the compare of A with B gave.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"
#include "ladder_priv.h"

#define HASH_CHUNK ((uint64_t)1 << 20) /* bytes read at a time */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t mix_bytes(uint64_t h, const unsigned char *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        h = mix(h, v);
    }
    uint64_t tail = 0;
    memcpy(&tail, p + i, n - i);
    return mix(h, tail ^ ((uint64_t)(n - i) << 56));
}

static ulp_status run_hash(const ulp__ladder_ctx *c, size_t run, unsigned char *buf, uint64_t *out,
                           ulp_error *err)
{
    const ulp_ladder_run *r = &c->r->runs[run];
    uint64_t h = mix(0, r->n_files);
    for (size_t f = 0; f < r->n_files; f++) {
        const ulp_snapshot *s = c->snaps[run][f];
        h = mix(h, (uint64_t)r->files[f].rank);
        for (size_t i = 0; i < ulp_snapshot_capture_count(s); i++) {
            const ulp_capture_info *ci = ulp_snapshot_capture(s, i);
            size_t es = ulp_dtype_size(ci->dtype);
            h = mix_bytes(h, (const unsigned char *)ci->name, strlen(ci->name));
            h = mix(mix(mix(h, (uint64_t)ci->occurrence), (uint64_t)ci->dtype), ci->elements);
            for (int k = 0; k < ci->ndim; k++)
                h = mix(h, (uint64_t)ci->shape[k]);
            uint64_t per = es ? HASH_CHUNK / es : 0;
            for (uint64_t at = 0; per && at < ci->elements; at += per) {
                uint64_t n = ci->elements - at < per ? ci->elements - at : per;
                ulp_status st = ulp_snapshot_read(s, i, at, n, buf, err);
                if (st != ULP_OK)
                    return st;
                h = mix_bytes(h, buf, (size_t)(n * es));
            }
        }
    }
    *out = h;
    return ULP_OK;
}

ulp_status ulp__ladder_plan_init(ulp__ladder_plan *plan, size_t n, ulp_error *err)
{
    memset(plan, 0, sizeof *plan);
    plan->n_runs = n;
    plan->cls = malloc(n * sizeof *plan->cls);
    plan->rep = malloc(n * sizeof *plan->rep);
    plan->join = calloc(n, sizeof *plan->join);
    plan->hash = malloc(n * sizeof *plan->hash);
    plan->buf = malloc(HASH_CHUNK);
    if (!plan->cls || !plan->rep || !plan->join || !plan->hash || !plan->buf)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    return ULP_OK;
}

/*
 * Run i, open, into its class: hashed, then a verifying compare with each
 * class's first run of the same hash.  Runs come in order, so a class's
 * first run is its lowest; it stays open for the compares between classes,
 * every other run is closed here.
 */
ulp_status ulp__ladder_plan_add(const ulp__ladder_ctx *c, ulp__ladder_plan *plan, size_t i,
                                ulp_error *err)
{
    uint64_t *hash = plan->hash;
    ulp_status st = run_hash(c, i, plan->buf, &hash[i], err);
    plan->cls[i] = SIZE_MAX;
    for (size_t x = 0; st == ULP_OK && x < plan->n_classes; x++) {
        size_t rep = plan->rep[x];
        if (hash[rep] != hash[i])
            continue;
        /* Kept as run i's join when it finds them identical; else the
         * task between the classes compares them again. */
        ulp_ladder_pair *p = &plan->join[i];
        ulp__ladder_pair_release(p);
        *p = (ulp_ladder_pair){.a = rep, .b = i, .rung = ULP_DIFF_LADDER_NONE};
        if ((st = ulp__ladder_compare_pair(c, p, err)) != ULP_OK)
            break;
        if (p->identical && p->ranks_only_a == 0 && p->ranks_only_b == 0) {
            plan->cls[i] = x;
            break;
        }
    }
    if (st == ULP_OK && plan->cls[i] == SIZE_MAX) {
        ulp__ladder_pair_release(&plan->join[i]);
        plan->rep[plan->n_classes] = i;
        plan->cls[i] = plan->n_classes++;
    } else {
        ulp__ladder_close_run(c, i);
    }
    return st;
}

ulp_status ulp__ladder_plan_build(const ulp__ladder_ctx *c, ulp__ladder_plan *plan, ulp_error *err)
{
    ulp_ladder_result *r = c->r;
    size_t n = r->n_runs, max_run = 0;
    free(plan->hash);
    free(plan->buf);
    plan->hash = NULL;
    plan->buf = NULL;
    for (size_t i = 0; i < n; i++)
        max_run = r->runs[i].n_run > max_run ? r->runs[i].n_run : max_run;
    plan->keys = calloc(2 * max_run + 1, sizeof *plan->keys);
    if (!plan->keys)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    size_t nc = plan->n_classes;
    if ((plan->task_of = malloc(nc * nc * sizeof *plan->task_of)) == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    /* An ordered pair of classes (X, Y) is needed when some run of X precedes
     * one of Y: when X's first run precedes Y's last. */
    size_t *last = calloc(nc + 1, sizeof *last);
    if (last == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        last[plan->cls[i]] = i;
    for (size_t q = 0; q < nc * nc; q++) {
        size_t x = q / nc, y = q % nc;
        plan->task_of[q] = x != y && plan->rep[x] < last[y] ? plan->n_tasks++ : SIZE_MAX;
    }
    free(last);
    plan->tasks = calloc(plan->n_tasks + 1, sizeof *plan->tasks);
    if (plan->tasks == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t q = 0; q < nc * nc; q++)
        if (plan->task_of[q] != SIZE_MAX) {
            ulp_ladder_pair *t = &plan->tasks[plan->task_of[q]];
            t->a = plan->rep[q / nc];
            t->b = plan->rep[q % nc];
            t->rung = ULP_DIFF_LADDER_NONE;
        }
    return ULP_OK;
}

void ulp__ladder_plan_release(ulp__ladder_plan *plan)
{
    for (size_t t = 0; plan->tasks && t < plan->n_tasks; t++)
        ulp__ladder_pair_release(&plan->tasks[t]);
    for (size_t i = 0; plan->join && i < plan->n_runs; i++)
        ulp__ladder_pair_release(&plan->join[i]);
    free(plan->tasks);
    free(plan->task_of);
    free(plan->cls);
    free(plan->rep);
    free(plan->join);
    free(plan->keys);
    free(plan->hash);
    free(plan->buf);
    memset(plan, 0, sizeof *plan);
}
