/* harness: run the apps on simcuda with and without the shim, and read what
 * they leave behind (output bytes, the shim's JSONL log, simcuda's call
 * counts).
 *
 * Paths come from the environment meson gives each test: VR_SHIM,
 * VR_SIMCUDA_DIR, VR_APPS_DIR, VR_PTX. Every run gets a clean environment:
 * only what the test names reaches the program, never the VAREMAP_* or
 * SIMCUDA_* of whoever runs the suite.
 */
#ifndef VR_HARNESS_H
#define VR_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A file's bytes, NUL-terminated for the text helpers (len excludes it). */
struct vr_buf {
    char *p;
    size_t len;
};

/* Reads `path`; false (and an empty buffer) when it cannot be read. */
bool vr_read_file(const char *path, struct vr_buf *b);
void vr_buf_free(struct vr_buf *b);

/* The environment variable `name`; aborts the test run when unset. */
const char *vr_env_path(const char *name);

/* Per-test scratch directory: setup in a suite's .init, teardown in .fini
 * (kept when VR_KEEP_TMP is set, for a look after a failure). */
void vr_tmp_setup(void);
void vr_tmp_teardown(void);
/* "<scratch>/<name>", valid until teardown. */
const char *vr_tmp_path(const char *name);

struct vr_proc {
    int status;          /* exit code, 128 + signal when killed, -1 when not started */
    bool timed_out;      /* killed after vr_spawn_timeout_s */
    struct vr_buf out;   /* stdout */
    struct vr_buf err;   /* stderr */
};

/* Runs argv[0] (a path; no PATH search unless `search`) with exactly `env`
 * (NULL-terminated NAME=VALUE list), stdin from /dev/null, stdout and
 * stderr captured through files named after `tag`. Returns 0 or -errno. */
int vr_spawn(const char *tag, char *const argv[], char *const env[], bool search,
             struct vr_proc *p);
void vr_proc_free(struct vr_proc *p);

/* Seconds a spawned program may run before it is killed (SIGKILL, status
 * 137, timed_out set); 0, the default: no limit. */
extern unsigned vr_spawn_timeout_s;

enum {
    VR_RUN_SHIM = 1,   /* LD_PRELOAD the shim */
    VR_RUN_NOLOG = 2,  /* no VAREMAP_LOG (VAREMAP_* only as the test names them) */
};

/* One run of an app from VR_APPS_DIR. The harness adds --out and --map
 * (files in the scratch dir named after `tag`), LD_LIBRARY_PATH=simcuda,
 * SIMCUDA_STATS, VR_PTX and, with the shim, VAREMAP_LOG; `env` entries come
 * last and override those. */
struct vr_run {
    struct vr_proc proc;
    struct vr_buf bytes;   /* --out */
    struct vr_buf map;     /* --map */
    struct vr_buf log;     /* VAREMAP_LOG */
    struct vr_buf stats;   /* SIMCUDA_STATS */
    bool parsed;           /* the final stdout line was found */
    unsigned long long steps, launches, setparams;
    char checksum[40];
};

int vr_run_app(const char *tag, const char *app, const char *const *args, unsigned flags,
               const char *const *env, struct vr_run *r);

/* Settings every shim run of this suite gets (NULL: none), before the run's
 * own `env`, which overrides them: a suite that checks what slices do sets
 * VAREMAP_SLICE_STILL=1 here once (its scenarios' buffers do not move while
 * profiled, and such an exec would otherwise stay compared). */
extern const char *const *vr_shim_env;
void vr_run_free(struct vr_run *r);

/* Lines of `text` that start with `prefix`. */
size_t vr_count_lines(const struct vr_buf *text, const char *prefix);
/* Lines of `text` that contain every one of the NULL-terminated `needles`. */
size_t vr_count_lines_with(const struct vr_buf *text, const char *const *needles);

/* ---- the JSONL log ---- */

/* Number of lines whose "event" is `event`. */
size_t vr_log_count(const struct vr_buf *log, const char *event);
/* The nth (0-based) such line, its length in *len; NULL when there is none. */
const char *vr_log_event(const struct vr_buf *log, const char *event, size_t nth, size_t *len);

/* The sum of `key` over every line whose "event" is `event`. */
uint64_t vr_log_sum(const struct vr_buf *log, const char *event, const char *key);

/* `"key":` within line[0..len): a number, or a string holding one ("0x1f",
 * "12"). False when absent or not a number. Keys inside nested objects are
 * found too; callers use keys that occur once per line. */
bool vr_json_u64(const char *line, size_t len, const char *key, uint64_t *v);
bool vr_json_str(const char *line, size_t len, const char *key, char *out, size_t cap);

/* Field of the (last) summary event. */
bool vr_summary(const struct vr_buf *log, const char *key, uint64_t *v);

struct vr_cand {
    uint64_t ptr, size, anchors;
    char verdict[32];
};
/* The candidates array of a profile_decision line: count (up to cap are
 * stored), or -1 when the line has none or it does not parse. */
long vr_candidates(const char *line, size_t len, struct vr_cand *c, size_t cap);

/* ---- simcuda's SIMCUDA_STATS file ---- */

/* calls["name"], 0 when the symbol was never called. */
uint64_t vr_sim_calls(const struct vr_buf *stats, const char *name);
/* True when the file holds a "calls" object at all. */
bool vr_sim_ok(const struct vr_buf *stats);

/* ---- the apps' --map file: "buf NAME 0xPTR SIZE ROLE" ---- */

/* Pointers of the buffers named `name` (NULL: any) with role `role` (NULL:
 * any), in allocation order; returns the count (up to cap stored). */
size_t vr_map_ptrs(const struct vr_buf *map, const char *name, const char *role, uint64_t *ptrs,
                   size_t cap);

#endif
