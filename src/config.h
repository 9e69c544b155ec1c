/* config: the shim's settings, read once.
 *
 * One table (config.c) names every setting, its default and its parser.
 * Sources, later wins: the defaults, the `key = value` file named by
 * VAREMAP_CONFIG (keys are the variable names in lower case, with or without
 * the "varemap_" prefix; '#' starts a comment), then the environment.
 * A bad value never fails the load: it prints one "varemap: warning:" line on
 * stderr naming the setting and the value, and the default stays.
 *
 * Every variable is read with secure_getenv, so a set-user-ID program
 * ignores them. The file must be a regular file of at most
 * VR_CONFIG_MAX_BYTES (it is opened without blocking, so a FIFO or device
 * cannot hang the program; anything else is one warning and no file); after
 * VR_CONFIG_MAX_ERRORS bad lines the rest of the file is skipped.
 */
#ifndef VR_CONFIG_H
#define VR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum vr_mode { VR_MODE_OFF, VR_MODE_OBSERVE, VR_MODE_DEDUP, VR_MODE_PROFILED };
enum vr_level { VR_LEVEL_ERROR, VR_LEVEL_WARN, VR_LEVEL_INFO, VR_LEVEL_DEBUG };

#define VR_PATH_MAX 4096
#define VR_CONFIG_MAX_BYTES (64 * 1024)
#define VR_CONFIG_MAX_ERRORS 5

struct vr_config {
    enum vr_mode mode;             /* VAREMAP_MODE, default profiled */
    char log_path[VR_PATH_MAX];    /* VAREMAP_LOG with %p expanded; "" = no log */
    char log_pattern[VR_PATH_MAX]; /* VAREMAP_LOG as written, for a forked child */
    enum vr_level log_level;       /* VAREMAP_LOG_LEVEL, default info */
    unsigned profile_launches;     /* VAREMAP_PROFILE_LAUNCHES, 1..1000, default 3 */
    unsigned variants;             /* VAREMAP_VARIANTS, 0..16, default 4: executable graphs per
                                    * active exec, the program's own included (variant.h) */
    uint64_t vmm_min_bytes;        /* VAREMAP_VMM_MIN_BYTES, default 1M */
    uint64_t max_padding;          /* VAREMAP_MAX_PADDING, default 1G */
    double max_padding_ratio;      /* VAREMAP_MAX_PADDING_RATIO, 0 < r <= 1, default 0.125 */
    uint64_t vmm_cache;            /* VAREMAP_VMM_CACHE, default 256M: freed VMM memory kept
                                    * mapped for reuse (alloc.h); 0: none */
    bool stats;                    /* VAREMAP_STATS, default 0 */
    bool slice_still;              /* VAREMAP_SLICE_STILL, default 0: buffers that never
                                    * moved while profiled get slices even where no moving
                                    * one does (policy.h: otherwise such an exec stays
                                    * compared), so a later move is a remap */
    bool cost_measured;            /* VAREMAP_COST_PRICES, default model (false): the policy
                                    * weighs with the cost model's prices; measured: with the
                                    * driver's as timed here, coarsely (cost.h) */
    char cost_model[VR_PATH_MAX];  /* VAREMAP_COST_MODEL: a cost model file whose prices the
                                    * policy weighs with; "" = the built-in ones */
};

/* Reads a variable; tests pass their own table instead of getenv.
 * NULL means secure_getenv (a set-user-ID program ignores VAREMAP_*):
 * the shim passes NULL. */
typedef const char *(*vr_getenv_fn)(const char *name);

/* Fills *cfg from the three sources. `pid` replaces %p in the log path.
 * Returns the number of warnings printed (0 when every value was good). */
int vr_config_load(struct vr_config *cfg, vr_getenv_fn getenv_fn, pid_t pid);

/* "4096", "64K", "1M", "2G" (also "KiB"/"MiB"/"GiB", any case) -> bytes.
 * Returns 0, or -EINVAL for anything else (empty, negative, overflow, junk). */
int vr_parse_size(const char *text, uint64_t *bytes);

/* VAREMAP_LOG's expansion: %p -> pid, %% -> %, any other % is -EINVAL, as
 * is a result that does not fit `cap`. Async-signal-safe (for fork). */
int vr_expand_path(const char *pattern, pid_t pid, char *out, size_t cap);
bool vr_path_has_pid(const char *pattern);

const char *vr_mode_name(enum vr_mode mode);
const char *vr_level_name(enum vr_level level);

#endif
