/*
 * ulpprof plots: draws a comparison (ulp_diff_result, diff.h) with gnuplot.
 *
 * ulp_plot_write() writes, into one directory, the data files, the gnuplot
 * scripts that read them, and -- when gnuplot is installed -- the images,
 * each as PNG (pngcairo) and SVG:
 *
 *   amplification.{dat,gp,png,svg}  per layer: differing fraction and max
 *                                    |a - b| on log scales, one curve per
 *                                    capture series, the first divergence
 *                                    marked, the logits as a last point;
 *   ulp_heatmap.{dat,gp,png,svg}    per layer: how many elements lie at each
 *                                    ULP distance (diff.h's bins), summed
 *                                    over the layer's activation captures;
 *   logits_margin.{dat,gp,png,svg}  per logits row: top-1 minus top-2 margin
 *                                    against the largest logit perturbation,
 *                                    the diagonal drawn, flipped rows marked
 *                                    (one file set per logits capture; the
 *                                    second is logits_margin_1.*, ...).
 *
 * The data files are plain whitespace-separated columns with a commented
 * header naming them; the numbers are the result's own (no recomputation),
 * so they agree with `ulpprof diff --format json`.  The scripts are
 * self-contained: `cd DIR && gnuplot amplification.gp` redraws.
 */
#ifndef ULPPROF_PLOT_H
#define ULPPROF_PLOT_H

#include <stddef.h>

#include "ulpprof/diff.h"
#include "ulpprof/export.h"
#include "ulpprof/ladder.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ULP_PLOT_MAX_FILES 32

/* Sized as ulpprof/capture.h says (struct_size, set by _init()); the first
 * version ends at `dir`. */
typedef struct ulp_plot_options {
    size_t struct_size;  /* sizeof(ulp_plot_options), set by _init()              */
    const char *dir;     /* output directory, created (one level) if missing
                            (the first version ends here)                         */
    const char *gnuplot; /* program; NULL: $ULPPROF_GNUPLOT, else "gnuplot" in PATH */
    int no_render;       /* 1: write data and scripts only, never run gnuplot      */
} ulp_plot_options;

/*
 * Fills the caller's `opts` of `size` bytes (its sizeof) with the defaults
 * (dir NULL: the caller must set it); ULP_EINVAL below the first version's
 * size.  The macro passes sizeof *opts.
 */
ULP_API ulp_status ulp_plot_options_init_sized(ulp_plot_options *opts, size_t size);
#define ulp_plot_options_init(opts) ((void)ulp_plot_options_init_sized((opts), sizeof *(opts)))

/* What ulp_plot_write() produced. */
typedef struct ulp_plot_files {
    int rendered; /* 1: gnuplot ran and wrote the images                    */
    int n;        /* paths below                                            */
    char path[ULP_PLOT_MAX_FILES][1024]; /* every file written, data, scripts, images */
} ulp_plot_files;

/*
 * Writes the plots of `r` into opts->dir.  `files` (may be NULL) lists what
 * was written.  Returns ULP_OK when the images were drawn (or no_render),
 * ULP_EUNSUPPORTED when gnuplot cannot be found -- the data files and the
 * scripts are written all the same and `err` says so in one line -- and
 * ULP_EIO / ULP_ENOENT when the directory or a file cannot be written or
 * gnuplot fails (`err` quotes gnuplot's first error line).
 */
ULP_API ulp_status ulp_plot_write(const ulp_diff_result *r, const ulp_plot_options *opts,
                                  ulp_plot_files *files, ulp_error *err);

/*
 * Writes the plots of a ladder (`ulpprof ladder --plot`) into opts->dir:
 * ladder_matrix.{dat,gp,png,svg} (every pair of runs: the fraction of
 * compared captures that differ, the rung the pair decides) and
 * ladder.{dat,gp,png,svg} (each rung coloured by its verdict, with where it
 * first breaks).  Returns as ulp_plot_write().
 */
ULP_API ulp_status ulp_plot_ladder_write(const ulp_ladder_result *r, const ulp_plot_options *opts,
                                         ulp_plot_files *files, ulp_error *err);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_PLOT_H */
