/*
 * ulp_plot_ladder_write(): the two figures of `ulpprof ladder --plot`.
 *
 *   ladder_matrix.{dat,gp,png,svg}  every pair of runs: the fraction of its
 *                                    compared captures that differ (0: bitwise
 *                                    identical), the digit of the rung the pair
 *                                    decides written in the cell;
 *   ladder.{dat,gp,png,svg}          one bar per rung, coloured by its verdict
 *                                    (holds, breaks, untested), with where it
 *                                    first breaks.
 *
 * As for the diff's plots, text from the snapshots goes into single-quoted
 * gnuplot strings only, and the numbers are the result's own.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "plot_priv.h"

#define MAX_TIC_RUNS 60 /* more runs: numbered tics only */

static FILE *open_file(const char *dir, const char *name, char *path, size_t len, ulp_error *err)
{
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        ulp__error(err, ULP_EIO, "cannot write '%s': %s", path, strerror(errno));
    return f;
}

static ulp_status close_file(FILE *f, const char *path, ulp_error *err)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return ulp__error(err, ULP_EIO, "cannot write '%s': %s", path, strerror(errno));
    return ULP_OK;
}

static void prologue(FILE *f, const char *base, int width, int height)
{
    char data[64];
    snprintf(data, sizeof data, "%s.dat", base);
    ulp__plot_gp_begin(f, base, data, width, height);
}

static double pair_fraction(const ulp_ladder_pair *p)
{
    return p->rows ? (double)p->differing_rows / (double)p->rows : 0.0;
}

static ulp_status matrix_files(const ulp_ladder_result *r, const char *dir, ulp_error *err)
{
    char path[1200];
    FILE *f = open_file(dir, "ladder_matrix.dat", path, sizeof path, err);
    if (f == NULL)
        return ULP_EIO;
    fprintf(f,
            "# ulpprof ladder: %zu runs; per pair of runs a, b:\n"
            "# a b differing_fraction identical(2: a == b) rung(-1: decides none)\n",
            r->n_runs);
    for (size_t a = 0; a < r->n_runs; a++) {
        for (size_t b = 0; b < r->n_runs; b++) {
            if (a == b) {
                fprintf(f, "%zu %zu NaN 2 -1\n", a, b); /* the diagonal: no pair */
                continue;
            }
            const ulp_ladder_pair *p =
                ulp_ladder_result_pair(r, ulp_ladder_pair_index(r->n_runs, a, b));
            fprintf(f, "%zu %zu ", a, b);
            ulp__plot_dat_num(f, pair_fraction(p));
            fprintf(f, " %d %d\n", p->identical, p->rung);
        }
        fputc('\n', f);
    }
    ulp_status st = close_file(f, path, err);
    if (st != ULP_OK || (f = open_file(dir, "ladder_matrix.gp", path, sizeof path, err)) == NULL)
        return st != ULP_OK ? st : ULP_EIO;
    int side = 360 + 18 * (int)(r->n_runs < 60 ? r->n_runs : 60);
    prologue(f, "ladder_matrix", side + 160, side);
    fprintf(f,
            "  set title \"pairs of runs: the fraction of captures that differ\\n"
            "=: bitwise identical; digit: the rung the pair decides; x: none\"\n"
            "  set size ratio -1\n"
            "  set xrange [-0.5:%zu.5]\n  set yrange [%zu.5:-0.5]\n"
            "  set cbrange [0:1]\n  set cblabel 'captures that differ'\n"
            "  set palette defined (0 '#f7fbff', 0.001 '#fdd0a2', 0.5 '#f16913', 1 '#7f2704')\n"
            "  set xtics rotate by 45 right\n",
            r->n_runs - 1, r->n_runs - 1);
    if (r->n_runs <= MAX_TIC_RUNS) {
        for (int axis = 0; axis < 2; axis++) {
            fprintf(f, "  set %stics (", axis ? "y" : "x");
            for (size_t i = 0; i < r->n_runs; i++) {
                char tic[300];
                snprintf(tic, sizeof tic, "%zu %s", i, r->runs[i].label);
                fputs(i ? ", " : "", f);
                ulp__plot_gp_string(f, tic);
                fprintf(f, " %zu", i);
            }
            fputs(")\n", f);
        }
    }
    fputs("  plot 'ladder_matrix.dat' using 1:2:3 with image notitle", f);
    if (r->n_runs <= 40)
        fputs(
            ", '' using 1:2:($4 == 1 ? '=' : ($5 >= 0 ? sprintf('%d', $5) : ($4 == 2 ? '' : 'x'))) "
            "with labels notitle",
            f);
    fputs("\n  unset output\n}\n", f);
    return close_file(f, path, err);
}

static const char *verdict_color(const ulp_ladder_rung *g)
{
    return g->verdict == ULP_LADDER_HOLDS    ? "#2ca02c"
           : g->verdict == ULP_LADDER_BREAKS ? "#d62728"
           : g->varied                       ? "#bdbdbd"
                                             : "#eeeeee";
}

static void rung_text(const ulp_ladder_result *r, const ulp_ladder_rung *g, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "%d %s: %s", g->level, g->name,
                                 ulp_ladder_verdict_name(g->verdict));
    if (g->n_deciding && at < len)
        at += (size_t)snprintf(buf + at, len - at, " (%zu of %zu pairs differ)", g->n_breaking,
                               g->n_deciding);
    else if (!g->varied && at < len)
        at += (size_t)snprintf(buf + at, len - at, " (not varied)");
    if (g->has_first_break && at < len) {
        const ulp_ladder_pair *p = ulp_ladder_result_pair(r, g->first_break);
        at += (size_t)snprintf(buf + at, len - at, ": %s vs %s", r->runs[p->a].label,
                               r->runs[p->b].label);
        if (p->has_first && at < len) {
            at += (size_t)snprintf(buf + at, len - at, ", first at %s", p->first.capture);
            if (p->first.position >= 0 && at < len)
                at += (size_t)snprintf(buf + at, len - at, " position %lld",
                                       (long long)p->first.position);
            else if (p->first.row >= 0 && at < len)
                at += (size_t)snprintf(buf + at, len - at, " row %lld", (long long)p->first.row);
        }
        if (p->logits_rows && at < len)
            snprintf(buf + at, len - at, ", %llu flips", (unsigned long long)p->argmax_flips);
    }
}

static ulp_status rung_files(const ulp_ladder_result *r, const char *dir, ulp_error *err)
{
    char path[1200];
    FILE *f = open_file(dir, "ladder.dat", path, sizeof path, err);
    if (f == NULL)
        return ULP_EIO;
    fputs("# ulpprof ladder: one line per rung\n"
          "# level verdict(0 untested, 1 holds, 2 breaks) varied deciding_pairs breaking_pairs "
          "first_break_layer(-1: none or no layer)\n",
          f);
    for (int level = 0; level < ULP_LADDER_RUNGS; level++) {
        const ulp_ladder_rung *g = &r->rungs[level];
        const ulp_ladder_pair *p =
            g->has_first_break ? ulp_ladder_result_pair(r, g->first_break) : NULL;
        fprintf(f, "%d %d %d %zu %zu %d\n", level, (int)g->verdict, g->varied, g->n_deciding,
                g->n_breaking, p && p->has_first ? (int)p->first.layer : -1);
    }
    ulp_status st = close_file(f, path, err);
    if (st != ULP_OK || (f = open_file(dir, "ladder.gp", path, sizeof path, err)) == NULL)
        return st != ULP_OK ? st : ULP_EIO;
    prologue(f, "ladder", 1100, 520);
    char title[200];
    snprintf(title, sizeof title,
             "determinism ladder: %zu runs, %zu pairs, %zu groups of "
             "bitwise-identical runs",
             r->n_runs, r->n_pairs, r->n_groups);
    fputs("  set title ", f);
    ulp__plot_gp_string(f, title);
    fputs("\n  unset xtics\n  unset key\n  set xrange [0:1]\n  set yrange [-0.6:7.6]\n"
          "  set ylabel 'rung'\n  set ytics 0,1,7\n  set style fill solid 0.85 border -1\n",
          f);
    for (int level = 0; level < ULP_LADDER_RUNGS; level++) {
        const ulp_ladder_rung *g = &r->rungs[level];
        char text[600];
        rung_text(r, g, text, sizeof text);
        fprintf(f, "  set object %d rect from 0,%g to 1,%g fc rgb '%s' behind\n", level + 1,
                level - 0.42, level + 0.42, verdict_color(g));
        fprintf(f, "  set label %d ", level + 1);
        ulp__plot_gp_string(f, text);
        fprintf(f, " at 0.01,%d left front\n", level);
    }
    fputs("  plot 'ladder.dat' using (0):1 with points pt -1 notitle\n  unset output\n}\n", f);
    return close_file(f, path, err);
}

ulp_status ulp_plot_ladder_write(const ulp_ladder_result *r, const ulp_plot_options *opts,
                                 ulp_plot_files *files, ulp_error *err)
{
    if (files)
        memset(files, 0, sizeof *files);
    ulp_plot_options oo;
    const ulp_plot_options *o = NULL;
    if (opts != NULL) {
        if (ulp__plot_options_read(&oo, opts, err) != ULP_OK)
            return ULP_EINVAL;
        o = &oo;
    }
    if (!r || !o || !o->dir || !*o->dir)
        return ulp__error(err, ULP_EINVAL, "no plot directory given");
    ulp_status st = ulp__plot_make_dir(o->dir, err);
    if (st == ULP_OK)
        st = matrix_files(r, o->dir, err);
    if (st == ULP_OK)
        st = rung_files(r, o->dir, err);
    if (st != ULP_OK)
        return st;
    static const char *const bases[] = {"ladder_matrix", "ladder"};
    static const char *const exts[] = {"dat", "gp"};
    for (int b = 0; b < 2 && files; b++)
        for (int e = 0; e < 2; e++)
            snprintf(files->path[files->n++], sizeof files->path[0], "%s/%s.%s", o->dir, bases[b],
                     exts[e]);
    if (o->no_render)
        return ULP_OK;
    return ulp__plot_render(o, o->dir, bases, 2, "ladder ", files, err);
}
