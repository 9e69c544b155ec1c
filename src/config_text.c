/* config_text: the syntax of a setting's value (names, sizes, paths with %p).
 *
 * Locale-free, heap-free and stdio-free like config.c, whose parsers these
 * are; vr_expand_path also runs in a forked child before anything but
 * async-signal-safe calls may be made.
 */
#include "config_text.h"

#include <errno.h>
#include <string.h>

#include "assert.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Locale-independent on purpose: a program may have called setlocale()
 * before the first hook, and config syntax must not change with it. */
static int vr_text_lower(int c)
{
    return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

bool vr_text_is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

bool vr_text_eq_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (vr_text_lower((unsigned char)*a) != vr_text_lower((unsigned char)*b))
            return false;
    return *a == *b;
}

static const char *const mode_names[] = {
    [VR_MODE_OFF] = "off",
    [VR_MODE_OBSERVE] = "observe",
    [VR_MODE_DEDUP] = "dedup",
    [VR_MODE_PROFILED] = "profiled",
};

static const char *const level_names[] = {
    [VR_LEVEL_ERROR] = "error",
    [VR_LEVEL_WARN] = "warn",
    [VR_LEVEL_INFO] = "info",
    [VR_LEVEL_DEBUG] = "debug",
};

const char *vr_mode_name(enum vr_mode mode)
{
    if ((unsigned)mode < COUNT(mode_names))
        return mode_names[mode];
    return "unknown";
}

const char *vr_level_name(enum vr_level level)
{
    if ((unsigned)level < COUNT(level_names))
        return level_names[level];
    return "unknown";
}

int vr_text_find(const char *const *names, size_t n, const char *text)
{
    for (size_t i = 0; i < n; i++)
        if (vr_text_eq_nocase(text, names[i]))
            return (int)i;
    return -EINVAL;
}

/* Plain decimal digits only: a sign, spaces or a radix point would each need
 * a rule of their own, and no setting has a use for them. */
int vr_text_digits(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;

    if (*s < '0' || *s > '9')
        return -EINVAL;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    *p = s;
    *out = v;
    return 0;
}

int vr_parse_size(const char *text, uint64_t *bytes)
{
    static const struct {
        const char *suffix;
        unsigned shift;
    } units[] = {
        { "", 0 },
        { "k", 10 }, { "kib", 10 },
        { "m", 20 }, { "mib", 20 },
        { "g", 30 }, { "gib", 30 },
    };
    const char *s = text;
    uint64_t v;

    if (!text || vr_text_digits(&s, &v) < 0)
        return -EINVAL;
    for (size_t i = 0; i < COUNT(units); i++) {
        if (!vr_text_eq_nocase(s, units[i].suffix))
            continue;
        if (v > (UINT64_MAX >> units[i].shift))
            return -EINVAL;
        *bytes = v << units[i].shift;
        return 0;
    }
    return -EINVAL;
}

int vr_mode_find(const char *text)
{
    return vr_text_find(mode_names, COUNT(mode_names), text);
}

int vr_level_find(const char *text)
{
    return vr_text_find(level_names, COUNT(level_names), text);
}

/* %p -> pid so that every process of a multi-process job gets its own log;
 * any other '%' sequence is refused rather than guessed at, so a typo such
 * as "%P" is reported instead of silently sharing one file. No snprintf:
 * a forked child calls this before it may use anything but AS-safe calls. */
int vr_expand_path(const char *pattern, pid_t pid, char *out, size_t cap)
{
    size_t n = 0;

    if (cap == 0)
        return -EINVAL;
    for (const char *s = pattern; *s; s++) {
        char pidbuf[24];
        const char *piece = s;
        size_t len = 1;

        if (*s == '%') {
            s++;
            if (*s == '%') {
                piece = s;
            } else if (*s == 'p') {
                unsigned long v = (unsigned long)pid;
                size_t i = sizeof(pidbuf);
                do {
                    pidbuf[--i] = (char)('0' + v % 10);
                    v /= 10;
                } while (v);
                piece = pidbuf + i;
                len = sizeof(pidbuf) - i;
            } else {
                return -EINVAL;
            }
        }
        if (len >= cap - n)
            return -EINVAL;
        memcpy(out + n, piece, len);
        n += len;
    }
    VR_ASSERT(n < cap);
    out[n] = '\0';
    return 0;
}

bool vr_path_has_pid(const char *pattern)
{
    for (const char *s = pattern; *s; s++) {
        if (*s != '%')
            continue;
        if (s[1] == 'p')
            return true;
        if (s[1] == '\0')
            return false;
        s++; /* "%%" is a literal percent sign */
    }
    return false;
}

static char *trim(char *s, char *end)
{
    while (s < end && vr_text_is_space((unsigned char)*s))
        s++;
    while (end > s && vr_text_is_space((unsigned char)end[-1]))
        end--;
    *end = '\0';
    return s;
}

/* '#' opens a comment at the start of a line or after whitespace, so that
 * "mode = dedup  # note" works while a path such as "/tmp/run#3.log" stays
 * whole. */
static char *comment_start(char *s)
{
    for (char *p = s; *p; p++)
        if (*p == '#' && (p == s || vr_text_is_space((unsigned char)p[-1])))
            return p;
    return NULL;
}

const char *vr_text_key_value(char *line, size_t len, char **key, char **value)
{
    if (memchr(line, '\0', len))
        return "expected 'key = value' (found a NUL byte)";
    line[len] = '\0';
    char *hash = comment_start(line);
    if (hash)
        *hash = '\0';
    line = trim(line, line + strlen(line));
    *key = *value = NULL;
    if (*line == '\0')
        return NULL;
    char *eq = strchr(line, '=');
    if (!eq)
        return "expected 'key = value'";
    char *v = trim(eq + 1, eq + 1 + strlen(eq + 1));
    char *k = trim(line, eq);
    if (*k == '\0')
        return "expected 'key = value' (no key)";
    *key = k;
    *value = v;
    return NULL;
}
