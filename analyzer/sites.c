/*
 * Logical sites (ulpprof/sites.h, docs/sites.md): the vocabulary, the
 * built-in naming rules and the rules of a map file.
 *
 * A built-in rule is a dotted module path whose `#` component is the layer
 * number; it matches the last components of a name (any prefix before
 * them: `model.`, `module.`, `base_model.model.`), or the whole name when
 * it starts with `^`.  A name of the ONNX exporter
 * (`/model/layers.0/self_attn/q_proj/MatMul_output_0`, or with its `/`
 * written as `.`, which a capture name may not hold) is the module scope
 * it was made in: the last component, the node's output, is dropped.
 */
#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "layouts.h"
#include "sites_priv.h"
#include "ulpprof/sites.h"

/* The vocabulary; per-layer sites first.  docs/sites.md says what each is. */
static const char *const layer_sites[] = {
    "input_norm",     "q",    "k",  "v",       "qkv", "attn_core", "o_proj", "attn", "attn_resid",
    "post_attn_norm", "gate", "up", "gate_up", "act", "down",      "mlp",    "out",  "k_cache",
    "v_cache",
};
static const char *const model_sites[] = {"embed", "final_norm", "logits"};

#define N_LAYER_SITES (sizeof layer_sites / sizeof layer_sites[0])
#define N_MODEL_SITES (sizeof model_sites / sizeof model_sites[0])

/* The site's canonical string, or NULL when unknown; *per_layer. */
static const char *site_find(const char *s, int *per_layer)
{
    for (size_t i = 0; i < N_LAYER_SITES; i++)
        if (strcmp(s, layer_sites[i]) == 0) {
            *per_layer = 1;
            return layer_sites[i];
        }
    for (size_t i = 0; i < N_MODEL_SITES; i++)
        if (strcmp(s, model_sites[i]) == 0) {
            *per_layer = 0;
            return model_sites[i];
        }
    return NULL;
}

int ulp_site_known(const char *site)
{
    int pl;
    return site != NULL && site_find(site, &pl) != NULL;
}

/*
 * The built-in rules, most specific first.  Checked against the real
 * module trees of HF transformers, Megatron-Core, vLLM, SGLang and the
 * reference workload (tests/python/test_sites_real.py; docs/sites.md says
 * which versions and how) and against ONNX Runtime's outputs of an
 * exported HF model (tests/python/test_sites_onnx.py).
 */
static const struct {
    const char *pattern, *site;
} builtin[] = {
    /* Llama-family decoder layers: HF transformers, vLLM, SGLang. */
    {"layers.#.input_layernorm", "input_norm"},
    {"layers.#.self_attn.q_proj", "q"},
    {"layers.#.self_attn.k_proj", "k"},
    {"layers.#.self_attn.v_proj", "v"},
    {"layers.#.self_attn.qkv_proj", "qkv"},
    {"layers.#.self_attn.attn", "attn_core"},
    {"layers.#.self_attn.o_proj", "o_proj"},
    {"layers.#.self_attn", "attn"},
    {"layers.#.post_attention_layernorm", "post_attn_norm"},
    {"layers.#.mlp.gate_proj", "gate"},
    {"layers.#.mlp.up_proj", "up"},
    {"layers.#.mlp.gate_up_proj", "gate_up"},
    {"layers.#.mlp.act_fn", "act"},
    {"layers.#.mlp.activation_fn", "act"}, /* Phi-3 (HF) */
    {"layers.#.mlp.down_proj", "down"},
    {"layers.#.mlp", "mlp"},
    {"layers.#.block_sparse_moe", "mlp"}, /* Mixtral's MoE block: HF 4.x, vLLM, SGLang */
    /* GPT-NeoX (HF). */
    {"layers.#.attention.query_key_value", "qkv"},
    {"layers.#.attention.dense", "o_proj"},
    {"layers.#.attention", "attn"},
    {"layers.#.mlp.dense_h_to_4h", "up"},
    {"layers.#.mlp.act", "act"},
    {"layers.#.mlp.dense_4h_to_h", "down"},
    /* Megatron-Core GPTModel. */
    {"layers.#.self_attention.linear_qkv", "qkv"},
    {"layers.#.self_attention.core_attention", "attn_core"},
    {"layers.#.self_attention.linear_proj", "o_proj"},
    {"layers.#.self_attention", "attn"},
    {"layers.#.pre_mlp_layernorm", "post_attn_norm"},
    {"layers.#.mlp.linear_fc1", "gate_up"},
    {"layers.#.mlp.linear_fc2", "down"},
    /* GPT-2 (HF). */
    {"h.#.ln_1", "input_norm"},
    {"h.#.attn.c_attn", "qkv"},
    {"h.#.attn.c_proj", "o_proj"},
    {"h.#.attn", "attn"},
    {"h.#.ln_2", "post_attn_norm"},
    {"h.#.mlp.c_fc", "up"},
    {"h.#.mlp.act", "act"},
    {"h.#.mlp.c_proj", "down"},
    {"h.#.mlp", "mlp"},
    {"h.#", "out"},
    /* The reference workload (`ulpprof demo`). */
    {"layers.#.attn_out", "attn"},
    {"layers.#.mlp_out", "mlp"},
    {"layers.#.out", "out"},
    {"lm_head.logits", "logits"},
    /* The decoder layer itself. */
    {"layers.#", "out"},
    /* KV cache outputs of an exported graph. */
    {"present.#.key", "k_cache"},
    {"present.#.value", "v_cache"},
    /* Outside the layers. */
    {"embed_tokens", "embed"},
    {"transformer.wte", "embed"},
    {"gpt_neox.embed_in", "embed"},
    {"embedding.word_embeddings", "embed"},
    {"^embedding", "embed"},
    {"model.norm", "final_norm"},
    {"transformer.ln_f", "final_norm"},
    {"gpt_neox.final_layer_norm", "final_norm"},
    {"decoder.final_layernorm", "final_norm"},
    {"lm_head", "logits"},
    {"embed_out", "logits"},
    {"output_layer", "logits"},
    {"logits_processor", "logits"},
    {"^logits", "logits"},
};

/* The layouts of the built-in fused sites (layouts.c); the others' captures
 * are the site's tensor. */
static const struct {
    const char *pattern;
    ulp__layout_kind layout;
} builtin_layouts[] = {
    {"layers.#.self_attn.qkv_proj", ULP__LAYOUT_QKV},
    {"h.#.attn.c_attn", ULP__LAYOUT_QKV},
    {"layers.#.mlp.gate_up_proj", ULP__LAYOUT_GATE_UP},
    {"layers.#.attention.query_key_value", ULP__LAYOUT_QKV_GROUPS},
    {"layers.#.self_attention.linear_qkv", ULP__LAYOUT_QKV_GROUPS},
    {"layers.#.mlp.linear_fc1", ULP__LAYOUT_GATE_UP},
};

typedef struct user_rule {
    regex_t re;
    const char *site;
    int per_layer, groups;
    ulp__layout layout; /* `[...]` after the site; kind NONE when none */
} user_rule;

struct ulp_site_map {
    user_rule *rules;
    size_t n;
};

#define MAX_COMPONENTS 64

/* Splits `s` (modified) at `sep` into comps; the count, or -1 when too many. */
static int split(char *s, char sep, char **comps)
{
    int n = 0;
    for (char *p = s;;) {
        if (n == MAX_COMPONENTS)
            return -1;
        comps[n++] = p;
        char *q = strchr(p, sep);
        if (q == NULL)
            return n;
        *q = '\0';
        p = q + 1;
    }
}

static int all_digits(const char *s)
{
    if (*s == '\0' || strlen(s) > 9)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

/* `Gather_output_0`, `MatMul_1_output_0`: a node's output in an ONNX graph. */
static int onnx_output(const char *s)
{
    const char *o = strstr(s, "_output_");
    if (o == NULL || o == s || !isupper((unsigned char)s[0]) || !all_digits(o + 8))
        return 0;
    for (const char *p = s; p < o; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return 0;
    return 1;
}

/* Does rule `pat` match the components comps[0..n)?  *layer when it has `#`. */
static int rule_match(const char *pat, char **comps, int n, int32_t *layer)
{
    char buf[128], *pc[MAX_COMPONENTS];
    int anchored = pat[0] == '^';
    snprintf(buf, sizeof buf, "%s", pat + anchored);
    int np = split(buf, '.', pc);
    if (np < 0 || np > n || (anchored && np != n))
        return 0;
    int32_t l = -1;
    for (int i = 0; i < np; i++) {
        const char *c = comps[n - np + i];
        if (strcmp(pc[i], "#") == 0) {
            if (!all_digits(c))
                return 0;
            l = (int32_t)strtol(c, NULL, 10);
        } else if (strcmp(pc[i], c) != 0) {
            return 0;
        }
    }
    *layer = l;
    return 1;
}

static const char *builtin_lookup(const char *name, int32_t *layer, ulp__layout *lay)
{
    char buf[1024], *comps[MAX_COMPONENTS];
    if (strlen(name) >= sizeof buf)
        return NULL;
    /* An ONNX exporter name: `/`-separated, or written with `.` from the start. */
    int onnx = name[0] == '/' || name[0] == '.';
    snprintf(buf, sizeof buf, "%s", name + onnx);
    if (onnx)
        for (char *p = buf; *p; p++)
            if (*p == '/')
                *p = '.';
    int n = split(buf, '.', comps);
    if (n < 0)
        return NULL;
    if (onnx && n > 1 && onnx_output(comps[n - 1]))
        n--;
    for (size_t r = 0; r < sizeof builtin / sizeof builtin[0]; r++)
        if (rule_match(builtin[r].pattern, comps, n, layer)) {
            for (size_t q = 0; q < sizeof builtin_layouts / sizeof builtin_layouts[0]; q++)
                if (strcmp(builtin_layouts[q].pattern, builtin[r].pattern) == 0)
                    lay->kind = builtin_layouts[q].layout;
            return builtin[r].site;
        }
    return NULL;
}

/* A rule's group g of `name` as a number (user group g is group g + 1 of
 * the anchored expression); -1 when it did not match digits. */
static int64_t group_number(const char *name, const regmatch_t *g, int k)
{
    char num[16];
    if (g[k].rm_so < 0)
        return -1;
    size_t len = (size_t)(g[k].rm_eo - g[k].rm_so);
    if (len == 0 || len >= sizeof num)
        return -1;
    memcpy(num, name + g[k].rm_so, len);
    num[len] = '\0';
    return all_digits(num) ? strtol(num, NULL, 10) : -1;
}

const char *ulp__site_lookup_layout(const ulp_site_map *m, const char *name, int32_t layer_attr,
                                    int32_t *layer, ulp__layout *lay)
{
    *layer = -1;
    memset(lay, 0, sizeof *lay);
    if (name == NULL)
        return NULL;
    for (size_t i = 0; m != NULL && i < m->n; i++) {
        const user_rule *u = &m->rules[i];
        regmatch_t g[11];
        if (regexec(&u->re, name, 11, g, 0) != 0)
            continue;
        *lay = u->layout;
        if (lay->kind == ULP__LAYOUT_SHARD && lay->rank_group > 0) {
            int64_t r = group_number(name, g, lay->rank_group + 1);
            if (r < 0 || r >= lay->nranks)
                continue; /* not a shard this rule describes */
            lay->rank = r;
        }
        if (!u->per_layer)
            return u->site;
        *layer = layer_attr;
        if (u->groups >= 1 && g[2].rm_so >= 0) {
            int64_t l = group_number(name, g, 2);
            if (l < 0)
                continue;
            *layer = (int32_t)l;
        }
        return u->site;
    }
    const char *s = builtin_lookup(name, layer, lay);
    int per_layer = 0;
    if (s != NULL && site_find(s, &per_layer) != NULL && !per_layer)
        *layer = -1;
    return s;
}

const char *ulp_site_lookup(const ulp_site_map *m, const char *name, int32_t layer_attr,
                            int32_t *layer)
{
    ulp__layout lay;
    return ulp__site_lookup_layout(m, name, layer_attr, layer, &lay);
}

void ulp_site_map_free(ulp_site_map *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->n; i++)
        regfree(&m->rules[i].re);
    free(m->rules);
    free(m);
}

/* One line of a map file into a new rule of m: ULP_OK, or an error naming path:line. */
static ulp_status parse_line(ulp_site_map *m, char *line, const char *path, int lineno,
                             ulp_error *err)
{
    char *p = line;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '\0' || *p == '#')
        return ULP_OK;
    char *end = p + strlen(p);
    while (end > p && isspace((unsigned char)end[-1]))
        *--end = '\0';
    /* `PATTERN SITE [LAYOUT]`: a line ending in `]` carries a layout (a
     * site never ends so, and a pattern is never last). */
    ulp__layout lay;
    memset(&lay, 0, sizeof lay);
    if (end > p && end[-1] == ']') {
        char *open = strrchr(p, '[');
        char why[200];
        if (open == NULL || open == p || !isspace((unsigned char)open[-1]))
            return ulp__error(err, ULP_EINVAL, "'%s' line %d: expected 'PATTERN SITE [LAYOUT]'",
                              path, lineno);
        end[-1] = '\0';
        if (ulp__layout_parse(open + 1, &lay, why, sizeof why) != 0)
            return ulp__error(err, ULP_EINVAL, "'%s' line %d: %s", path, lineno, why);
        end = open;
        while (end > p && isspace((unsigned char)end[-1]))
            *--end = '\0';
    }
    char *sp = end;
    while (sp > p && !isspace((unsigned char)sp[-1]))
        sp--;
    if (sp == p)
        return ulp__error(err, ULP_EINVAL, "'%s' line %d: expected 'PATTERN SITE'", path, lineno);
    const char *site = sp;
    char *pe = sp;
    while (pe > p && isspace((unsigned char)pe[-1]))
        pe--;
    *pe = '\0';
    int per_layer = 0;
    const char *canon = site_find(site, &per_layer);
    if (canon == NULL)
        return ulp__error(err, ULP_EINVAL, "'%s' line %d: unknown site '%s' (docs/sites.md)", path,
                          lineno, site);
    /* Anchored: `^(PATTERN)$`, so the pattern's own first group is group 2. */
    char re[1100];
    if (snprintf(re, sizeof re, "^(%s)$", p) >= (int)sizeof re)
        return ulp__error(err, ULP_EINVAL, "'%s' line %d: pattern too long", path, lineno);
    user_rule *u = &m->rules[m->n];
    if (regcomp(&u->re, re, REG_EXTENDED) != 0)
        return ulp__error(err, ULP_EINVAL, "'%s' line %d: bad regular expression '%s'", path,
                          lineno, p);
    size_t groups = u->re.re_nsub - 1;
    const char *fused = lay.kind == ULP__LAYOUT_NONE || lay.kind == ULP__LAYOUT_SHARD ||
                                lay.kind == ULP__LAYOUT_SHARD_FILE
                            ? NULL
                        : lay.kind == ULP__LAYOUT_GATE_UP ? "gate_up"
                                                          : "qkv";
    const char *bad = NULL;
    if (fused != NULL && strcmp(canon, fused) != 0)
        bad = "the layout is that of another site";
    else if (lay.kind == ULP__LAYOUT_SHARD && lay.rank_group > 0 && (size_t)lay.rank_group > groups)
        bad = "the shard's rank group is not a group of the pattern";
    else if (lay.kind == ULP__LAYOUT_SHARD && (lay.rank_group == 1 && per_layer && groups >= 1))
        bad = "group 1 is the layer number";
    else if (lay.kind == ULP__LAYOUT_SHARD && !per_layer)
        bad = "shards are of a layer's site";
    if (bad != NULL) {
        regfree(&u->re);
        return ulp__error(err, ULP_EINVAL, "'%s' line %d: %s (%s)", path, lineno, bad, canon);
    }
    u->layout = lay;
    u->site = canon;
    u->per_layer = per_layer;
    u->groups = (int)groups;
    m->n++;
    return ULP_OK;
}

ulp_status ulp_site_map_open(const char *path, ulp_site_map **out, ulp_error *err)
{
    *out = NULL;
    ulp_site_map *m = calloc(1, sizeof *m);
    if (m == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    if (path == NULL) {
        *out = m;
        return ULP_OK;
    }
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        ulp_site_map_free(m);
        return ulp__error(err, ULP_EIO, "cannot open site map '%s': %s", path, strerror(errno));
    }
    char line[2048];
    size_t cap = 0;
    int lineno = 0;
    ulp_status st = ULP_OK;
    while (st == ULP_OK && fgets(line, sizeof line, f) != NULL) {
        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            st = ulp__error(err, ULP_EINVAL, "'%s' line %d: line too long", path, lineno);
            break;
        }
        if (m->n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            user_rule *r = realloc(m->rules, nc * sizeof *r);
            if (r == NULL) {
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
                break;
            }
            m->rules = r;
            cap = nc;
        }
        st = parse_line(m, line, path, lineno, err);
    }
    if (st == ULP_OK && ferror(f))
        st = ulp__error(err, ULP_EIO, "cannot read site map '%s'", path);
    fclose(f);
    if (st == ULP_OK && m->n == 0)
        st = ulp__error(err, ULP_EINVAL, "site map '%s' holds no rule", path);
    if (st != ULP_OK) {
        ulp_site_map_free(m);
        return st;
    }
    *out = m;
    return ULP_OK;
}
