/*
 * The per-name facts of a snapshot's captures that a comparison pairs by
 * (snapshot_summary.h gives a snapshot's), and the rule that gathers them
 * (name_summary.c).  Not installed.
 */
#ifndef ULPPROF_FORMAT_NAME_SUMMARY_H
#define ULPPROF_FORMAT_NAME_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/snapshot.h"

/* One distinct capture name of a snapshot. */
typedef struct ulp__name_summary {
    const char *name; /* the snapshot's copy: the `name` of each of its captures */
    uint64_t count;   /* its captures                                            */
    int contiguous;   /* its k-th capture in seq order has occurrence k, every k   */
    int positions;    /* 1 every capture of it has positions, in one row form
                         (ulp__row_form); -2 every one has, in several forms;
                         0 none has; -1 some have                               */
    uint64_t form;    /* ulp__row_form of its first capture                      */
} ulp__name_summary;

/*
 * A capture's row form: its dtype, and its axes after the row axes (the
 * shape of one (request, position) row), hashed.  A name's captures are
 * paired on (request, position) keys as one tensor only when all of them
 * have one form: the rows of captures of two forms cannot stand in one
 * compared view (an engine's decode-step scores, a row as wide as the
 * context so far, or a name captured in f32 and in bf16).  Equal forms
 * hash equal; a collision only lets the aligned pairing refuse the name
 * (a dtype or shape mismatch) as it did before.
 */
uint64_t ulp__row_form(const ulp_capture_info *c);

/*
 * The positions state of a name (ulp__name_summary.positions) with capture
 * c added: *state and *form as after the name's earlier captures, `first`
 * when c is its first.  The one rule of the summaries and of the
 * analyzer's name table (analyzer/names.c).
 */
void ulp__positions_add(int *state, uint64_t *form, int first, const ulp_capture_info *c);

typedef struct ulp__snapshot_summary {
    const ulp__name_summary *names; /* [nnames], sorted by strcmp(3) of the name */
    size_t nnames;
    int any_rows;           /* some capture has positions (row_rank > 0)    */
    uint64_t data_bytes;    /* elements x dtype size, summed over captures  */
    size_t largest_mapped;  /* the largest capture ulp__snapshot_mapped()   */
    uint64_t largest_bytes; /* maps (its bytes), or the capture count, 0    */
} ulp__snapshot_summary;

/* The summary of the name `name` (any copy of it), or NULL when s has none. */
const ulp__name_summary *ulp__snapshot_summary_find(const ulp__snapshot_summary *sum,
                                                    const char *name);

/*
 * Adds capture i of the snapshot, `bytes` bytes of data, to `sum` and to
 * its name's entry `ns` (all zero but the name before the name's first
 * capture); `mapped`: whether ulp__snapshot_mapped(s, i, 0) gives its
 * bytes.  The one rule of the walk of a table read whole and of the
 * open's pass over a table made in pages.
 */
void ulp__summary_add(ulp__snapshot_summary *sum, ulp__name_summary *ns, const ulp_capture_info *c,
                      size_t i, uint64_t bytes, int mapped);

/*
 * A summary in one allocation (free(3) frees it; the close frees the
 * snapshot's): *sum's fields with a copy of names[0..sum->nnames), which
 * are sorted here.  NULL when out of memory.
 */
ulp__snapshot_summary *ulp__snapshot_summary_new(const ulp__snapshot_summary *sum,
                                                 ulp__name_summary *names);

#endif /* ULPPROF_FORMAT_NAME_SUMMARY_H */
