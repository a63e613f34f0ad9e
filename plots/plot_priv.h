/* Internals of the plots (plots/).  Not installed. */
#ifndef ULPPROF_PLOT_PRIV_H
#define ULPPROF_PLOT_PRIV_H

#include <stdio.h>

#include "ulpprof/plot.h"

#define ULP__PLOT_MAX_SERIES 8 /* curves drawn; the data file holds every series */

/* Activation rows grouped into series ("model.layers.*.out"), x = layer. */
typedef struct ulp__plot_series {
    char key[256]; /* the name with the layer number replaced by '*'   */
    size_t n;
    size_t *rows; /* indices into result->rows, by increasing x        */
    double *x;
} ulp__plot_series;

typedef struct ulp__plot_model {
    const ulp_diff_result *r;
    int by_layer; /* 1: x is the layer; 0: x is the row's seq position */
    size_t n_series;
    ulp__plot_series *series;
    double x_min, x_max; /* over the series                                   */
    double x_logits;     /* where the logits point sits (x_max + 1)           */
    int any_differs;     /* some plotted activation or logits row differs     */
    double x_first;      /* x of the first divergence, when it is plotted     */
    int has_first;
    int max_bin; /* highest non-empty ULP histogram bin (>= 1)        */
} ulp__plot_model;

ulp_status ulp__plot_model_build(const ulp_diff_result *r, ulp__plot_model *m, ulp_error *err);
void ulp__plot_model_release(ulp__plot_model *m);

/* Data files (plot_data.c); `path` is the file to create. */
ulp_status ulp__plot_write_amplification_dat(const ulp__plot_model *m, const char *path,
                                             ulp_error *err);
ulp_status ulp__plot_write_hist_dat(const ulp__plot_model *m, const char *path, ulp_error *err);
ulp_status ulp__plot_write_logits_dat(const ulp__plot_model *m, size_t li, const char *path,
                                      ulp_error *err);

/* Scripts (plot_scripts.c); `base` is the file name without extension. */
ulp_status ulp__plot_write_amplification_gp(const ulp__plot_model *m, const char *dir,
                                            const char *base, ulp_error *err);
ulp_status ulp__plot_write_hist_gp(const ulp__plot_model *m, const char *dir, const char *base,
                                   ulp_error *err);
ulp_status ulp__plot_write_logits_gp(const ulp__plot_model *m, size_t li, const char *dir,
                                     const char *base, ulp_error *err);

/* Writes `s` as a gnuplot single-quoted string literal (no substitutions inside). */
void ulp__plot_gp_string(FILE *f, const char *s);
/*
 * The head every script shares: where it came from (`data`), how to redraw
 * it, and the loop over PNG and SVG at width x height writing BASE.png and
 * BASE.svg; the figure's commands follow, and "  unset output\n}\n" ends it.
 */
void ulp__plot_gp_begin(FILE *f, const char *base, const char *data, int width, int height);
/* Writes `s` with every character that would break a data column replaced by '_'. */
void ulp__plot_dat_word(FILE *f, const char *s);
/* Writes a double that gnuplot and Python read back exactly ("NaN" when not finite). */
void ulp__plot_dat_num(FILE *f, double v);

/* The caller's options read by their struct_size (common/sized.h), the
 * defaults for the rest; ULP_EINVAL, one stderr line and `err`, for a bad size. */
ulp_status ulp__plot_options_read(ulp_plot_options *out, const ulp_plot_options *in,
                                  ulp_error *err);

/* The gnuplot program to run (`buf` may hold it), or NULL when there is none. */
const char *ulp__plot_find_gnuplot(const ulp_plot_options *o, char *buf, size_t len);
/* Runs `prog script` in `dir`; a failure comes back with gnuplot's error line. */
ulp_status ulp__plot_run_gnuplot(const char *prog, const char *dir, const char *script,
                                 ulp_error *err);
/*
 * Runs each of the `n` scripts BASE.gp in `dir`, which must write BASE.png
 * and BASE.svg there; adds those to `files` (may be NULL) and marks them
 * rendered.  Without gnuplot, fails saying the `what`plot data ("",
 * "ladder ") and scripts are written but no images.
 */
ulp_status ulp__plot_render(const ulp_plot_options *o, const char *dir, const char *const *scripts,
                            size_t n, const char *what, ulp_plot_files *files, ulp_error *err);
/* Creates `dir` (one level) unless it is a directory already. */
ulp_status ulp__plot_make_dir(const char *dir, ulp_error *err);

#endif /* ULPPROF_PLOT_PRIV_H */
