/* jw: the JSON line builder of the decision log, over a caller-owned buffer.
 *
 * No malloc, no lock, no stdio: a line is built on the caller's stack (hot
 * paths included) and handed whole to vr_log_emit (log.h). The UTF-8 reader
 * is exported so that the test oracle that parses the log checks strings
 * with the same rule the writer follows.
 */
#include "jw.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "assert.h"

#define MAX_DEPTH 32

/* ---- JSON builder ----
 * Every append checks that the bytes and a terminating NUL fit before
 * writing, and a field that does not fit is rolled back, so after an
 * overflow the buffer still holds a NUL-terminated prefix of whole fields. */

static bool put(struct vr_jw *w, const char *s, size_t n)
{
    if (w->overflow)
        return false;
    VR_ASSERT(w->len < w->cap); /* room for the NUL is always kept */
    if (n >= w->cap - w->len) {
        w->overflow = true;
        return false;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
    return true;
}

static bool put_u64(struct vr_jw *w, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof(tmp);

    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return put(w, tmp + i, sizeof(tmp) - i);
}

/* Length of the well-formed UTF-8 sequence at s, or 0. JSON text must be
 * UTF-8, and paths and kernel names are arbitrary bytes. */
size_t vr_utf8_seq(const unsigned char *s)
{
    unsigned c = s[0], cp;
    size_t n;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    cp = c & (0x3fu >> (n - 1));
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* Control characters become \u00XX; bytes that are not UTF-8 are written
 * the same way (their Latin-1 reading) so the line still parses. */
static bool put_str(struct vr_jw *w, const char *str)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;

    if (!put(w, "\"", 1))
        return false;
    while (*s) {
        const unsigned char *run = s;
        size_t n;

        while (*s >= 0x20 && *s != '"' && *s != '\\' && (n = vr_utf8_seq(s)) > 0)
            s += n;
        if (s > run && !put(w, (const char *)run, (size_t)(s - run)))
            return false;
        if (!*s)
            break;
        if (*s == '"' || *s == '\\') {
            char esc[2] = { '\\', (char)*s };
            if (!put(w, esc, 2))
                return false;
        } else {
            char esc[6] = { '\\', 'u', '0', '0', hex[*s >> 4], hex[*s & 15] };
            if (!put(w, esc, 6))
                return false;
        }
        s++;
    }
    return put(w, "\"", 1);
}

static bool in_array(const struct vr_jw *w)
{
    return w->depth > 0 && (w->arrays >> (w->depth - 1)) & 1u;
}

/* Comma and key. A key inside an array, or none inside an object, would
 * produce invalid JSON, so it drops the line instead. */
static bool field(struct vr_jw *w, const char *key)
{
    if (w->overflow)
        return false;
    if (w->finished || (key != NULL) == in_array(w)) {
        w->overflow = true;
        return false;
    }
    if (w->need_comma && !put(w, ",", 1))
        return false;
    if (key && !(put_str(w, key) && put(w, ":", 1)))
        return false;
    return true;
}

/* A failed field leaves no partial bytes behind. */
static void done(struct vr_jw *w, size_t mark, bool ok)
{
    if (ok) {
        w->need_comma = true;
        return;
    }
    w->len = mark;
    if (w->cap > 0)
        w->buf[mark] = '\0';
}

void vr_jw_begin(struct vr_jw *w, char *buf, size_t cap, const char *event)
{
    int saved = errno;
    struct timespec ts;
    char frac[6];
    long us;
    bool ok;

    *w = (struct vr_jw){ .buf = buf, .cap = buf ? cap : 0 };
    if (w->cap == 0) {
        w->overflow = true;
        errno = saved;
        return;
    }
    buf[0] = '\0';
    clock_gettime(CLOCK_REALTIME, &ts);
    us = ts.tv_nsec / 1000;
    for (int i = 5; i >= 0; i--, us /= 10)
        frac[i] = (char)('0' + us % 10);
    ok = put(w, "{\"ts\":", 6) && put_u64(w, (uint64_t)ts.tv_sec) && put(w, ".", 1) &&
         put(w, frac, 6) && put(w, ",\"pid\":", 7) && put_u64(w, (uint64_t)getpid()) &&
         put(w, ",\"event\":", 9) && put_str(w, event ? event : "");
    done(w, 0, ok);
    errno = saved;
}

void vr_jw_str(struct vr_jw *w, const char *key, const char *value)
{
    int saved = errno;
    size_t mark = w->len;

    done(w, mark, field(w, key) && (value ? put_str(w, value) : put(w, "null", 4)));
    errno = saved;
}

void vr_jw_u64(struct vr_jw *w, const char *key, uint64_t value)
{
    int saved = errno;
    size_t mark = w->len;

    done(w, mark, field(w, key) && put_u64(w, value));
    errno = saved;
}

void vr_jw_i64(struct vr_jw *w, const char *key, int64_t value)
{
    int saved = errno;
    size_t mark = w->len;
    /* Negating INT64_MIN overflows int64_t but not uint64_t. */
    uint64_t mag = value < 0 ? -(uint64_t)value : (uint64_t)value;

    done(w, mark, field(w, key) && (value >= 0 || put(w, "-", 1)) && put_u64(w, mag));
    errno = saved;
}

void vr_jw_hex(struct vr_jw *w, const char *key, uint64_t value)
{
    static const char hex[] = "0123456789abcdef";
    int saved = errno;
    size_t mark = w->len;
    char tmp[20];
    size_t i = sizeof(tmp);

    tmp[--i] = '"';
    do {
        tmp[--i] = hex[value & 15];
        value >>= 4;
    } while (value);
    tmp[--i] = 'x';
    tmp[--i] = '0';
    tmp[--i] = '"';
    done(w, mark, field(w, key) && put(w, tmp + i, sizeof(tmp) - i));
    errno = saved;
}

void vr_jw_bool(struct vr_jw *w, const char *key, bool value)
{
    int saved = errno;
    size_t mark = w->len;

    done(w, mark, field(w, key) && (value ? put(w, "true", 4) : put(w, "false", 5)));
    errno = saved;
}

/* The shortest of %.15g..%.17g that reads back exactly, so 0.1 is written
 * "0.1". printf follows LC_NUMERIC, which the program may have changed, so
 * the radix character (whatever its bytes) is rewritten as '.'. */
static bool put_double(struct vr_jw *w, double v)
{
    char tmp[40], out[40];
    size_t n = 0;
    bool radix = false;

    if (!isfinite(v))
        return put(w, "null", 4);
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    for (const char *s = tmp; *s; s++) {
        bool numeric = (*s >= '0' && *s <= '9') || *s == '-' || *s == '+' || *s == 'e';
        if (numeric) {
            out[n++] = *s;
            radix = false;
        } else if (!radix) {
            out[n++] = '.';
            radix = true;
        }
    }
    return put(w, out, n);
}

void vr_jw_double(struct vr_jw *w, const char *key, double value)
{
    int saved = errno;
    size_t mark = w->len;

    done(w, mark, field(w, key) && put_double(w, value));
    errno = saved;
}

static void open_container(struct vr_jw *w, const char *key, bool array)
{
    int saved = errno;
    size_t mark = w->len;
    bool ok = field(w, key);

    if (ok && w->depth >= MAX_DEPTH) {
        w->overflow = true;
        ok = false;
    }
    if (ok && put(w, array ? "[" : "{", 1)) {
        if (array)
            w->arrays |= 1u << w->depth;
        else
            w->arrays &= ~(1u << w->depth);
        w->depth++;
        w->need_comma = false;
    } else {
        done(w, mark, false);
    }
    errno = saved;
}

static void close_container(struct vr_jw *w, bool array)
{
    int saved = errno;

    if (!w->overflow && (w->depth == 0 || in_array(w) != array || w->finished))
        w->overflow = true;
    if (put(w, array ? "]" : "}", 1)) {
        VR_ASSERT(w->depth > 0);
        w->depth--;
        w->need_comma = true;
    }
    errno = saved;
}

void vr_jw_array_begin(struct vr_jw *w, const char *key)
{
    open_container(w, key, true);
}

void vr_jw_array_end(struct vr_jw *w)
{
    close_container(w, true);
}

void vr_jw_object_begin(struct vr_jw *w, const char *key)
{
    open_container(w, key, false);
}

void vr_jw_object_end(struct vr_jw *w)
{
    close_container(w, false);
}

long vr_jw_finish(struct vr_jw *w)
{
    /* Touches no errno-setting call, so there is nothing to save here. */
    if (w->finished && !w->overflow)
        return (long)w->len;
    if (w->overflow || w->depth != 0 || !put(w, "}\n", 2)) {
        w->overflow = true;
        return -ENOSPC;
    }
    w->finished = true;
    return (long)w->len;
}
