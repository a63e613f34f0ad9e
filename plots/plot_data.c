/*
 * The plots' data: which rows of a comparison form which curve, and the
 * data files gnuplot reads.  Every number written is the comparison's own
 * (ulp_diff_result), printed so that it reads back exactly.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "plot_priv.h"
#include "ulpprof/format.h"

void ulp__plot_dat_num(FILE *f, double v)
{
    if (isnan(v))
        fputs("NaN", f);
    else if (isinf(v))
        fputs(v > 0 ? "inf" : "-inf", f);
    else
        fprintf(f, "%.17g", v);
}

void ulp__plot_dat_word(FILE *f, const char *s)
{
    if (!s || !*s) {
        fputc('_', f);
        return;
    }
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        fputc(c <= ' ' || c == '"' || c == '\'' || c == '#' || c == 0x7f ? '_' : c, f);
    }
}

static int is_activation(const ulp_diff_row *row)
{
    return (row->status == ULP_DIFF_IDENTICAL || row->status == ULP_DIFF_DIFFERS) &&
           (!row->role || strcmp(row->role, ulp_role_name(ULP_ROLE_ACTIVATION)) == 0);
}

/* "model.layers.14.out" with layer 14 -> "model.layers.*.out". */
static void series_key(const ulp_diff_row *row, int by_layer, char *key, size_t len)
{
    char num[24];
    const char *name = row->name ? row->name : "";
    snprintf(key, len, "%s", by_layer ? name : "captures");
    if (by_layer) {
        snprintf(num, sizeof num, "%d", (int)row->layer);
        size_t nl = strlen(num);
        for (const char *p = name; (p = strstr(p, num)) != NULL; p++) {
            int left_ok = p == name || !isdigit((unsigned char)p[-1]);
            int right_ok = !isdigit((unsigned char)p[nl]);
            if (left_ok && right_ok) {
                snprintf(key, len, "%.*s*%s", (int)(p - name), name, p + nl);
                break;
            }
        }
    }
    if (row->occurrence > 0) {
        size_t at = strlen(key);
        snprintf(key + at, len - at, " #%lld", (long long)row->occurrence);
    }
}

void ulp__plot_model_release(ulp__plot_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_series; i++) {
        free(m->series[i].rows);
        free(m->series[i].x);
    }
    free(m->series);
    memset(m, 0, sizeof *m);
}

ulp_status ulp__plot_model_build(const ulp_diff_result *r, ulp__plot_model *m, ulp_error *err)
{
    memset(m, 0, sizeof *m);
    m->r = r;
    m->max_bin = 1;
    for (size_t i = 0; i < r->n_rows; i++)
        if (is_activation(&r->rows[i]) && r->rows[i].layer >= 0)
            m->by_layer = 1;

    m->series = calloc(r->n_rows ? r->n_rows : 1, sizeof *m->series);
    if (!m->series)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    size_t position = 0;
    int have_x = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        const ulp_diff_row *row = &r->rows[i];
        if (!is_activation(row) || (m->by_layer && row->layer < 0))
            continue;
        double x = m->by_layer ? (double)row->layer : (double)position++;
        char key[256];
        series_key(row, m->by_layer, key, sizeof key);
        size_t s = 0;
        while (s < m->n_series && strcmp(m->series[s].key, key) != 0)
            s++;
        ulp__plot_series *ser = &m->series[s];
        if (s == m->n_series) {
            m->n_series++;
            snprintf(ser->key, sizeof ser->key, "%s", key);
            ser->rows = malloc(r->n_rows * sizeof *ser->rows);
            ser->x = malloc(r->n_rows * sizeof *ser->x);
            if (!ser->rows || !ser->x) {
                ulp__plot_model_release(m);
                return ulp__error(err, ULP_ENOMEM, "out of memory");
            }
        }
        /* Insert by x, stable: a series is drawn left to right. */
        size_t at = ser->n;
        while (at > 0 && ser->x[at - 1] > x) {
            ser->x[at] = ser->x[at - 1];
            ser->rows[at] = ser->rows[at - 1];
            at--;
        }
        ser->x[at] = x;
        ser->rows[at] = i;
        ser->n++;
        if (!have_x || x < m->x_min)
            m->x_min = x;
        if (!have_x || x > m->x_max)
            m->x_max = x;
        have_x = 1;
        if (row->status == ULP_DIFF_DIFFERS)
            m->any_differs = 1;
        for (int k = ULP_DIFF_HIST_BINS - 1; k > m->max_bin; k--)
            if (row->m.hist[k]) {
                m->max_bin = k;
                break;
            }
        if (r->has_first_divergence && r->first_divergence == i) {
            m->has_first = 1;
            m->x_first = x;
        }
    }
    m->x_logits = have_x ? m->x_max + 1 : 0;
    for (size_t l = 0; l < r->n_logits; l++) {
        const ulp_diff_row *row = &r->rows[r->logits[l].row_index];
        if (row->status == ULP_DIFF_DIFFERS)
            m->any_differs = 1;
        if (r->has_first_divergence && r->first_divergence == r->logits[l].row_index &&
            !m->has_first) {
            m->has_first = 1;
            m->x_first = m->x_logits;
        }
    }
    return ULP_OK;
}

static FILE *open_out(const char *path, ulp_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        ulp__error(err, ULP_EIO, "cannot write '%s': %s", path, strerror(errno));
    return f;
}

static ulp_status close_out(FILE *f, const char *path, ulp_error *err)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return ulp__error(err, ULP_EIO, "cannot write '%s': %s", path, strerror(errno));
    return ULP_OK;
}

static void header(FILE *f, const ulp_diff_result *r, const char *what)
{
    fprintf(f, "# ulpprof %s: A ", what);
    ulp__plot_dat_word(f, r->label_a);
    fputs(" (", f);
    ulp__plot_dat_word(f, r->path_a);
    fputs(") vs B ", f);
    ulp__plot_dat_word(f, r->label_b);
    fputs(" (", f);
    ulp__plot_dat_word(f, r->path_b);
    fputs(")\n", f);
}

static void amp_line(FILE *f, double x, const ulp_diff_row *row)
{
    ulp__plot_dat_num(f, x);
    fprintf(f, " %lld %llu %llu ", (long long)row->seq_a, (unsigned long long)row->elements,
            (unsigned long long)row->m.differing);
    ulp__plot_dat_num(f, row->elements ? (double)row->m.differing / (double)row->elements : 0.0);
    fprintf(f, " %llu ", (unsigned long long)row->m.max_ulp);
    ulp__plot_dat_num(f, row->m.max_abs_diff);
    fputc(' ', f);
    ulp__plot_dat_word(f, row->name);
    fputc('\n', f);
}

ulp_status ulp__plot_write_amplification_dat(const ulp__plot_model *m, const char *path,
                                             ulp_error *err)
{
    const ulp_diff_result *r = m->r;
    FILE *f = open_out(path, err);
    if (!f)
        return err ? err->status : ULP_EIO;
    header(f, r, "amplification");
    if (r->has_first_divergence) {
        fputs("# first divergence: ", f);
        ulp__plot_dat_word(f, r->rows[r->first_divergence].name);
        fprintf(f, " (layer %d)\n", (int)r->rows[r->first_divergence].layer);
    } else {
        fputs("# first divergence: none\n", f);
    }
    fprintf(f, "# x is the %s; one block per series (gnuplot 'index'), the logits last\n",
            m->by_layer ? "layer" : "capture's position in A's seq order");
    fputs("# columns: x seq_a elements differing differing_fraction max_ulp max_abs_diff name\n",
          f);
    for (size_t s = 0; s < m->n_series; s++) {
        const ulp__plot_series *ser = &m->series[s];
        fprintf(f, "%s# series %zu: ", s ? "\n\n" : "", s);
        ulp__plot_dat_word(f, ser->key);
        fputc('\n', f);
        for (size_t i = 0; i < ser->n; i++)
            amp_line(f, ser->x[i], &r->rows[ser->rows[i]]);
    }
    for (size_t l = 0; l < r->n_logits; l++) {
        fprintf(f, "%s# logits %zu: ", m->n_series || l ? "\n\n" : "", l);
        ulp__plot_dat_word(f, r->logits[l].name);
        fputc('\n', f);
        amp_line(f, m->x_logits, &r->rows[r->logits[l].row_index]);
    }
    return close_out(f, path, err);
}

ulp_status ulp__plot_write_hist_dat(const ulp__plot_model *m, const char *path, ulp_error *err)
{
    const ulp_diff_result *r = m->r;
    FILE *f = open_out(path, err);
    if (!f)
        return err ? err->status : ULP_EIO;
    header(f, r, "ULP histogram");
    fprintf(f, "# per %s, summed over its activation captures; bin 0 (bitwise equal) left out\n",
            m->by_layer ? "layer" : "capture");
    fputs("# columns: x bin ulp_lo ulp_hi count fraction_of_elements\n", f);
    /* The distinct x values, in order. */
    size_t nx = 0, cap = 0;
    for (size_t s = 0; s < m->n_series; s++)
        cap += m->series[s].n;
    double *xs = malloc((cap ? cap : 1) * sizeof *xs);
    if (!xs) {
        fclose(f);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    for (size_t s = 0; s < m->n_series; s++) {
        for (size_t i = 0; i < m->series[s].n; i++) {
            double x = m->series[s].x[i];
            size_t at = 0;
            while (at < nx && xs[at] < x)
                at++;
            if (at < nx && xs[at] == x)
                continue;
            memmove(xs + at + 1, xs + at, (nx - at) * sizeof *xs);
            xs[at] = x;
            nx++;
        }
    }
    for (size_t xi = 0; xi < nx; xi++) {
        uint64_t count[ULP_DIFF_HIST_BINS] = {0}, elements = 0;
        for (size_t s = 0; s < m->n_series; s++) {
            for (size_t i = 0; i < m->series[s].n; i++) {
                if (m->series[s].x[i] != xs[xi])
                    continue;
                const ulp_diff_row *row = &r->rows[m->series[s].rows[i]];
                elements += row->elements;
                for (int k = 0; k < ULP_DIFF_HIST_BINS; k++)
                    count[k] += row->m.hist[k];
            }
        }
        if (xi)
            fputc('\n', f);
        for (int k = 1; k <= m->max_bin; k++) {
            ulp__plot_dat_num(f, xs[xi]);
            fprintf(f, " %d %llu %llu %llu ", k, (unsigned long long)ulp_diff_hist_lo(k),
                    (unsigned long long)ulp_diff_hist_hi(k), (unsigned long long)count[k]);
            ulp__plot_dat_num(f, elements ? (double)count[k] / (double)elements : 0.0);
            fputc('\n', f);
        }
    }
    free(xs);
    return close_out(f, path, err);
}

ulp_status ulp__plot_write_logits_dat(const ulp__plot_model *m, size_t li, const char *path,
                                      ulp_error *err)
{
    const ulp_diff_result *r = m->r;
    const ulp_diff_logits *lg = &r->logits[li];
    FILE *f = open_out(path, err);
    if (!f)
        return err ? err->status : ULP_EIO;
    header(f, r, "logits margins");
    fputs("# capture: ", f);
    ulp__plot_dat_word(f, lg->name);
    fprintf(f, " occurrence %lld, %llu rows x %llu vocab, %llu argmax flips\n",
            (long long)lg->occurrence, (unsigned long long)lg->rows, (unsigned long long)lg->vocab,
            (unsigned long long)lg->argmax_flips);
    fputs("# margin = top-1 minus top-2 logit of a row; min_margin = the smaller of A's and B's;\n"
          "# max_perturbation = max |z_A - z_B| over the row\n",
          f);
    fputs("# columns: row argmax_a argmax_b margin_a margin_b min_margin max_perturbation "
          "flipped at_risk\n",
          f);
    for (uint64_t i = 0; i < lg->rows; i++) {
        double ma = lg->margin_a[i], mb = lg->margin_b[i];
        double mn = isnan(ma) ? mb : isnan(mb) ? ma : (ma < mb ? ma : mb);
        fprintf(f, "%llu %lld %lld ", (unsigned long long)i, (long long)lg->argmax_a[i],
                (long long)lg->argmax_b[i]);
        ulp__plot_dat_num(f, ma);
        fputc(' ', f);
        ulp__plot_dat_num(f, mb);
        fputc(' ', f);
        ulp__plot_dat_num(f, mn);
        fputc(' ', f);
        ulp__plot_dat_num(f, lg->max_perturbation[i]);
        fprintf(f, " %d %d\n", lg->flipped[i] ? 1 : 0, lg->at_risk[i] ? 1 : 0);
    }
    return close_out(f, path, err);
}
