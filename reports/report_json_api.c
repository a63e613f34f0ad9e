/*
 * The public JSON writer (ulpprof/report.h): report_json_out.h's writer,
 * with the separators it leaves to its caller (ulp__jw_item() before a
 * value in an array) put in by itself, and a value out of place refused.
 */
#include <stdlib.h>

#include "report_json_out.h"
#include "ulpprof/report.h"

struct ulp_json {
    unsigned arrays; /* bit d: the container at depth d is an array */
    int keyed;       /* a key was written, its value not yet        */
    int values;      /* values written at the top (one at most)     */
    int bad;         /* something was given out of place            */
    ulp__jw w;
};

ulp_json *ulp_json_open(FILE *f)
{
    ulp_json *j = malloc(sizeof *j);
    if (j == NULL)
        return NULL;
    j->arrays = 0;
    j->keyed = 0;
    j->values = 0;
    j->bad = 0;
    ulp__jw_init(&j->w, f, 0);
    return j;
}

/* Whether a value may go here; writes the separator in an array. */
static int value(ulp_json *j)
{
    int d = j->w.depth;
    if (j->bad)
        return 0;
    if (d == 0) {
        j->bad = j->values++ != 0;
    } else if (j->arrays >> d & 1u) {
        ulp__jw_item(&j->w);
    } else {
        j->bad = !j->keyed;
        j->keyed = 0;
    }
    return !j->bad;
}

static void begin(ulp_json *j, char brace)
{
    if (!value(j))
        return;
    if (j->w.depth + 1 >= ULP__JW_DEPTH) {
        j->bad = 1;
        return;
    }
    ulp__jw_open(&j->w, brace);
    if (brace == '[')
        j->arrays |= 1u << j->w.depth;
    else
        j->arrays &= ~(1u << j->w.depth);
}

void ulp_json_object(ulp_json *j)
{
    begin(j, '{');
}

void ulp_json_array(ulp_json *j)
{
    begin(j, '[');
}

void ulp_json_end(ulp_json *j)
{
    if (j->bad || j->w.depth == 0 || j->keyed) {
        j->bad = 1;
        return;
    }
    ulp__jw_close(&j->w, j->arrays >> j->w.depth & 1u ? ']' : '}');
}

void ulp_json_key(ulp_json *j, const char *key)
{
    if (j->bad || j->w.depth == 0 || (j->arrays >> j->w.depth & 1u) || j->keyed || key == NULL) {
        j->bad = 1;
        return;
    }
    ulp__jw_key_str(&j->w, key);
    j->keyed = 1;
}

void ulp_json_string(ulp_json *j, const char *s)
{
    if (value(j))
        ulp__jw_str(&j->w, s);
}

void ulp_json_int(ulp_json *j, int64_t v)
{
    if (value(j))
        ulp__jw_int(&j->w, v);
}

void ulp_json_uint(ulp_json *j, uint64_t v)
{
    if (value(j))
        ulp__jw_u64(&j->w, v);
}

void ulp_json_real(ulp_json *j, double v)
{
    if (value(j))
        ulp__jw_num(&j->w, v);
}

void ulp_json_bool(ulp_json *j, int v)
{
    if (value(j))
        ulp__jw_bool(&j->w, v);
}

void ulp_json_null(ulp_json *j)
{
    if (value(j))
        ulp__jw_null(&j->w);
}

int ulp_json_close(ulp_json *j)
{
    if (j == NULL)
        return -1;
    int whole = !j->bad && j->w.depth == 0 && j->values == 1;
    ulp__jw_flush(&j->w);
    int rc = whole && !ferror(j->w.f) ? 0 : -1;
    free(j);
    return rc;
}
