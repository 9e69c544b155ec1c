/* log: the JSON Lines decision log and the one-line stderr messages.
 *
 * Every function keeps errno as it found it and never writes to stdout.
 * Nothing here calls malloc: a line is built in a buffer the caller owns
 * (on the stack for hot-path events) and written with one write(2), so
 * lines from many threads never interleave. A line that does not fit its
 * buffer is dropped and counted, never cut into invalid JSON.
 *
 * The log is a regular file only (a FIFO, device or directory: one warning,
 * no log). Before each line the descriptor is checked to still be the file
 * the log opened; one the program closed or reused for its own file is
 * left alone and the path is opened again, so the program's files never
 * receive log lines.
 *
 * Fork: vr_log_after_fork, at a forked child's first CUDA call, gives it a
 * log of its own when VAREMAP_LOG has %p; otherwise parent and child share
 * the one file, appending whole lines, each line naming its pid.
 *
 * stderr messages share an error budget: after VR_MSG_BUDGET lines, one
 * "varemap: warning: further warnings suppressed" and then silence.
 */
#ifndef VR_LOG_H
#define VR_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "jw.h"

#define VR_MSG_BUDGET 10

/* Opens (O_APPEND|O_CREAT|O_CLOEXEC|O_NONBLOCK) the log at `path` as it is,
 * "" means no log. On failure (or a path that is not a regular file) prints
 * one warning naming the path and the reason, and the shim runs without a
 * log. Returns 0 or -errno (-EINVAL: not a regular file). A forked child
 * keeps appending to the same file. */
int vr_log_open(const char *path, enum vr_level level);

/* vr_log_open(cfg->log_path, cfg->log_level), and remembers
 * cfg->log_pattern: when it has %p, a forked child opens its own file. */
int vr_log_start(const struct vr_config *cfg);

/* Only once no thread emits any more (exit). */
void vr_log_close(void);

/* For a forked child's first CUDA call: a fresh lock, and with a %p
 * pattern the child's own log file (the parent's descriptor copy is
 * closed). */
void vr_log_after_fork(void);

/* The log's descriptor (-1: none) and level, for vr_log_enabled only. */
extern __attribute__((visibility("hidden"))) atomic_int vr_log_fd_, vr_log_level_;

/* True when a log is open and `level` passes the configured level. Inline:
 * the forwarding and passing paths ask it on every update. */
static inline bool vr_log_enabled(enum vr_level level)
{
    return atomic_load_explicit(&vr_log_fd_, memory_order_acquire) >= 0 &&
           (int)level <= atomic_load_explicit(&vr_log_level_, memory_order_relaxed);
}

/* Sets the level for stderr messages (default warn). */
void vr_msg_level(enum vr_level level);

/* "varemap: warning: <message>\n" / "varemap: error: ..." / "varemap: ..."
 * on stderr in one write, when the configured level lets it through. */
void vr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vr_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vr_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Finishes `w` and writes it to the log when `level` is enabled.
 * Returns 0, -ENOSPC (line dropped) or -errno of write. */
int vr_log_emit(struct vr_jw *w, enum vr_level level);

/* One `fallback` event (level info): what the shim gave up on, and why. */
void vr_log_fallback(const char *what, const char *reason);

/* Lines dropped because they overflowed their buffer or write failed. */
uint64_t vr_log_dropped(void);

#endif
