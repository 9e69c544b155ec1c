#include "simcmp.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* ---- bytes --------------------------------------------------------------- */

/* The first byte offset where a and b differ (the shorter one's length when
 * one is a prefix of the other), or -1 when they are equal. */
static int first_byte(FILE *fa, FILE *fb, long long *at)
{
    long long off = 0;
    *at = -1;
    for (;;) {
        int ca = getc(fa), cb = getc(fb);
        if (ca != cb) {
            *at = off;
            break;
        }
        if (ca == EOF)
            break;
        off++;
    }
    return ferror(fa) || ferror(fb) ? -EIO : 0;
}

/* ---- numbers --------------------------------------------------------------- */

/* Length of the number starting at s[i] (0: none there): 0x and hex digits,
 * or digits with an optional fraction and exponent, signed when the sign
 * does not follow a word or a number. */
static size_t number_at(const char *s, size_t i, size_t n)
{
    size_t j = i;
    if (j < n && (s[j] == '-' || s[j] == '+') && j + 1 < n && isdigit((unsigned char)s[j + 1]) &&
        (j == 0 || !(isalnum((unsigned char)s[j - 1]) || s[j - 1] == '.')))
        j++;
    if (j >= n || !isdigit((unsigned char)s[j]))
        return 0;
    if (s[j] == '0' && j + 2 < n && (s[j + 1] == 'x' || s[j + 1] == 'X') &&
        isxdigit((unsigned char)s[j + 2])) {
        j += 2;
        while (j < n && isxdigit((unsigned char)s[j]))
            j++;
        return j - i;
    }
    while (j < n && isdigit((unsigned char)s[j]))
        j++;
    if (j + 1 < n && s[j] == '.' && isdigit((unsigned char)s[j + 1])) {
        j++;
        while (j < n && isdigit((unsigned char)s[j]))
            j++;
    }
    if (j + 1 < n && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < n && (s[k] == '-' || s[k] == '+'))
            k++;
        if (k < n && isdigit((unsigned char)s[k])) {
            while (k < n && isdigit((unsigned char)s[k]))
                k++;
            j = k;
        }
    }
    return j - i;
}

/* Whether a and b are the same once every number is a placeholder. */
static bool same_but_numbers(const char *a, size_t na, const char *b, size_t nb)
{
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        size_t ka = number_at(a, i, na), kb = number_at(b, j, nb);
        if (ka && kb) {
            i += ka;
            j += kb;
        } else if (ka || kb || a[i] != b[j]) {
            return false;
        } else {
            i++;
            j++;
        }
    }
    return i == na && j == nb;
}

static void ere_escape(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
    for (size_t i = 0; i < n && *len + 3 < cap; i++) {
        if (strchr(".[]{}()\\*+?^$|", s[i]))
            out[(*len)++] = '\\';
        out[(*len)++] = s[i];
    }
    out[*len] = '\0';
}

/* An --ignore for line s: the text before its first number, anchored, when
 * that says something (three characters besides blanks); else the whole
 * line's shape, each number a class. */
static char *suggestion(const char *s, size_t n)
{
    size_t first = n, words = 0;
    for (size_t i = 0; i < n; i++)
        if (number_at(s, i, n)) {
            first = i;
            break;
        }
    for (size_t i = 0; i < first; i++)
        words += !isspace((unsigned char)s[i]);
    size_t cap = 4 * n + 64, len = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    out[len++] = '^';
    out[len] = '\0';
    if (words >= 3) {
        ere_escape(out, cap, &len, s, first);
        return out;
    }
    for (size_t i = 0; i < n;) {
        size_t k = number_at(s, i, n);
        if (k) {
            const char *cls = "[-+.0-9a-fA-FxX]+";
            if (len + strlen(cls) + 2 < cap) {
                memcpy(out + len, cls, strlen(cls) + 1);
                len += strlen(cls);
            }
            i += k;
        } else {
            ere_escape(out, cap, &len, s + i, 1);
            i++;
        }
    }
    if (len + 2 < cap) {
        out[len++] = '$';
        out[len] = '\0';
    }
    return out;
}

/* ---- lines ----------------------------------------------------------------- */

struct reader {
    FILE *f;
    char *line;
    size_t cap, no; /* no: the line's number in the file */
    ssize_t len;
};

static bool ignored(const char *line, const regex_t *ign, size_t nign)
{
    for (size_t i = 0; i < nign; i++)
        if (regexec(&ign[i], line, 0, NULL, 0) == 0)
            return true;
    return false;
}

/* The next line not left out (its '\n' dropped); false at the end. */
static bool next_kept(struct reader *r, const regex_t *ign, size_t nign)
{
    for (;;) {
        r->len = getline(&r->line, &r->cap, r->f);
        if (r->len < 0)
            return false;
        r->no++;
        if (r->len > 0 && r->line[r->len - 1] == '\n')
            r->line[--r->len] = '\0';
        if (!ignored(r->line, ign, nign))
            return true;
    }
}

static char *clip(const char *s, size_t n)
{
    size_t k = n > 160 ? 160 : n;
    char *c = malloc(k + 4);
    if (c) {
        memcpy(c, s, k);
        strcpy(c + k, n > k ? "..." : "");
    }
    return c;
}

static void add_suggestion(struct simcmp *r, const char *s, size_t n)
{
    char *g = suggestion(s, n);
    if (!g)
        return;
    for (size_t i = 0; i < r->nsuggest; i++)
        if (strcmp(r->suggest[i], g) == 0) {
            free(g);
            return;
        }
    if (r->nsuggest < SIMCMP_SUGGEST)
        r->suggest[r->nsuggest++] = g;
    else {
        r->more_suggest = true;
        free(g);
    }
}

static void compare_lines(FILE *fa, FILE *fb, const regex_t *ign, size_t nign, struct simcmp *r)
{
    struct reader a = { .f = fa }, b = { .f = fb };
    bool numbers = true;
    for (;;) {
        bool ha = next_kept(&a, ign, nign), hb = next_kept(&b, ign, nign);
        if (!ha && !hb)
            break;
        bool same = ha && hb && a.len == b.len && memcmp(a.line, b.line, (size_t)a.len) == 0;
        if (same)
            continue;
        if (!r->differ) {
            r->differ = true;
            r->line_a = ha ? a.no : a.no + 1;
            r->line_b = hb ? b.no : b.no + 1;
        }
        if (!ha || !hb || !same_but_numbers(a.line, (size_t)a.len, b.line, (size_t)b.len)) {
            numbers = false;
            break;
        }
        if (r->number_lines++ == 0) {
            r->ex_line = a.no;
            r->ex_a = clip(a.line, (size_t)a.len);
            r->ex_b = clip(b.line, (size_t)b.len);
        }
        add_suggestion(r, a.line, (size_t)a.len);
    }
    r->numbers_only = r->differ && numbers;
    if (!r->numbers_only) {
        r->number_lines = 0;
        for (size_t i = 0; i < r->nsuggest; i++)
            free(r->suggest[i]);
        r->nsuggest = 0;
        r->more_suggest = false;
    }
    free(a.line);
    free(b.line);
}

int simcmp_files(const char *a, const char *b, const regex_t *ign, size_t nign, struct simcmp *r)
{
    memset(r, 0, sizeof *r);
    r->at = -1;
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    if (!fa || !fb) {
        int e = errno;
        if (fa)
            fclose(fa);
        if (fb)
            fclose(fb);
        return -e;
    }
    struct stat sa, sb;
    r->len_a = fstat(fileno(fa), &sa) == 0 ? (long long)sa.st_size : -1;
    r->len_b = fstat(fileno(fb), &sb) == 0 ? (long long)sb.st_size : -1;
    int rc = 0;
    if (nign == 0) {
        rc = first_byte(fa, fb, &r->at);
        if (rc == 0 && r->at >= 0) {
            rewind(fa);
            rewind(fb);
            compare_lines(fa, fb, ign, 0, r);
            r->differ = true; /* bytes differ even where lines cannot say how */
        }
    } else {
        compare_lines(fa, fb, ign, nign, r);
    }
    if (rc == 0 && (ferror(fa) || ferror(fb)))
        rc = -EIO;
    fclose(fa);
    fclose(fb);
    return rc;
}

void simcmp_free(struct simcmp *r)
{
    free(r->ex_a);
    free(r->ex_b);
    for (size_t i = 0; i < r->nsuggest; i++)
        free(r->suggest[i]);
    memset(r, 0, sizeof *r);
}

void simcmp_shell_quote(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    if (cap < 3)
        return;
    out[n++] = '\'';
    for (; *s && n + 6 < cap; s++) {
        if (*s == '\'') {
            memcpy(out + n, "'\\''", 4);
            n += 4;
        } else {
            out[n++] = *s;
        }
    }
    out[n++] = '\'';
    out[n] = '\0';
}
