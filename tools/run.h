/* run: `varemap [options] -- PROGRAM ARGS...`, the program under the shim.
 *
 * Sets the VAREMAP_* variables the options name, prepends the shim to
 * LD_PRELOAD, runs the program as a child and exits as it did (a signal N
 * becomes 128+N). Unless quiet, reads the decision log of every process the
 * run left (a private temporary log with %p when the user named none) and
 * prints a short summary per exec on stderr.
 *
 * With --sim, a dry run without a GPU: the program twice on the simulated
 * driver, without and with the shim, and whether the two runs agree.
 */
#ifndef VR_TOOL_RUN_H
#define VR_TOOL_RUN_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

/* The command's own failures, as env(1) and timeout(1) report theirs. */
enum {
    RUN_EXIT_USAGE = 2,
    RUN_EXIT_BOTH_FAILED = 3,  /* --sim: both runs failed alike */
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
    /* --sim */
    bool sim;
    const char *sim_dir;
    const char **outputs;          /* --output FILE, in the order given */
    size_t noutputs;
    const char **ignores;          /* --ignore REGEX, as given ... */
    const regex_t *ignore_res;     /* ... and compiled (REG_EXTENDED) */
    size_t nignores;
    const char *prices;            /* --prices FILE; NULL: the built-in model */
};

/* The library to preload: --shim, else VAREMAP_SHIM, else the one installed
 * beside this program, else the build tree's. Writes an absolute path and
 * returns 0, or returns -1 with what was tried in `why`. */
int run_find_shim(const char *explicit_path, char *out, size_t cap, char *why, size_t whycap);

/* The directories to put on LD_LIBRARY_PATH for simcuda's libcuda.so.1
 * (and simcudart's libcudart.so.13): --sim-dir, else VAREMAP_SIM_DIR, else
 * <libdir>/varemap/sim beside this program, else the build tree's. Writes
 * a ':'-separated list of absolute paths and returns 0, or returns -1 with
 * what was tried in `why`. */
int run_find_sim(const char *explicit_dir, char *out, size_t cap, char *why, size_t whycap);

/* Runs the program; returns the exit status for varemap. */
int run_program(const struct run_opts *o);

/* --sim: runs the program on simcuda without, then with the shim, and
 * compares exit status, stdout and the --output files (lines matching an
 * --ignore left out). Prints on stdout what the shim decided and would save
 * at the cost model's prices; the last line says `identical`, `both runs
 * failed`, or names the first difference. Returns 0 when they agree, 1 when
 * not, RUN_EXIT_BOTH_FAILED when they agree on a failure, 125-127 when it
 * could not compare. */
int run_sim(const struct run_opts *o);

#endif
