/*
 * A ladder run's files are closed once the run is no longer needed
 * (ladder_priv.h): memory grows with the classes kept open, not the runs.
 */
#include <stdlib.h>

#include "common/error.h"
#include "ladder_priv.h"

void ulp__ladder_close_run(const ulp__ladder_ctx *c, size_t i)
{
    for (size_t f = 0; c->snaps[i] && f < c->r->runs[i].n_files; f++)
        ulp_snapshot_close(c->snaps[i][f]);
    free(c->snaps[i]);
    c->snaps[i] = NULL;
}
