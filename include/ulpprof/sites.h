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
 * `PATTERN SITE`: PATTERN a POSIX extended regular expression matched
 * against the whole capture name, whose first group, when it has one, is
 * the layer number; `#` starts a comment line.  Errors name the file and
 * line (ULP_EINVAL), or the file (ULP_EIO).
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

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_SITES_H */
