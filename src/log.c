/* log: stderr messages, the JSON line builder and the decision log writer.
 *
 * Called from hooks on any thread, including while the program holds its own
 * locks, so: no malloc and no stdio streams. Emitting a line takes no lock:
 * a line is one write(2) on an O_APPEND descriptor, which the kernel does not
 * interleave with other writers' lines. The only lock (`reopen_lock`) is a
 * leaf taken on the rare path that (re)opens the file; nothing else is
 * called under it but open/fstat/close.
 *
 * The program owns the descriptor table: it may close every descriptor and
 * open its own file, which then gets the number the log had. So the log
 * remembers the device and inode it opened and checks them (fstat) before
 * every write; a descriptor that is closed or names another file is no
 * longer ours: it is forgotten, never written to or closed, and the path
 * is opened again.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "assert.h"

/* Long enough for a warning that quotes a full path; longer ones are cut
 * and marked rather than split over two writes. */
#define MSG_MAX 2048
#define MAX_DEPTH 32

static atomic_int log_fd = -1;
/* The file log_fd was opened on; stored before log_fd (release). */
static atomic_uint_fast64_t log_dev, log_ino;
static atomic_int log_level = VR_LEVEL_INFO;
static atomic_int msg_level = VR_LEVEL_WARN;
static atomic_uint_fast64_t dropped;
static atomic_uint msgs_printed;

/* Serializes (re)opening; guards the two paths below. */
static pthread_mutex_t reopen_lock = PTHREAD_MUTEX_INITIALIZER;
static char open_path[VR_PATH_MAX]; /* what log_fd was opened from */
static char pattern[VR_PATH_MAX];   /* VAREMAP_LOG before %p expansion, for a forked child */

/* Writes everything or fails; a signal or a short write must not leave
 * half a line that the next writer's bytes would be glued to. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- stderr messages ---- */

/* The error budget: a program that trips the same problem in a loop (or
 * a config file full of junk) must not bury its own output under ours. */
static bool within_budget(void)
{
    static const char last[] = "varemap: warning: further warnings suppressed\n";
    unsigned n = atomic_fetch_add_explicit(&msgs_printed, 1, memory_order_relaxed);

    if (n < VR_MSG_BUDGET)
        return true;
    if (n == VR_MSG_BUDGET)
        (void)write_all(STDERR_FILENO, last, sizeof(last) - 1);
    else /* stays put instead of wrapping around after 2^32 messages */
        atomic_store_explicit(&msgs_printed, VR_MSG_BUDGET + 1, memory_order_relaxed);
    return false;
}

static void message(enum vr_level level, const char *prefix, const char *fmt, va_list ap)
{
    static const char cut[] = "...\n";
    char buf[MSG_MAX];
    size_t plen = strlen(prefix);
    size_t room = sizeof(buf) - plen - 1; /* keeps a byte for '\n' */
    int n;

    if ((int)level > atomic_load_explicit(&msg_level, memory_order_relaxed))
        return;
    if (!within_budget())
        return;
    memcpy(buf, prefix, plen);
    n = vsnprintf(buf + plen, room + 1, fmt, ap);
    if (n < 0)
        return;
    if ((size_t)n > room) {
        memcpy(buf + sizeof(buf) - sizeof(cut), cut, sizeof(cut) - 1);
        n = (int)(sizeof(buf) - 1 - plen);
    } else {
        buf[plen + (size_t)n] = '\n';
        n++;
    }
    (void)write_all(STDERR_FILENO, buf, plen + (size_t)n);
}

#define MESSAGE(level, prefix)                 \
    do {                                       \
        int saved = errno;                     \
        va_list ap;                            \
        va_start(ap, fmt);                     \
        message(level, prefix, fmt, ap);       \
        va_end(ap);                            \
        errno = saved;                         \
    } while (0)

void vr_warn(const char *fmt, ...)
{
    MESSAGE(VR_LEVEL_WARN, "varemap: warning: ");
}

void vr_error(const char *fmt, ...)
{
    MESSAGE(VR_LEVEL_ERROR, "varemap: error: ");
}

void vr_info(const char *fmt, ...)
{
    MESSAGE(VR_LEVEL_INFO, "varemap: ");
}

void vr_msg_level(enum vr_level level)
{
    atomic_store_explicit(&msg_level, (int)level, memory_order_relaxed);
}

/* ---- the log file ---- */

static bool is_ours(int fd)
{
    struct stat st;

    return fd >= 0 && fstat(fd, &st) == 0 &&
           (uint64_t)st.st_dev == atomic_load_explicit(&log_dev, memory_order_relaxed) &&
           (uint64_t)st.st_ino == atomic_load_explicit(&log_ino, memory_order_relaxed);
}

/* Only a regular file: a FIFO would block the program's hooks as soon as
 * its reader stalls (or block in open without one), and a device may act
 * on being opened. stat first so a device is never opened at all, then
 * fstat what was opened in case the path changed in between. O_NONBLOCK
 * keeps that open from waiting for a FIFO reader; it means nothing for a
 * regular file. Returns the descriptor or -errno (-EINVAL: not regular). */
static int open_regular(const char *path, struct stat *st)
{
    int fd;

    if (stat(path, st) == 0 && !S_ISREG(st->st_mode))
        return -EINVAL;
    do {
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0644);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -errno;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        int err = S_ISREG(st->st_mode) ? errno : EINVAL;
        close(fd);
        return -err;
    }
    return fd;
}

static void warn_open(const char *path, int rc)
{
    char why[128];

    if (rc == -EINVAL)
        vr_warn("log %s is not a regular file; running without a log", path);
    else
        /* GNU strerror_r (we build with _GNU_SOURCE): no allocation, and
         * unlike strerror it is safe while other threads report errors. */
        vr_warn("cannot open log %s: %s", path, strerror_r(-rc, why, sizeof(why)));
}

/* Caller holds reopen_lock. Replaces the log with `path` ("" = none);
 * the old descriptor is closed only if it is still ours. A path that cannot
 * be opened warns once and leaves no log. Returns 0 or -errno. */
static int switch_to(const char *path)
{
    struct stat st;
    int fd = -1, old;

    if (*path) {
        fd = open_regular(path, &st);
        if (fd < 0)
            warn_open(path, fd);
    }
    old = atomic_exchange(&log_fd, -1);
    if (is_ours(old))
        close(old);
    if (fd < 0) {
        open_path[0] = '\0';
        return *path ? fd : 0;
    }
    memmove(open_path, path, strlen(path) + 1);
    atomic_store_explicit(&log_dev, (uint64_t)st.st_dev, memory_order_relaxed);
    atomic_store_explicit(&log_ino, (uint64_t)st.st_ino, memory_order_relaxed);
    atomic_store_explicit(&log_fd, fd, memory_order_release);
    return 0;
}

static int open_locked(const char *path, enum vr_level level)
{
    int saved = errno, rc;

    /* The level goes first so an emitter that sees the new fd also sees it. */
    atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
    if (path && strlen(path) >= sizeof(open_path)) {
        vr_warn("log path too long; running without a log");
        (void)switch_to("");
        rc = -ENAMETOOLONG;
    } else {
        rc = switch_to(path ? path : "");
    }
    errno = saved;
    return rc;
}

int vr_log_open(const char *path, enum vr_level level)
{
    int rc;

    pthread_mutex_lock(&reopen_lock);
    pattern[0] = '\0';
    rc = open_locked(path, level);
    pthread_mutex_unlock(&reopen_lock);
    return rc;
}

int vr_log_start(const struct vr_config *cfg)
{
    int rc;

    pthread_mutex_lock(&reopen_lock);
    rc = open_locked(cfg->log_path, cfg->log_level);
    if (rc == 0 && cfg->log_path[0] && vr_path_has_pid(cfg->log_pattern))
        memcpy(pattern, cfg->log_pattern, strlen(cfg->log_pattern) + 1);
    else
        pattern[0] = '\0';
    pthread_mutex_unlock(&reopen_lock);
    return rc;
}

/* The log descriptor failed the identity check. Returns the descriptor to
 * write to now, or -1 when there is no log any more. */
static int reopen(void)
{
    int saved = errno;
    int fd;

    pthread_mutex_lock(&reopen_lock);
    fd = atomic_load_explicit(&log_fd, memory_order_acquire);
    if (fd < 0 || is_ours(fd))
        goto out; /* closed meanwhile, or another thread re-opened it */
    /* Not ours any more: forget it without closing (the program's now). */
    atomic_store_explicit(&log_fd, -1, memory_order_relaxed);
    {
        struct stat st;
        int nfd = open_regular(open_path, &st);
        if (nfd < 0) {
            char why[128];
            vr_warn("log descriptor %d was closed or reused by the program and %s cannot be "
                    "opened again (%s); running without a log",
                    fd, open_path,
                    nfd == -EINVAL ? "not a regular file" : strerror_r(-nfd, why, sizeof(why)));
            open_path[0] = '\0';
            fd = -1;
            goto out;
        }
        atomic_store_explicit(&log_dev, (uint64_t)st.st_dev, memory_order_relaxed);
        atomic_store_explicit(&log_ino, (uint64_t)st.st_ino, memory_order_relaxed);
        atomic_store_explicit(&log_fd, nfd, memory_order_release);
        fd = nfd;
    }
out:
    pthread_mutex_unlock(&reopen_lock);
    errno = saved;
    return fd;
}

/* Only safe once no thread emits any more (exit): a racing emitter that
 * already checked the descriptor could still write after it is closed. */
void vr_log_close(void)
{
    int saved = errno;

    pthread_mutex_lock(&reopen_lock);
    pattern[0] = '\0';
    (void)switch_to("");
    pthread_mutex_unlock(&reopen_lock);
    errno = saved;
}

/* Runs in the child of fork() at its first CUDA call (interpose.c), before
 * any of the child's own log lines: the lock may be held by a thread that
 * stayed behind in the parent, so it is made anew rather than taken. Only
 * async-signal-safe calls on the way (open, fstat, close) unless a warning
 * has to be printed. */
void vr_log_after_fork(void)
{
    int saved = errno;
    char path[VR_PATH_MAX];
    int old;

    pthread_mutex_init(&reopen_lock, NULL);
    if (pattern[0] == '\0')
        goto out; /* one file for all: O_APPEND lines carry their own pid */
    old = atomic_exchange(&log_fd, -1);
    if (is_ours(old))
        close(old); /* the child's copy; the parent's stays open */
    if (vr_expand_path(pattern, getpid(), path, sizeof(path)) < 0) {
        open_path[0] = '\0';
        goto out;
    }
    (void)switch_to(path);
out:
    errno = saved;
}

bool vr_log_enabled(enum vr_level level)
{
    return atomic_load_explicit(&log_fd, memory_order_acquire) >= 0 &&
           (int)level <= atomic_load_explicit(&log_level, memory_order_relaxed);
}

uint64_t vr_log_dropped(void)
{
    return (uint64_t)atomic_load_explicit(&dropped, memory_order_relaxed);
}

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
static size_t utf8_seq(const unsigned char *s)
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

        while (*s >= 0x20 && *s != '"' && *s != '\\' && (n = utf8_seq(s)) > 0)
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

int vr_log_emit(struct vr_jw *w, enum vr_level level)
{
    int saved = errno;
    int fd = atomic_load_explicit(&log_fd, memory_order_acquire);
    long len;
    int rc = 0;

    if (fd < 0 || (int)level > atomic_load_explicit(&log_level, memory_order_relaxed))
        goto out;
    len = vr_jw_finish(w);
    if (len < 0) {
        rc = (int)len;
    } else {
        if (!is_ours(fd))
            fd = reopen();
        rc = fd < 0 ? -EBADF : write_all(fd, w->buf, (size_t)len);
    }
    if (rc < 0)
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
out:
    errno = saved;
    return rc;
}

void vr_log_fallback(const char *what, const char *reason)
{
    if (!vr_log_enabled(VR_LEVEL_INFO))
        return;
    char buf[512];
    struct vr_jw w;
    vr_jw_begin(&w, buf, sizeof buf, "fallback");
    vr_jw_str(&w, "what", what);
    vr_jw_str(&w, "reason", reason);
    vr_log_emit(&w, VR_LEVEL_INFO);
}

/* ---- assertions (assert.h) ---- */

void vr_assert_fail(const char *expr, const char *file, int line)
{
    char buf[MSG_MAX];
    int n = snprintf(buf, sizeof(buf), "varemap: assertion failed: %s at %s:%d\n", expr, file,
                     line);

    if (n > 0)
        (void)write_all(STDERR_FILENO, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
    abort();
}
