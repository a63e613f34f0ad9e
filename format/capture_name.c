/* Which names a capture may have (capture_name.h). */
#include <stdint.h>
#include <string.h>

#include "capture_name.h"

int ulp__capture_name_ok(const char *name)
{
    if (name == NULL || name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return 0;
    const unsigned char *p = (const unsigned char *)name;
    while (*p) {
        unsigned c = *p;
        if (c == '/' || c < 0x20 || c == 0x7f)
            return 0;
        if (c < 0x80) {
            p++;
            continue;
        }
        /* A UTF-8 sequence: lead byte, continuation bytes, no overlongs,
         * no surrogates, nothing above U+10FFFF. */
        int n;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        for (int i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i] & 0x3fu);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        p += n + 1;
    }
    return 1;
}
