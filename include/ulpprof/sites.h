/*
 * Logical sites (docs/sites.md): what a captured tensor *is* in a
 * transformer -- the embedding, a layer's q projection, its MLP's down
 * projection, the logits -- whatever an implementation calls it.  Two runs
 * of one model in two engines name their tensors differently
 * (`model.layers.0.self_attn.q_proj` in HF transformers,
 * `/model/layers.0/self_attn/q_proj/MatMul_output_0` from the ONNX
 * exporter, `decoder.layers.0.self_attention.linear_qkv` in Megatron-Core);
 * `ulpprof diff --by site` pairs them by (site, layer).
 *
 * A site map is the built-in naming rules of HF transformers, vLLM,
 * SGLang, Megatron-Core, the ONNX exporter and the reference workload,
 * with a user's rules (a map file) tried first.
 */
#ifndef ULPPROF_SITES_H
#define ULPPROF_SITES_H

#include <stdint.h>

#include "ulpprof/export.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ulp_site_map ulp_site_map;

/*
 * The built-in rules, and the rules of the map file at `path` before them
 * (NULL: the built-in rules only).  A map file holds one rule a line,
 * `PATTERN SITE` or `PATTERN SITE [LAYOUT]`: PATTERN a POSIX extended
 * regular expression matched against the whole capture name, whose first
 * group, when it has one, is the layer number; `#` starts a comment line.
 * LAYOUT says how the capture holds its site's tensor (docs/sites.md
 * "Layouts"):
 *   [qkv]                   q | k | v blocks on the last axis
 *   [qkv Hq=N Hkv=N D=N]    the same, the head counts and size checked
 *                           (and needed to join tensor-parallel ranks)
 *   [qkv-groups D=N]        per KV group: its q heads, its k, its v
 *                           (Megatron-Core; D the head size)
 *   [gate_up]               gate | up halves on the last axis
 *   [shard R/N] [shard R/N cols]
 *                           column-parallel shard R of N in one snapshot
 *                           (R a number or \G, group G of PATTERN)
 *   [shard rank]            a column-parallel shard whose rank is its
 *                           file's (ulp_tp_join)
 * `[shard R/N rows]` is refused: row-parallel shards are compared after
 * the all-reduce.  Errors name the file and line (ULP_EINVAL), or the file
 * (ULP_EIO).
 */
ULP_API ulp_status ulp_site_map_open(const char *path, ulp_site_map **out, ulp_error *err);
ULP_API void ulp_site_map_free(ulp_site_map *m);

/*
 * The site of capture `name`: its vocabulary name ("q", "o_proj",
 * "logits", ...; docs/sites.md) and *layer (-1 for a site outside the
 * layers; for a rule without a layer number, `layer_attr`, the capture's
 * layer attribute), or NULL when no rule knows the name.
 */
ULP_API const char *ulp_site_lookup(const ulp_site_map *m, const char *name, int32_t layer_attr,
                                    int32_t *layer);

/* 1 when `site` is a name of the vocabulary, 0 otherwise. */
ULP_API int ulp_site_known(const char *site);

/* What ulp_tp_join() did: allocated by the library (fields may be appended),
 * freed with ulp_tp_join_info_free(). */
typedef struct ulp_tp_join_info {
    size_t ranks;             /* files joined (ranks 0..ranks-1)                    */
    size_t joined;            /* captures joined on the last axis (column-parallel) */
    size_t replicated;        /* captures every rank holds whole: rank 0's taken    */
    size_t disagree;          /* of those, captures where some rank's bits differ   */
    char first_disagree[256]; /* the first such capture's name; "" if none */
    int64_t first_disagree_occurrence;
    size_t first_disagree_rank;       /* the first rank that differs     */
    uint64_t first_disagree_elements; /* its elements that differ ...    */
    uint64_t first_disagree_of;       /* ... of this many                */
} ulp_tp_join_info;

/*
 * Joins a tensor-parallel run directory -- one snapshot a rank, as
 * `record -o DIR/%r.h5` writes them (ranks from /env `rank`, 0..N-1) --
 * into one snapshot at `out`, as one unsharded run would have captured it
 * (docs/sites.md "Tensor-parallel runs").  Each capture of rank 0 is
 * matched by name and occurrence in every rank.  Column-parallel sites
 * (q, k, v, attn_core, gate, up, act, and a map rule's `[shard rank]`)
 * are joined on the last axis in rank order; fused ones part by part
 * (gate_up: each rank's gate | up halves; qkv: each rank's q | k | v,
 * which needs `[qkv Hq=N Hkv=N D=N]` in the map, or the per-group layout,
 * whose groups the ranks hold whole).  Every other capture (row-parallel
 * outputs after their all-reduce, norms, embeddings, logits) must have
 * one shape on every rank: rank 0's is written, and **info says whether
 * the ranks agree bit for bit (on success *info is the caller's to free,
 * on error NULL).  `site_map` as ulp_site_map_open().
 * Errors (ULP_EINVAL, one sentence naming the file and capture): ranks
 * not 0..N-1, a capture missing from a rank, shards of other dtypes,
 * leading axes or positions, a qkv without head counts.
 */
ULP_API ulp_status ulp_tp_join(const char *dir, const char *site_map, const char *out,
                               ulp_tp_join_info **info, ulp_error *err);

/* Frees what ulp_tp_join() returned in *info; NULL is accepted. */
ULP_API void ulp_tp_join_info_free(ulp_tp_join_info *info);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_SITES_H */
