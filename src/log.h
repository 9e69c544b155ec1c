/* log: the JSON Lines decision log and the one-line stderr messages.
 *
 * Every function keeps errno as it found it and never writes to stdout.
 * Nothing here calls malloc: a line is built in a buffer the caller owns
 * (on the stack for hot-path events) and written with one write(2), so
 * lines from many threads never interleave. A line that does not fit its
 * buffer is dropped and counted, never cut into invalid JSON.
 */
#ifndef VR_LOG_H
#define VR_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Opens (O_APPEND|O_CREAT|O_CLOEXEC) the log at `path`; "" means no log.
 * On failure prints one warning naming the path and the reason, and the
 * shim runs without a log. Returns 0 or -errno. */
int vr_log_open(const char *path, enum vr_level level);
void vr_log_close(void);

/* True when a log is open and `level` passes the configured level. */
bool vr_log_enabled(enum vr_level level);

/* Sets the level for stderr messages (default warn). */
void vr_msg_level(enum vr_level level);

/* "varemap: warning: <message>\n" / "varemap: error: ..." / "varemap: ..."
 * on stderr in one write, when the configured level lets it through. */
void vr_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vr_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void vr_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* JSON object builder over a caller-owned buffer. */
struct vr_jw {
    char *buf;
    size_t cap;
    size_t len;
    unsigned depth;     /* open arrays/objects below the top level */
    bool need_comma;
    bool overflow;      /* also set on misuse (unbalanced, key mismatch): the line is dropped */
    uint32_t arrays;    /* bit d-1 set: the container at depth d is an array */
    bool finished;      /* vr_jw_finish already closed the line */
};

/* Starts {"ts":<seconds>,"pid":<pid>,"event":"<event>" */
void vr_jw_begin(struct vr_jw *w, char *buf, size_t cap, const char *event);
void vr_jw_str(struct vr_jw *w, const char *key, const char *value);
void vr_jw_u64(struct vr_jw *w, const char *key, uint64_t value);
void vr_jw_i64(struct vr_jw *w, const char *key, int64_t value);
void vr_jw_hex(struct vr_jw *w, const char *key, uint64_t value); /* "0x1f" as a string */
void vr_jw_bool(struct vr_jw *w, const char *key, bool value);
void vr_jw_double(struct vr_jw *w, const char *key, double value);
/* Nested containers; key is NULL inside an array. */
void vr_jw_array_begin(struct vr_jw *w, const char *key);
void vr_jw_array_end(struct vr_jw *w);
void vr_jw_object_begin(struct vr_jw *w, const char *key);
void vr_jw_object_end(struct vr_jw *w);
/* Closes the object and terminates the line with '\n'. Returns the line
 * length, or -ENOSPC when it overflowed (or containers were left open). */
long vr_jw_finish(struct vr_jw *w);

/* Finishes `w` and writes it to the log when `level` is enabled.
 * Returns 0, -ENOSPC (line dropped) or -errno of write. */
int vr_log_emit(struct vr_jw *w, enum vr_level level);

/* Lines dropped because they overflowed their buffer or write failed. */
uint64_t vr_log_dropped(void);

#endif
