/*
 * The produced-token captures (FORMAT.md "Produced tokens"): captures named
 * `tokens`, f64 [rows, 2] with positions over axis 0, which `ulpprof
 * streams` reads and `ulpprof diff` names the first divergence last.
 */
#ifndef ULPPROF_PRODUCED_TOKENS_H
#define ULPPROF_PRODUCED_TOKENS_H

#include "ulpprof/snapshot.h"
#include "ulpprof/status.h"

#define ULP__TOKENS_NAME "tokens"

/* 1 when `name` is the produced tokens' name. */
int ulp__tokens_named(const char *name);

/*
 * ULP_OK when `c` is not named `tokens` or has the layout FORMAT.md gives
 * them; else ULP_EBADATTR and one line naming `path`, the capture and what
 * is wrong (its dtype, its shape, its positions).
 */
ulp_status ulp__tokens_check(const ulp_capture_info *c, const char *path, ulp_error *err);

#endif /* ULPPROF_PRODUCED_TOKENS_H */
