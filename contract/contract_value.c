/*
 * A contract as an object: reading, writing, freeing; the value helpers the
 * check and the compare share; and the numerical_policy digest.
 *
 * The digest is SHA-256 of the canonical JSON (keys sorted, no spaces,
 * ASCII, reals with 17 significant digits) of {group: {field: value}} over
 * the fields marked bit-relevant in the schema's table -- the GEMM sites,
 * reduction, collective, quant, scheduler (not step_rows), kv, sampling
 * and identity's dtype and capture_dtypes -- with each field's value
 * (observed, else declared; unobservable fields left out).  Whether a value
 * was observed or declared does not change the bits, so it is not hashed;
 * who ran (model, engine, device, BLAS), the claims and the tolerances are
 * not the policy and are not hashed either.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "contract_priv.h"
#include "contract_sha256.h"

char *ulp__canonical(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_ENCODE_ANY |
                             JSON_REAL_PRECISION(17));
}

const char *ulp__field_source(const json_t *field)
{
    const char *s = json_string_value(json_object_get(field, "source"));
    return s ? s : "unobservable";
}

const json_t *ulp__field_promise(const json_t *field)
{
    const json_t *d = json_object_get(field, "declared");
    return d ? d : json_object_get(field, "value");
}

static json_t *policy_object(const json_t *root)
{
    json_t *p = json_object();
    for (size_t i = 0; i < ulp__n_cfields; i++) {
        const ulp__cfield *f = &ulp__cfields[i];
        json_t *v =
            json_object_get(json_object_get(json_object_get(root, f->group), f->name), "value");
        if (!f->digest || !v)
            continue;
        json_t *g = json_object_get(p, f->group);
        if (!g)
            json_object_set_new(p, f->group, g = json_object());
        json_object_set(g, f->name, v);
    }
    json_t *gemm = json_object_get(root, "gemm");
    const char *site;
    json_t *s;
    json_object_foreach(gemm, site, s)
    {
        json_t *o = json_object();
        const char *name;
        json_t *f;
        json_object_foreach(s, name, f)
        {
            json_t *v = json_object_get(f, "value");
            if (v)
                json_object_set(o, name, v);
        }
        if (!json_object_get(p, "gemm"))
            json_object_set_new(p, "gemm", json_object());
        json_object_set_new(json_object_get(p, "gemm"), site, o);
    }
    return p;
}

ulp_contract *ulp__contract_wrap(json_t *root)
{
    ulp_contract *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->root = root;
    json_t *p = policy_object(root);
    char *text = ulp__canonical(p);
    json_decref(p);
    char hex[65] = "";
    if (text)
        ulp__sha256_hex(text, strlen(text), hex);
    free(text);
    snprintf(c->digest, sizeof c->digest, "sha256:%s", hex);
    return c;
}

ulp_status ulp_contract_read(const char *path, ulp_contract **out, ulp_error *err)
{
    *out = NULL;
    json_error_t je;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ulp__error(err, errno == ENOENT ? ULP_ENOENT : ULP_EIO, "cannot open '%s': %s", path,
                          strerror(errno));
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!root)
        return ulp__error(err, ULP_EFORMAT, "%s: not JSON: line %d: %s", path, je.line, je.text);
    ulp_status st = ulp__contract_validate(root, path, err);
    if (st != ULP_OK) {
        json_decref(root);
        return st;
    }
    ulp_contract *c = ulp__contract_wrap(root);
    if (!c) {
        json_decref(root);
        return ulp__error(err, ULP_ENOMEM, "%s: out of memory", path);
    }
    const char *np = json_string_value(json_object_get(root, "numerical_policy"));
    if (np && strcmp(np, c->digest) != 0) {
        st = ulp__error(err, ULP_EFORMAT,
                        "%s: numerical_policy %s does not match its fields (%s): edited after "
                        "emit? drop the key to have it made again",
                        path, np, c->digest);
        ulp_contract_free(c);
        return st;
    }
    *out = c;
    return ULP_OK;
}

ulp_status ulp_contract_write(const ulp_contract *c, FILE *f, ulp_error *err)
{
    json_object_set_new(c->root, "numerical_policy", json_string(c->digest));
    if (json_dumpf(c->root, f,
                   JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(17)) !=
            0 ||
        fputc('\n', f) == EOF)
        return ulp__error(err, ULP_EIO, "cannot write the contract: %s", strerror(errno));
    return ULP_OK;
}

const char *ulp_contract_digest(const ulp_contract *c)
{
    return c->digest;
}

void ulp_contract_free(ulp_contract *c)
{
    if (!c)
        return;
    json_decref(c->root);
    free(c);
}

/* Text of a scalar for the loose comparison: strings as they are, the rest as JSON. */
static char *scalar_text(const json_t *v)
{
    if (json_is_string(v))
        return strdup(json_string_value(v));
    return ulp__canonical(v);
}

int ulp__value_equal(const json_t *a, const json_t *b)
{
    if (!a || !b)
        return a == b;
    if (json_equal(ulp__mut(a), ulp__mut(b)))
        return 1;
    if (json_is_array(a) || json_is_array(b) || json_is_object(a) || json_is_object(b)) {
        if (json_is_array(a) && json_is_array(b) && json_array_size(a) == json_array_size(b)) {
            for (size_t i = 0; i < json_array_size(a); i++)
                if (!ulp__value_equal(json_array_get(a, i), json_array_get(b, i)))
                    return 0;
            return 1;
        }
        return 0;
    }
    char *x = scalar_text(a), *y = scalar_text(b);
    int eq = x && y && strcmp(x, y) == 0;
    free(x);
    free(y);
    return eq;
}

char *ulp__value_text(const json_t *v)
{
    if (!v)
        return strdup("-");
    return json_is_string(v) ? strdup(json_string_value(v)) : ulp__canonical(v);
}

json_t *ulp__config_scheme(const json_t *config)
{
    json_t *o = json_deep_copy(config);
    json_object_del(o, "m");
    json_object_del(o, "n");
    json_object_del(o, "k");
    json_object_del(o, "batch");
    return o;
}

int ulp__config_same_shape(const json_t *a, const json_t *b)
{
    const char *keys[] = {"n", "k", "batch"};
    for (size_t i = 0; i < 3; i++) {
        const json_t *x = json_object_get(a, keys[i]), *y = json_object_get(b, keys[i]);
        if ((x || y) && !(x && y && ulp__value_equal(x, y)))
            return 0;
    }
    return 1;
}

char *ulp__config_text(const json_t *c)
{
    char buf[256];
    size_t len = 0;
    buf[0] = '\0';
    const char *keys[] = {"m", "algo", "tile", "stages", "splitk", "reduction"};
    const char *words[] = {"M=", "", "", "stages ", "split-K ", "reduction "};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(c, keys[i]);
        if (!v || (json_is_string(v) && !*json_string_value(v)))
            continue;
        char *t = ulp__value_text(v);
        len += (size_t)snprintf(buf + len, len < sizeof buf ? sizeof buf - len : 0, "%s%s%s",
                                len ? " " : "", words[i], t ? t : "?");
        free(t);
        if (len >= sizeof buf)
            break;
    }
    return strdup(buf);
}
