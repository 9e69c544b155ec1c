/* cli: running the `varemap` command in the tests/cli suites.
 *
 * Builds on the e2e harness (scratch directory, vr_spawn, log readers).
 * Every run gets a clean environment: PATH, LD_LIBRARY_PATH=simcuda,
 * VR_PTX, SIMCUDA_KERNELS and VR_EXTENT when set, TMPDIR=<scratch>/tmp (so a suite can see what the command leaves
 * behind) and ASAN_OPTIONS for the sanitizer builds; the test's own entries
 * come last and win.
 */
#ifndef VR_CLI_H
#define VR_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "harness.h"

struct cli_env {
    char *v[64];
    size_t n;
};

void cli_env_init(struct cli_env *e);
/* Adds or replaces NAME=VALUE (printf-style). */
void cli_env_set(struct cli_env *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_env_free(struct cli_env *e);

/* <scratch>/tmp, created by cli_env_init. */
const char *cli_tmpdir(void);
/* VR_APPS_DIR/<name> */
const char *cli_app(const char *name);

/* Runs argv (argv[0] is searched in PATH when it has no '/') with e. */
void cli_run(const char *tag, const char *const *argv, const struct cli_env *e, struct vr_proc *p);

/* Entries of a directory besides . and .. */
size_t cli_dir_entries(const char *dir);

/* True when some line of text, with runs of blanks squeezed to one space
 * and the ends trimmed, equals `want`. */
bool cli_has_row(const struct vr_buf *text, const char *want);

/* Writes text to path (the test aborts when it cannot). */
void cli_write(const char *path, const char *text);

#endif
