/*
 * A report of a streamed diff (ulp_diff_stream()): each batch of rows is
 * formatted as it comes into a spool (memory, then a temporary file:
 * report_spool.c), and what the reports'
 * sentences need of all rows is tallied (report_tally.c); once the result
 * is known, the report is its head, the file's rows and its tail -- the
 * bytes ulp_report_write() writes for the same result, from the same code.
 * The table's rows are kept as their full name and the rest of their line,
 * the name column's width being known only at the end.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "report_json_out.h"
#include "report_priv.h"

struct ulp_report_stream {
    ulp_report_format format;
    unsigned flags;
    ulp__spool sp; /* the formatted rows (a table row: one record)      */
    FILE *spool;   /* sp.f                                              */
    ulp__tally tally;
    const struct ulp_tp_join_info *tp[2]; /* the joined sides, for the CSV's rows */
};

ulp_status ulp_report_stream_open(ulp_report_format format, unsigned flags, ulp_report_stream **out,
                                  ulp_error *err)
{
    *out = NULL;
    if ((int)format < ULP_REPORT_TABLE || format > ULP_REPORT_JSON)
        return ulp__error(err, ULP_EINVAL, "unknown report format %d", (int)format);
    ulp_report_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    s->format = format;
    s->flags = flags;
    ulp__tally_init(&s->tally);
    if (ulp__spool_open(&s->sp) != 0) {
        int e = errno;
        free(s);
        return ulp__error(err, ULP_EIO, "cannot make a spool for the report: %s", strerror(e));
    }
    s->spool = s->sp.f;
    *out = s;
    return ULP_OK;
}

void ulp_report_stream_tp_join(ulp_report_stream *s, const struct ulp_tp_join_info *a,
                               const struct ulp_tp_join_info *b)
{
    s->tp[0] = a;
    s->tp[1] = b;
}

void ulp_report_stream_free(ulp_report_stream *s)
{
    if (s == NULL)
        return;
    ulp__spool_close(&s->sp);
    ulp__tally_release(&s->tally);
    free(s);
}

/*
 * A table row in the spool: the lengths of its full name and of the rest
 * of its line, then both (four small writes and reads a row were 3% of a
 * diff of 10,000 captures), gathered a block of rows at a time (a write a
 * row was another 2%).
 */
typedef struct record_head {
    uint32_t name, rest;
} record_head;
#define RECORD_MAX (sizeof(record_head) + ULP__FULL_NAME + ULP__TABLE_LINE)

typedef struct records {
    FILE *f;
    size_t n;
    char b[16 * RECORD_MAX];
} records;

static void put_record(records *rb, const char *full, size_t nf, const char *rest, size_t nr)
{
    if (sizeof rb->b - rb->n < RECORD_MAX) {
        fwrite(rb->b, 1, rb->n, rb->f);
        rb->n = 0;
    }
    char *p = rb->b + rb->n;
    record_head h = {(uint32_t)nf, (uint32_t)nr};
    memcpy(p, &h, sizeof h);
    memcpy(p + sizeof h, full, nf);
    memcpy(p + sizeof h + nf, rest, nr);
    rb->n += sizeof h + nf + nr;
}

/* Reads the spool back: in place from memory, or from its file in blocks
 * of whole records. */
typedef struct spool_reader {
    FILE *f; /* NULL: every record is at p */
    const char *p;
    size_t at, end;
    char buf[1 << 16];
    char out[1 << 16]; /* the table's lines, written a block at a time */
    size_t nout;
} spool_reader;

/* The next record's name and rest; -1 when short. */
static int get_record(spool_reader *sr, const char **full, size_t *nf, const char **rest,
                      size_t *nr)
{
    record_head h;
    if (sr->f != NULL && sr->end - sr->at < RECORD_MAX) {
        memmove(sr->buf, sr->p + sr->at, sr->end - sr->at);
        sr->end -= sr->at;
        sr->at = 0;
        sr->end += fread(sr->buf + sr->end, 1, sizeof sr->buf - sr->end, sr->f);
        sr->p = sr->buf;
    }
    if (sr->end - sr->at < sizeof h)
        return -1;
    memcpy(&h, sr->p + sr->at, sizeof h);
    if (h.name >= ULP__FULL_NAME || h.rest > ULP__TABLE_LINE ||
        sr->end - sr->at < sizeof h + h.name + h.rest)
        return -1;
    const char *p = sr->p + sr->at + sizeof h;
    *full = p;
    *nf = h.name;
    *rest = p + h.name;
    *nr = h.rest;
    sr->at += sizeof h + h.name + h.rest;
    return 0;
}

/* Rows as the table and Markdown show them (escaped), formatted and tallied. */
static int shown_rows(ulp_report_stream *s, const ulp_diff_row *rows, size_t n)
{
    ulp_diff_result batch;
    memset(&batch, 0, sizeof batch);
    batch.rows = (ulp_diff_row *)(uintptr_t)rows;
    batch.n_rows = n;
    ulp_diff_result *shown = ulp__report_display(&batch, s->format == ULP_REPORT_MARKDOWN);
    if (shown == NULL)
        return -1;
    ulp__tally_rows(&s->tally, shown->rows, n);
    if (s->format == ULP_REPORT_MARKDOWN) {
        ulp__markdown_rows(shown->rows, n, s->spool);
    } else {
        char full[ULP__FULL_NAME], rest[ULP__TABLE_LINE];
        records *rb = malloc(sizeof *rb);
        if (rb == NULL) {
            ulp__report_display_free(shown);
            return -1;
        }
        rb->f = s->spool;
        rb->n = 0;
        for (size_t i = 0; i < n; i++) {
            size_t nf = ulp__full_name(full, sizeof full, &shown->rows[i]);
            size_t k = ulp__table_rest(&shown->rows[i], (s->flags & ULP_REPORT_COLOR) != 0, rest);
            put_record(rb, full, nf, rest, k);
        }
        fwrite(rb->b, 1, rb->n, rb->f);
        free(rb);
    }
    ulp__report_display_free(shown);
    return 0;
}

ulp_status ulp_report_stream_rows(void *stream, const ulp_diff_row *rows, size_t first, size_t n,
                                  ulp_error *err)
{
    ulp_report_stream *s = stream;
    int rc = 0;
    switch (s->format) {
    case ULP_REPORT_TABLE:
    case ULP_REPORT_MARKDOWN:
        rc = shown_rows(s, rows, n);
        break;
    case ULP_REPORT_CSV:
        ulp__csv_rows(rows, n, s->tp[0], s->tp[1], s->spool);
        break;
    case ULP_REPORT_JSON:
        ulp__tally_rows(&s->tally, rows, n);
        rc = ulp__json_spool_rows(rows, n, s->spool);
        break;
    }
    if (rc != 0 || s->tally.oom)
        return ulp__error(err, ULP_ENOMEM, "out of memory writing the report");
    /* Flushed batch by batch: a temporary file that cannot take the rows
     * (a full /tmp) fails here, during the comparison, never once the
     * caller has opened (truncated) the report's own file. */
    if (ulp__spool_flush(&s->sp) != 0) {
        int e = errno;
        /* The rows still in memory, or tmpfile()'s stream, not given. */
        if (e == ENOMEM)
            return ulp__error(err, ULP_ENOMEM, "out of memory writing the report");
        return ulp__error(err, ULP_EIO, "cannot write the report's temporary file: %s",
                          e != 0 ? strerror(e) : "write error");
    }
    return ULP_OK;
}

/* The spooled rows to f as they are; 0, or -1 when reading them failed. */
static int copy_spool(FILE *spool, const char *mem, size_t len, FILE *f)
{
    char buf[1 << 16];
    size_t n;
    if (mem != NULL) {
        fwrite(mem, 1, len, f);
        return 0;
    }
    while ((n = fread(buf, 1, sizeof buf, spool)) > 0)
        fwrite(buf, 1, n, f);
    return ferror(spool) ? -1 : 0;
}

/* The table: the rows' names fitted to the width of the longest. */
static ulp_status write_table(ulp_report_stream *s, const ulp_diff_result *shown, FILE *spool,
                              const char *mem, size_t len, FILE *f)
{
    size_t wname = ulp__table_width(&s->tally), nr;
    spool_reader *sr = malloc(sizeof *sr);
    if (sr == NULL)
        return ULP_ENOMEM;
    sr->f = mem != NULL ? NULL : spool;
    sr->p = mem != NULL ? mem : sr->buf;
    sr->at = 0;
    sr->end = mem != NULL ? len : 0;
    sr->nout = 0;
    ulp__table_head(shown, wname, f);
    for (size_t i = 0; i < shown->n_rows; i++) {
        const char *full, *rest;
        size_t nf;
        if (get_record(sr, &full, &nf, &rest, &nr) != 0) {
            free(sr);
            return ULP_EIO;
        }
        if (sizeof sr->out - sr->nout < ULP__TABLE_LINE) {
            fwrite(sr->out, 1, sr->nout, f);
            sr->nout = 0;
        }
        sr->nout += ulp__table_line(sr->out + sr->nout, full, nf, wname, rest, nr);
    }
    fwrite(sr->out, 1, sr->nout, f);
    free(sr);
    return ulp__table_tail(shown, &s->tally, f);
}

static ulp_status write_json(ulp_report_stream *s, const ulp_diff_result *r, FILE *spool, FILE *f,
                             ulp_error *err)
{
    ulp__jw *w = malloc(sizeof *w);
    if (w == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory writing the JSON report");
    ulp__jw_init(w, f, 0);
    ulp__json_head(w, r);
    int rc = ulp__json_unspool(spool, f);
    ulp__json_rows_end(r->n_rows, f);
    ulp__json_tail(w, r, s->tally.rows - s->tally.nident);
    free(w);
    if (rc == -2)
        return ulp__error(err, ULP_ENOMEM, "out of memory writing the JSON report");
    /* Its rows not read back whole: the temporary file failed, not `f`. */
    if (rc != 0 && !ferror(f))
        return ulp__error(err, ULP_EIO, "cannot read the report's temporary file back (damaged?)");
    if (rc != 0 || ferror(f))
        return ulp__report_write_error(err, ULP_EIO);
    return ULP_OK;
}

ulp_status ulp_report_stream_write(ulp_report_stream *s, const ulp_diff_result *r, FILE *f,
                                   ulp_error *err)
{
    ulp_status st = ULP_OK;
    const char *mem;
    size_t len;
    errno = 0;
    FILE *spool = ulp__spool_rewind(&s->sp, &mem, &len);
    if (spool == NULL && errno == ENOMEM) /* the spool's reader in memory not given */
        return ulp__error(err, ULP_ENOMEM, "out of memory writing the report");
    if (spool == NULL)
        return ulp__error(err, ULP_EIO, "cannot read the report's temporary file");
    errno = 0;
    if (s->format == ULP_REPORT_JSON)
        return write_json(s, r, spool, f, err);
    if (s->format == ULP_REPORT_CSV) {
        ulp__csv_head(f);
        st = copy_spool(spool, mem, len, f) != 0 || ferror(f) ? ULP_EIO : ULP_OK;
    } else {
        ulp_diff_result *shown = ulp__report_display(r, s->format == ULP_REPORT_MARKDOWN);
        if (shown == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory writing the report");
        if (s->format == ULP_REPORT_TABLE) {
            st = write_table(s, shown, spool, mem, len, f);
        } else {
            ulp__markdown_head(shown, &s->tally, f);
            st = copy_spool(spool, mem, len, f) != 0 ? ULP_EIO : ulp__markdown_tail(shown, f);
        }
        ulp__report_display_free(shown);
    }
    if (st != ULP_OK)
        return ulp__report_write_error(err, st);
    return ULP_OK;
}
