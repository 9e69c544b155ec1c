/* simcmp: how `varemap --sim` compares what its two runs wrote.
 *
 * Without --ignore, byte for byte; the first differing byte is named. With
 * --ignore REGEX (POSIX extended, repeatable), the files are read as lines
 * ('\n' ends one) and every line that matches any REGEX is left out of both
 * before they are compared, so a run that prints its timing compares equal
 * (`diff -I` leaves out a hunk whose lines all match; dropping each matching
 * line is the stricter reading: a line that differs and does not match
 * always counts).
 *
 * Either way, when the files differ, the kept lines are also compared with
 * every number replaced by a placeholder: when that makes them equal (and
 * both have as many lines), only numbers differ, and the result names the
 * lines and an --ignore that would leave them out.
 */
#ifndef VR_TOOL_SIMCMP_H
#define VR_TOOL_SIMCMP_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#define SIMCMP_SUGGEST 4

struct simcmp {
    bool differ;
    long long at, len_a, len_b;  /* without --ignore: first differing byte, sizes */
    size_t line_a, line_b;       /* first differing kept line of each (1-based) */
    bool numbers_only;           /* every difference is in numbers alone */
    size_t number_lines;         /* how many kept lines differ so */
    size_t ex_line;              /* the first of them, its line in a */
    char *ex_a, *ex_b;           /* ... and its text in each */
    char *suggest[SIMCMP_SUGGEST]; /* --ignore REGEX that would leave them out */
    size_t nsuggest;
    bool more_suggest;           /* more than SIMCMP_SUGGEST distinct lines */
};

/* Compares files a and b, leaving out lines that match any of ign[0..nign).
 * Returns 0 with *r filled in, or -errno when one cannot be read. */
int simcmp_files(const char *a, const char *b, const regex_t *ign, size_t nign, struct simcmp *r);
void simcmp_free(struct simcmp *r);

/* The text of a single-quoted shell word for s (quotes inside escaped),
 * written into out; truncated to fit. */
void simcmp_shell_quote(const char *s, char *out, size_t cap);

#endif
