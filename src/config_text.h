/* config_text: value syntax shared by config.c's parsers (private to config).
 *
 * Names compare case-insensitively and locale-independently; numbers are
 * plain decimal digits. Public parts (vr_parse_size, vr_expand_path,
 * vr_path_has_pid, vr_mode_name, vr_level_name) are declared in config.h.
 */
#ifndef VR_CONFIG_TEXT_H
#define VR_CONFIG_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

bool vr_text_is_space(int c);
bool vr_text_eq_nocase(const char *a, const char *b);
/* Index of text among names[0..n), or -EINVAL. */
int vr_text_find(const char *const *names, size_t n, const char *text);
/* Reads digits at *p (advanced past them) into *out; -EINVAL on none or overflow. */
int vr_text_digits(const char **p, uint64_t *out);
/* An enum vr_mode / vr_level by name, or -EINVAL. */
int vr_mode_find(const char *text);
int vr_level_find(const char *text);
/* One line of a config file (line[len] must be writable), split in place:
 * a '#' at the start or after a blank opens a comment, blanks around the
 * key and the value go. NULL with *key NULL: a blank line; NULL with *key
 * and *value set: "key = value"; else why it is not such a line. */
const char *vr_text_key_value(char *line, size_t len, char **key, char **value);

#endif
