/*
 * A side joined from a tensor-parallel run directory (ulp_tp_join(),
 * ulpprof/sites.h) in the reports: one summary line a joined side for the
 * table and Markdown, an object in JSON's "a" / "b", cells in CSV
 * (docs/sites.md "Tensor-parallel runs", FORMAT.md's report keys).
 */
#include <inttypes.h>
#include <stdio.h>

#include "report_json_out.h"
#include "report_priv.h"
#include "ulpprof/sites.h"

void ulp__report_tp_join_text(const ulp_diff_result *r, FILE *f, const char *bullet,
                              const char *code)
{
    for (int side = 0; side < 2; side++) {
        const ulp_tp_join_info *t = side ? r->tp_join_b : r->tp_join_a;
        if (t == NULL)
            continue;
        fprintf(f,
                "%s%s joined from %zu ranks: %zu captures column-parallel, joined on the last "
                "axis in rank order; %zu whole on every rank, rank 0's compared: ",
                bullet, side ? "B" : "A", t->ranks, t->joined, t->replicated);
        if (t->disagree == 0)
            fprintf(f, "the ranks agree bit for bit on all %zu\n", t->replicated);
        else
            fprintf(f,
                    "the ranks DISAGREE on %zu: first %s%s%s #%" PRId64
                    ", rank %zu differs from rank 0 in %" PRIu64 " of %" PRIu64 " elements\n",
                    t->disagree, code, t->first_disagree, code, t->first_disagree_occurrence,
                    t->first_disagree_rank, t->first_disagree_elements, t->first_disagree_of);
    }
}

void ulp__report_tp_join_json(ulp__jw *w, const ulp_tp_join_info *t)
{
    if (t == NULL) /* absent for one snapshot: older reports stay as they were */
        return;
    ulp__jw_key(w, "tp_join");
    ulp__jw_open(w, '{');
    ulp__jw_ku64(w, "ranks", t->ranks);
    ulp__jw_ku64(w, "column_parallel", t->joined);
    ulp__jw_ku64(w, "whole", t->replicated);
    ulp__jw_ku64(w, "whole_disagree", t->disagree);
    if (ulp__jw_kobject_or_null(w, "first_disagree", t->disagree != 0)) {
        ulp__jw_kstr(w, "name", t->first_disagree);
        ulp__jw_kint(w, "occurrence", t->first_disagree_occurrence);
        ulp__jw_ku64(w, "rank", t->first_disagree_rank);
        ulp__jw_ku64(w, "differing", t->first_disagree_elements);
        ulp__jw_ku64(w, "elements", t->first_disagree_of);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, '}');
}
