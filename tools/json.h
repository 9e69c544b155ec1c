/* json: a small reader and writer for the decision log's lines.
 *
 * vj_parse turns one line of JSON text into a tree of malloc'ed nodes; any
 * value JSON allows is accepted (unknown fields and nesting are kept, never
 * an error), so log lines from newer shims still read. Integers that fit
 * uint64_t or int64_t are kept exactly besides their double value.
 * vj_write prints a tree back as compact JSON.
 */
#ifndef VR_TOOL_JSON_H
#define VR_TOOL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum vj_type { VJ_NULL, VJ_BOOL, VJ_NUM, VJ_STR, VJ_ARR, VJ_OBJ };

struct vj {
    enum vj_type type;
    bool b;
    double num;
    bool is_u64;    /* num is a non-negative integer, exactly u64 */
    bool is_i64;    /* num is a negative integer, exactly i64 */
    uint64_t u64;
    int64_t i64;
    char *str;      /* VJ_STR: decoded UTF-8, NUL-terminated */
    size_t n;       /* VJ_ARR / VJ_OBJ: element count */
    struct vj *items;
    char **keys;    /* VJ_OBJ: n keys, in the line's order */
};

/* Parses text[0..len) as exactly one JSON value (surrounding whitespace
 * allowed). Returns 0, or -1 with a one-line reason (with its byte column)
 * in err. On failure *out is left as VJ_NULL with nothing to free. */
int vj_parse(const char *text, size_t len, struct vj *out, char *err, size_t errcap);
void vj_free(struct vj *v);

/* The member `key` of an object (the last one when repeated), or NULL. */
const struct vj *vj_get(const struct vj *obj, const char *key);
/* Typed reads of a member; false when absent or of another type. */
bool vj_get_str(const struct vj *obj, const char *key, const char **out);
bool vj_get_u64(const struct vj *obj, const char *key, uint64_t *out);
bool vj_get_i64(const struct vj *obj, const char *key, int64_t *out);
bool vj_get_bool(const struct vj *obj, const char *key, bool *out);
bool vj_get_num(const struct vj *obj, const char *key, double *out);

/* Compact JSON. */
void vj_write(FILE *f, const struct vj *v);
/* A JSON string literal with the escapes JSON needs. */
void vj_write_str(FILE *f, const char *s);

#endif
