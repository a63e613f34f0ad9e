/*
 * ulpprof-refmodel: runs the reference transformer once and writes a
 * snapshot.  `ulpprof demo` runs the same code in-process; this program is
 * for running one mode by hand, e.g.
 *
 *   ulpprof-refmodel --mode miss --out miss.h5
 *   ulpprof-refmodel --mode hit  --out hit.h5
 *   ulpprof diff miss.h5 hit.h5
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ulpprof/refmodel.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: ulpprof-refmodel --out FILE.h5 [options]\n"
        "\n"
        "  --mode MODE        miss | hit | split | batch=B   (default miss)\n"
        "  --gemm GEMM        tiled (emulated M-dependent split-K, default) | blas (OpenBLAS)\n"
        "                     | exact (M-independent fp64 accumulation)\n"
        "  --preset NAME      tiny (default) | qwen1.5b (Qwen2.5-1.5B shapes, synthetic weights)\n"
        "  --seed N           weights and prompt (default %d)\n"
        "  --prompt-len N     prompt tokens (default %d)\n"
        "  --cached N         tokens a hit takes from the cache, a multiple of %d\n"
        "                     (default N - N mod %d)\n"
        "  --logits-rows N    logits of the last N suffix rows only (default: all)\n"
        "  --suffix-only      capture the suffix rows only (default: every position of\n"
        "                     every pass, with inputs)\n"
        "  --threads N        OpenBLAS threads (default 1)\n"
        "  --label NAME       run label (default: the mode)\n"
        "  --tp N             EMULATE the reduction order of N tensor-parallel ranks in the\n"
        "                     row-parallel GEMMs (attention output, MLP down): K in N shards,\n"
        "                     each rounded to bf16, summed in rank order (default 1)\n"
        "  --prefill-chunk N  miss only: prefill in steps of N tokens (chunked prefill)\n"
        "  --probe            no model run: measure which of the model's GEMM shapes give\n"
        "                     different bits for the suffix rows as M changes (no --out)\n"
        "  -v, --verbose      timings on stderr\n"
        "  -h, --help         this text\n",
        ULP_REFMODEL_DEFAULT_SEED, ULP_REFMODEL_DEFAULT_PROMPT_LEN, ULP_REFMODEL_BLOCK_SIZE,
        ULP_REFMODEL_BLOCK_SIZE);
}

static int parse_int(const char *opt, const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "ulpprof-refmodel: invalid value '%s' for %s\n", s, opt);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"mode", required_argument, NULL, 'm'},
                                             {"gemm", required_argument, NULL, 'g'},
                                             {"preset", required_argument, NULL, 'p'},
                                             {"seed", required_argument, NULL, 's'},
                                             {"prompt-len", required_argument, NULL, 'n'},
                                             {"cached", required_argument, NULL, 'c'},
                                             {"logits-rows", required_argument, NULL, 'r'},
                                             {"threads", required_argument, NULL, 't'},
                                             {"label", required_argument, NULL, 'l'},
                                             {"tp", required_argument, NULL, 'T'},
                                             {"prefill-chunk", required_argument, NULL, 'C'},
                                             {"out", required_argument, NULL, 'o'},
                                             {"verbose", no_argument, NULL, 'v'},
                                             {"probe", no_argument, NULL, 'P'},
                                             {"suffix-only", no_argument, NULL, 'S'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    ulp_refmodel_options o;
    ulp_refmodel_options_init(&o);
    int c, probe = 0;
    long v;
    while ((c = getopt_long(argc, argv, "o:vh", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (ulp_refmodel_mode_parse(optarg, &o.mode, &o.batch) != 0) {
                fprintf(stderr, "ulpprof-refmodel: invalid mode '%s' (miss, hit, split, batch=B)\n",
                        optarg);
                return 2;
            }
            break;
        case 'g':
            if (ulp_refmodel_gemm_parse(optarg, &o.gemm) != 0) {
                fprintf(stderr, "ulpprof-refmodel: invalid gemm '%s' (tiled, blas, exact)\n",
                        optarg);
                return 2;
            }
            break;
        case 'p':
            if (ulp_refmodel_preset(optarg, &o.dims) != ULP_OK) {
                fprintf(stderr, "ulpprof-refmodel: unknown preset '%s' (tiny, qwen1.5b)\n", optarg);
                return 2;
            }
            break;
        case 's': {
            char *end;
            unsigned long long s = strtoull(optarg, &end, 10);
            if (end == optarg || *end || optarg[0] == '-') {
                fprintf(stderr, "ulpprof-refmodel: invalid value '%s' for --seed\n", optarg);
                return 2;
            }
            o.seed = s;
            break;
        }
        case 'n':
            if (parse_int("--prompt-len", optarg, 2, 65536, &v))
                return 2;
            o.prompt_len = (int)v;
            break;
        case 'c':
            if (parse_int("--cached", optarg, 1, 65536, &v))
                return 2;
            o.cached_tokens = (int)v;
            break;
        case 'r':
            if (parse_int("--logits-rows", optarg, 0, 65536, &v))
                return 2;
            o.logits_rows = (int)v;
            break;
        case 't':
            if (parse_int("--threads", optarg, 1, 1024, &v))
                return 2;
            o.threads = (int)v;
            break;
        case 'l':
            o.label = optarg;
            break;
        case 'T':
            if (parse_int("--tp", optarg, 1, 64, &v))
                return 2;
            o.tp = (int)v;
            break;
        case 'C':
            if (parse_int("--prefill-chunk", optarg, 1, 65536, &v))
                return 2;
            o.prefill_chunk = (int)v;
            break;
        case 'o':
            o.out = optarg;
            break;
        case 'v':
            o.verbose = 1;
            break;
        case 'P':
            probe = 1;
            break;
        case 'S':
            o.suffix_only = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ulpprof-refmodel: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    ulp_error err;
    ulp_error_clear(&err);
    if (probe) {
        if (ulp_refmodel_probe(&o, stdout, &err) != ULP_OK) {
            fprintf(stderr, "ulpprof-refmodel: %s\n", err.msg);
            return 2;
        }
        return fflush(stdout) == 0 ? 0 : 2;
    }
    if (!o.out) {
        fprintf(stderr, "ulpprof-refmodel: --out FILE.h5 is required\n");
        return 2;
    }
    if (ulp_refmodel_run(&o, &err) != ULP_OK) {
        fprintf(stderr, "ulpprof-refmodel: %s\n",
                err.msg[0] ? err.msg : ulp_status_str(err.status));
        return 2;
    }
    return 0;
}
