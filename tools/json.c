#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Deep enough for every line the shim writes, shallow enough that a hostile
 * line cannot exhaust the stack. */
#define MAX_DEPTH 64

struct parser {
    const char *s;
    size_t len, pos;
    char *err;
    size_t errcap;
    bool failed;
};

static int fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct parser *p, const char *fmt, ...)
{
    if (p->failed)
        return -1;
    p->failed = true;
    if (p->errcap == 0)
        return -1;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (p->pos >= p->len)
        snprintf(p->err, p->errcap, "%s at the end of the line (truncated?)", what);
    else
        snprintf(p->err, p->errcap, "%s at column %zu", what, p->pos + 1);
    return -1;
}

static void skip_ws(struct parser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static bool literal(struct parser *p, const char *word)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return false;
    p->pos += n;
    return true;
}

/* A growable byte buffer for decoded strings. */
struct sbuf {
    char *p;
    size_t len, cap;
};

static bool sb_put(struct sbuf *b, const char *src, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q)
            return false;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

static bool sb_utf8(struct sbuf *b, uint32_t c)
{
    char u[4];
    size_t n;
    if (c < 0x80) {
        u[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        u[0] = (char)(0xc0 | (c >> 6));
        u[1] = (char)(0x80 | (c & 0x3f));
        n = 2;
    } else if (c < 0x10000) {
        u[0] = (char)(0xe0 | (c >> 12));
        u[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        u[2] = (char)(0x80 | (c & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | (c >> 18));
        u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((c >> 6) & 0x3f));
        u[3] = (char)(0x80 | (c & 0x3f));
        n = 4;
    }
    return sb_put(b, u, n);
}

static int hex4(struct parser *p, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        if (p->pos >= p->len)
            return fail(p, "short \\u escape");
        char c = p->s[p->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return fail(p, "bad \\u escape");
    }
    *out = v;
    return 0;
}

/* At the opening quote. */
static int parse_string(struct parser *p, char **out)
{
    struct sbuf b = { 0 };
    p->pos++;
    if (!sb_put(&b, "", 0))
        return fail(p, "out of memory");
    for (;;) {
        if (p->pos >= p->len) {
            free(b.p);
            return fail(p, "unterminated string");
        }
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) {
            free(b.p);
            return fail(p, "control character in a string");
        }
        if (c != '\\') {
            size_t start = p->pos;
            while (p->pos < p->len && p->s[p->pos] != '"' && p->s[p->pos] != '\\' &&
                   (unsigned char)p->s[p->pos] >= 0x20)
                p->pos++;
            if (!sb_put(&b, p->s + start, p->pos - start)) {
                free(b.p);
                return fail(p, "out of memory");
            }
            continue;
        }
        p->pos++;
        if (p->pos >= p->len) {
            free(b.p);
            return fail(p, "unterminated escape");
        }
        char e = p->s[p->pos++];
        const char *rep = NULL;
        switch (e) {
        case '"': rep = "\""; break;
        case '\\': rep = "\\"; break;
        case '/': rep = "/"; break;
        case 'b': rep = "\b"; break;
        case 'f': rep = "\f"; break;
        case 'n': rep = "\n"; break;
        case 'r': rep = "\r"; break;
        case 't': rep = "\t"; break;
        case 'u': {
            uint32_t cp;
            if (hex4(p, &cp) != 0) {
                free(b.p);
                return -1;
            }
            if (cp >= 0xd800 && cp < 0xdc00 && p->len - p->pos >= 6 &&
                p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u') {
                size_t save = p->pos;
                uint32_t lo;
                p->pos += 2;
                if (hex4(p, &lo) != 0) {
                    free(b.p);
                    return -1;
                }
                if (lo >= 0xdc00 && lo < 0xe000)
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                else
                    p->pos = save;
            }
            if (cp == 0)
                cp = 0xfffd; /* keep strings NUL-terminated C strings */
            if (!sb_utf8(&b, cp)) {
                free(b.p);
                return fail(p, "out of memory");
            }
            continue;
        }
        default:
            free(b.p);
            p->pos--;
            return fail(p, "bad escape \\%c", e);
        }
        if (!sb_put(&b, rep, 1)) {
            free(b.p);
            return fail(p, "out of memory");
        }
    }
    *out = b.p;
    return 0;
}

static int parse_number(struct parser *p, struct vj *v)
{
    size_t start = p->pos;
    if (p->s[p->pos] == '-')
        p->pos++;
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
        return fail(p, "bad number");
    if (p->s[p->pos] == '0')
        p->pos++;
    else
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
    bool integer = true;
    if (p->pos < p->len && p->s[p->pos] == '.') {
        integer = false;
        p->pos++;
        size_t d = p->pos;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
        if (p->pos == d)
            return fail(p, "bad number");
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        integer = false;
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
            p->pos++;
        size_t d = p->pos;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9')
            p->pos++;
        if (p->pos == d)
            return fail(p, "bad number");
    }
    char tmp[64];
    size_t n = p->pos - start;
    if (n >= sizeof tmp)
        n = sizeof tmp - 1; /* long mantissas lose only digits past double precision */
    memcpy(tmp, p->s + start, n);
    tmp[n] = '\0';
    v->type = VJ_NUM;
    v->num = strtod(tmp, NULL);
    if (integer && n < sizeof tmp - 1) {
        errno = 0;
        if (tmp[0] == '-') {
            long long x = strtoll(tmp, NULL, 10);
            if (errno == 0) {
                v->is_i64 = true;
                v->i64 = x;
            }
        } else {
            unsigned long long x = strtoull(tmp, NULL, 10);
            if (errno == 0) {
                v->is_u64 = true;
                v->u64 = x;
                v->is_i64 = x <= INT64_MAX;
                v->i64 = v->is_i64 ? (int64_t)x : 0;
            }
        }
    }
    return 0;
}

static int parse_value(struct parser *p, struct vj *v, unsigned depth);

static int grow(struct vj **items, char ***keys, size_t n, size_t *cap)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    struct vj *ni = realloc(*items, nc * sizeof **items);
    if (!ni)
        return -1;
    *items = ni;
    if (keys) {
        char **nk = realloc(*keys, nc * sizeof **keys);
        if (!nk)
            return -1;
        *keys = nk;
    }
    *cap = nc;
    return 0;
}

static int parse_container(struct parser *p, struct vj *v, unsigned depth, bool object)
{
    char close = object ? '}' : ']';
    size_t cap = 0;
    v->type = object ? VJ_OBJ : VJ_ARR;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return 0;
    }
    for (;;) {
        skip_ws(p);
        char *key = NULL;
        if (object) {
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return fail(p, "expected a key");
            if (parse_string(p, &key) != 0)
                return -1;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(key);
                return fail(p, "expected ':'");
            }
            p->pos++;
        }
        if (grow(&v->items, object ? &v->keys : NULL, v->n, &cap) != 0) {
            free(key);
            return fail(p, "out of memory");
        }
        v->items[v->n] = (struct vj){ 0 };
        if (object)
            v->keys[v->n] = key;
        v->n++; /* counted now, so vj_free releases the key on failure */
        if (parse_value(p, &v->items[v->n - 1], depth + 1) != 0)
            return -1;
        skip_ws(p);
        if (p->pos >= p->len)
            return fail(p, object ? "unterminated object" : "unterminated array");
        if (p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->s[p->pos] == close) {
            p->pos++;
            return 0;
        }
        return fail(p, "expected ',' or '%c'", close);
    }
}

static int parse_value(struct parser *p, struct vj *v, unsigned depth)
{
    if (depth > MAX_DEPTH)
        return fail(p, "nested too deeply");
    skip_ws(p);
    if (p->pos >= p->len)
        return fail(p, "expected a value");
    char c = p->s[p->pos];
    switch (c) {
    case '{':
        return parse_container(p, v, depth, true);
    case '[':
        return parse_container(p, v, depth, false);
    case '"':
        v->type = VJ_STR;
        return parse_string(p, &v->str);
    case 't':
    case 'f':
    case 'n':
        if (literal(p, "true")) {
            v->type = VJ_BOOL;
            v->b = true;
        } else if (literal(p, "false")) {
            v->type = VJ_BOOL;
        } else if (literal(p, "null")) {
            v->type = VJ_NULL;
        } else {
            return fail(p, "unexpected '%c'", c);
        }
        return 0;
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return parse_number(p, v);
        if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
            return fail(p, "unexpected '%c'", c);
        return fail(p, "unexpected byte 0x%02x", (unsigned char)c);
    }
}

int vj_parse(const char *text, size_t len, struct vj *out, char *err, size_t errcap)
{
    struct parser p = { .s = text, .len = len, .err = err, .errcap = errcap };
    struct vj v = { 0 };
    if (errcap)
        err[0] = '\0';
    if (parse_value(&p, &v, 0) == 0) {
        skip_ws(&p);
        if (p.pos < p.len)
            fail(&p, "text after the value");
    }
    if (p.failed) {
        vj_free(&v);
        *out = (struct vj){ 0 };
        return -1;
    }
    *out = v;
    return 0;
}

void vj_free(struct vj *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        vj_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    *v = (struct vj){ 0 };
}

const struct vj *vj_get(const struct vj *obj, const char *key)
{
    if (!obj || obj->type != VJ_OBJ)
        return NULL;
    for (size_t i = obj->n; i-- > 0;)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

bool vj_get_str(const struct vj *obj, const char *key, const char **out)
{
    const struct vj *v = vj_get(obj, key);
    if (!v || v->type != VJ_STR)
        return false;
    *out = v->str;
    return true;
}

bool vj_get_u64(const struct vj *obj, const char *key, uint64_t *out)
{
    const struct vj *v = vj_get(obj, key);
    if (!v || v->type != VJ_NUM || !v->is_u64)
        return false;
    *out = v->u64;
    return true;
}

bool vj_get_i64(const struct vj *obj, const char *key, int64_t *out)
{
    const struct vj *v = vj_get(obj, key);
    if (!v || v->type != VJ_NUM || !v->is_i64)
        return false;
    *out = v->i64;
    return true;
}

bool vj_get_bool(const struct vj *obj, const char *key, bool *out)
{
    const struct vj *v = vj_get(obj, key);
    if (!v || v->type != VJ_BOOL)
        return false;
    *out = v->b;
    return true;
}

bool vj_get_num(const struct vj *obj, const char *key, double *out)
{
    const struct vj *v = vj_get(obj, key);
    if (!v || v->type != VJ_NUM)
        return false;
    *out = v->num;
    return true;
}

void vj_write_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        switch (*c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*c < 0x20)
                fprintf(f, "\\u%04x", *c);
            else
                fputc(*c, f);
        }
    }
    fputc('"', f);
}

void vj_write(FILE *f, const struct vj *v)
{
    switch (v->type) {
    case VJ_NULL:
        fputs("null", f);
        break;
    case VJ_BOOL:
        fputs(v->b ? "true" : "false", f);
        break;
    case VJ_NUM:
        if (v->is_u64)
            fprintf(f, "%llu", (unsigned long long)v->u64);
        else if (v->is_i64)
            fprintf(f, "%lld", (long long)v->i64);
        else if (isfinite(v->num))
            fprintf(f, "%.17g", v->num);
        else
            fputs("null", f);
        break;
    case VJ_STR:
        vj_write_str(f, v->str);
        break;
    case VJ_ARR:
    case VJ_OBJ:
        fputc(v->type == VJ_ARR ? '[' : '{', f);
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                fputc(',', f);
            if (v->type == VJ_OBJ) {
                vj_write_str(f, v->keys[i]);
                fputc(':', f);
            }
            vj_write(f, &v->items[i]);
        }
        fputc(v->type == VJ_ARR ? ']' : '}', f);
        break;
    }
}
