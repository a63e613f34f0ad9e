/*
 * The verdict of a pair (ulpprof/verdict.h) in the reports: summary lines
 * for the table and Markdown, an object for JSON (FORMAT.md "verdict").
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>

#include "report_priv.h"
#include "ulpprof/verdict.h"

void ulp__report_verdict_text(const ulp_diff_verdict *v, FILE *f, const char *bullet)
{
    fprintf(f, "%sverdict: %s\n", bullet, v->summary ? v->summary : "?");
    for (size_t i = v->kind == ULP_VERDICT_DEFECT ? 1 : 0; i < v->n_evidence; i++)
        fprintf(f, "%sevidence: %s\n", bullet, v->evidence[i]);
    if (v->has_logits)
        fprintf(f,
                "%snear ties: %llu of %llu logits rows have a top-2 margin below 2P (P = %.3g, "
                "the largest |dz|), %llu exact ties; %llu argmax flips, %llu of them in those "
                "rows\n",
                bullet, (unsigned long long)v->near_ties, (unsigned long long)v->logits_rows,
                v->perturbation, (unsigned long long)v->exact_ties, (unsigned long long)v->flips,
                (unsigned long long)v->flips_near);
    if (v->witness != ULP_WITNESS_NOT_CACHE && v->witness_text)
        fprintf(f, "%scache witness: %s\n", bullet, v->witness_text);
    if (v->contract_verdict)
        fprintf(f, "%scontract: %s: %s\n", bullet, v->contract_verdict,
                v->contract_text ? v->contract_text : "");
}

static json_t *num(double x)
{
    return isfinite(x) ? json_real(x) : json_null();
}

json_t *ulp__report_verdict_json(const ulp_diff_verdict *v)
{
    json_t *o = json_object();
    json_object_set_new(o, "kind", ulp_json_str(ulp_verdict_kind_name(v->kind)));
    json_object_set_new(o, "summary", ulp_json_str(v->summary));
    json_t *ev = json_array();
    for (size_t i = 0; i < v->n_evidence; i++)
        json_array_append_new(ev, ulp_json_str(v->evidence[i]));
    json_object_set_new(o, "evidence", ev);
    if (v->has_bound) {
        json_t *b = json_object();
        json_object_set_new(b, "site", ulp_json_str(v->site));
        json_object_set_new(b, "layer", v->layer >= 0 ? json_integer(v->layer) : json_null());
        json_object_set_new(b, "max_abs_diff", num(v->max_abs_diff));
        json_object_set_new(b, "scale", num(v->scale));
        json_object_set_new(b, "k", json_integer(v->k));
        json_object_set_new(b, "k_from", ulp_json_str(v->k_from));
        json_object_set_new(b, "accumulation", ulp_json_str(v->acc));
        json_object_set_new(b, "u_acc", num(v->u_acc));
        json_object_set_new(b, "ulp_out", num(v->ulp_out));
        json_object_set_new(b, "bound", num(v->bound));
        json_object_set_new(b, "ratio", num(v->ratio));
        json_object_set_new(o, "bound", b);
    } else {
        json_object_set_new(o, "bound", json_null());
    }
    json_object_set_new(o, "growth", v->has_growth ? num(v->growth) : json_null());
    if (v->has_logits) {
        json_t *t = json_object();
        json_object_set_new(t, "rows", json_integer((json_int_t)v->logits_rows));
        json_object_set_new(t, "perturbation", num(v->perturbation));
        json_object_set_new(t, "near_ties", json_integer((json_int_t)v->near_ties));
        json_object_set_new(t, "exact_ties", json_integer((json_int_t)v->exact_ties));
        json_object_set_new(t, "flips", json_integer((json_int_t)v->flips));
        json_object_set_new(t, "flips_near", json_integer((json_int_t)v->flips_near));
        json_object_set_new(t, "jump_rows", json_integer((json_int_t)v->jump_rows));
        json_object_set_new(o, "near_ties", t);
    } else {
        json_object_set_new(o, "near_ties", json_null());
    }
    json_object_set_new(o, "cache_witness", ulp_json_str(ulp_cache_witness_name(v->witness)));
    json_object_set_new(o, "cache_witness_text",
                        v->witness_text ? ulp_json_str(v->witness_text) : json_null());
    json_object_set_new(o, "contract",
                        v->contract_verdict ? ulp_json_str(v->contract_verdict) : json_null());
    json_object_set_new(o, "contract_text",
                        v->contract_text ? ulp_json_str(v->contract_text) : json_null());
    return o;
}
