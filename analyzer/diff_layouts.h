/*
 * diff_layouts.c: a site's tensor made out of a side's fused or sharded
 * captures, for pairing by site (docs/sites.md "Layouts").
 */
#ifndef ULPPROF_ANALYZER_DIFF_LAYOUTS_H
#define ULPPROF_ANALYZER_DIFF_LAYOUTS_H

#include "diff_priv.h"

/* A site's tensor on one side: runs of its captures, the capture the
 * row names (the fused one, or shard 0) and what was done, for the report. */
typedef struct ulp__lview {
    ulp__lruns runs;
    size_t cap;
    char desc[160];
} ulp__lview;

/* The rank of capture c among the captures of `key` in s (seq order). */
size_t ulp__layout_rank(const ulp_snapshot *s, const ulp__names *names, const char *key,
                        const ulp_capture_info *c);

/*
 * The j-th `site`@layer tensor of shape part->shape made from side `side`'s
 * captures (snapshot s, its names by key): from the fused capture that
 * holds it, or from its column shards.  1 with v filled; 0 when that side
 * has neither; -1 when the shapes do not fit the layout (an error naming
 * the file and capture in err); -2 out of memory.
 */
int ulp__layout_view(const ulp_snapshot *s, const ulp__names *names, const ulp__site_keys *sk,
                     int side, const char *site, int32_t layer, size_t j,
                     const ulp_capture_info *part, ulp__lview *v, ulp_error *err);

/* 1 when capture i of `side`, fused or a shard, is compared through the
 * other side's captures (their names `other`): the other side holds its
 * parts, or the whole tensor its shards make. */
int ulp__layout_consumed(const ulp__names *other, const ulp__site_keys *sk, int side, size_t i);

/* 1 when two captures of fused `site` hold it in one layout. */
int ulp__layout_same(const ulp__layout *x, const ulp__layout *y, const char *site);

#endif /* ULPPROF_ANALYZER_DIFF_LAYOUTS_H */
