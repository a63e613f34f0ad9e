/*
 * Layouts (docs/sites.md "Layouts"): how a capture holds a site's tensor
 * when it is not the tensor itself -- a fused q/k/v or gate/up projection's
 * output, or one column-parallel shard of it -- and the runs of elements
 * that make the site's tensor out of such captures.  Pure arithmetic on
 * shapes; nothing here reads a snapshot.
 */
#ifndef ULPPROF_ANALYZER_LAYOUTS_H
#define ULPPROF_ANALYZER_LAYOUTS_H

#include <stddef.h>
#include <stdint.h>

typedef enum ulp__layout_kind {
    ULP__LAYOUT_NONE = 0,   /* the capture is the site's tensor                      */
    ULP__LAYOUT_QKV,        /* q | k | v blocks on the last axis (vLLM, SGLang, GPT-2) */
    ULP__LAYOUT_QKV_GROUPS, /* per KV group: q heads of the group, k, v (Megatron-Core
                               linear_qkv; GPT-NeoX with one q head a group)       */
    ULP__LAYOUT_GATE_UP,    /* gate | up halves on the last axis                     */
    ULP__LAYOUT_SHARD,      /* column-parallel shard `rank` of `nranks` (last axis)   */
    ULP__LAYOUT_SHARD_FILE, /* `[shard rank]`: a column-parallel shard whose rank is
                               its file's, joined by ulp_tp_join (tp_join.c); one
                               snapshot holds the capture as it is                 */
} ulp__layout_kind;

typedef struct ulp__layout {
    ulp__layout_kind kind;
    int64_t hq, hkv, d;   /* qkv: 0 where not declared (then from the shapes)  */
    int64_t rank, nranks; /* shard                                              */
    int rank_group;       /* shard: the map rule's group that holds the rank;
                             0 when `rank` is given                            */
} ulp__layout;

/*
 * Parses the text between a map rule's brackets ("qkv", "qkv Hq=4 Hkv=2
 * D=8", "qkv-groups D=8", "gate_up", "shard 1/2", "shard \2/4").  0, or -1
 * with a sentence in why[0..n).
 */
int ulp__layout_parse(const char *spec, ulp__layout *out, char *why, size_t n);

/* The fused site that holds `part` ("qkv" for q, k, v; "gate_up" for
 * gate, up), or NULL. */
const char *ulp__layout_fused_site(const char *part);

/* A run of elements: `len` elements from element `off` of capture `cap`,
 * elements [base, base + len) of the site's tensor. */
typedef struct ulp__lrun {
    size_t cap;
    uint64_t off, len, base;
} ulp__lrun;
typedef struct ulp__lruns {
    ulp__lrun *v;
    size_t n, cap;
} ulp__lruns;

/*
 * The runs of `part` (q, k, v, gate or up) of shape part_shape[0..ndim)
 * inside capture `cap` of layout `l` and shape fused_shape[0..ndim),
 * appended to `out`.  0; -1 when the shapes do not fit the layout (a
 * sentence in why[0..n)); -2 out of memory.
 */
int ulp__layout_split(const ulp__layout *l, const char *part, int ndim, const int64_t *part_shape,
                      const int64_t *fused_shape, size_t cap, ulp__lruns *out, char *why, size_t n);

/*
 * The runs of the whole tensor of shape whole[0..ndim) from its nranks
 * column shards, caps[r] of shape shapes[r][0..ndim), concatenated on the
 * last axis in rank order; 0, -1 (why) or -2 as above.
 */
int ulp__layout_concat(int ndim, const int64_t *whole, size_t nranks, const size_t *caps,
                       const int64_t *const *shapes, ulp__lruns *out, char *why, size_t n);

/* What the layout does to `part`, for the reports: "q of qkv q|k|v",
 * "k of qkv per group (D=8)", "2 column shards", into buf[0..n). */
void ulp__layout_describe(const ulp__layout *l, const char *part, size_t nranks, char *buf,
                          size_t n);

#endif /* ULPPROF_ANALYZER_LAYOUTS_H */
