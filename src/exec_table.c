/* exec_table: the table of execs, each thread's cache of the execs it used
 * last, and the pool of records (type-stable: recycled, never freed before
 * exit). Finds a record and hands it back locked; knows nothing of what a
 * record does. The per-exec counters are summed here (live and retired).
 */
#include "exec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "driver.h"
#include "err.h"
#include "log.h"
#include "stats.h"
#include "tomb.h"
#include "xlat.h"

/* The layer's settings and its degraded switch: defined at its bottom, so
 * every file of the layer reads them without pointing up at exec.c. */
struct vr_config vr_ex_cfg;
atomic_bool vr_ex_degraded;

/* ---- the table of execs ---------------------------------------------- */

#define VR_EXEC_BUCKETS 1024
static vr_rwlock table_lock = VR_RWLOCK_INIT;
static struct vr_exec *buckets[VR_EXEC_BUCKETS];
static vr_mutex pool_lock = VR_MUTEX_INIT; /* the free list, the retired counters, the kept graphs */
static struct vr_exec *pool;
static struct counters retired;

/* The graphs the program destroyed while execs instantiated from them live
 * (exec.c, vr_exec_graph_destroyed): the driver's cuGraphDestroy waits
 * until the last such exec goes, because the driver names an exec's nodes
 * by that graph's node handles and refuses them once it is destroyed. One
 * entry per graph, its count of execs; memory only, under pool_lock. */
struct kept {
    CUgraph graph;
    size_t refs;
};
static struct kept *kept;
static size_t nkept, capkept;

/* What the first entry points at before any exec: never current (its serial
 * is no cached one's, its absorb_key neither 0 nor ~0), so the absorbed path
 * needs no NULL test. */
struct vr_exec vr_ex_nobody = {.serial = UINT64_MAX, .absorb_key = 1};
_Thread_local struct vr_thread vr_thread = {.last_exec = {{NULL, &vr_ex_nobody, 0}}};

static size_t bucket_of(const void *h)
{
    uintptr_t k = (uintptr_t)h;
    return (size_t)((k >> 4) ^ (k >> 14)) & (VR_EXEC_BUCKETS - 1);
}

/* Locks c's record when it is still c's exec. */
static bool lock_if_same(const struct cached *c)
{
    vr_mutex_lock(&c->e->lock);
    if (c->e->serial == c->serial) {
        vr_rank_take(VR_RANK_EXEC);
        return true;
    }
    vr_mutex_unlock(&c->e->lock);
    return false;
}

/* vr_ex_acquire() past the first cache entry: the other entries, then the table
 * under its read lock. The hit moves to the front. */
__attribute__((noinline)) struct vr_exec *vr_ex_acquire_slow(CUgraphExec h)
{
    if (!h || vr_ex_cfg.mode == VR_MODE_OFF)
        return NULL;
    struct cached c = {0};
    size_t i = 1;
    while (i < VR_EXEC_CACHED && !(vr_ex_last_exec[i].e && vr_ex_last_exec[i].handle == h))
        i++;
    if (i < VR_EXEC_CACHED && lock_if_same(&vr_ex_last_exec[i])) {
        c = vr_ex_last_exec[i];
    } else {
        vr_read_lock(&table_lock);
        struct vr_exec *e = buckets[bucket_of(h)];
        while (e && e->handle != h)
            e = e->next;
        if (e)
            c = (struct cached){h, e, e->serial};
        vr_read_unlock(&table_lock);
        if (!e || !lock_if_same(&c))
            return NULL;
        i = VR_EXEC_CACHED - 1;
    }
    /* Observe mode never absorbs, nor does an orphan: their execs stay out
     * of the first entry, the absorbed path's, which then needs no test. */
    size_t front = vr_ex_cfg.mode == VR_MODE_OBSERVE || c.e->orphan;
    memmove(&vr_ex_last_exec[front + 1], &vr_ex_last_exec[front], (i - front) * sizeof vr_ex_last_exec[0]);
    vr_ex_last_exec[front] = c;
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(c.e->handle == h && c.e->serial == c.serial && c.e->state != ST_GONE);
    return c.e;
}
struct vr_exec *vr_ex_unlink_exec(CUgraphExec h)
{
    vr_write_lock(&table_lock);
    struct vr_exec **pp = &buckets[bucket_of(h)];
    while (*pp && (*pp)->handle != h)
        pp = &(*pp)->next;
    struct vr_exec *e = *pp;
    if (e)
        *pp = e->next;
    vr_write_unlock(&table_lock);
    VR_ASSERT(!e || e->handle == h);
    return e;
}

/* Returns a cleared record, locked: a thread still holding the recycled
 * record's old serial waits until it is set up, then sees the new serial. */
struct vr_exec *vr_ex_new_record(void)
{
    vr_mutex_lock(&pool_lock);
    struct vr_exec *e = pool;
    if (e)
        pool = e->next;
    vr_mutex_unlock(&pool_lock);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (e)
            vr_mutex_lock(&e->lock);
        return e;
    }
    vr_mutex_lock(&e->lock);
    uint64_t serial = e->serial + 1;
    memset((char *)e + sizeof e->lock, 0, sizeof *e - sizeof e->lock);
    e->serial = serial;
    vr_ex_rekey(e);
    VR_ASSERT(e->state == ST_PROFILING && !e->slices && !e->vars && !e->prof);
    return e;
}

static void add_counters(struct counters *to, const struct counters *c)
{
    to->seen += c->seen;
    to->skipped += c->skipped;
    to->forwarded += c->forwarded;
    to->transition += c->transition;
    to->launches += c->launches;
    to->rebinds += c->rebinds;
    to->rebind_waits += c->rebind_waits;
    to->absorbed += c->absorbed;
    to->xabsorbed += c->xabsorbed;
    to->remaps.slots += c->remaps.slots;
    to->remaps.calls += c->remaps.calls;
}

/* Called with e locked and dead: its counters move to the retired sum and
 * the record to the free list once unlocked by the caller. */
void vr_ex_retire_record(struct vr_exec *e)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT(e->state == ST_GONE);
    vr_mutex_lock(&pool_lock);
    add_counters(&retired, &e->c);
    memset(&e->c, 0, sizeof e->c);
    vr_mutex_unlock(&pool_lock);
}

void vr_ex_recycle(struct vr_exec *e)
{
    VR_ASSERT(e->state == ST_GONE && !e->slices && !e->vars);
    vr_mutex_lock(&pool_lock);
    e->next = pool;
    pool = e;
    vr_mutex_unlock(&pool_lock);
}

/* ---- graphs kept for their execs ---------------------------------------- */

static size_t kept_find(CUgraph g)
{
    size_t i = 0;
    while (i < nkept && kept[i].graph != g)
        i++;
    return i;
}

int vr_ex_keep_graph(CUgraph g)
{
    VR_ASSERT(g);
    int rc = 0;
    vr_mutex_lock(&pool_lock);
    size_t i = kept_find(g);
    if (i == nkept && nkept == capkept) {
        size_t cap = capkept ? 2 * capkept : 8;
        struct kept *v = realloc(kept, cap * sizeof *v);
        if (v) {
            kept = v;
            capkept = cap;
        } else {
            rc = -ENOMEM;
        }
    }
    if (rc == 0) {
        if (i == nkept)
            kept[nkept++] = (struct kept){g, 0};
        kept[i].refs++;
    }
    vr_mutex_unlock(&pool_lock);
    return rc;
}

bool vr_ex_unkeep_graph(CUgraph g)
{
    bool last = false;
    vr_mutex_lock(&pool_lock);
    size_t i = kept_find(g);
    VR_ASSERT(i < nkept && kept[i].refs > 0);
    if (i < nkept && --kept[i].refs == 0) {
        kept[i] = kept[--nkept];
        last = true;
    }
    vr_mutex_unlock(&pool_lock);
    return last;
}

bool vr_ex_graph_kept(CUgraph g)
{
    vr_mutex_lock(&pool_lock);
    bool in = kept_find(g) < nkept;
    vr_mutex_unlock(&pool_lock);
    return in;
}

size_t vr_ex_take_kept(CUgraph **out)
{
    vr_mutex_lock(&pool_lock);
    size_t n = nkept;
    CUgraph *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; v && i < n; i++)
        v[i] = kept[i].graph;
    if (v) {
        free(kept);
        kept = NULL;
        nkept = capkept = 0;
    }
    vr_mutex_unlock(&pool_lock);
    *out = v;
    return v ? n : 0;
}

/* Makes the cleared, locked record e the exec `handle`'s. */
void vr_ex_insert_exec(struct vr_exec *e, CUgraphExec handle)
{
    VR_ASSERT(e->handle == handle && e->state != ST_GONE);
    vr_write_lock(&table_lock);
    size_t b = bucket_of(handle);
    e->next = buckets[b];
    buckets[b] = e;
    vr_write_unlock(&table_lock);
}

/* The live records and their serials, copied out under the table lock so no
 * exec's lock is taken while holding it. */
static size_t snapshot(struct cached **out)
{
    vr_read_lock(&table_lock);
    size_t n = 0;
    for (size_t b = 0; b < VR_EXEC_BUCKETS; b++)
        for (struct vr_exec *e = buckets[b]; e; e = e->next)
            n++;
    struct cached *v = malloc((n ? n : 1) * sizeof *v);
    size_t k = 0;
    for (size_t b = 0; v && b < VR_EXEC_BUCKETS; b++)
        for (struct vr_exec *e = buckets[b]; e; e = e->next)
            v[k++] = (struct cached){e->handle, e, e->serial};
    vr_read_unlock(&table_lock);
    *out = v;
    return v ? k : 0;
}

/* fn on every live exec, each under its own lock (taken after the table's
 * is dropped, and skipped when the record stopped being that exec). */
void vr_ex_each_exec(void (*fn)(struct vr_exec *e, void *arg), void *arg)
{
    VR_ASSERT(fn);
    struct cached *v;
    size_t n = snapshot(&v);
    for (size_t i = 0; i < n; i++) {
        if (!lock_if_same(&v[i]))
            continue;
        fn(v[i].e, arg);
        vr_ex_unlock(v[i].e);
    }
    free(v);
}
static void add_counters_of(struct vr_exec *e, void *sum)
{
    add_counters(sum, &e->c);
}

void vr_exec_add_stats(struct varemap_stats *s)
{
    struct counters sum;
    vr_mutex_lock(&pool_lock);
    sum = retired;
    vr_mutex_unlock(&pool_lock);
    vr_ex_each_exec(add_counters_of, &sum);
    s->setparams_seen += sum.seen + sum.absorbed;
    s->setparams_skipped += sum.skipped + sum.absorbed;
    s->setparams_forwarded += sum.forwarded;
    s->launches += sum.launches;
    s->rebind_waits += sum.rebind_waits;
}

void vr_exec_after_fork(void)
{
    table_lock = (vr_rwlock)VR_RWLOCK_INIT;
    pool_lock = (vr_mutex)VR_MUTEX_INIT;
    for (size_t b = 0; b < VR_EXEC_BUCKETS; b++)
        for (struct vr_exec *e = buckets[b]; e; e = e->next)
            e->lock = (vr_mutex)VR_MUTEX_INIT;
    memset(vr_ex_last_exec, 0, sizeof vr_ex_last_exec);
    vr_ex_last_exec[0].e = &vr_ex_nobody;
    vr_ex_nobody.lock = (vr_mutex)VR_MUTEX_INIT;
}

/* ---- events ------------------------------------------------------------- */

void vr_ex_begin_exec_event(struct vr_jw *w, char *buf, size_t cap, const char *event,
                             CUgraphExec exec)
{
    VR_ASSERT(w && buf && event);
    vr_jw_begin(w, buf, cap, event);
    vr_jw_hex(w, "exec", (uint64_t)(uintptr_t)exec);
}

void vr_ex_log_exec_event(const char *event, const struct vr_exec *e)
{
    if (!vr_log_enabled(VR_LEVEL_INFO))
        return;
    char buf[1024];
    struct vr_jw w;
    vr_ex_begin_exec_event(&w, buf, sizeof buf, event, e->handle);
    vr_jw_u64(&w, "setparams_seen", e->c.seen + e->c.absorbed);
    vr_jw_u64(&w, "setparams_skipped", e->c.skipped + e->c.absorbed);
    vr_jw_u64(&w, "setparams_forwarded", e->c.forwarded);
    vr_jw_u64(&w, "transition_updates", e->c.transition);
    vr_jw_u64(&w, "launches", e->c.launches);
    vr_jw_u64(&w, "rebinds", e->c.rebinds);
    vr_jw_u64(&w, "rebind_waits", e->c.rebind_waits);
    vr_log_emit(&w, VR_LEVEL_INFO);
}

/* ---- the state machine's one setter --------------------------------- */

/* Here, at the layer's bottom, so that exec.c and the files it calls
 * (exec_reprofile.c) all move a record's state without pointing up. */
static const char *const state_name[] = {
    [ST_PROFILING] = "profiling", [ST_ACTIVE] = "active",     [ST_DEDUP] = "dedup",
    [ST_DISABLED] = "disabled",   [ST_OBSERVED] = "observed", [ST_OPAQUE] = "opaque",
    [ST_GONE] = "gone",
};

void vr_ex_set_state(struct vr_exec *e, enum vr_ex_state to)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    VR_ASSERT((unsigned)to < sizeof state_name / sizeof *state_name);
    enum vr_ex_state from = e->state;
    if (from == to)
        return;
    /* A record leaves GONE only through new_record's clearing. */
    VR_ASSERT(from != ST_GONE);
    /* Only a profile decides, and only for a record that has its slices. */
    VR_ASSERT(to != ST_ACTIVE || (from == ST_PROFILING && e->slices));
    if (from == ST_ACTIVE)
        vr_stat_add(VR_C_execs_active, -1);
    else if (to == ST_ACTIVE)
        vr_stat_inc(VR_C_execs_active);
    /* A profile again that decides against slices leaves the exec as it
     * was counted. */
    if (to == ST_DISABLED && !(from == ST_PROFILING && e->reprofiling))
        vr_stat_inc(VR_C_execs_disabled);
    e->state = to;
    if (!vr_log_enabled(VR_LEVEL_DEBUG))
        return;
    char buf[256];
    struct vr_jw w;
    vr_ex_begin_exec_event(&w, buf, sizeof buf, "exec_state", e->handle);
    vr_jw_str(&w, "from", state_name[from]);
    vr_jw_str(&w, "to", state_name[to]);
    vr_log_emit(&w, VR_LEVEL_DEBUG);
}
