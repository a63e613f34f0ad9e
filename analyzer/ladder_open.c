/*
 * A ladder run's files, opened while the run is needed and closed after
 * (ladder_priv.h): memory grows with the classes kept open, not the runs.
 */
#include <stdlib.h>

#include "common/error.h"
#include "ladder_priv.h"

ulp_status ulp__ladder_open_run(const ulp__ladder_ctx *c, size_t i, ulp_error *err)
{
    const ulp_ladder_run *run = &c->r->runs[i];
    if (c->snaps[i] != NULL)
        return ULP_OK;
    if ((c->snaps[i] = calloc(run->n_files, sizeof *c->snaps[i])) == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t f = 0; f < run->n_files; f++) {
        ulp_status st = ulp_snapshot_open(run->files[f].path, &c->snaps[i][f], err);
        if (st != ULP_OK) {
            ulp__ladder_close_run(c, i);
            return st;
        }
    }
    return ULP_OK;
}

void ulp__ladder_close_run(const ulp__ladder_ctx *c, size_t i)
{
    for (size_t f = 0; c->snaps[i] && f < c->r->runs[i].n_files; f++)
        ulp_snapshot_close(c->snaps[i][f]);
    free(c->snaps[i]);
    c->snaps[i] = NULL;
}
