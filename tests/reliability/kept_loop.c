/*
 * kept_loop: a digest-mode host program that captures what a decode loop
 * does, for the crash test of kept captures (tests/python/test_crash_kept.py):
 * per step i, the fed token ids `input_ids` (int64, role input, one element a
 * row: a prompt of P positions at step 0, one position after), an activation
 * `h` (float32 [rows, 32], digests only) and the produced `tokens` (float64
 * [1, 2] at the step's last position), every one of a known formula:
 *     input_ids at position p = (p * 7919 + 13) mod 32000
 *     tokens of step i        = [(i * 104729 + 7) mod 32000, i + 0.5]
 *     h[r][j] at step i       = i + r * 0.25 + j / 64
 * so a test checks what a killed file keeps without this program.
 *
 *   kept_loop --out FILE [--steps N] [--prompt P] [--flush-every F]
 *
 * Prints "opened" once the session is open, then "flushed k" each time
 * ulp_session_flush() returned after step k-1 (every F steps): steps 0..k-1
 * are then in the file.  Exit 0 at the end, 2 on a usage error or when the
 * session cannot be opened.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ulpprof/capture.h"

static int capture(ulp_session *s, const char *name, const void *data, ulp_dtype dtype, int ndim,
                   const int64_t *shape, ulp_role role, int64_t step, const int64_t *positions)
{
    ulp_capture_desc d;
    ulp_capture_desc_init(&d);
    d.name = name;
    d.data = data;
    d.dtype = dtype;
    d.ndim = ndim;
    d.shape = shape;
    d.role = role;
    d.step = step;
    d.time_ns = 1000 + step; /* fixed: two runs give the same attributes */
    d.positions = positions;
    d.row_rank = 1;
    return ulp_session_capture(s, &d) == ULP_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    long steps = 40, prompt = 8, every = 5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atol(argv[++i]);
        else if (strcmp(argv[i], "--prompt") == 0 && i + 1 < argc)
            prompt = atol(argv[++i]);
        else if (strcmp(argv[i], "--flush-every") == 0 && i + 1 < argc)
            every = atol(argv[++i]);
        else
            out = NULL, i = argc;
    }
    if (out == NULL || steps < 1 || prompt < 1 || prompt > 4096 || every < 1) {
        fprintf(stderr, "kept_loop: usage: kept_loop --out FILE [--steps N] [--prompt P] "
                        "[--flush-every F]\n");
        return 2;
    }
    ulp_session_options o;
    ulp_session_options_init(&o);
    o.path = out;
    o.label = "kept_loop";
    o.writer = "kept_loop";
    /* Given at the open, as ulpprof.torch.capture(mode="digest") gives it: the file is made
     * for digests (FORMAT.md "Digests"), and that layout is what the kills test. */
    o.capture_mode = "digest";
    ulp_session *s = NULL;
    ulp_error err;
    if (ulp_session_open(&o, &s, &err) != ULP_OK) {
        fprintf(stderr, "kept_loop: %s\n", err.msg);
        return 2;
    }
    printf("opened\n");
    fflush(stdout);
    int64_t *ids = malloc((size_t)prompt * sizeof *ids),
            *pos = malloc((size_t)prompt * sizeof *pos);
    float *h = malloc((size_t)prompt * 32 * sizeof *h);
    if (ids == NULL || pos == NULL || h == NULL)
        return 2;
    int64_t next = 0; /* the next position fed */
    for (long i = 0; i < steps; i++) {
        int64_t rows = i == 0 ? prompt : 1;
        for (int64_t r = 0; r < rows; r++) {
            pos[r] = next + r;
            ids[r] = (pos[r] * 7919 + 13) % 32000;
            for (int j = 0; j < 32; j++)
                h[r * 32 + j] = (float)i + (float)r * 0.25f + (float)j / 64.0f;
        }
        next += rows;
        int64_t ishape[1] = {rows}, hshape[2] = {rows, 32}, tshape[2] = {1, 2};
        int64_t last = pos[rows - 1];
        double tok[2] = {(double)((i * 104729 + 7) % 32000), (double)i + 0.5};
        if (capture(s, "input_ids", ids, ULP_DTYPE_I64, 1, ishape, ULP_ROLE_INPUT, i, pos) < 0 ||
            capture(s, "h", h, ULP_DTYPE_F32, 2, hshape, ULP_ROLE_ACTIVATION, i, pos) < 0 ||
            capture(s, "tokens", tok, ULP_DTYPE_F64, 2, tshape, ULP_ROLE_ACTIVATION, i, &last) <
                0) {
            fprintf(stderr, "kept_loop: capture %ld refused\n", i);
            break;
        }
        if ((i + 1) % every == 0) {
            if (ulp_session_flush(s) != ULP_OK) {
                fprintf(stderr, "kept_loop: flush failed\n");
                break;
            }
            printf("flushed %ld\n", i + 1);
            fflush(stdout);
        }
    }
    ulp_status st = ulp_session_close(s);
    free(ids);
    free(pos);
    free(h);
    return st == ULP_OK ? 0 : 1;
}
