/*
 * The verdict of a pair (ulpprof/verdict.h) in the reports: summary lines
 * for the table and Markdown, an object for JSON (FORMAT.md "verdict").
 */
#include <math.h>
#include <stdio.h>

#include "report_json_out.h"
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

static void jbound(ulp__jw *w, const ulp_diff_verdict *v)
{
    if (!ulp__jw_kobject_or_null(w, "bound", v->has_bound))
        return;
    ulp__jw_kstr(w, "site", v->site);
    ulp__jw_kint_or_null(w, "layer", v->layer >= 0, v->layer);
    ulp__jw_knum(w, "max_abs_diff", v->max_abs_diff);
    ulp__jw_knum(w, "scale", v->scale);
    ulp__jw_key(w, "k");
    ulp__jw_int(w, (int64_t)v->k);
    ulp__jw_kstr(w, "k_from", v->k_from);
    ulp__jw_kstr(w, "accumulation", v->acc);
    ulp__jw_knum(w, "u_acc", v->u_acc);
    ulp__jw_knum(w, "ulp_out", v->ulp_out);
    ulp__jw_knum(w, "bound", v->bound);
    ulp__jw_knum(w, "ratio", v->ratio);
    ulp__jw_close(w, '}');
}

static void jties(ulp__jw *w, const ulp_diff_verdict *v)
{
    if (!ulp__jw_kobject_or_null(w, "near_ties", v->has_logits))
        return;
    ulp__jw_ku64(w, "rows", v->logits_rows);
    ulp__jw_knum(w, "perturbation", v->perturbation);
    ulp__jw_ku64(w, "near_ties", v->near_ties);
    ulp__jw_ku64(w, "exact_ties", v->exact_ties);
    ulp__jw_ku64(w, "flips", v->flips);
    ulp__jw_ku64(w, "flips_near", v->flips_near);
    ulp__jw_ku64(w, "jump_rows", v->jump_rows);
    ulp__jw_close(w, '}');
}

void ulp__report_verdict_json(ulp__jw *w, const ulp_diff_verdict *v)
{
    ulp__jw_open(w, '{');
    ulp__jw_kstr(w, "kind", ulp_verdict_kind_name(v->kind));
    ulp__jw_kstr(w, "summary", v->summary);
    ulp__jw_key(w, "evidence");
    ulp__jw_open(w, '[');
    for (size_t i = 0; i < v->n_evidence; i++) {
        ulp__jw_item(w);
        ulp__jw_str(w, v->evidence[i]);
    }
    ulp__jw_close(w, ']');
    jbound(w, v);
    ulp__jw_knum(w, "growth", v->has_growth ? v->growth : (double)NAN);
    jties(w, v);
    ulp__jw_kstr(w, "cache_witness", ulp_cache_witness_name(v->witness));
    ulp__jw_kstr(w, "cache_witness_text", v->witness_text);
    ulp__jw_kstr(w, "contract", v->contract_verdict);
    ulp__jw_kstr(w, "contract_text", v->contract_text);
    ulp__jw_close(w, '}');
}
