/* Unit tests for log.c: the JSON builder's exact output, overflow and misuse,
 * the log file writer, levels, errno preservation and concurrent writers.
 * Each Criterion test runs in its own process, so log.c's globals (the fd,
 * the levels, the dropped counter) start fresh in every test. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "assert.h"
#include "log.h"

/* ---- a strict JSON checker (RFC 8259), enough to prove lines parse ---- */

static const char *json_value(const char *p, int depth);

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static const char *json_string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    while (*p != '"') {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20)
            return NULL;
        if (c == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (hexval(p[i]) < 0)
                        return NULL;
                p += 5;
            } else if (strchr("\"\\/bfnrt", *p) && *p) {
                p++;
            } else {
                return NULL;
            }
            continue;
        }
        size_t n = vr_utf8_seq((const unsigned char *)p);
        if (n == 0)
            return NULL;
        p += n;
    }
    return p + 1;
}

static const char *json_number(const char *p)
{
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return NULL;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return NULL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return p;
}

static const char *json_container(const char *p, int depth, char close, bool keys)
{
    p = json_ws(p + 1);
    if (*p == close)
        return p + 1;
    for (;;) {
        if (keys) {
            p = json_string(json_ws(p));
            if (!p)
                return NULL;
            p = json_ws(p);
            if (*p++ != ':')
                return NULL;
        }
        p = json_value(p, depth + 1);
        if (!p)
            return NULL;
        p = json_ws(p);
        if (*p == close)
            return p + 1;
        if (*p++ != ',')
            return NULL;
    }
}

static const char *json_value(const char *p, int depth)
{
    if (depth > 64)
        return NULL;
    p = json_ws(p);
    switch (*p) {
    case '{':
        return json_container(p, depth, '}', true);
    case '[':
        return json_container(p, depth, ']', false);
    case '"':
        return json_string(p);
    case 't':
        return strncmp(p, "true", 4) ? NULL : p + 4;
    case 'f':
        return strncmp(p, "false", 5) ? NULL : p + 5;
    case 'n':
        return strncmp(p, "null", 4) ? NULL : p + 4;
    default:
        return json_number(p);
    }
}

/* One log line: a JSON object, then exactly "\n" and nothing else. */
static bool json_line(const char *line)
{
    const char *end;

    if (*line != '{')
        return false;
    end = json_value(line, 0);
    return end && end[0] == '\n' && end[1] == '\0';
}

Test(json_checker, rejects_what_it_should)
{
    /* The checker guards the other tests, so it must be able to say no. */
    cr_assert(json_line("{\"a\":1}\n"));
    cr_assert(json_line("{\"a\":[1,-0.5e+3,\"x\\u00e9\",{},[],true,null]}\n"));
    cr_assert_not(json_line("{\"a\":1}"));
    cr_assert_not(json_line("{\"a\":nan}\n"));
    cr_assert_not(json_line("{\"a\":inf}\n"));
    cr_assert_not(json_line("{\"a\":1,}\n"));
    cr_assert_not(json_line("{\"a\":\"\x01\"}\n"));
    cr_assert_not(json_line("{\"a\":\"\xff\"}\n"));
    cr_assert_not(json_line("{\"a\":01}\n"));
    cr_assert_not(json_line("{\"a\":1,5}\n"));
    cr_assert_not(json_line("{\"a\" 1}\n"));
    cr_assert_not(json_line("{\"a\":\"\\x\"}\n"));
}

/* ---- helpers ---- */

/* Checks {"ts":<s>.<6 digits>,"pid":<pid>,"event":"<event>" and returns
 * what follows it. */
static const char *skip_header(const char *line, const char *event)
{
    char expect[128];
    const char *p = line;
    char *end;
    double ts;
    size_t n;

    cr_assert_eq(strncmp(p, "{\"ts\":", 6), 0, "line: %s", line);
    p += 6;
    ts = strtod(p, &end);
    n = strspn(p, "0123456789");
    cr_assert_geq(n, 10u, "seconds: %s", line);
    cr_assert_eq(p[n], '.', "line: %s", line);
    cr_assert_eq(strspn(p + n + 1, "0123456789"), 6u, "microseconds: %s", line);
    cr_assert_eq(end, p + n + 7);
    cr_assert(fabs(ts - (double)time(NULL)) < 120.0, "ts %f is not now", ts);
    p = end;
    snprintf(expect, sizeof(expect), ",\"pid\":%ld,\"event\":\"%s\"", (long)getpid(), event);
    cr_assert_eq(strncmp(p, expect, strlen(expect)), 0, "expected %s in %s", expect, line);
    return p + strlen(expect);
}

static void temp_path(char *path, size_t cap)
{
    int fd;

    snprintf(path, cap, "/tmp/varemap-test-log-XXXXXX");
    fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
}

/* Reads the whole file into a static buffer. */
static char *slurp(const char *path, size_t *len)
{
    static char buf[16 << 20];
    int fd = open(path, O_RDONLY);
    size_t n = 0;
    ssize_t r;

    cr_assert_geq(fd, 0);
    while ((r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    cr_assert_lt(n, sizeof(buf) - 1, "log file larger than the test buffer");
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* ---- builder ---- */

Test(jw, every_field_type)
{
    char buf[1024];
    struct vr_jw w;
    long n;

    vr_jw_begin(&w, buf, sizeof(buf), "start");
    vr_jw_str(&w, "mode", "profiled");
    vr_jw_str(&w, "none", NULL);
    vr_jw_u64(&w, "u0", 0);
    vr_jw_u64(&w, "umax", UINT64_MAX);
    vr_jw_i64(&w, "neg", -5);
    vr_jw_i64(&w, "imin", INT64_MIN);
    vr_jw_i64(&w, "imax", INT64_MAX);
    vr_jw_hex(&w, "exec", UINT64_C(0x7f12abcd0040));
    vr_jw_hex(&w, "zero", 0);
    vr_jw_hex(&w, "hmax", UINT64_MAX);
    vr_jw_bool(&w, "yes", true);
    vr_jw_bool(&w, "no", false);
    n = vr_jw_finish(&w);
    cr_assert_gt(n, 0);
    cr_assert_eq((size_t)n, strlen(buf));
    cr_assert_eq((size_t)n, w.len);
    cr_assert_str_eq(skip_header(buf, "start"),
                     ",\"mode\":\"profiled\",\"none\":null,\"u0\":0,"
                     "\"umax\":18446744073709551615,\"neg\":-5,"
                     "\"imin\":-9223372036854775808,\"imax\":9223372036854775807,"
                     "\"exec\":\"0x7f12abcd0040\",\"zero\":\"0x0\","
                     "\"hmax\":\"0xffffffffffffffff\",\"yes\":true,\"no\":false}\n");
    cr_assert(json_line(buf));
}

Test(jw, doubles_are_json_numbers_or_null)
{
    char buf[512];
    struct vr_jw w;

    vr_jw_begin(&w, buf, sizeof(buf), "d");
    vr_jw_double(&w, "half", 0.5);
    vr_jw_double(&w, "tenth", 0.1);
    vr_jw_double(&w, "three", 3.0);
    vr_jw_double(&w, "big", 1e300);
    vr_jw_double(&w, "tiny", -2.5e-10);
    vr_jw_double(&w, "negzero", -0.0);
    vr_jw_double(&w, "nan", NAN);
    vr_jw_double(&w, "inf", INFINITY);
    vr_jw_double(&w, "ninf", -INFINITY);
    vr_jw_double(&w, "third", 1.0 / 3.0);
    cr_assert_gt(vr_jw_finish(&w), 0);
    cr_assert_str_eq(skip_header(buf, "d"),
                     ",\"half\":0.5,\"tenth\":0.1,\"three\":3,\"big\":1e+300,"
                     "\"tiny\":-2.5e-10,\"negzero\":-0,\"nan\":null,\"inf\":null,"
                     "\"ninf\":null,\"third\":0.3333333333333333}\n");
    cr_assert(json_line(buf));
}

Test(jw, strings_are_escaped)
{
    char buf[512];
    struct vr_jw w;

    vr_jw_begin(&w, buf, sizeof(buf), "ev\"ent");
    vr_jw_str(&w, "q\"k", "a\"b\\c/d");
    vr_jw_str(&w, "ctl", "\n\t\r\b\f\x01\x1f\x7f");
    vr_jw_str(&w, "utf8", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    vr_jw_str(&w, "bad", "\xff|\x80|\xc0\xaf|\xed\xa0\x80|\xe2\x82");
    vr_jw_str(&w, "empty", "");
    cr_assert_gt(vr_jw_finish(&w), 0);
    cr_assert_str_eq(skip_header(buf, "ev\\\"ent"),
                     ",\"q\\\"k\":\"a\\\"b\\\\c/d\","
                     "\"ctl\":\"\\u000a\\u0009\\u000d\\u0008\\u000c\\u0001\\u001f\x7f\","
                     "\"utf8\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\","
                     "\"bad\":\"\\u00ff|\\u0080|\\u00c0\\u00af|\\u00ed\\u00a0\\u0080|"
                     "\\u00e2\\u0082\","
                     "\"empty\":\"\"}\n");
    cr_assert(json_line(buf));
}

Test(jw, nested_containers)
{
    char buf[512];
    struct vr_jw w;

    vr_jw_begin(&w, buf, sizeof(buf), "profile_decision");
    vr_jw_hex(&w, "exec", 0x10);
    vr_jw_array_begin(&w, "candidates");
    for (int i = 0; i < 2; i++) {
        vr_jw_object_begin(&w, NULL);
        vr_jw_hex(&w, "ptr", (uint64_t)(0x1000 * (i + 1)));
        vr_jw_u64(&w, "size", 4096);
        vr_jw_str(&w, "verdict", i ? "freed" : "selected");
        vr_jw_object_end(&w);
    }
    vr_jw_array_end(&w);
    vr_jw_array_begin(&w, "empty");
    vr_jw_array_end(&w);
    vr_jw_object_begin(&w, "obj");
    vr_jw_object_end(&w);
    vr_jw_array_begin(&w, "nums");
    vr_jw_u64(&w, NULL, 1);
    vr_jw_array_begin(&w, NULL);
    vr_jw_i64(&w, NULL, -2);
    vr_jw_bool(&w, NULL, true);
    vr_jw_array_end(&w);
    vr_jw_str(&w, NULL, "s");
    vr_jw_array_end(&w);
    vr_jw_u64(&w, "after", 7);
    cr_assert_eq(w.depth, 0u);
    cr_assert_gt(vr_jw_finish(&w), 0);
    cr_assert_str_eq(skip_header(buf, "profile_decision"),
                     ",\"exec\":\"0x10\",\"candidates\":["
                     "{\"ptr\":\"0x1000\",\"size\":4096,\"verdict\":\"selected\"},"
                     "{\"ptr\":\"0x2000\",\"size\":4096,\"verdict\":\"freed\"}],"
                     "\"empty\":[],\"obj\":{},\"nums\":[1,[-2,true],\"s\"],\"after\":7}\n");
    cr_assert(json_line(buf));
}

Test(jw, unbalanced_containers_fail)
{
    char buf[256];
    struct vr_jw w;

    vr_jw_begin(&w, buf, sizeof(buf), "x");
    vr_jw_array_begin(&w, "open");
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);

    vr_jw_begin(&w, buf, sizeof(buf), "x");
    vr_jw_array_end(&w);
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);

    vr_jw_begin(&w, buf, sizeof(buf), "x");
    vr_jw_array_begin(&w, "a");
    vr_jw_object_end(&w);
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);
}

Test(jw, key_misuse_fails)
{
    char buf[256];
    struct vr_jw w;

    vr_jw_begin(&w, buf, sizeof(buf), "x");
    vr_jw_u64(&w, NULL, 1); /* a value without a key in an object */
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);

    vr_jw_begin(&w, buf, sizeof(buf), "x");
    vr_jw_array_begin(&w, "a");
    vr_jw_u64(&w, "k", 1); /* a key inside an array */
    vr_jw_array_end(&w);
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);
}

Test(jw, too_deep_fails)
{
    char buf[1024];
    struct vr_jw w;

    vr_jw_begin(&w, buf, sizeof(buf), "x");
    vr_jw_array_begin(&w, "a");
    for (int i = 0; i < 40; i++)
        vr_jw_array_begin(&w, NULL);
    for (int i = 0; i < 40; i++)
        vr_jw_array_end(&w);
    vr_jw_array_end(&w);
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);
}

/* A line that fits exactly (with its NUL) succeeds; one byte less fails,
 * and what the buffer holds afterwards is still a NUL-terminated prefix
 * made of whole fields. */
Test(jw, overflow_boundary)
{
    char big[512], small[512];
    struct vr_jw w;
    long full;

    vr_jw_begin(&w, big, sizeof(big), "e");
    vr_jw_str(&w, "k", "a\"quoted\" value");
    vr_jw_u64(&w, "n", 123456789);
    full = vr_jw_finish(&w);
    cr_assert_gt(full, 0);

    /* The timestamp's length is fixed for the next few centuries. */
    vr_jw_begin(&w, small, (size_t)full + 1, "e");
    vr_jw_str(&w, "k", "a\"quoted\" value");
    vr_jw_u64(&w, "n", 123456789);
    cr_assert_eq(vr_jw_finish(&w), full);
    cr_assert_eq(strlen(small), (size_t)full);

    vr_jw_begin(&w, small, (size_t)full, "e");
    vr_jw_str(&w, "k", "a\"quoted\" value");
    vr_jw_u64(&w, "n", 123456789);
    cr_assert_not(w.overflow);
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);
    cr_assert(w.overflow);
    cr_assert_eq(strlen(small), w.len);
    cr_assert_eq(small[w.len - 1], '9', "prefix should end after the last whole field: %s",
                 small);

    /* A field that does not fit leaves nothing of itself behind. */
    vr_jw_begin(&w, small, 80, "e");
    vr_jw_u64(&w, "n", 1);
    size_t before = w.len;
    vr_jw_str(&w, "long", "0123456789012345678901234567890123456789012345678901234567890");
    cr_assert(w.overflow);
    cr_assert_eq(w.len, before);
    cr_assert_eq(strlen(small), before);
    vr_jw_u64(&w, "m", 2); /* would fit, but the line is already lost */
    cr_assert_eq(w.len, before);
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);
}

Test(jw, no_buffer_is_overflow)
{
    struct vr_jw w;
    char one[1];

    vr_jw_begin(&w, NULL, 100, "x");
    vr_jw_u64(&w, "a", 1);
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);

    vr_jw_begin(&w, one, 0, "x");
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);

    vr_jw_begin(&w, one, sizeof(one), "x");
    cr_assert_eq(vr_jw_finish(&w), -ENOSPC);
    cr_assert_eq(one[0], '\0');
}

Test(jw, finish_is_idempotent)
{
    char buf[256];
    struct vr_jw w;
    long n;

    vr_jw_begin(&w, buf, sizeof(buf), "x");
    n = vr_jw_finish(&w);
    cr_assert_gt(n, 0);
    cr_assert_eq(vr_jw_finish(&w), n);
    cr_assert_eq(strlen(buf), (size_t)n);
    cr_assert_eq(buf[n - 1], '\n');
    cr_assert_eq(buf[n - 2], '}');
    cr_assert_neq(buf[n - 3], '}');
}

/* ---- the log file ---- */

Test(log, emit_writes_one_line_per_event)
{
    char path[64], buf[256];
    struct vr_jw w;
    char *text, *line;
    size_t len;

    temp_path(path, sizeof(path));
    cr_assert_not(vr_log_enabled(VR_LEVEL_ERROR));
    cr_assert_eq(vr_log_open(path, VR_LEVEL_INFO), 0);
    cr_assert(vr_log_enabled(VR_LEVEL_INFO));
    for (int i = 0; i < 3; i++) {
        char ev[8];
        snprintf(ev, sizeof(ev), "e%d", i);
        vr_jw_begin(&w, buf, sizeof(buf), ev);
        vr_jw_u64(&w, "i", (uint64_t)i);
        cr_assert_eq(vr_log_emit(&w, VR_LEVEL_INFO), 0);
    }
    vr_log_close();
    cr_assert_not(vr_log_enabled(VR_LEVEL_ERROR));

    text = slurp(path, &len);
    cr_assert_eq(count_lines(text), 3u, "%s", text);
    line = text;
    for (int i = 0; i < 3; i++) {
        char ev[8], rest[32];
        char *nl = strchr(line, '\n');
        char save = nl[1];

        snprintf(ev, sizeof(ev), "e%d", i);
        snprintf(rest, sizeof(rest), ",\"i\":%d}\n", i);
        nl[1] = '\0';
        cr_assert(json_line(line), "%s", line);
        cr_assert_str_eq(skip_header(line, ev), rest);
        nl[1] = save;
        line = nl + 1;
    }
    cr_assert_eq(vr_log_dropped(), 0u);
    unlink(path);
}

Test(log, appends_to_existing_file)
{
    char path[64], buf[128];
    struct vr_jw w;
    int fd;

    temp_path(path, sizeof(path));
    fd = open(path, O_WRONLY);
    cr_assert_eq(write(fd, "old\n", 4), 4);
    close(fd);
    cr_assert_eq(vr_log_open(path, VR_LEVEL_DEBUG), 0);
    vr_jw_begin(&w, buf, sizeof(buf), "new");
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_DEBUG), 0);
    vr_log_close();
    char *text = slurp(path, NULL);
    cr_assert_eq(strncmp(text, "old\n{\"ts\":", 10), 0, "%s", text);
    cr_assert_eq(count_lines(text), 2u);
    unlink(path);
}

Test(log, level_filtering)
{
    char path[64], buf[128];
    struct vr_jw w;

    temp_path(path, sizeof(path));
    cr_assert_eq(vr_log_open(path, VR_LEVEL_WARN), 0);
    cr_assert(vr_log_enabled(VR_LEVEL_ERROR));
    cr_assert(vr_log_enabled(VR_LEVEL_WARN));
    cr_assert_not(vr_log_enabled(VR_LEVEL_INFO));
    cr_assert_not(vr_log_enabled(VR_LEVEL_DEBUG));

    vr_jw_begin(&w, buf, sizeof(buf), "info_event");
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_INFO), 0);
    vr_jw_begin(&w, buf, sizeof(buf), "debug_event");
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_DEBUG), 0);
    vr_jw_begin(&w, buf, sizeof(buf), "error_event");
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_ERROR), 0);
    vr_jw_begin(&w, buf, sizeof(buf), "warn_event");
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_WARN), 0);
    vr_log_close();

    char *text = slurp(path, NULL);
    cr_assert_eq(count_lines(text), 2u, "%s", text);
    cr_assert_not_null(strstr(text, "\"event\":\"error_event\""));
    cr_assert_not_null(strstr(text, "\"event\":\"warn_event\""));
    cr_assert_null(strstr(text, "info_event"));
    cr_assert_null(strstr(text, "debug_event"));
    cr_assert_eq(vr_log_dropped(), 0u);
    unlink(path);
}

Test(log, overflow_writes_nothing_and_counts)
{
    char path[64], buf[40];
    struct vr_jw w;
    struct stat st;

    temp_path(path, sizeof(path));
    cr_assert_eq(vr_log_open(path, VR_LEVEL_INFO), 0);
    vr_jw_begin(&w, buf, sizeof(buf), "an_event_name_that_does_not_fit");
    vr_jw_u64(&w, "n", 1);
    errno = EDOM;
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_INFO), -ENOSPC);
    cr_assert_eq(errno, EDOM);
    cr_assert_eq(vr_log_dropped(), 1u);

    vr_jw_begin(&w, buf, sizeof(buf), "x");
    vr_jw_array_begin(&w, "open");
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_INFO), -ENOSPC);
    cr_assert_eq(vr_log_dropped(), 2u);
    vr_log_close();
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_size, 0);
    unlink(path);
}

Test(log, no_log_emits_are_harmless)
{
    char buf[128];
    struct vr_jw w;

    cr_assert_eq(vr_log_open("", VR_LEVEL_DEBUG), 0);
    cr_assert_eq(vr_log_open(NULL, VR_LEVEL_DEBUG), 0);
    cr_assert_not(vr_log_enabled(VR_LEVEL_ERROR));
    vr_jw_begin(&w, buf, sizeof(buf), "x");
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_ERROR), 0);
    cr_assert_eq(vr_log_dropped(), 0u);
}

Test(log, unwritable_path_warns_once, .init = cr_redirect_stderr)
{
    char buf[128];
    struct vr_jw w;

    errno = EXDEV;
    cr_assert_eq(vr_log_open("/nonexistent-varemap-dir/x.jsonl", VR_LEVEL_INFO), -ENOENT);
    cr_assert_eq(errno, EXDEV);
    cr_assert_not(vr_log_enabled(VR_LEVEL_ERROR));
    for (int i = 0; i < 5; i++) {
        vr_jw_begin(&w, buf, sizeof(buf), "later");
        cr_assert_eq(vr_log_emit(&w, VR_LEVEL_ERROR), 0);
    }
    cr_assert_eq(vr_log_dropped(), 0u);
    cr_assert_stderr_eq_str("varemap: warning: cannot open log /nonexistent-varemap-dir/x.jsonl: "
                            "No such file or directory\n");
}

Test(log, reopen_switches_files)
{
    char a[64], b[64], buf[128];
    struct vr_jw w;

    temp_path(a, sizeof(a));
    temp_path(b, sizeof(b));
    cr_assert_eq(vr_log_open(a, VR_LEVEL_INFO), 0);
    vr_jw_begin(&w, buf, sizeof(buf), "to_a");
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_INFO), 0);
    cr_assert_eq(vr_log_open(b, VR_LEVEL_INFO), 0);
    vr_jw_begin(&w, buf, sizeof(buf), "to_b");
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_INFO), 0);
    vr_log_close();
    cr_assert_not_null(strstr(slurp(a, NULL), "to_a"));
    cr_assert_null(strstr(slurp(a, NULL), "to_b"));
    cr_assert_not_null(strstr(slurp(b, NULL), "to_b"));
    cr_assert_eq(count_lines(slurp(b, NULL)), 1u);
    unlink(a);
    unlink(b);
}

/* A regular file that refuses the write: the file size limit (with
 * SIGXFSZ ignored, write fails with EFBIG). */
Test(log, write_failure_returns_errno_and_counts)
{
    char path[64], buf[128];
    struct vr_jw w;
    struct rlimit lim = { 0, 0 };

    temp_path(path, sizeof(path));
    cr_assert_eq(vr_log_open(path, VR_LEVEL_INFO), 0);
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    vr_jw_begin(&w, buf, sizeof(buf), "x");
    errno = ERANGE;
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_INFO), -EFBIG);
    cr_assert_eq(errno, ERANGE);
    cr_assert_eq(vr_log_dropped(), 1u);
    unlink(path);
}

/* ---- the log never writes into the program's files ---- */

/* The descriptor the log holds on `path`, found the way a program that
 * closes "all other" descriptors would meet it: in /proc/self/fd. */
static int log_fd_of(const char *path)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int found = -1;

    cr_assert_not_null(d);
    while ((e = readdir(d)) != NULL) {
        char link[300], target[512];
        ssize_t n;

        snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
        n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (strcmp(target, path) == 0 && atoi(e->d_name) != dirfd(d))
            found = atoi(e->d_name);
    }
    closedir(d);
    return found;
}

static void emit_event(const char *event)
{
    char buf[128];
    struct vr_jw w;

    vr_jw_begin(&w, buf, sizeof(buf), event);
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_INFO), 0);
}

Test(log, never_writes_into_a_reused_descriptor)
{
    char logp[64], mine[64];
    int fd, own;
    struct stat st;

    temp_path(logp, sizeof(logp));
    temp_path(mine, sizeof(mine));
    cr_assert_eq(vr_log_open(logp, VR_LEVEL_INFO), 0);
    emit_event("before");
    fd = log_fd_of(logp);
    cr_assert_geq(fd, 0);

    /* The program closes its descriptors and opens its own file, which gets
     * the number the log had. */
    cr_assert_eq(close(fd), 0);
    own = open(mine, O_WRONLY | O_TRUNC);
    cr_assert_geq(own, 0);
    if (own != fd) {
        cr_assert_eq(dup2(own, fd), fd);
        close(own);
    }
    errno = EXDEV;
    emit_event("after");
    cr_assert_eq(errno, EXDEV);
    emit_event("later");

    cr_assert_eq(stat(mine, &st), 0);
    cr_assert_eq(st.st_size, 0, "the program's file got log lines: %s", slurp(mine, NULL));
    /* The program's descriptor is still open and still its own. */
    cr_assert_eq(write(fd, "mine\n", 5), 5);
    cr_assert_str_eq(slurp(mine, NULL), "mine\n");
    char *text = slurp(logp, NULL);
    cr_assert_eq(count_lines(text), 3u, "%s", text);
    cr_assert_not_null(strstr(text, "\"event\":\"after\""));
    cr_assert_not_null(strstr(text, "\"event\":\"later\""));
    cr_assert_eq(vr_log_dropped(), 0u);
    /* Closing the log leaves the program's descriptor alone. */
    vr_log_close();
    cr_assert_eq(fcntl(fd, F_GETFD), 0);
    close(fd);
    unlink(logp);
    unlink(mine);
}

Test(log, closed_descriptor_is_reopened)
{
    char logp[64];
    int fd;

    temp_path(logp, sizeof(logp));
    cr_assert_eq(vr_log_open(logp, VR_LEVEL_INFO), 0);
    fd = log_fd_of(logp);
    cr_assert_geq(fd, 0);
    cr_assert_eq(close(fd), 0);
    emit_event("after_close");
    cr_assert_eq(count_lines(slurp(logp, NULL)), 1u);
    fd = log_fd_of(logp);
    cr_assert_geq(fd, 0, "not re-opened");
    cr_assert_eq(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    cr_assert(fcntl(fd, F_GETFL) & O_APPEND);
    vr_log_close();
    cr_assert_eq(log_fd_of(logp), -1);
    unlink(logp);
}

Test(log, unreopenable_path_warns_once_and_stops, .init = cr_redirect_stderr)
{
    char dir[64], logp[96];
    int fd;

    snprintf(dir, sizeof(dir), "/tmp/varemap-test-dir-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(logp, sizeof(logp), "%s/log.jsonl", dir);
    cr_assert_eq(vr_log_open(logp, VR_LEVEL_INFO), 0);
    fd = log_fd_of(logp);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(logp);
    cr_assert_eq(rmdir(dir), 0);
    for (int i = 0; i < 3; i++) {
        char buf[128];
        struct vr_jw w;
        vr_jw_begin(&w, buf, sizeof(buf), "lost");
        vr_log_emit(&w, VR_LEVEL_INFO);
    }
    cr_assert_not(vr_log_enabled(VR_LEVEL_ERROR));
    char expect[512];
    snprintf(expect, sizeof(expect),
             "varemap: warning: log descriptor %d was closed or reused by the program and %s "
             "cannot be opened again (No such file or directory); running without a log\n",
             fd, logp);
    cr_assert_stderr_eq_str(expect);
}

Test(log, fifo_is_refused_without_blocking, .init = cr_redirect_stderr, .timeout = 10)
{
    char dir[64], fifo[96], expect[512];
    int reader;

    snprintf(dir, sizeof(dir), "/tmp/varemap-test-dir-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    /* No reader: a blocking open would wait forever. */
    cr_assert_eq(vr_log_open(fifo, VR_LEVEL_INFO), -EINVAL);
    cr_assert_not(vr_log_enabled(VR_LEVEL_ERROR));
    /* With a reader it opens, and is still refused. */
    reader = open(fifo, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(reader, 0);
    cr_assert_eq(vr_log_open(fifo, VR_LEVEL_INFO), -EINVAL);
    cr_assert_not(vr_log_enabled(VR_LEVEL_ERROR));
    close(reader);
    unlink(fifo);
    rmdir(dir);
    snprintf(expect, sizeof(expect),
             "varemap: warning: log %s is not a regular file; running without a log\n"
             "varemap: warning: log %s is not a regular file; running without a log\n",
             fifo, fifo);
    cr_assert_stderr_eq_str(expect);
}

Test(log, device_is_refused, .init = cr_redirect_stderr)
{
    cr_assert_eq(vr_log_open("/dev/null", VR_LEVEL_INFO), -EINVAL);
    cr_assert_not(vr_log_enabled(VR_LEVEL_ERROR));
    cr_assert_stderr_eq_str(
        "varemap: warning: log /dev/null is not a regular file; running without a log\n");
}

/* ---- fork ---- */

static void fill_cfg(struct vr_config *cfg, const char *pattern)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->log_pattern, sizeof(cfg->log_pattern), "%s", pattern);
    cr_assert_eq(vr_expand_path(pattern, getpid(), cfg->log_path, sizeof(cfg->log_path)), 0);
    cfg->log_level = VR_LEVEL_INFO;
}

static void wait_ok(pid_t pid)
{
    int status;

    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
}

Test(log, fork_with_pid_pattern_gives_the_child_its_own_file)
{
    char dir[64], pattern[128], childp[128];
    struct vr_config cfg;
    pid_t child;

    snprintf(dir, sizeof(dir), "/tmp/varemap-test-dir-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(pattern, sizeof(pattern), "%s/log-%%p.jsonl", dir);
    fill_cfg(&cfg, pattern);
    cr_assert_eq(vr_log_start(&cfg), 0);
    emit_event("parent_before");
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        char buf[128];
        struct vr_jw w;
        vr_log_after_fork();
        vr_jw_begin(&w, buf, sizeof(buf), "in_child");
        _exit(vr_log_emit(&w, VR_LEVEL_INFO) == 0 ? 0 : 1);
    }
    wait_ok(child);
    emit_event("parent_after");
    vr_log_close();

    char *text = slurp(cfg.log_path, NULL);
    cr_assert_eq(count_lines(text), 2u, "%s", text);
    cr_assert_null(strstr(text, "in_child"), "%s", text);
    snprintf(childp, sizeof(childp), "%s/log-%ld.jsonl", dir, (long)child);
    text = slurp(childp, NULL);
    cr_assert_eq(count_lines(text), 1u, "%s", text);
    cr_assert(json_line(text), "%s", text);
    char tail[64];
    snprintf(tail, sizeof(tail), "\"pid\":%ld,\"event\":\"in_child\"}\n", (long)child);
    cr_assert_not_null(strstr(text, tail), "%s", text);
    unlink(childp);
    unlink(cfg.log_path);
    rmdir(dir);
}

Test(log, fork_without_pattern_shares_the_file_in_whole_lines)
{
    char path[64];
    struct vr_config cfg;
    pid_t child;

    temp_path(path, sizeof(path));
    fill_cfg(&cfg, path);
    cr_assert_eq(vr_log_start(&cfg), 0);
    child = fork();
    cr_assert_geq(child, 0);
    for (int i = 0; i < 500; i++) {
        char buf[256];
        struct vr_jw w;
        if (child == 0 && i == 0)
            vr_log_after_fork();
        vr_jw_begin(&w, buf, sizeof(buf), child == 0 ? "child" : "parent");
        vr_jw_str(&w, "pad", "0123456789012345678901234567890123456789");
        if (vr_log_emit(&w, VR_LEVEL_INFO) != 0 && child == 0)
            _exit(1);
    }
    if (child == 0)
        _exit(0);
    wait_ok(child);
    vr_log_close();

    char *text = slurp(path, NULL), *line = text;
    size_t parent = 0, kid = 0;
    while (*line) {
        char *nl = strchr(line, '\n');
        char save;
        cr_assert_not_null(nl);
        save = nl[1];
        nl[1] = '\0';
        cr_assert(json_line(line), "%s", line);
        if (strstr(line, "\"event\":\"child\""))
            kid++;
        else
            parent++;
        nl[1] = save;
        line = nl + 1;
    }
    cr_assert_eq(parent, 500u);
    cr_assert_eq(kid, 500u);
    unlink(path);
}

/* A thread (re)opens the log in a loop while the main thread forks: a child
 * forked while that thread held the log's lock must still be able to open
 * and write its log (after vr_log_after_fork), not hang. */
static atomic_bool stop_churn;
static struct vr_config churn_cfg;

static void *churn(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_churn))
        vr_log_start(&churn_cfg);
    return NULL;
}

Test(log, fork_while_another_thread_holds_the_lock, .timeout = 60)
{
    char dir[64], pattern[128];
    pthread_t t;

    snprintf(dir, sizeof(dir), "/tmp/varemap-test-dir-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(pattern, sizeof(pattern), "%s/log-%%p.jsonl", dir);
    fill_cfg(&churn_cfg, pattern);
    cr_assert_eq(vr_log_start(&churn_cfg), 0);
    cr_assert_eq(pthread_create(&t, NULL, churn, NULL), 0);
    for (int i = 0; i < 200; i++) {
        pid_t child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
            char buf[128], path[128];
            struct vr_jw w;
            alarm(30); /* a child that deadlocks must not outlive the test */
            vr_log_after_fork();
            vr_jw_begin(&w, buf, sizeof(buf), "child");
            if (vr_log_emit(&w, VR_LEVEL_INFO) != 0)
                _exit(1);
            vr_log_start(&churn_cfg); /* takes the lock */
            vr_log_close();
            snprintf(path, sizeof(path), "%s/log-%ld.jsonl", dir, (long)getpid());
            _exit(unlink(path) == 0 ? 0 : 2);
        }
        wait_ok(child);
    }
    atomic_store(&stop_churn, true);
    pthread_join(t, NULL);
    vr_log_close();
    unlink(churn_cfg.log_path);
    cr_assert_eq(rmdir(dir), 0, "a child left its log behind");
}

/* ---- the warning budget ---- */

Test(msg, budget_caps_warnings, .init = cr_redirect_stderr)
{
    char expect[2048];
    size_t n = 0;

    for (int i = 0; i < 3 * VR_MSG_BUDGET; i++) {
        errno = EXDEV;
        if (i % 2)
            vr_warn("w %d", i);
        else
            vr_error("e %d", i);
        cr_assert_eq(errno, EXDEV);
    }
    vr_info("filtered out by level, not counted");
    for (int i = 0; i < VR_MSG_BUDGET; i++)
        n += (size_t)snprintf(expect + n, sizeof(expect) - n, i % 2 ? "varemap: warning: w %d\n"
                                                                    : "varemap: error: e %d\n",
                              i);
    snprintf(expect + n, sizeof(expect) - n, "varemap: warning: further warnings suppressed\n");
    cr_assert_stderr_eq_str(expect);
}

Test(msg, filtered_messages_do_not_use_the_budget, .init = cr_redirect_stderr)
{
    for (int i = 0; i < 3 * VR_MSG_BUDGET; i++)
        vr_info("hidden");
    vr_warn("shown");
    cr_assert_stderr_eq_str("varemap: warning: shown\n");
}

/* ---- VR_ASSERT ---- */

static int evaluations;

static int count_eval(int v)
{
    evaluations++;
    return v;
}

Test(assert, active_in_this_build_and_evaluates_once)
{
    cr_assert_eq(VR_ASSERT_ON, 1, "the test build should check assertions");
    VR_ASSERT(count_eval(1) == 1);
    cr_assert_eq(evaluations, 1);
    /* The system assert still comes through the same header name. */
    assert(evaluations == 1);
}

Test(assert, failure_prints_and_aborts)
{
    int fds[2];
    pid_t child;
    int status;
    char out[512] = "";
    ssize_t n, got = 0;

    cr_assert_eq(pipe(fds), 0);
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        dup2(fds[1], STDERR_FILENO);
        for (int i = 0; i < 2 * VR_MSG_BUDGET; i++)
            vr_warn("use up the budget"); /* an assertion is never suppressed */
        VR_ASSERT(count_eval(2) + 1 == 4);
        _exit(0);
    }
    close(fds[1]);
    while ((n = read(fds[0], out + got, sizeof(out) - 1 - (size_t)got)) > 0)
        got += n;
    out[got] = '\0';
    close(fds[0]);
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "status %#x", status);
    char line[256];
    snprintf(line, sizeof(line), "varemap: assertion failed: count_eval(2) + 1 == 4 at %s:",
             __FILE__);
    const char *at = strstr(out, line);
    cr_assert_not_null(at, "%s", out);
    cr_assert_not_null(strchr(at, '\n'));
}

/* ---- errno ---- */

Test(log, errno_preserved_everywhere, .init = cr_redirect_stderr)
{
    char path[64], buf[256];
    struct vr_jw w;

    temp_path(path, sizeof(path));
    errno = EXDEV;
    vr_warn("w %d", 1);
    cr_assert_eq(errno, EXDEV);
    vr_error("e");
    vr_info("i");
    cr_assert_eq(errno, EXDEV);
    cr_assert_eq(vr_log_open(path, VR_LEVEL_DEBUG), 0);
    cr_assert_eq(errno, EXDEV);
    vr_jw_begin(&w, buf, sizeof(buf), "x");
    vr_jw_double(&w, "denormal", 4.9406564584124654e-324); /* strtod sets ERANGE */
    vr_jw_double(&w, "nan", NAN);
    vr_jw_str(&w, "s", "v");
    vr_jw_hex(&w, "h", 1);
    vr_jw_array_begin(&w, "a");
    vr_jw_array_end(&w);
    cr_assert_eq(errno, EXDEV);
    cr_assert_eq(vr_log_emit(&w, VR_LEVEL_INFO), 0);
    cr_assert_eq(errno, EXDEV);
    vr_log_close();
    cr_assert_eq(errno, EXDEV);
    unlink(path);
    cr_assert_stderr_eq_str("varemap: warning: w 1\nvaremap: error: e\n");
}

/* ---- stderr messages ---- */

Test(msg, default_level_is_warn, .init = cr_redirect_stderr)
{
    vr_info("hidden %d", 1);
    vr_warn("shown %s", "w");
    vr_error("shown %s", "e");
    cr_assert_stderr_eq_str("varemap: warning: shown w\nvaremap: error: shown e\n");
}

Test(msg, error_level_hides_warnings, .init = cr_redirect_stderr)
{
    vr_msg_level(VR_LEVEL_ERROR);
    vr_info("i");
    vr_warn("w");
    vr_error("e");
    cr_assert_stderr_eq_str("varemap: error: e\n");
}

Test(msg, debug_level_shows_info, .init = cr_redirect_stderr)
{
    vr_msg_level(VR_LEVEL_DEBUG);
    vr_info("i %d", 42);
    vr_warn("w");
    cr_assert_stderr_eq_str("varemap: i 42\nvaremap: warning: w\n");
}

Test(msg, long_message_is_cut_into_one_line, .init = cr_redirect_stderr)
{
    static char arg[5000], expect[4096];
    static const char prefix[] = "varemap: warning: ";

    memset(arg, 'x', sizeof(arg) - 1);
    vr_warn("%s", arg);
    /* 2047 bytes in all: prefix, as many x as fit, then "...\n". */
    size_t nx = 2047 - (sizeof(prefix) - 1) - 4;
    memcpy(expect, prefix, sizeof(prefix) - 1);
    memset(expect + sizeof(prefix) - 1, 'x', nx);
    memcpy(expect + sizeof(prefix) - 1 + nx, "...\n", 5);
    cr_assert_stderr_eq_str(expect);
}

/* ---- threads ---- */

#define THREADS 8
#define PER_THREAD 2000

static const char *concurrent_path;

static void *writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    char payload[1200];
    char buf[2048];
    struct vr_jw w;

    for (int i = 0; i < PER_THREAD; i++) {
        /* Lengths vary so that lines of different threads cannot line up. */
        size_t len = (size_t)((i * 37 + id * 101) % (int)(sizeof(payload) - 1));
        memset(payload, 'a' + id, len);
        payload[len] = '\0';
        vr_jw_begin(&w, buf, sizeof(buf), "concurrent");
        vr_jw_u64(&w, "thread", (uint64_t)id);
        vr_jw_u64(&w, "i", (uint64_t)i);
        vr_jw_str(&w, "payload", payload);
        if (vr_log_emit(&w, VR_LEVEL_INFO) != 0)
            return (void *)1;
    }
    return NULL;
}

Test(log, concurrent_emits_give_whole_lines, .timeout = 60)
{
    char path[64];
    pthread_t t[THREADS];
    int seen[THREADS] = { 0 };
    char *text, *line;
    size_t lines = 0;

    temp_path(path, sizeof(path));
    concurrent_path = path;
    cr_assert_eq(vr_log_open(concurrent_path, VR_LEVEL_INFO), 0);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *ret;
        cr_assert_eq(pthread_join(t[i], &ret), 0);
        cr_assert_null(ret, "thread %d failed to emit", i);
    }
    vr_log_close();

    text = slurp(path, NULL);
    line = text;
    while (*line) {
        char *nl = strchr(line, '\n');
        char save;
        unsigned id, i;
        const char *rest;

        cr_assert_not_null(nl, "unterminated last line");
        save = nl[1];
        nl[1] = '\0';
        cr_assert(json_line(line), "not a whole JSON line: %.200s", line);
        rest = skip_header(line, "concurrent");
        cr_assert_eq(sscanf(rest, ",\"thread\":%u,\"i\":%u,", &id, &i), 2, "%.200s", line);
        cr_assert_lt(id, (unsigned)THREADS);
        /* The payload is made of this thread's letter only. */
        const char *pl = strstr(rest, "\"payload\":\"") + 11;
        size_t run = strspn(pl, (char[]){ (char)('a' + id), '\0' });
        cr_assert_eq(pl[run], '"', "foreign bytes in thread %u's line", id);
        seen[id]++;
        lines++;
        nl[1] = save;
        line = nl + 1;
    }
    cr_assert_eq(lines, (size_t)THREADS * PER_THREAD);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(seen[i], PER_THREAD, "thread %d", i);
    cr_assert_eq(vr_log_dropped(), 0u);
    unlink(path);
}
