/* The capture roles' names (FORMAT.md "role"), for writer and reader alike. */
#include <string.h>

#include "ulpprof/format.h"

static const char *const role_names[ULP_ROLE_COUNT] = {
    [ULP_ROLE_ACTIVATION] = "activation", [ULP_ROLE_LOGITS] = "logits", [ULP_ROLE_KV] = "kv",
    [ULP_ROLE_INPUT] = "input",           [ULP_ROLE_WEIGHT] = "weight",
};

const char *ulp_role_name(ulp_role role)
{
    if ((int)role < 0 || role >= ULP_ROLE_COUNT)
        return NULL;
    return role_names[role];
}

int ulp_role_from_name(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < ULP_ROLE_COUNT; i++)
        if (strcmp(name, role_names[i]) == 0)
            return i;
    return -1;
}
