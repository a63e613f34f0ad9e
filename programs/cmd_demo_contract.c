/*
 * `ulpprof demo --contract`: the numeric contract on the reference
 * workload.  Climbs the ladder (`demo --ladder`'s eight runs), then writes
 * the contracts of the miss, the hit and the split and two claim files --
 * "level 2 with the split at the block boundary" and a plain "level 2" --
 * and shows `contract compare` of the miss and the hit (the split-K policy
 * is the reason they cannot promise the cache rung), `compare` of the split
 * and the hit (one numerical_policy), and `contract check` of both claims
 * over the eight runs: the first kept, the second broken.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ulpprof/contract.h"
#include "ulpprof/ladder.h"

static const char claim_split[] =
    "{\n"
    "  \"ulpprof_contract\": 1,\n"
    "  \"producer\": \"reference workload, prefill split at the block boundary\",\n"
    "  \"scheduler\": {\"block_size\": 16},\n"
    "  \"claims\": [\n"
    "    {\"level\": 2, \"name\": \"a cache hit equals a miss split at the block boundary\",\n"
    "     \"scope\": {\"model\": \"tiny\"},\n"
    "     \"domain\": {\"batch_size\": [1], \"tp\": [1]},\n"
    "     \"requires\": {\"scheduler.split_at_block_boundary\": true}}\n"
    "  ]\n"
    "}\n";

static const char claim_plain[] = "{\n"
                                  "  \"ulpprof_contract\": 1,\n"
                                  "  \"producer\": \"reference workload\",\n"
                                  "  \"claims\": [\n"
                                  "    {\"level\": 2, \"name\": \"a cache hit equals a miss\",\n"
                                  "     \"scope\": {\"model\": \"tiny\"}}\n"
                                  "  ]\n"
                                  "}\n";

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) == EOF || fclose(f) != 0) {
        cli_error("cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static ulp_contract *emit_one(const char *run, const char *out)
{
    ulp_contract *c = NULL;
    ulp_error err;
    ulp_error_clear(&err);
    const char *runs[1] = {run};
    if (ulp_contract_emit(runs, 1, NULL, NULL, &c, &err) != ULP_OK) {
        cli_error("demo: %s", err.msg);
        return NULL;
    }
    FILE *f = fopen(out, "w");
    if (!f || ulp_contract_write(c, f, &err) != ULP_OK || fclose(f) != 0) {
        cli_error("cannot write '%s'", out);
        ulp_contract_free(c);
        return NULL;
    }
    return c;
}

static int check_claim(const char *path, const char *const *runs, size_t n, ulp_contract_verdict *v)
{
    ulp_contract *c = NULL;
    ulp_error err;
    ulp_error_clear(&err);
    if (ulp_contract_read(path, &c, &err) != ULP_OK ||
        ulp_contract_check(c, runs, n, stdout, v, &err) != ULP_OK) {
        cli_error("demo: %s", err.msg);
        ulp_contract_free(c);
        return -1;
    }
    ulp_contract_free(c);
    return 0;
}

int demo_contract(const ulp_refmodel_options *base, const char *dir, const char *gnuplot, int plots)
{
    int rc = demo_ladder(base, dir, gnuplot, plots);
    if (rc != CLI_EXIT_OK)
        return rc;
    char **runs = NULL;
    size_t n = 0;
    ulp_error err;
    ulp_error_clear(&err);
    if (ulp_ladder_list_dir(dir, &runs, &n, &err) != ULP_OK) {
        cli_error("demo: %s", err.msg);
        return CLI_EXIT_ERROR;
    }
    char p[3][1100], c1[1100], c2[1100];
    const char *names[3] = {"miss", "hit", "split"}, *files[3] = {"0-miss", "3-hit", "4-split"};
    ulp_contract *ct[3] = {NULL, NULL, NULL};
    rc = CLI_EXIT_ERROR;
    int ok = 1;
    for (int i = 0; i < 3 && ok; i++) {
        char run[1100];
        snprintf(run, sizeof run, "%s/%s.h5", dir, files[i]);
        snprintf(p[i], sizeof p[i], "%s/contract-%s.json", dir, names[i]);
        ok = (ct[i] = emit_one(run, p[i])) != NULL;
    }
    snprintf(c1, sizeof c1, "%s/claim-level2-split.json", dir);
    snprintf(c2, sizeof c2, "%s/claim-level2.json", dir);
    ok = ok && write_text(c1, claim_split) == 0 && write_text(c2, claim_plain) == 0;
    int lv_mh = 0, lv_sh = 0;
    ulp_contract_verdict v1 = ULP_CONTRACT_BROKEN, v2 = ULP_CONTRACT_KEPT;
    if (ok) {
        printf("\nThe numeric contract (docs/contract.md)\n\n$ ulpprof contract compare "
               "%s %s\n",
               p[0], p[1]);
        ok = ulp_contract_compare(ct[0], ct[1], stdout, &lv_mh, &err) == ULP_OK;
        printf("\n$ ulpprof contract compare %s %s\n", p[2], p[1]);
        ok = ok && ulp_contract_compare(ct[2], ct[1], stdout, &lv_sh, &err) == ULP_OK;
        printf("\n$ ulpprof contract check %s %s\n", c1, dir);
        ok = ok && check_claim(c1, (const char *const *)runs, n, &v1) == 0;
        printf("\n$ ulpprof contract check %s %s\n", c2, dir);
        ok = ok && check_claim(c2, (const char *const *)runs, n, &v2) == 0;
    }
    if (ok) {
        printf("\nWhat the contract says\n"
               "  The miss and the hit can promise at most level %d together: the suffix's\n"
               "  GEMMs pick their split-K from M.  The split and the hit share one\n"
               "  numerical_policy, and the claim \"level 2 with the split at the block\n"
               "  boundary\" is %s over the %zu runs, while plain \"level 2\" is %s.\n"
               "Files: %s/contract-{miss,hit,split}.json, %s/claim-level2{-split,}.json\n",
               lv_mh, v1 == ULP_CONTRACT_KEPT ? "kept" : "NOT kept", n,
               v2 == ULP_CONTRACT_BROKEN ? "broken" : "NOT broken", dir, dir);
        rc = v1 == ULP_CONTRACT_KEPT && v2 == ULP_CONTRACT_BROKEN ? CLI_EXIT_OK : CLI_EXIT_DIFFER;
    }
    for (int i = 0; i < 3; i++)
        ulp_contract_free(ct[i]);
    for (size_t i = 0; i < n; i++)
        free(runs[i]);
    free(runs);
    return rc;
}
