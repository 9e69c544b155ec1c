/* jw: a JSON object, one line of the decision log, built over a
 * caller-owned buffer.
 *
 * Every append checks that its bytes and a terminating NUL fit; a field that
 * does not fit is rolled back and the line marked overflowed, so a line is
 * either whole or dropped, never cut into invalid JSON. Strings are written
 * as UTF-8 where they are well formed, their other bytes as \u00XX.
 */
#ifndef VR_JW_H
#define VR_JW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Length of the well-formed UTF-8 sequence at s, or 0 (overlong forms,
 * surrogates and code points past U+10FFFF are not well formed). */
size_t vr_utf8_seq(const unsigned char *s);

#endif
