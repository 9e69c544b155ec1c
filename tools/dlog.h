/* dlog: reads varemap decision logs (../shared/DESIGN.md, "Decision log (contract)"; docs/design.md)
 * into processes and execs, for `varemap report` and the command's summary.
 *
 * Lines are grouped by their "pid" (a pid that already wrote its `summary`
 * and writes again is a new process: pid reuse in an appended log). Within
 * a process, execs are keyed by their handle, a new `exec_instantiated` or
 * an event after `exec_destroyed` starting a new one (the driver reuses
 * handles). Unknown events, fields and verdicts are kept or skipped, never
 * an error. A line that is not a JSON object with "pid" and "event" is
 * recorded as bad (file, line number, reason) and skipped.
 */
#ifndef VR_TOOL_DLOG_H
#define VR_TOOL_DLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "json.h"

struct dl_count {       /* a name with how often it was seen */
    char *name;
    uint64_t n;
};

struct dl_counts {
    struct dl_count *v;
    size_t n;
};

/* The per-exec counters of exec_reset / exec_destroyed, summed. */
struct dl_exec_counters {
    uint64_t seen, skipped, forwarded, transition, launches, rebinds, rebind_waits;
};

struct dl_exec {
    char *handle;
    bool instantiated;
    uint64_t kernel_nodes, opaque_nodes;
    /* The latest profile_decision (a reset restarts the profile). */
    unsigned decisions;
    char *state;               /* "active", "disabled", ...; NULL: undecided */
    bool observe;
    uint64_t profiled_launches, reserved_bytes;
    struct vj candidates;      /* the line's array, unknown fields kept */
    struct vj costs;           /* costs_ns when present, else VJ_NULL */
    struct vj unstable;
    struct dl_counts verdicts; /* verdict -> buffers */
    uint64_t selected, rejected;
    /* Counted once the exec was reset or destroyed. */
    bool counted;
    struct dl_exec_counters c;
    uint64_t resets;
    bool destroyed;
    uint64_t rebind_events, rebinds_waited;
    struct dl_counts forward_reasons; /* setparams_forwarded (debug level) */
};

struct dl_proc {
    uint64_t pid;
    char *log;                 /* the first file it was seen in */
    double first_ts;
    bool started;
    char *mode;
    uint64_t profile_launches;
    int64_t driver_version;
    bool vmm_supported;
    struct dl_exec *execs;
    size_t nexecs;
    struct dl_counts fallbacks; /* "what: reason" -> events */
    bool has_summary;
    struct vj summary;          /* the summary line, every field kept */
    uint64_t events;
};

struct dl_bad {
    char *file;
    size_t line;
    char *why;
};

struct dl_file {
    char *path;
    int err;          /* 0, or the errno that stopped reading it */
    size_t lines;     /* lines read as events */
    size_t bad;
};

struct dl_model {
    struct dl_proc *procs;
    size_t nprocs;
    struct dl_file *files;
    size_t nfiles;
    struct dl_bad *bads;
    size_t nbads;
    size_t events;    /* good lines over every file */
};

/* Reads `path` from byte offset `from` (earlier lines are only counted for
 * line numbers). Returns 0, or -errno when the file cannot be opened or
 * read (recorded in the model too). */
int dl_read(struct dl_model *m, const char *path, off_t from);
/* Orders processes by their first line's time (stable). */
void dl_finish(struct dl_model *m);
void dl_free(struct dl_model *m);

/* Summary field, 0 when absent. */
uint64_t dl_summary_u64(const struct dl_proc *p, const char *key);
/* True for verdicts that mean "selected". */
bool dl_verdict_selected(const char *verdict);

#endif
