/*
 * Device printf: nvcc turns printf(fmt, ...) into a call of the external
 * function vprintf(fmt, args), args being a buffer in the thread's local
 * memory that holds the arguments after C's default promotions (char and
 * short as int, float as double), each at its natural alignment. The
 * driver formats it on the host; so does this, as the CUDA programming
 * guide ("Formatted Output") describes the format:
 * %[flags][width][.precision][size]type with flags `# 0 - + space`, width
 * digits or `*`, precision digits or `*`, size `h hh l ll`, type one of
 * `c d i o u x X p e E f g G a A s`, each handed to the host's printf. A
 * specifier of another form is printed as written; so is every specifier
 * after the 32nd argument (the guide: "additional arguments beyond this
 * will be ignored, and the format specifier output as-is").
 */
#include "ptx_int.h"
#include "sim.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { PTX_PRINTF_MAX_ARGS = 32 };

struct pbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

static bool reserve(struct pbuf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t nc = b->cap ? b->cap : 128;
    while (nc < b->len + more + 1)
        nc *= 2;
    char *n = sim_realloc(b->p, nc);
    if (!n) {
        b->oom = true;
        return false;
    }
    b->p = n;
    b->cap = nc;
    return true;
}

static void put(struct pbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

/* One conversion through the host's printf. */
__attribute__((format(printf, 2, 3))) static void putf(struct pbuf *b, const char *spec, ...)
{
    va_list ap;
    va_start(ap, spec);
    int n = vsnprintf(NULL, 0, spec, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    va_start(ap, spec);
    vsnprintf(b->p + b->len, (size_t)n + 1, spec, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* The next argument of size bytes (4 or 8), at its alignment. */
static uint64_t take(const unsigned char *args, size_t *off, size_t size)
{
    *off = (*off + size - 1) / size * size;
    uint64_t v = 0;
    memcpy(&v, args + *off, size);
    *off += size;
    return v;
}

int ptx_format(const char *fmt, const unsigned char *args, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (!fmt)
        return -1; /* documented: a NULL format string */
    struct pbuf b = { 0 };
    size_t off = 0;
    int nargs = 0;
    for (const char *p = fmt; *p;) {
        if (*p != '%') {
            const char *q = strchr(p, '%');
            size_t n = q ? (size_t)(q - p) : strlen(p);
            put(&b, p, n);
            p += n;
            continue;
        }
        const char *start = p++;
        if (*p == '%') {
            put(&b, "%", 1);
            p++;
            continue;
        }
        char flags[8];
        size_t nf = 0;
        while (*p && strchr("#0- +", *p)) {
            if (nf < sizeof flags - 1)
                flags[nf++] = *p;
            p++;
        }
        flags[nf] = '\0';
        bool wstar = false, pstar = false, prec = false;
        long width = -1, precision = -1;
        if (*p == '*') {
            wstar = true;
            p++;
        } else if (isdigit((unsigned char)*p)) {
            width = strtol(p, (char **)&p, 10);
        }
        if (*p == '.') {
            prec = true;
            p++;
            if (*p == '*') {
                pstar = true;
                p++;
            } else {
                precision = isdigit((unsigned char)*p) ? strtol(p, (char **)&p, 10) : 0;
            }
        }
        int size = 0; /* 1 h, 2 hh, 3 l, 4 ll */
        if (*p == 'h') {
            size = p[1] == 'h' ? 2 : 1;
            p += size;
        } else if (*p == 'l') {
            size = p[1] == 'l' ? 4 : 3;
            p += size - 2;
        }
        char t = *p;
        if (!t || !strchr("cdiouxXpeEfgGaAs", t)) {
            if (t)
                p++;
            put(&b, start, (size_t)(p - start)); /* not a specifier printf() takes */
            continue;
        }
        p++;
        int need = 1 + wstar + pstar;
        if (nargs + need > PTX_PRINTF_MAX_ARGS) {
            put(&b, start, (size_t)(p - start));
            continue;
        }
        nargs += need;
        if (wstar)
            width = (int32_t)take(args, &off, 4);
        if (pstar) {
            precision = (int32_t)take(args, &off, 4);
            if (precision < 0)
                prec = false; /* C: a negative precision is taken as omitted */
        }
        /* the specifier rebuilt with the widths as numbers */
        char spec[64];
        int sl = snprintf(spec, sizeof spec, "%%%s%s", flags, width < 0 && wstar ? "-" : "");
        if (width >= 0 || wstar)
            sl += snprintf(spec + sl, sizeof spec - (size_t)sl, "%ld", width < 0 ? -width : width);
        if (prec)
            sl += snprintf(spec + sl, sizeof spec - (size_t)sl, ".%ld", precision);
        const char *mod = "";
        switch (t) {
        case 'd': case 'i': case 'o': case 'u': case 'x': case 'X': {
            bool wide = size >= 3;
            mod = wide ? "ll" : size == 1 ? "h" : size == 2 ? "hh" : "";
            snprintf(spec + sl, sizeof spec - (size_t)sl, "%s%c", mod, t);
            uint64_t v = take(args, &off, wide ? 8 : 4);
            bool sgn = t == 'd' || t == 'i';
            if (wide)
                sgn ? putf(&b, spec, (long long)v) : putf(&b, spec, (unsigned long long)v);
            else
                sgn ? putf(&b, spec, (int)(int32_t)v) : putf(&b, spec, (unsigned)v);
            break;
        }
        case 'c':
            snprintf(spec + sl, sizeof spec - (size_t)sl, "c");
            putf(&b, spec, (int)(int32_t)take(args, &off, 4));
            break;
        case 's': {
            snprintf(spec + sl, sizeof spec - (size_t)sl, "s");
            const char *s = (const char *)(uintptr_t)take(args, &off, 8);
            putf(&b, spec, s ? s : "(null)");
            break;
        }
        case 'p':
            snprintf(spec + sl, sizeof spec - (size_t)sl, "p");
            putf(&b, spec, (void *)(uintptr_t)take(args, &off, 8));
            break;
        default: { /* e E f g G a A: a double */
            snprintf(spec + sl, sizeof spec - (size_t)sl, "%c", t);
            uint64_t v = take(args, &off, 8);
            double d;
            memcpy(&d, &v, sizeof d);
            putf(&b, spec, d);
            break;
        }
        }
    }
    if (b.oom) {
        sim_free(b.p);
        return -2; /* documented: an internal error */
    }
    *out = b.p;
    *len = b.len;
    return nargs;
}
