/* log: stderr messages and the decision log writer (lines built by jw.h).
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
#include "lockrank.h"

/* Long enough for a warning that quotes a full path; longer ones are cut
 * and marked rather than split over two writes. */
#define MSG_MAX 2048

atomic_int vr_log_fd_ = -1;
/* The file vr_log_fd_ was opened on; stored before vr_log_fd_ (release). */
static atomic_uint_fast64_t log_dev, log_ino;
atomic_int vr_log_level_ = VR_LEVEL_INFO;
static atomic_int msg_level = VR_LEVEL_WARN;
static atomic_uint_fast64_t dropped;
static atomic_uint msgs_printed;

/* Serializes (re)opening; guards the two paths below. */
static pthread_mutex_t reopen_lock = PTHREAD_MUTEX_INITIALIZER;
static void reopen_take(void)
{
    vr_rank_take(VR_RANK_LOG);
    pthread_mutex_lock(&reopen_lock);
}

static void reopen_drop(void)
{
    pthread_mutex_unlock(&reopen_lock);
    vr_rank_drop(VR_RANK_LOG);
}

static char open_path[VR_PATH_MAX]; /* what vr_log_fd_ was opened from */
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
    old = atomic_exchange(&vr_log_fd_, -1);
    if (is_ours(old))
        close(old);
    if (fd < 0) {
        open_path[0] = '\0';
        return *path ? fd : 0;
    }
    memmove(open_path, path, strlen(path) + 1);
    atomic_store_explicit(&log_dev, (uint64_t)st.st_dev, memory_order_relaxed);
    atomic_store_explicit(&log_ino, (uint64_t)st.st_ino, memory_order_relaxed);
    atomic_store_explicit(&vr_log_fd_, fd, memory_order_release);
    return 0;
}

static int open_locked(const char *path, enum vr_level level)
{
    VR_ASSERT_HELD(VR_RANK_LOG);
    int saved = errno, rc;

    /* The level goes first so an emitter that sees the new fd also sees it. */
    atomic_store_explicit(&vr_log_level_, (int)level, memory_order_relaxed);
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

    reopen_take();
    pattern[0] = '\0';
    rc = open_locked(path, level);
    reopen_drop();
    return rc;
}

int vr_log_start(const struct vr_config *cfg)
{
    int rc;

    reopen_take();
    rc = open_locked(cfg->log_path, cfg->log_level);
    if (rc == 0 && cfg->log_path[0] && vr_path_has_pid(cfg->log_pattern))
        memcpy(pattern, cfg->log_pattern, strlen(cfg->log_pattern) + 1);
    else
        pattern[0] = '\0';
    reopen_drop();
    return rc;
}

/* The log descriptor failed the identity check. Returns the descriptor to
 * write to now, or -1 when there is no log any more. */
static int reopen(void)
{
    int saved = errno;
    int fd;

    reopen_take();
    fd = atomic_load_explicit(&vr_log_fd_, memory_order_acquire);
    if (fd < 0 || is_ours(fd))
        goto out; /* closed meanwhile, or another thread re-opened it */
    /* Not ours any more: forget it without closing (the program's now). */
    atomic_store_explicit(&vr_log_fd_, -1, memory_order_relaxed);
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
        atomic_store_explicit(&vr_log_fd_, nfd, memory_order_release);
        fd = nfd;
    }
out:
    reopen_drop();
    errno = saved;
    return fd;
}

/* Only safe once no thread emits any more (exit): a racing emitter that
 * already checked the descriptor could still write after it is closed. */
void vr_log_close(void)
{
    int saved = errno;

    reopen_take();
    pattern[0] = '\0';
    (void)switch_to("");
    reopen_drop();
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
    old = atomic_exchange(&vr_log_fd_, -1);
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

uint64_t vr_log_dropped(void)
{
    return (uint64_t)atomic_load_explicit(&dropped, memory_order_relaxed);
}

int vr_log_emit(struct vr_jw *w, enum vr_level level)
{
    int saved = errno;
    int fd = atomic_load_explicit(&vr_log_fd_, memory_order_acquire);
    long len;
    int rc = 0;

    if (fd < 0 || (int)level > atomic_load_explicit(&vr_log_level_, memory_order_relaxed))
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
