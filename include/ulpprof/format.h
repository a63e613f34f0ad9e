/*
 * The names and limits of the snapshot format (format/FORMAT.md) that both
 * sides of the file share: the capture roles and the largest rank.  The
 * collector writes them, the analyzer reads them; neither spells them out.
 */
#ifndef ULPPROF_FORMAT_H
#define ULPPROF_FORMAT_H

#include "ulpprof/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ULP_MAX_RANK 8 /* tensors have rank 0..8 */

/* What a capture holds; stored as the "role" attribute by name. */
typedef enum ulp_role {
    ULP_ROLE_ACTIVATION = 0,
    ULP_ROLE_LOGITS,
    ULP_ROLE_KV,
    ULP_ROLE_INPUT,
    ULP_ROLE_WEIGHT,
    ULP_ROLE_COUNT
} ulp_role;

/* "activation", "logits", ...; NULL for an invalid role. */
ULP_API const char *ulp_role_name(ulp_role role);
/* The role of a FORMAT.md name; -1 when unknown or NULL. */
ULP_API int ulp_role_from_name(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_FORMAT_H */
