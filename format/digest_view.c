/* A name's digest tables in either packed layout (digest_view.h). */
#include "digest_view.h"

#include <stdlib.h>
#include <string.h>

#include "digest_rows.h"
#include "digest_table.h"

static void view_init(ulp__digest_view *v)
{
    memset(v, 0, sizeof *v);
    v->occ = v->digest = v->position = v->request = v->inputs = v->value = H5I_INVALID_HID;
}

/* The tables of group g, either layout's (inputs 0 long when absent): their lengths in n. */
static void open_tables(hid_t g, hid_t *occ, hid_t *digest, hid_t *position, hid_t *request,
                        hid_t *inputs, int64_t n[5])
{
    n[0] = ulp__digest_open_1d(g, "occurrences", occ);
    n[1] = ulp__digest_open_1d(g, "digest", digest);
    n[2] = ulp__digest_open_1d(g, "position", position);
    n[3] = ulp__digest_open_1d(g, "request", request);
    n[4] = H5Lexists(g, "inputs", H5P_DEFAULT) > 0 ? ulp__digest_open_1d(g, "inputs", inputs) : 0;
}

const char *ulp__digest_view_group(hid_t g, ulp__digest_view *v)
{
    view_init(v);
    v->owned = 1;
    int64_t n[5];
    open_tables(g, &v->occ, &v->digest, &v->position, &v->request, &v->inputs, n);
    int64_t nocc = n[0], nd = n[1], np = n[2], nr = n[3], ni = n[4];
    if (H5Lexists(g, "value", H5P_DEFAULT) > 0)
        v->value = H5Dopen2(g, "value", H5P_DEFAULT);
    if (nocc < 0 || nd < 0 || np < 0 || nr < 0)
        return "lacks its 1-D datasets occurrences, digest, position and request";
    if (nd != np || nd != nr)
        return "has digest, position and request datasets of different lengths";
    if (ni < 0 && v->inputs >= 0) { /* read as absent: a kept capture's inputs then fail */
        H5Dclose(v->inputs);
        v->inputs = H5I_INVALID_HID;
    }
    v->nocc = (uint64_t)nocc;
    v->nrows = (uint64_t)nd;
    v->ninputs = ni > 0 ? (uint64_t)ni : 0;
    return NULL;
}

void ulp__digest_view_close(ulp__digest_view *v)
{
    hid_t own[] = {v->occ, v->digest, v->position, v->request, v->inputs};
    for (size_t i = 0; v->owned && i < sizeof own / sizeof own[0]; i++)
        if (own[i] >= 0)
            H5Dclose(own[i]);
    if (v->value >= 0)
        H5Dclose(v->value);
    view_init(v);
}

hid_t ulp__digest_name_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(ulp__digest_name));
    hid_t s = ulp__digest_str_type(0, 1);
    int bad = t < 0 || s < 0;
#define M(f, ty) bad = bad || H5Tinsert(t, #f, HOFFSET(ulp__digest_name, f), ty) < 0
    M(name, s);
    M(occurrences_first, H5T_NATIVE_UINT64);
    M(occurrences, H5T_NATIVE_UINT64);
    M(rows_first, H5T_NATIVE_UINT64);
    M(rows, H5T_NATIVE_UINT64);
    M(inputs_first, H5T_NATIVE_UINT64);
    M(inputs, H5T_NATIVE_UINT64);
    M(has_value, H5T_NATIVE_UINT8);
#undef M
    if (s >= 0)
        H5Tclose(s);
    if (bad && t >= 0) {
        H5Tclose(t);
        t = H5I_INVALID_HID;
    }
    return t;
}

/* Whether [first, first + n) lies within [0, len). */
static int within(uint64_t first, uint64_t n, uint64_t len)
{
    return first <= len && n <= len - first;
}

const char *ulp__digests_shared_open(hid_t g, ulp__digests_shared *d)
{
    memset(d, 0, sizeof *d);
    d->occ = d->digest = d->position = d->request = d->inputs = d->values = H5I_INVALID_HID;
    int64_t n[5];
    open_tables(g, &d->occ, &d->digest, &d->position, &d->request, &d->inputs, n);
    int64_t nocc = n[0], nd = n[1], np = n[2], nr = n[3], ni = n[4];
    hid_t names = H5I_INVALID_HID;
    int64_t nn = ulp__digest_open_1d(g, "names", &names);
    if (H5Lexists(g, "value", H5P_DEFAULT) > 0)
        d->values = H5Gopen2(g, "value", H5P_DEFAULT);
    const char *why = NULL;
    hid_t mt = ulp__digest_name_type();
    if (nocc < 0 || nd < 0 || np < 0 || nr < 0 || nn < 0 || ni < 0)
        why = "lacks its 1-D datasets names, occurrences, digest, position and request";
    else if (nd != np || nd != nr)
        why = "has digest, position and request datasets of different lengths";
    else if (mt < 0 || (d->names = calloc((size_t)(nn > 0 ? nn : 1), sizeof *d->names)) == NULL)
        why = "is too large to read";
    else if (ulp__digest_read_rows(names, mt, 1, 0, (uint64_t)nn, 1, d->names) < 0)
        why = "has a `names` table that cannot be read";
    /* What HDF5 allocated of the names, read whole or not, is freed at the close: the
     * others are still NULL (calloc). */
    if (d->names != NULL)
        d->n = (size_t)nn;
    if (why == NULL) {
        d->nocc = (uint64_t)nocc;
        d->nrows = (uint64_t)nd;
        d->ninputs = (uint64_t)ni;
    }
    for (size_t i = 0; why == NULL && i < d->n; i++) {
        const ulp__digest_name *e = &d->names[i];
        if (e->name == NULL || e->name[0] == '\0' || strchr(e->name, '/') != NULL)
            why = "has a `names` element that is no capture name";
        else if (!within(e->occurrences_first, e->occurrences, d->nocc) ||
                 !within(e->rows_first, e->rows, d->nrows) ||
                 !within(e->inputs_first, e->inputs, d->ninputs))
            why = "has a name whose ranges lie past the shared datasets";
        else if (e->has_value && (d->values < 0 || H5Lexists(d->values, e->name, H5P_DEFAULT) <= 0))
            why = "has a name that keeps rows without its dataset in `value`";
    }
    if (names >= 0)
        H5Dclose(names);
    if (mt >= 0)
        H5Tclose(mt);
    return why;
}

const char *ulp__digests_shared_view(const ulp__digests_shared *d, size_t i, ulp__digest_view *v)
{
    view_init(v);
    const ulp__digest_name *e = &d->names[i];
    v->occ = d->occ;
    v->digest = d->digest;
    v->position = d->position;
    v->request = d->request;
    v->inputs = d->inputs;
    v->occ_base = e->occurrences_first;
    v->nocc = e->occurrences;
    v->row_base = e->rows_first;
    v->nrows = e->rows;
    v->inputs_base = e->inputs_first;
    v->ninputs = e->inputs;
    if (e->has_value && (v->value = H5Dopen2(d->values, e->name, H5P_DEFAULT)) < 0)
        return "has a `value` dataset that does not open";
    return NULL;
}

void ulp__digests_shared_close(ulp__digests_shared *d)
{
    hid_t ds[] = {d->occ, d->digest, d->position, d->request, d->inputs};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
        if (ds[i] >= 0)
            H5Dclose(ds[i]);
    if (d->values >= 0)
        H5Gclose(d->values);
    if (d->names != NULL) {
        for (size_t i = 0; i < d->n; i++)
            H5free_memory(d->names[i].name); /* HDF5 allocated it */
        free(d->names);
    }
    memset(d, 0, sizeof *d);
    d->occ = d->digest = d->position = d->request = d->inputs = d->values = H5I_INVALID_HID;
}
