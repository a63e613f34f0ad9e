/*
 * Internals of the site map (sites.c), for the pairing by site.  Not
 * installed.
 */
#ifndef ULPPROF_ANALYZER_SITES_PRIV_H
#define ULPPROF_ANALYZER_SITES_PRIV_H

#include "layouts.h"
#include "ulpprof/sites.h"

/*
 * As ulp_site_lookup(), and *lay the layout the matching rule gives the
 * capture (kind ULP__LAYOUT_NONE: the capture is the site's tensor; a
 * shard's rank read from the name).  A built-in rule's per-group qkv
 * layout has D = 0: the head size is not in the names.
 */
const char *ulp__site_lookup_layout(const ulp_site_map *m, const char *name, int32_t layer_attr,
                                    int32_t *layer, ulp__layout *lay);

#endif /* ULPPROF_ANALYZER_SITES_PRIV_H */
