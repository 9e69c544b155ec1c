/* ptx_text: reads a whole text file (the kernels' PTX) into a NUL-terminated
 * malloc'd buffer, for the test and benchmark programs. Header-only, so every way of
 * building them (meson, gpu-check's plain cc) picks it up unchanged. */
#ifndef VR_PTX_TEXT_H
#define VR_PTX_TEXT_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* Returns the text, or NULL with errno set. */
static inline char *vr_read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
        if (cap - len - 1 == 0) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                errno = ENOMEM;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

#endif
