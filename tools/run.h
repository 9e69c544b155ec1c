/* run: `varemap [options] -- PROGRAM ARGS...`, the program under the shim.
 *
 * Sets the VAREMAP_* variables the options name, prepends the shim to
 * LD_PRELOAD, runs the program as a child and exits as it did (a signal N
 * becomes 128+N). Unless quiet, reads the decision log of every process the
 * run left (a private temporary log with %p when the user named none) and
 * prints a short summary per exec on stderr.
 */
#ifndef VR_TOOL_RUN_H
#define VR_TOOL_RUN_H

#include <stdbool.h>
#include <stddef.h>

/* The command's own failures, as env(1) and timeout(1) report theirs. */
enum {
    RUN_EXIT_USAGE = 2,
    RUN_EXIT_FAILED = 125,   /* varemap itself: no shim, cannot fork */
    RUN_EXIT_CANNOT_EXEC = 126,
    RUN_EXIT_NOT_FOUND = 127,
};

struct run_opts {
    const char *mode;              /* NULL: leave the environment's */
    const char *log;
    const char *profile_launches;
    const char *shim;
    bool stats, quiet;
    char **argv;                   /* PROGRAM ARGS..., NULL-terminated */
};

/* The library to preload: --shim, else VAREMAP_SHIM, else the one installed
 * beside this program, else the build tree's. Writes an absolute path and
 * returns 0, or returns -1 with what was tried in `why`. */
int run_find_shim(const char *explicit_path, char *out, size_t cap, char *why, size_t whycap);

/* Runs the program; returns the exit status for varemap. */
int run_program(const struct run_opts *o);

#endif
