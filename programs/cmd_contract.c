/*
 * `ulpprof contract emit|check|compare`: the numeric contract
 * (ulpprof/contract.h, docs/contract.md).  emit writes what runs show,
 * merged with a declaration; check holds a contract against runs (exit 0
 * kept, 1 broken or untested, 2 error); compare prints what two contracts
 * differ in and the level the two producers can still promise.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ulpprof/contract.h"
#include "ulpprof/ladder.h"

#define CONTRACT_USAGE                                                                             \
    "ulpprof contract emit RUN... [--declare FILE] [--producer NAME] [-o C.json]\n"                \
    "       ulpprof contract check C.json RUN... | DIR\n"                                          \
    "       ulpprof contract compare [--format table|json] A.json B.json"

static void contract_help(void)
{
    printf("usage: " CONTRACT_USAGE "\n"
           "\n"
           "A contract (JSON, docs/contract.md) writes down what a producer promises\n"
           "about its numerics: the ladder levels it claims, over which scope and\n"
           "domain, and the bit-relevant choices behind them -- GEMM dtypes, compute\n"
           "type and configuration per M, reductions, collectives, quantization,\n"
           "scheduler, KV cache, sampling -- each field observed, declared or\n"
           "unobservable, with a numerical_policy digest over the bit-relevant ones.\n"
           "\n"
           "  emit     fills every field the runs show (run keys, /env, /observed,\n"
           "           /trace/gemms, kernel names, capture dtypes, rows per step) and\n"
           "           merges the declared ones from --declare FILE\n"
           "  check    declared against observed, field by field; every claim against\n"
           "           the runs' pairs on its rung (a claim no pair tests is untested)\n"
           "  compare  the fields two contracts differ in, and the highest level the\n"
           "           two producers can still promise together, with the reason\n"
           "\n"
           "A RUN is a snapshot file or a directory of per-rank files; check given one\n"
           "DIR takes every *.h5 file and directory of them in it as a run.\n"
           "\n"
           "options (emit):\n"
           "  -d, --declare FILE   a contract file of declared fields and claims\n"
           "  -p, --producer NAME  the producer's name (default: the first run's label)\n"
           "  -o, --output FILE    write the contract to FILE instead of stdout\n"
           "  -h, --help           show this help\n"
           "\n"
           "options (compare):\n"
           "  -f, --format FMT     table (default), or json: every difference with the\n"
           "                       full list of the GEMM sites it was found at\n"
           "\n"
           "exit status: emit, compare: 0 done, 2 error; check: 0 every field and claim\n"
           "kept, 1 something broken or a claim untested, 2 error\n");
}

static int usage_error(const char *msg)
{
    fprintf(stderr, "ulpprof contract: %s\nusage: " CONTRACT_USAGE "\n", msg);
    return CLI_EXIT_ERROR;
}

static ulp_contract *read_contract(const char *path)
{
    ulp_contract *c = NULL;
    ulp_error err;
    ulp_error_clear(&err);
    if (ulp_contract_read(path, &c, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        return NULL;
    }
    return c;
}

/* Every run readable (one line and -1 for the first that is not). */
static int check_runs(char *const *runs, int n)
{
    for (int i = 0; i < n; i++)
        if (cli_check_run(runs[i]) != 0)
            return -1;
    return 0;
}

static int do_emit(int argc, char **argv)
{
    static const struct option opts[] = {{"declare", required_argument, NULL, 'd'},
                                         {"producer", required_argument, NULL, 'p'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *declare = NULL, *producer = NULL, *out_path = NULL;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":d:p:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            declare = optarg;
            break;
        case 'p':
            producer = optarg;
            break;
        case 'o':
            out_path = optarg;
            break;
        case 'h':
            contract_help();
            return CLI_EXIT_OK;
        default:
            return cli_bad_option("contract emit", CONTRACT_USAGE, argv, c);
        }
    }
    int n = argc - optind;
    if (n < 1)
        return usage_error("emit needs at least one run");
    char **runs = argv + optind;
    if (out_path && cli_output_is_input("contract emit", out_path, runs, n))
        return CLI_EXIT_ERROR;
    if (check_runs(runs, n) != 0)
        return CLI_EXIT_ERROR;
    ulp_contract *decl = NULL;
    if (declare && !(decl = read_contract(declare)))
        return CLI_EXIT_ERROR;
    ulp_contract *ct = NULL;
    ulp_error err;
    ulp_error_clear(&err);
    if (ulp_contract_emit((const char *const *)runs, (size_t)n, decl, producer, &ct, &err) !=
        ULP_OK) {
        ulp_contract_free(decl);
        cli_error("%s", err.msg);
        return CLI_EXIT_ERROR;
    }
    ulp_contract_free(decl);
    FILE *f = out_path ? fopen(out_path, "w") : stdout;
    if (!f) {
        cli_error("cannot open '%s' for writing: %s", out_path, strerror(errno));
        ulp_contract_free(ct);
        return CLI_EXIT_ERROR;
    }
    int rc = CLI_EXIT_OK;
    if (ulp_contract_write(ct, f, &err) != ULP_OK) {
        cli_error("%s: %s", out_path ? out_path : "standard output", err.msg);
        rc = CLI_EXIT_ERROR;
    }
    if (out_path && fclose(f) != 0 && rc == CLI_EXIT_OK) {
        cli_error("cannot write '%s': %s", out_path, strerror(errno));
        rc = CLI_EXIT_ERROR;
    }
    ulp_contract_free(ct);
    return rc;
}

static int do_check(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        contract_help();
        return CLI_EXIT_OK;
    }
    if (argc < 3)
        return usage_error("check needs a contract and at least one run");
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1])
            return usage_error("check takes no options");
    char **runs = argv + 2;
    size_t n = (size_t)(argc - 2);
    char **listed = NULL;
    ulp_error err;
    ulp_error_clear(&err);
    if (n == 1 && cli_is_dir(runs[0])) {
        ulp_ladder_file *files = NULL;
        size_t nf = 0;
        /* A directory of per-rank files is one run; a directory of runs is listed. */
        if (ulp_ladder_list_dir(runs[0], &listed, &n, &err) != ULP_OK) {
            cli_error("%s", err.msg);
            return CLI_EXIT_ERROR;
        }
        (void)files;
        (void)nf;
        runs = listed;
    }
    int rc = CLI_EXIT_ERROR;
    ulp_contract *ct = NULL;
    if (check_runs(runs, (int)n) == 0 && (ct = read_contract(argv[1]))) {
        ulp_contract_verdict v;
        if (ulp_contract_check(ct, (const char *const *)runs, n, stdout, &v, &err) != ULP_OK)
            cli_error("%s", err.msg);
        else
            rc = v == ULP_CONTRACT_KEPT ? CLI_EXIT_OK : CLI_EXIT_DIFFER;
    }
    ulp_contract_free(ct);
    if (listed) {
        for (size_t i = 0; i < n; i++)
            free(listed[i]);
        free(listed);
    }
    return rc;
}

static int do_compare(int argc, char **argv)
{
    int json = 0;
    char *files[2];
    int nfiles = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            contract_help();
            return CLI_EXIT_OK;
        }
        if (strcmp(a, "-f") == 0 || strcmp(a, "--format") == 0 || strncmp(a, "--format=", 9) == 0) {
            const char *v = a[1] == '-' && a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);
            if (v == NULL)
                return usage_error("--format needs table or json");
            if (strcmp(v, "json") == 0)
                json = 1;
            else if (strcmp(v, "table") == 0)
                json = 0;
            else
                return usage_error("compare --format is table or json");
            continue;
        }
        if (a[0] == '-' && a[1] != '\0')
            return usage_error("compare takes --format and two contracts");
        if (nfiles == 2)
            return usage_error("compare needs two contracts");
        files[nfiles++] = argv[i];
    }
    if (nfiles != 2)
        return usage_error("compare needs two contracts");
    ulp_contract *a = read_contract(files[0]), *b = a ? read_contract(files[1]) : NULL;
    int rc = CLI_EXIT_ERROR, level;
    ulp_error err;
    ulp_error_clear(&err);
    if (a && b) {
        ulp_status st = json ? ulp_contract_compare_json(a, b, stdout, &level, &err)
                             : ulp_contract_compare(a, b, stdout, &level, &err);
        if (st != ULP_OK)
            cli_error("%s", err.msg);
        else
            rc = CLI_EXIT_OK;
    }
    ulp_contract_free(a);
    ulp_contract_free(b);
    return rc;
}

int cmd_contract(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("which: emit, check or compare?");
    const char *sub = argv[1];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
        contract_help();
        return CLI_EXIT_OK;
    }
    if (strcmp(sub, "emit") == 0)
        return do_emit(argc - 1, argv + 1);
    if (strcmp(sub, "check") == 0)
        return do_check(argc - 1, argv + 1);
    if (strcmp(sub, "compare") == 0)
        return do_compare(argc - 1, argv + 1);
    fprintf(stderr, "ulpprof contract: '%s' is not emit, check or compare\n", sub);
    return CLI_EXIT_ERROR;
}
