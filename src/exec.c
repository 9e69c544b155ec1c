#include "exec.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "driver.h"
#include "err.h"
#include "lock.h"
#include "log.h"
#include "profile.h"
#include "slice.h"
#include "stats.h"
#include "tomb.h"
#include "xlat.h"
#include "variant.h"

static struct vr_config cfg;
static atomic_bool degraded;

void vr_exec_configure(const struct vr_config *c)
{
    cfg = *c;
    vr_profile_configure(cfg.variants > 1);
}

/* Launches that SetParams pass moved buffers through after one that no
 * variant could serve (launch_active). */
#define VR_STUCK_LAUNCHES 4

enum state { ST_PROFILING, ST_ACTIVE, ST_DISABLED, ST_OBSERVED, ST_DEDUP };

/* A decision undone by cuGraphExecUpdate within this many launches did not
 * pay for its slices (reset_locked). */
#define VR_BRIEF_DECISION 64

/* Every this many launches an active exec weighs what its slices cost
 * against what they saved; two losing windows in a row settle it
 * (weigh_slices). */
#define VR_WEIGH_EVERY 32

/* A passing exec compares again after this many launches (reprobe), and
 * after twice as many each time it found its updates still changing, up to
 * VR_REPROBE_MAX: a program whose buffers settle after a while absorbs
 * again, one whose buffers never do pays a short window of compares now and
 * then. */
#define VR_REPROBE_FIRST 256
#define VR_REPROBE_MAX 65536
/* A reprobe is judged on one window this short: its first launch's updates
 * all go to the driver, and settled buffers are absorbed from the second
 * (7 in 8), moving ones not at all. A long window would cost an exec whose
 * buffers never settle a window of compares at each reprobe. */
#define VR_REPROBE_WINDOW 8

/* Counted under the exec's lock, summed on demand: no shared cache line is
 * written on the hot path. */
struct counters {
    uint64_t seen, skipped, forwarded, transition, launches, rebinds, rebind_waits;
    uint64_t absorbed; /* on the absorbed path: seen and skipped, one add */
    uint64_t xabsorbed; /* skipped because the slices made a changed update what the
                         * driver holds (a moved buffer): what dedup would have sent */
};

struct vr_exec {
    vr_mutex lock;
    uint64_t serial;       /* changes whenever the record stops being this exec */
    CUgraphExec handle;
    struct vr_exec *next;  /* table chain, or the free list */
    enum state state;
    CUcontext ctx;         /* current at instantiation */
    CUgraph graph;         /* instantiated from: its nodes name this exec's nodes */
    bool orphan;           /* that graph is destroyed: no node can change */
    uint64_t reset_at;     /* c.launches at the last cuGraphExecUpdate */
    unsigned brief;        /* updates in a row that came too soon after the last */
    bool settled;          /* slices cost more than they saved: no new binding */
    bool pass;             /* no slices and nothing absorbed for two windows: updates go
                            * straight to the driver, the shadows unkept (weigh_absorbed) */
    uint64_t pass_since;   /* c.launches when it began to pass */
    uint32_t reprobe_after; /* launches of passing before the next reprobe; 0: none yet
                            * since the exec last absorbed */
    bool probing;          /* reprobed: the window is VR_REPROBE_WINDOW launches, and one
                            * losing window sends it back to passing */
    unsigned losing;       /* weighings in a row that found the slices costlier */
    struct counters weighed; /* the counters at the last weigh_slices */

    struct vr_nodes ns;
    struct vr_profile *prof;

    struct vr_slices *slices;
    vr_anchor *anchor_slot; /* per word once active, -1 = not an anchor */
    uint8_t *slot_back;    /* per slot: its buffer came back while profiled */
    uint32_t *anchored;    /* nodes holding at least one anchor (until the transition) */
    size_t nanchored;
    /* fix_nodes' work, O(changed nodes): per slot the nodes with an anchor
     * homed there (home_node[home_first[s] .. home_first[s + 1]]), the slots
     * whose target changed since the last fix, and the nodes whose installed
     * words may lie in a slot other than their anchor's home. */
    uint32_t *home_first, *home_node;
    uint32_t *dirty;
    size_t ndirty;
    uint8_t *is_dirty;
    uint32_t *cross;
    size_t ncross;
    uint8_t *in_cross;     /* per node */
    bool cross_lost;       /* cross/in_cross could not be made: fix_nodes checks all */
    uint8_t *mark;         /* per node: the fix round that checked it, mod 256 (one
                            * byte: cleared once every 255 rounds, O(nodes / 255)) */
    uint8_t round;
    uint32_t xnode;        /* the node translate_node is translating */
    bool xvary;            /* and whether a moved buffer may go to a variant meanwhile */
    unsigned peers;        /* vr_alloc_peer_generation() the slices' access reflects */

    struct vr_track t;     /* order and completion of every launch (track.h) */
    uint64_t v0_last;      /* the program's exec's last launch (t's numbering) */
    /* While set, reservations leaving are gathered here and buried under
     * one event (drop_slices): a teardown from a thread that cannot record
     * into the last launch's stream has only the track's own event. */
    struct burial *burial;
    struct vr_variants *vars; /* NULL: never varied */
    bool retargeted;       /* a slot's target moved since the last launch */
    unsigned stuck;        /* launches left during which SetParams do not retarget
                            * for variants: none could run the last change */

    uint8_t *scratch, *xlat;
    void **kp;
    struct counters c;
};

/* ---- the table of execs ---------------------------------------------- */

#define VR_EXEC_BUCKETS 1024
static vr_rwlock table_lock = VR_RWLOCK_INIT;
static struct vr_exec *buckets[VR_EXEC_BUCKETS];
static vr_mutex pool_lock = VR_MUTEX_INIT; /* the free list and the retired counters */
static struct vr_exec *pool;
static struct counters retired;

struct cached {
    CUgraphExec handle;
    struct vr_exec *e;
    uint64_t serial;
};

/* The execs this thread used last, most recent first: a thread replaying one
 * exec (or alternating between a few) never touches the table. A record's
 * serial changes whenever it stops being that exec (destroy, a stale handle,
 * recycling), so a matching serial under the record's lock proves the entry
 * current. */
#define VR_EXEC_CACHED 4

/* What the first entry points at before any exec: never current (its serial
 * is no cached one's), so the absorbed path needs no NULL test. */
static struct vr_exec nobody = {.serial = UINT64_MAX};
static _Thread_local struct cached last_exec[VR_EXEC_CACHED] = {{NULL, &nobody, 0}};

static size_t bucket_of(const void *h)
{
    uintptr_t k = (uintptr_t)h;
    return (size_t)((k >> 4) ^ (k >> 14)) & (VR_EXEC_BUCKETS - 1);
}

/* Locks c's record when it is still c's exec. */
static bool lock_if_same(const struct cached *c)
{
    vr_mutex_lock(&c->e->lock);
    if (c->e->serial == c->serial)
        return true;
    vr_mutex_unlock(&c->e->lock);
    return false;
}

/* acquire() past the first cache entry: the other entries, then the table
 * under its read lock. The hit moves to the front. */
static __attribute__((noinline)) struct vr_exec *acquire_slow(CUgraphExec h)
{
    if (!h || cfg.mode == VR_MODE_OFF)
        return NULL;
    struct cached c = {0};
    size_t i = 1;
    while (i < VR_EXEC_CACHED && !(last_exec[i].e && last_exec[i].handle == h))
        i++;
    if (i < VR_EXEC_CACHED && lock_if_same(&last_exec[i])) {
        c = last_exec[i];
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
    size_t front = cfg.mode == VR_MODE_OBSERVE || c.e->orphan;
    memmove(&last_exec[front + 1], &last_exec[front], (i - front) * sizeof last_exec[0]);
    last_exec[front] = c;
    return c.e;
}

/* Returns the live record of h locked, or NULL. */
static inline struct vr_exec *acquire(CUgraphExec h)
{
    struct cached c = last_exec[0];
    if (__builtin_expect(c.handle == h && c.e != NULL, 1)) {
        vr_mutex_lock(&c.e->lock);
        if (__builtin_expect(c.e->serial == c.serial, 1))
            return c.e;
        vr_mutex_unlock(&c.e->lock);
    }
    return acquire_slow(h);
}

static struct vr_exec *unlink_exec(CUgraphExec h)
{
    vr_write_lock(&table_lock);
    struct vr_exec **pp = &buckets[bucket_of(h)];
    while (*pp && (*pp)->handle != h)
        pp = &(*pp)->next;
    struct vr_exec *e = *pp;
    if (e)
        *pp = e->next;
    vr_write_unlock(&table_lock);
    return e;
}

/* Returns a cleared record, locked: a thread still holding the recycled
 * record's old serial waits until it is set up, then sees the new serial. */
static struct vr_exec *new_record(void)
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
}

/* Called with e locked and dead: its counters move to the retired sum and
 * the record to the free list once unlocked by the caller. */
static void retire_record(struct vr_exec *e)
{
    vr_mutex_lock(&pool_lock);
    add_counters(&retired, &e->c);
    memset(&e->c, 0, sizeof e->c);
    vr_mutex_unlock(&pool_lock);
}

static void recycle(struct vr_exec *e)
{
    vr_mutex_lock(&pool_lock);
    e->next = pool;
    pool = e;
    vr_mutex_unlock(&pool_lock);
}

/* ---- events ------------------------------------------------------------- */

static void begin_exec_event(struct vr_jw *w, char *buf, size_t cap, const char *event,
                             CUgraphExec exec)
{
    vr_jw_begin(w, buf, cap, event);
    vr_jw_hex(w, "exec", (uint64_t)(uintptr_t)exec);
}

static void log_exec_event(const char *event, const struct vr_exec *e)
{
    if (!vr_log_enabled(VR_LEVEL_INFO))
        return;
    char buf[1024];
    struct vr_jw w;
    begin_exec_event(&w, buf, sizeof buf, event, e->handle);
    vr_jw_u64(&w, "setparams_seen", e->c.seen + e->c.absorbed);
    vr_jw_u64(&w, "setparams_skipped", e->c.skipped + e->c.absorbed);
    vr_jw_u64(&w, "setparams_forwarded", e->c.forwarded);
    vr_jw_u64(&w, "transition_updates", e->c.transition);
    vr_jw_u64(&w, "launches", e->c.launches);
    vr_jw_u64(&w, "rebinds", e->c.rebinds);
    vr_jw_u64(&w, "rebind_waits", e->c.rebind_waits);
    vr_log_emit(&w, VR_LEVEL_INFO);
}

/* Counts an update sent to the driver; at log level debug, says why, so a
 * low skip rate can be traced to its nodes. */
static void note_forward(struct vr_exec *e, const struct vr_node *n, const char *why)
{
    e->c.forwarded++;
    if (!vr_log_enabled(VR_LEVEL_DEBUG))
        return;
    char buf[256];
    struct vr_jw w;
    begin_exec_event(&w, buf, sizeof buf, "setparams_forwarded", e->handle);
    if (n)
        vr_jw_u64(&w, "node", (uint64_t)(n - e->ns.v));
    vr_jw_str(&w, "reason", why);
    vr_log_emit(&w, VR_LEVEL_DEBUG);
}

/* ---- record contents ---------------------------------------------------- */

static int alloc_scratch(struct vr_exec *e)
{
    free(e->scratch);
    free(e->xlat);
    free(e->kp);
    e->scratch = calloc(1, e->ns.max_bytes);
    e->xlat = calloc(1, e->ns.max_bytes);
    e->kp = calloc(e->ns.max_params, sizeof *e->kp);
    return e->scratch && e->xlat && e->kp ? 0 : -ENOMEM;
}

struct burial {
    struct vr_slices *s[2 * VR_VARIANTS_MAX + 1];
    size_t n;
};

/* A reservation leaves: destroyed now when launches up to `last` are known
 * complete, else buried with an event after the last launch (gathered into
 * the exec's burial while drop_slices runs); never waits. */
static void bury_after(void *owner, struct vr_slices *sl, uint64_t last)
{
    struct vr_exec *e = owner;
    if (vr_track_known(&e->t, last)) {
        if (vr_slices_destroy(sl) != 0)
            vr_tomb_bury(sl, NULL, e->ctx, true);
        return;
    }
    if (e->burial && e->burial->n < sizeof e->burial->s / sizeof *e->burial->s) {
        e->burial->s[e->burial->n++] = sl;
        return;
    }
    vr_tomb_bury(sl, vr_track_event_after(&e->t), e->ctx, false);
}

static struct vr_var_ctx var_ctx(struct vr_exec *e)
{
    return (struct vr_var_ctx){&e->ns, e->anchor_slot, e->slot_back, e->slices, e->xlat, e->kp,
                               bury_after, e, &e->c.transition, &e->c.rebinds};
}

/* Hands the slices (the variants' too) to the tomb list, to be unmapped
 * once the launches that could read them are known complete; never waits.
 * `freeze`: no variant is made again (the clone no longer matches). */
static void drop_slices(struct vr_exec *e, bool freeze)
{
    if (e->state == ST_ACTIVE)
        vr_stat_add(VR_C_execs_active, -1);
    struct burial burial = {.n = 0};
    e->burial = &burial;
    struct vr_var_ctx cx = var_ctx(e);
    vr_variants_drop(e->vars, &cx, freeze);
    free(e->anchor_slot);
    free(e->slot_back);
    e->slot_back = NULL;
    free(e->anchored);
    e->anchor_slot = NULL;
    e->anchored = NULL;
    e->nanchored = 0;
    free(e->home_first);
    free(e->home_node);
    free(e->dirty);
    free(e->is_dirty);
    free(e->cross);
    free(e->in_cross);
    free(e->mark);
    e->home_first = e->home_node = e->dirty = e->cross = NULL;
    e->is_dirty = e->in_cross = e->mark = NULL;
    e->ndirty = e->ncross = 0;
    e->cross_lost = false;
    if (e->slices)
        bury_after(e, e->slices, e->v0_last);
    e->slices = NULL;
    e->burial = NULL;
    if (burial.n)
        vr_tomb_bury_many(burial.s, burial.n, vr_track_event_after(&e->t), e->ctx, false);
}

static void free_contents(struct vr_exec *e)
{
    drop_slices(e, true);
    struct vr_var_ctx cx = var_ctx(e);
    vr_variants_free(e->vars, &cx);
    e->vars = NULL;
    vr_track_free(&e->t);
    vr_profile_free(e->prof);
    e->prof = NULL;
    vr_nodes_free(&e->ns);
    free(e->scratch);
    free(e->xlat);
    free(e->kp);
    e->scratch = e->xlat = NULL;
    e->kp = NULL;
}

/* Starts (again) where a new exec starts: profiling, or dedup. */
static void restart(struct vr_exec *e)
{
    e->state = cfg.mode == VR_MODE_DEDUP || atomic_load(&degraded) ? ST_DEDUP : ST_PROFILING;
    if (e->state == ST_PROFILING && vr_profile_new(&e->prof, e->ns.nwords) != 0)
        e->state = ST_DEDUP;
}

void vr_exec_track(CUgraphExec handle, CUgraph graph, unsigned long long flags)
{
    if (cfg.mode == VR_MODE_OFF)
        return;
    vr_tomb_drain(false);
    struct vr_exec *e = new_record();
    if (!e)
        return;
    int rc = vr_nodes_read(&e->ns, graph);
    if (rc == 0)
        rc = alloc_scratch(e);
    if (rc != 0) {
        vr_warn("cannot read graph %p (%d): exec %p passes through", (void *)graph, rc,
                (void *)handle);
        free_contents(e);
        vr_mutex_unlock(&e->lock);
        recycle(e);
        return;
    }
    vr_real.cuCtxGetCurrent(&e->ctx);
    vr_track_init(&e->t, e->ctx);
    e->handle = handle;
    e->graph = graph;
    e->orphan = false;
    e->reset_at = 0;
    e->brief = 0;
    e->settled = false;
    e->losing = 0;
    restart(e);
    if (e->state == ST_PROFILING && cfg.mode == VR_MODE_PROFILED &&
        vr_variants_new(&e->vars, graph, &e->ns, cfg.variants, flags) != 0)
        vr_warn("exec %p: its graph could not be cloned; it is not varied", (void *)handle);

    /* An exec handle the driver reuses after a destroy we did not see. */
    struct vr_exec *stale = unlink_exec(handle);
    if (stale) {
        vr_mutex_lock(&stale->lock);
        stale->serial++;
        free_contents(stale);
        retire_record(stale);
        vr_mutex_unlock(&stale->lock);
        recycle(stale);
    }
    vr_write_lock(&table_lock);
    size_t b = bucket_of(handle);
    e->next = buckets[b];
    buckets[b] = e;
    vr_write_unlock(&table_lock);
    vr_mutex_unlock(&e->lock);

    if (vr_log_enabled(VR_LEVEL_INFO)) {
        char buf[256];
        struct vr_jw w;
        begin_exec_event(&w, buf, sizeof buf, "exec_instantiated", handle);
        vr_jw_u64(&w, "kernel_nodes", e->ns.n);
        vr_jw_u64(&w, "opaque_nodes", e->ns.nopaque);
        vr_log_emit(&w, VR_LEVEL_INFO);
    }
}

/* ---- completion --------------------------------------------------------- */

/* True when the program's exec's last launch is known complete. Asks the
 * driver at most once between launches; a failed query means "not
 * complete". */
static bool exec_idle(struct vr_exec *e)
{
    return vr_track_complete(&e->t, e->v0_last);
}

/* Whether a slot may be retargeted while the program's exec is busy: a
 * variant may hold the new target at the next launch. */
static bool may_vary(const struct vr_exec *e)
{
    return vr_variants_usable(e->vars);
}

/* ---- slot changes --------------------------------------------------------- */

/* Every change of a slot's target goes through these: the nodes that may
 * read the slot are re-checked at the next fix_nodes, and only those. */
static void mark_slot(struct vr_exec *e, size_t s)
{
    if (!e->is_dirty[s]) {
        e->is_dirty[s] = 1;
        e->dirty[e->ndirty++] = (uint32_t)s;
    }
}

static int retarget(struct vr_exec *e, size_t s, const struct vr_slice_bind *b)
{
    mark_slot(e, s);
    return vr_slices_retarget(e->slices, s, b);
}

static void cancel(struct vr_exec *e, size_t s)
{
    mark_slot(e, s);
    vr_slices_cancel(e->slices, s);
}

/* A failed remap may change the target too (the slot left unbound). */
static int remap(struct vr_exec *e, size_t s)
{
    uint64_t want = vr_slices_target(e->slices, s)->id;
    int rc = vr_slices_remap(e->slices, s);
    if (rc != 0 || vr_slices_target(e->slices, s)->id != want)
        mark_slot(e, s);
    return rc;
}

/* Whether a slice address lies in slot s's window, its end included. */
static bool in_window(const struct vr_exec *e, size_t s, uint64_t va)
{
    uint64_t lo = vr_slices_va(e->slices, s);
    return va >= lo && va - lo <= vr_slices_size(e->slices, s);
}

/* A node whose word was translated into a slot other than its anchor's
 * home: fix_nodes checks it whenever any slot changed. */
static void note_cross(struct vr_exec *e, int32_t home, uint64_t w, uint64_t t)
{
    if (t == w || in_window(e, (size_t)home, t))
        return;
    /* Made at the first such node: most execs never have one, and the
     * lists cost 5 bytes per node. */
    if (!e->in_cross && !e->cross_lost) {
        size_t n = e->ns.n ? e->ns.n : 1;
        e->cross = malloc(n * sizeof *e->cross);
        e->in_cross = calloc(n, 1);
        if (!e->cross || !e->in_cross) {
            free(e->cross);
            free(e->in_cross);
            e->cross = NULL;
            e->in_cross = NULL;
            e->cross_lost = true;
        }
    }
    if (e->cross_lost || e->in_cross[e->xnode])
        return;
    e->in_cross[e->xnode] = 1;
    e->cross[e->ncross++] = e->xnode;
}

/* ---- translation -------------------------------------------------------- */

/* Allocation a word points into (its end included), as a slice binding. */
static bool binding_of(uint64_t word, struct vr_slice_bind *b)
{
    struct vr_alloc_info a;
    if (vr_alloc_find(word, &a) != 0 &&
        (!word || vr_alloc_find(word - 1, &a) != 0 || word != a.base + a.size))
        return false;
    if (!a.vmm)
        return false;
    *b = (struct vr_slice_bind){a.id, a.base, a.size, a.padded, a.handle, a.device};
    return true;
}

/* The translation of one anchor word for a SetParams: through a stable slot;
 * through a slot about to be remapped only while the exec is idle (the next
 * launch remaps it before running); else as the program wrote it. `*at_home`:
 * the result lies in the anchor's home slot (or is w). */
static uint64_t translate_anchor(struct vr_exec *e, int32_t home, uint64_t w, bool *at_home)
{
    /* Its own slot first: a position keeps its slot, so a buffer that comes
     * back (pingpong, periodic) changes no installed word. With variants a
     * slot may move while the program's exec is busy: the launch picks a
     * variant that holds the targets. */
    bool vary = e->xvary;
    uint64_t t = vr_slices_home(e->slices, (size_t)home, w, vary);
    *at_home = true;
    if (t)
        return t;
    int s = vr_slices_slot_of(e->slices, w, VR_VIEW_TARGET);
    if (!vary && s >= 0 && !vr_slices_slot_pending(e->slices, (size_t)s)) {
        *at_home = false;
        return vr_slices_translate(e->slices, w, VR_VIEW_STABLE);
    }
    if (atomic_load_explicit(&degraded, memory_order_relaxed) || e->settled ||
        (!vary && !exec_idle(e)))
        return w;
    if ((t = vr_slices_home(e->slices, (size_t)home, w, true)))
        return t;
    if (s < 0 || vary) {
        struct vr_slice_bind b;
        if (!binding_of(w, &b) || retarget(e, (size_t)home, &b) != 0)
            return w;
        e->retargeted = true;
        return vr_slices_va(e->slices, (size_t)home) + (w - b.base);
    }
    *at_home = false;
    return vr_slices_translate(e->slices, w, VR_VIEW_TARGET);
}

static uint64_t xlat_setparams(void *ctx, int32_t home, uint64_t w)
{
    bool at_home;
    uint64_t t = translate_anchor(ctx, home, w, &at_home);
    if (!at_home)
        note_cross(ctx, home, w, t);
    return t;
}

static uint64_t xlat_stable(void *ctx, int32_t home, uint64_t w)
{
    struct vr_exec *e = ctx;
    uint64_t t = vr_slices_translate(e->slices, w, VR_VIEW_STABLE);
    note_cross(e, home, w, t);
    return t;
}

/* dst = src with the anchors translated; only anchors: any other word is
 * passed as the program wrote it, whatever its bits look like. */
static void translate_node(struct vr_exec *e, const struct vr_node *n, const uint8_t *src,
                           uint8_t *dst, bool setparams)
{
    e->xnode = (uint32_t)(n - e->ns.v);
    e->xvary = may_vary(e) && !e->stuck;
    vr_xlat_args(n->layout->words, e->anchor_slot + n->word0, n->layout->nwords,
                 n->layout->bytes, src, dst, setparams ? xlat_setparams : xlat_stable, e);
}

/* ---- SetParams --------------------------------------------------------- */

/* The program's new arguments (in scratch) become what it intends; a
 * profile reads the node again at its next launch. */
static void set_intended(struct vr_exec *e, struct vr_node *n)
{
    memcpy(n->intended, e->scratch, n->layout->bytes);
    if (e->prof)
        vr_profile_touch(e->prof, (size_t)(n - e->ns.v));
}

/* A change the variants cannot replay: they go, and none is made again. */
static void unvary(struct vr_exec *e)
{
    if (!vr_variants_usable(e->vars))
        return;
    struct vr_var_ctx cx = var_ctx(e);
    vr_variants_drop(e->vars, &cx, true);
}

static int update_args(struct vr_exec *e, struct vr_node *n, CUgraphNode node,
                       enum vr_sp_entry entry, const void *params, const struct vr_fields *f,
                       bool same);

/* One forwarded update in eight is timed: two clock reads are a sizeable
 * share of a fast driver's SetParams (230 ns on an H200), and the estimate
 * follows the driver well enough on a sample. sample_start's 0: not timed. */
static inline uint64_t sample_start(const struct vr_exec *e)
{
    return (e->c.forwarded & 7) == 0 ? vr_now_ns() : 0;
}

static inline void sample_end(uint64_t t0, CUresult r)
{
    if (t0 && r == CUDA_SUCCESS)
        vr_cost_note(VR_COST_SETPARAMS, t0);
}

static int setparams_slow(struct vr_exec *e, struct vr_node *n, CUgraphNode node,
                          enum vr_sp_entry entry, const void *params)
{
    struct vr_call c;
    bool kernel = vr_call_decode(entry, params, &c);
    CUresult r;

    if (!n && entry == VR_SP_NODE && params &&
        ((const CUgraphNodeParams *)params)->type != CU_GRAPH_NODE_TYPE_KERNEL) {
        /* Another node type's parameters: the variants get them too. */
        struct vr_set set = {.kind = VR_SET_NODE, .params = params};
        r = vr_set_issue(e->handle, node, &set);
        if (r == CUDA_SUCCESS && e->vars) {
            struct vr_var_ctx cx = var_ctx(e);
            vr_variants_set_node(e->vars, &cx, node, &set);
        }
        note_forward(e, n, "not_kernel");
        return vr_err_cu(r);
    }
    if (!n || !n->layout || !kernel || e->state == ST_OBSERVED) {
        r = vr_forward_raw(e->handle, node, entry, params);
        if (r == CUDA_SUCCESS)
            unvary(e); /* what the driver holds now is not known here */
        note_forward(e, n, !n ? "unknown_node" : !kernel ? "not_kernel"
                         : e->state == ST_OBSERVED ? "observe" : "opaque");
        return vr_err_cu(r);
    }
    const struct vr_layout *l = n->layout;
    if (c.extra || (l->nparams && !c.kernelParams) || !vr_same_function(&c.f, &n->f)) {
        /* The arguments can no longer be read with this layout. */
        const char *why = c.extra ? "extra" : vr_same_function(&c.f, &n->f) ? "no_arguments"
                                                                           : "function";
        r = vr_forward_raw(e->handle, node, entry, params);
        if (r == CUDA_SUCCESS) {
            vr_node_make_opaque(&e->ns, n);
            n->f = c.f;
            unvary(e);
        }
        note_forward(e, n, why);
        return vr_err_cu(r);
    }

    vr_layout_pack(l, c.kernelParams, e->scratch);
    bool same = vr_same_fields(&c.f, &n->f);
    if (cfg.mode == VR_MODE_OBSERVE) {
        r = vr_forward_raw(e->handle, node, entry, params);
        if (r == CUDA_SUCCESS) {
            set_intended(e, n);
            memcpy(vr_installed(&e->ns, n), e->scratch, l->bytes);
            n->f = c.f;
        }
        note_forward(e, n, "observe");
        return vr_err_cu(r);
    }
    return update_args(e, n, node, entry, params, &c.f, same);
}

/* The program's arguments, packed in scratch, against the node's shadows:
 * skipped when they are what it asked for last or (translated) what the
 * driver holds, else forwarded, translated when active. f: the call's
 * fields; same: they equal the node's. */
static int update_args(struct vr_exec *e, struct vr_node *n, CUgraphNode node,
                       enum vr_sp_entry entry, const void *params, const struct vr_fields *f,
                       bool same)
{
    const struct vr_layout *l = n->layout;
    if (same && memcmp(e->scratch, n->intended, l->bytes) == 0)
        goto skip;

    const uint8_t *send = e->scratch;
    if (e->state == ST_ACTIVE) {
        translate_node(e, n, e->scratch, e->xlat, true);
        send = e->xlat;
    }
    if (same && memcmp(send, vr_installed(&e->ns, n), l->bytes) == 0) {
        set_intended(e, n);
        e->c.xabsorbed += send == e->xlat;
        goto skip;
    }
    vr_layout_point(l, (uint8_t *)send, e->kp);
    uint64_t t0 = sample_start(e);
    CUresult r = vr_forward_args(e->handle, node, entry, params, e->kp);
    sample_end(t0, r);
    note_forward(e, n, same ? "arguments" : "shape");
    if (r == CUDA_SUCCESS) {
        set_intended(e, n);
        memcpy(vr_installed(&e->ns, n), send, l->bytes);
        n->f = *f;
        vr_variants_touch(e->vars, (size_t)(n - e->ns.v));
    }
    return vr_err_cu(r);

skip:
    e->c.skipped++;
    return 0;
}

/* The same function, no `extra` and the same launch shape as the driver
 * holds, tested without decoding or copying anything; then the node's
 * fields stay as they are whatever the arguments (vr_call_decode gives a
 * node with func set no kern and no ctx). */
static inline __attribute__((always_inline)) bool same_call(const struct vr_node *n,
                                                            enum vr_sp_entry entry,
                                                            const void *params)
{
    if (!n->layout || !params)
        return false;
    const CUDA_KERNEL_NODE_PARAMS_v2 *p = vr_call_v2(entry, params);
    /* One test for the function, `extra` and the launch shape. */
    return p && p->func && p->kernelParams &&
           (((uintptr_t)p->func ^ (uintptr_t)n->f.func) | (uintptr_t)p->extra |
            vr_dims_diff(&p->gridDimX, n->f.dims)) == 0;
}

/* The common case: the same call with the same arguments as the program
 * last asked for; then what the driver holds already means the same bytes
 * (the invariant). False for a layout with units under 4 bytes (then
 * direct_args decides). */
static inline __attribute__((always_inline)) bool absorbable(const struct vr_node *n,
                                                             enum vr_sp_entry entry,
                                                             const void *params)
{
    return same_call(n, entry, params) &&
           vr_args_same(n->layout, vr_call_v2(entry, params)->kernelParams, n->intended);
}

/* A same_call update that needs no decoding: its fields stay the node's,
 * only its arguments are new (observe mode forwards everything as it came). */
static inline bool direct(const struct vr_exec *e, const struct vr_node *n,
                          enum vr_sp_entry entry, const void *params)
{
    return cfg.mode != VR_MODE_OBSERVE && !e->orphan && e->state != ST_OBSERVED &&
           same_call(n, entry, params);
}

/* An exec without slices (dedup, still profiling, settled) holds what the
 * program asked for (installed == intended): the program's own struct goes
 * to the driver as it is, and both shadows take its arguments. `changed`:
 * the caller's compare was exact (no unit under 4 bytes) and found a
 * difference; else this one decides. */
static int forward_plain(struct vr_exec *e, struct vr_node *n, enum vr_sp_entry entry,
                         const void *params, bool changed)
{
    const struct vr_layout *l = n->layout;
    void *const *kp = vr_call_v2(entry, params)->kernelParams;
    if (!changed && vr_layout_equal(l, kp, n->intended)) {
        e->c.skipped++;
        return 0;
    }
    uint64_t t0 = sample_start(e);
    CUresult r = vr_forward_raw(e->handle, n->handle, entry, params);
    sample_end(t0, r);
    if (r == CUDA_SUCCESS) {
        vr_layout_pack2(l, kp, n->intended, vr_installed(&e->ns, n));
        size_t i = (size_t)(n - e->ns.v);
        if (e->prof)
            vr_profile_touch(e->prof, i);
        vr_variants_touch(e->vars, i);
    }
    note_forward(e, n, "arguments");
    return vr_err_cu(r);
}

/* A direct update. `changed`: the caller's compare was exact and found a
 * difference. */
static int direct_args(struct vr_exec *e, struct vr_node *n, enum vr_sp_entry entry,
                       const void *params, bool changed)
{
    if (!e->slices)
        return forward_plain(e, n, entry, params, changed);
    vr_layout_pack(n->layout, vr_call_v2(entry, params)->kernelParams, e->scratch);
    return update_args(e, n, n->handle, entry, params, &n->f, true);
}

/* A passing exec's update (weigh_absorbed): straight to the driver. */
static inline CUresult pass_update(struct vr_exec *e, CUgraphNode node, enum vr_sp_entry entry,
                                   const void *params)
{
    note_forward(e, NULL, "pass");
    return vr_forward_raw(e->handle, node, entry, params);
}

/* Everything but an absorbed update. */
static __attribute__((noinline)) int setparams_rest(CUgraphExec exec, CUgraphNode node,
                                                    enum vr_sp_entry entry, const void *params)
{
    struct vr_exec *e = acquire(exec);
    if (!e) {
        vr_stat_inc(VR_C_setparams_seen);
        vr_stat_inc(VR_C_setparams_forwarded);
        return vr_err_cu(vr_forward_raw(exec, node, entry, params));
    }
    e->c.seen++;
    if (e->pass) {
        int rc = vr_err_cu(pass_update(e, node, entry, params));
        vr_mutex_unlock(&e->lock);
        return rc;
    }
    struct vr_node *n = vr_nodes_find(&e->ns, node);
    int rc = 0;
    if (e->orphan) {
        /* The driver's own answer for a node of a destroyed graph. */
        rc = vr_err_cu(vr_forward_raw(exec, node, entry, params));
        note_forward(e, n, "graph_destroyed");
    } else if (n && direct(e, n, entry, params))
        rc = direct_args(e, n, entry, params, false);
    else
        rc = setparams_slow(e, n, node, entry, params);
    vr_mutex_unlock(&e->lock);
    return rc;
}

/* The absorbed path: the exec this thread used last, the node that followed
 * the last one updated, one compare with what the program last asked for.
 * No global atomic, no allocation, no call but the tail call of the hook's
 * full path when the update is not absorbed (another exec or node order, a
 * busy lock: nothing was done), of changed_* when the arguments changed, and
 * the wake of a sleeper. Observe mode never absorbs (acquire_slow keeps its
 * execs out of the first entry). Every exit is a return or a tail call, so
 * few registers need saving; once the node is found, the record holds the
 * exec's and the node's handles and the full path gets them from there (the
 * same values), which keeps the compare's registers free. */
#define VR_SP_ENTRY(suffix, entry, ptype)                                           \
    static __attribute__((noinline, cold)) CUresult absorb_wake_##suffix(           \
        struct vr_exec *e, bool ok, CUgraphExec exec, CUgraphNode node, ptype *params) \
    {                                                                               \
        vr_mutex_wake(&e->lock);                                                    \
        return ok ? CUDA_SUCCESS : vr_hook_setparams_##suffix(exec, node, params);  \
    }                                                                               \
    /* A passing exec's update, under the guard the full path would set. */    \
    static __attribute__((noinline)) CUresult pass_##suffix(struct vr_exec *e,    \
                                                             CUgraphNode node,    \
                                                             ptype *params)       \
    {                                                                               \
        e->c.seen++;                                                                \
        vr_in_shim = 1;                                                             \
        CUresult r = pass_update(e, node, entry, params);                           \
        vr_in_shim = 0;                                                             \
        vr_mutex_unlock(&e->lock);                                                  \
        return r;                                                                   \
    }                                                                               \
    /* A node found, not absorbed: a direct update is finished here; else   \
     * the full path, with the handles from the record. */                      \
    static __attribute__((noinline)) CUresult changed_##suffix(struct vr_exec *e, \
                                                                ptype *params) \
    {                                                                               \
        struct vr_node *n = e->ns.cur;                                              \
        if (direct(e, n, entry, params)) {                                          \
            e->c.seen++;                                                            \
            vr_in_shim = 1;                                                         \
            /* vr_args_same is exact without units under 4 bytes */              \
            int rc = direct_args(e, n, entry, params,                               \
                                 n->layout->end4 == n->layout->end);                \
            vr_in_shim = 0;                                                         \
            vr_mutex_unlock(&e->lock);                                              \
            return vr_err_to_cu(rc);                                                \
        }                                                                           \
        CUgraphExec exec = e->handle;                                               \
        CUgraphNode node = n->handle;                                               \
        if (vr_mutex_release(&e->lock))                                             \
            return absorb_wake_##suffix(e, false, exec, node, params);              \
        return vr_hook_setparams_##suffix(exec, node, params);                      \
    }                                                                               \
    CUresult vr_exec_absorb_##suffix(CUgraphExec exec, CUgraphNode node, ptype *params) \
    {                                                                               \
        struct vr_exec *e = last_exec[0].e;                                         \
        if (__builtin_expect(last_exec[0].handle != exec || !vr_mutex_trylock(&e->lock), 0)) \
            return vr_hook_setparams_##suffix(exec, node, params);                  \
        struct vr_node *n = e->serial == last_exec[0].serial && !e->pass              \
                                ? vr_nodes_next(&e->ns, node) : NULL;                \
        if (__builtin_expect(!n, 0)) {                                              \
            if (e->pass && e->serial == last_exec[0].serial)                        \
                return pass_##suffix(e, node, params);                              \
            if (vr_mutex_release(&e->lock))                                         \
                return absorb_wake_##suffix(e, false, exec, node, params);          \
            return vr_hook_setparams_##suffix(exec, node, params);                  \
        }                                                                           \
        if (__builtin_expect(absorbable(n, entry, params), 1)) {                    \
            e->c.absorbed++;                                                        \
            if (__builtin_expect(vr_mutex_release(&e->lock), 0))                    \
                return absorb_wake_##suffix(e, true, NULL, NULL, NULL);             \
            return CUDA_SUCCESS;                                                    \
        }                                                                           \
        return changed_##suffix(e, params);                                         \
    }                                                                               \
    int vr_exec_setparams_##suffix(CUgraphExec exec, CUgraphNode node, const void *params) \
    {                                                                               \
        return setparams_rest(exec, node, entry, params);                           \
    }
VR_SP_ENTRY(v1, VR_SP_V1, const CUDA_KERNEL_NODE_PARAMS_v1)
VR_SP_ENTRY(v2, VR_SP_V2, const CUDA_KERNEL_NODE_PARAMS_v2)
VR_SP_ENTRY(node, VR_SP_NODE, CUgraphNodeParams)
#undef VR_SP_ENTRY

/* ---- decision and transition --------------------------------------------- */

/* Where an installed anchor word reads: its home slot when it lies in that
 * window (an end pointer of a binding that fills its slot equals the next
 * slot's start, and means the home's end), else the slot it lies in, or -1
 * (the program's own address). */
static int slot_read(const struct vr_exec *e, int32_t home, uint64_t have)
{
    return in_window(e, (size_t)home, have) ? home : vr_slices_slot_at(e->slices, have);
}

/* Re-issues node i when an installed anchor word would not mean what it
 * intends once the pending remaps are made (pending slots are treated as
 * holding their targets), with only stable slots translated. A refused
 * re-issue marks its home slots again, so the next fix retries it. */
static int fix_node(struct vr_exec *e, uint32_t i, int rc)
{
    if (e->mark[i] == e->round)
        return rc;
    e->mark[i] = e->round;
    struct vr_node *n = &e->ns.v[i];
    if (!n->layout)
        return rc;
    bool wrong = false;
    for (uint32_t k = 0; k < n->layout->nwords && !wrong; k++) {
        int32_t home = e->anchor_slot[n->word0 + k];
        if (home < 0)
            continue;
        uint32_t off = n->layout->words[k];
        uint64_t have = vr_load_word(vr_installed(&e->ns, n) + off);
        uint64_t want = vr_load_word(n->intended + off);
        int s = slot_read(e, home, have);
        if (s < 0)
            continue;
        const struct vr_slice_bind *b = vr_slices_target(e->slices, (size_t)s);
        wrong = !b->id || want != b->base + (have - vr_slices_va(e->slices, (size_t)s));
    }
    if (!wrong)
        return rc;
    translate_node(e, n, n->intended, e->xlat, false);
    /* The shim's own update, like the transition's: not one of the
     * program's calls. */
    CUresult r = vr_node_issue(e->handle, n, e->xlat, e->kp);
    e->c.transition++;
    vr_stat_inc(VR_C_transition_updates);
    if (r == CUDA_SUCCESS) {
        memcpy(vr_installed(&e->ns, n), e->xlat, n->layout->bytes);
        vr_variants_touch(e->vars, i);
        return rc;
    }
    for (uint32_t k = 0; k < n->layout->nwords; k++)
        if (e->anchor_slot[n->word0 + k] >= 0)
            mark_slot(e, (size_t)e->anchor_slot[n->word0 + k]);
    return rc ? rc : vr_err_cu(r);
}

/* Whether node i still has an installed anchor word in a slot other than
 * its home. */
static bool has_cross(const struct vr_exec *e, uint32_t i)
{
    const struct vr_node *n = &e->ns.v[i];
    for (uint32_t k = 0; n->layout && k < n->layout->nwords; k++) {
        int32_t home = e->anchor_slot[n->word0 + k];
        if (home < 0)
            continue;
        int s = slot_read(e, home, vr_load_word(vr_installed(&e->ns, n) + n->layout->words[k]));
        if (s >= 0 && s != home)
            return true;
    }
    return false;
}

/* Re-issues every node that may read a slot whose target changed since the
 * last fix and would read it wrongly: the nodes homed in those slots and
 * the few that point across slots. Returns the first driver error. */
static int fix_nodes(struct vr_exec *e)
{
    if (!e->ndirty)
        return 0;
    if (++e->round == 0) {
        memset(e->mark, 0, (e->ns.n ? e->ns.n : 1) * sizeof *e->mark);
        e->round = 1;
    }
    size_t nd = e->ndirty;
    for (size_t d = 0; d < nd; d++)
        e->is_dirty[e->dirty[d]] = 0;
    /* A refused re-issue marks slots again: appended after the nd taken now
     * (room for twice the slots), and left for the next fix. */
    int rc = 0;
    for (size_t d = 0; d < nd; d++) {
        uint32_t s = e->dirty[d];
        for (uint32_t j = e->home_first[s]; j < e->home_first[s + 1]; j++)
            rc = fix_node(e, e->home_node[j], rc);
    }
    /* Out of memory for the cross list once: every node is a suspect. */
    for (uint32_t i = 0; e->cross_lost && i < e->ns.n; i++)
        rc = fix_node(e, i, rc);
    for (size_t j = 0; j < e->ncross;) {
        uint32_t i = e->cross[j];
        rc = fix_node(e, i, rc);
        if (has_cross(e, i)) {
            j++;
            continue;
        }
        e->in_cross[i] = 0;
        e->cross[j] = e->cross[--e->ncross];
    }
    memmove(e->dirty, e->dirty + nd, (e->ndirty - nd) * sizeof *e->dirty);
    e->ndirty -= nd;
    return rc;
}

static void log_rebind(struct vr_exec *e, size_t slot, uint64_t from, uint64_t to, int rc)
{
    if (!vr_log_enabled(VR_LEVEL_INFO))
        return;
    char buf[512];
    struct vr_jw w;
    begin_exec_event(&w, buf, sizeof buf, "slice_rebind", e->handle);
    vr_jw_u64(&w, "slice", slot);
    vr_jw_hex(&w, "from", from);
    vr_jw_hex(&w, "to", rc == 0 ? to : 0);
    vr_jw_bool(&w, "waited", false);
    if (rc != 0)
        vr_jw_str(&w, "error", vr_cu_name(vr_err_to_cu(rc)));
    vr_log_emit(&w, VR_LEVEL_INFO);
}

/* Gives up the pending rebinds, but never the unbinding of a freed
 * allocation (target id 0): its address may be handed out again, and a slot
 * still bound to it would translate the new allocation's words into the old
 * memory. It stays pending (outside the stable view) until the exec is idle. */
static void cancel_all(struct vr_exec *e)
{
    static const struct vr_slice_bind none = {0};
    for (size_t s = 0; s < vr_slices_count(e->slices); s++) {
        if (!vr_slices_slot_pending(e->slices, s) || vr_slices_target(e->slices, s)->id == 0)
            continue;
        /* A retarget may have replaced a pending unbind (a new buffer at the
         * freed one's address): giving it up must not bring the freed
         * buffer back. */
        const struct vr_slice_bind *cur = vr_slices_current(e->slices, s);
        struct vr_alloc_info a;
        if (cur->id && (vr_alloc_find(cur->base, &a) != 0 || a.id != cur->id))
            retarget(e, s, &none);
        else
            cancel(e, s);
    }
}

/* Makes the pending remaps before a launch, or gives them up: only when the
 * exec is idle, and only after every node that would read a remapped slot
 * wrongly was re-issued; a refused re-issue cancels the remaps. Returns a
 * driver error only when the graph cannot be made to mean what the program
 * asked for. */
static int apply_pending(struct vr_exec *e)
{
    if (atomic_load_explicit(&degraded, memory_order_relaxed) || !exec_idle(e)) {
        cancel_all(e);
        return fix_nodes(e);
    }
    if (fix_nodes(e) != 0) {
        vr_log_fallback("rebind", "a node could not be re-issued before a remap; remap cancelled");
        cancel_all(e);
        return fix_nodes(e);
    }
    int rc = 0;
    for (size_t s = 0; s < vr_slices_count(e->slices); s++) {
        if (!vr_slices_slot_pending(e->slices, s))
            continue;
        uint64_t from = vr_slices_current(e->slices, s)->base;
        uint64_t to = vr_slices_target(e->slices, s)->base;
        int r = remap(e, s);
        e->c.rebinds++;
        vr_stat_inc(VR_C_rebinds);
        log_rebind(e, s, from, to, r);
        if (r != 0)
            rc = r;
    }
    if (rc != 0) {
        vr_log_fallback("rebind", "a slice could not be remapped; its nodes pass through");
        return fix_nodes(e);
    }
    return 0;
}

/* Points every node whose anchors fall into a bound slice at it, once. A
 * refused update leaves the node as the program set it, which is correct. */
static void transition(struct vr_exec *e)
{
    for (size_t i = 0; i < e->nanchored; i++) {
        struct vr_node *n = &e->ns.v[e->anchored[i]];
        translate_node(e, n, n->intended, e->xlat, false);
        if (memcmp(e->xlat, vr_installed(&e->ns, n), n->layout->bytes) == 0)
            continue;
        CUresult r = vr_node_issue(e->handle, n, e->xlat, e->kp);
        e->c.transition++;
        vr_stat_inc(VR_C_transition_updates);
        if (r == CUDA_SUCCESS) {
            memcpy(vr_installed(&e->ns, n), e->xlat, n->layout->bytes);
            vr_variants_touch(e->vars, e->anchored[i]);
        }
    }
}

/* The anchored nodes, and per slot the nodes with an anchor homed there
 * (fix_nodes' lists); e->anchor_slot is set. */
static int index_anchors(struct vr_exec *e, size_t nslots)
{
    size_t n = e->ns.n ? e->ns.n : 1, ns = nslots ? nslots : 1;
    e->anchored = malloc(n * sizeof *e->anchored);
    e->home_first = calloc(ns + 1, sizeof *e->home_first);
    e->dirty = malloc(2 * ns * sizeof *e->dirty);
    e->is_dirty = calloc(ns, 1);
    e->mark = calloc(n, sizeof *e->mark);
    uint32_t *last = calloc(ns, sizeof *last); /* node index + 1 that counted it last */
    if (!e->anchored || !e->home_first || !e->dirty || !e->is_dirty || !e->mark || !last) {
        free(last);
        return -ENOMEM;
    }
    /* Two passes: count per slot, then fill (home_first ends as starts). */
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        memset(last, 0, ns * sizeof *last);
        for (size_t i = 0; i < e->ns.n; i++) {
            const struct vr_node *nd = &e->ns.v[i];
            bool any = false;
            for (uint32_t k = 0; nd->layout && k < nd->layout->nwords; k++) {
                int32_t h = e->anchor_slot[nd->word0 + k];
                if (h < 0 || last[h] == i + 1)
                    continue;
                last[h] = (uint32_t)i + 1;
                any = true;
                if (pass == 0)
                    e->home_first[h + 1]++;
                else
                    e->home_node[e->home_first[h]++] = (uint32_t)i;
            }
            if (pass == 0 && any)
                e->anchored[e->nanchored++] = (uint32_t)i;
        }
        if (pass == 0) {
            for (size_t k = 0; k < nslots; k++)
                e->home_first[k + 1] += e->home_first[k];
            total = e->home_first[nslots];
            e->home_node = malloc((total ? total : 1) * sizeof *e->home_node);
            if (!e->home_node) {
                free(last);
                return -ENOMEM;
            }
        }
    }
    /* The fill moved every start to the next slot's: shift back. */
    for (size_t k = nslots; k > 0; k--)
        e->home_first[k] = e->home_first[k - 1];
    e->home_first[0] = 0;
    free(last);
    return 0;
}

/* No variant will ever be made: the clone and the variants' bookkeeping go
 * (memory per node counts: programs have graphs of many thousand nodes). */
static void no_variants(struct vr_exec *e)
{
    struct vr_var_ctx cx = var_ctx(e);
    vr_variants_free(e->vars, &cx);
    e->vars = NULL;
}

static void decide(struct vr_exec *e)
{
    bool observe = cfg.mode == VR_MODE_OBSERVE;
    struct vr_decision d;
    vr_profile_decide(e->prof, &e->ns, e->handle, observe, &d);
    vr_profile_free(e->prof);
    e->prof = NULL;
    if (observe) {
        e->state = ST_OBSERVED;
        return;
    }
    if (d.active) {
        e->anchor_slot = d.anchor_slot;
        if (index_anchors(e, vr_slices_count(d.slices)) != 0) {
            d.active = false;
            drop_slices(e, false); /* frees what index_anchors made, and d.anchor_slot */
            d.anchor_slot = NULL;
        }
    }
    if (!d.active) {
        no_variants(e); /* they need slices */
        free(d.anchor_slot);
        free(d.slot_back);
        /* No node points into the slices yet: nothing can be reading them. */
        if (d.slices && vr_slices_destroy(d.slices) != 0)
            vr_tomb_bury(d.slices, NULL, e->ctx, true);
        e->state = ST_DISABLED;
        vr_stat_inc(VR_C_execs_disabled);
        return;
    }
    /* Every selected buffer stayed put while profiled: remaps at an idle
     * launch serve the rare rebind, and variants would only cost memory. */
    if (!d.moved)
        no_variants(e);
    e->slices = d.slices;
    e->slot_back = d.slot_back;
    e->state = ST_ACTIVE;
    /* Rebinds are most likely right after the decision: the next launches
     * get completion events (variant.h). */
    e->t.hot = e->t.seq + VR_TRACK_EVERY + 1;
    e->peers = vr_alloc_peer_generation();
    vr_stat_inc(VR_C_execs_active);
    transition(e);
    e->weighed = e->c; /* the transition is paid once; what follows is weighed */
    /* Needed by the transition only: 4 bytes per node less from here on. */
    free(e->anchored);
    e->anchored = NULL;
    e->nanchored = 0;
}

/* ---- launch ------------------------------------------------------------ */

/* Every launch of a known exec, in every state: ordered behind the last
 * one (a variant's, perhaps, which the driver does not order), then
 * tracked. The ordering's failure is the shim's own and never the
 * program's: it only ever leaves a host wait, counted. */
static int launch_ordered(struct vr_exec *e, CUgraphExec h, uint64_t var, CUstream stream,
                          bool per_thread, enum vr_track_mode mode)
{
    int rc = vr_track_order(&e->t, var, stream, per_thread);
    if (rc > 0)
        e->c.rebind_waits++;
    else if (rc < 0)
        vr_log_fallback("launch", "a launch could not be ordered behind the exec's last "
                                  "one (the context failed to synchronize)");
    CUresult r = per_thread ? vr_real.cuGraphLaunch_ptsz(h, stream)
                            : vr_real.cuGraphLaunch(h, stream);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    vr_track_launched(&e->t, var, stream, per_thread, mode);
    if (!var)
        e->v0_last = e->t.seq;
    return 0;
}

/* Active: the program's exec, or a variant holding the slots' targets. The
 * variant is made ready (remapped, its nodes brought up to date) before
 * anything is launched; the program's exec applies its own pending remaps. */
static int launch_active(struct vr_exec *e, CUstream stream, bool per_thread)
{
    unsigned peers = vr_alloc_peer_generation();
    if (peers != e->peers) {
        vr_slices_reaccess(e->slices);
        vr_variants_reaccess(e->vars);
        e->peers = peers;
    }
    int var = 0;
    bool vmm = false;
    /* A freed buffer's slot may have been unmapped at once (the exec was
     * idle), leaving nothing pending, while nodes still point into it (a
     * new buffer at the same address makes the program's next update
     * identical, so it is absorbed): no node launches pointing at an
     * unmapped slot. */
    if (e->ndirty && !vr_slices_pending(e->slices)) {
        int rc = fix_nodes(e);
        if (rc != 0)
            return rc; /* the graph would read an unmapped slot */
    }
    if (vr_slices_pending(e->slices)) {
        if (e->retargeted && may_vary(e) && fix_nodes(e) != 0)
            unvary(e);
        e->retargeted = false;
        struct vr_var_ctx cx = var_ctx(e);
        /* A variant is another exec to the driver: only where its launch can
         * be ordered behind the last one without a host wait, and made in
         * the exec's context, whatever the calling thread's. */
        if (!atomic_load_explicit(&degraded, memory_order_relaxed) &&
            vr_track_orderable(&e->t, stream, per_thread)) {
            bool entered = vr_ctx_enter(e->ctx);
            var = vr_variants_pick(e->vars, &e->t, &cx, e->v0_last, &vmm);
            vr_ctx_leave(entered);
        }
        if (var == 0) {
            vmm = true;
            /* Nothing could run the targets (the program's exec and every
             * variant still running): the moved nodes pass through now and
             * would come back at the next SetParams, to pass through again
             * while the GPU stays behind. For a few launches SetParams pass
             * them through at once, as dedup would; then variants are tried
             * again. */
            if (may_vary(e) && !exec_idle(e))
                e->stuck = VR_STUCK_LAUNCHES;
            int rc = apply_pending(e);
            if (rc != 0)
                return rc; /* the graph would read what the program did not ask for */
        } else if (e->stuck) {
            e->stuck--;
        }
    } else if (e->stuck) {
        e->stuck--;
    }
    CUgraphExec h = var ? vr_variants_handle(e->vars, var) : e->handle;
    uint64_t id = var ? vr_variants_id(e->vars, var) : 0;
    int rc = launch_ordered(e, h, id, stream, per_thread, vmm ? VR_TRACK_HOT : VR_TRACK_NORMAL);
    if (rc == 0 && var)
        vr_variants_launched(e->vars, var, e->t.seq);
    return rc;
}

/* No slot takes a new buffer from now on: the variants go, pending rebinds
 * are given up and their nodes re-issued as the program set them. The slots
 * keep what they hold (a node still pointing there reads the right memory);
 * a new buffer reaches the driver as the program wrote it, as in dedup. */
static void stop_rebinding(struct vr_exec *e)
{
    if (e->vars) {
        struct vr_var_ctx cx = var_ctx(e);
        vr_variants_drop(e->vars, &cx, true);
    }
    if (e->state == ST_ACTIVE) {
        cancel_all(e);
        if (fix_nodes(e) != 0)
            vr_log_fallback("degrade", "a node could not be re-issued off a pending slot");
    }
    e->retargeted = false;
}

/* The exec goes on as in dedup: every node that reads a slice is re-issued
 * as the program set it (once, O(nodes)), then the slices and variants go
 * once their last launches are done. If a node cannot be re-issued, the
 * slices stay and only stop taking new buffers. */
static void settle(struct vr_exec *e)
{
    stop_rebinding(e);
    for (size_t i = 0; i < e->ns.n; i++) {
        struct vr_node *n = &e->ns.v[i];
        if (!n->layout || memcmp(vr_installed(&e->ns, n), n->intended, n->layout->bytes) == 0)
            continue;
        memcpy(e->xlat, n->intended, n->layout->bytes);
        CUresult r = vr_node_issue(e->handle, n, e->xlat, e->kp);
        e->c.transition++;
        vr_stat_inc(VR_C_transition_updates);
        if (r != CUDA_SUCCESS) {
            e->settled = true; /* a node still reads a slice: keep them */
            return;
        }
        memcpy(vr_installed(&e->ns, n), n->intended, n->layout->bytes);
    }
    drop_slices(e, true);
    e->state = ST_DISABLED;
    e->losing = 0; /* weigh_absorbed starts afresh */
    vr_stat_inc(VR_C_execs_disabled);
}

/* Never worse than dedup, judged on what happened: what the slices cost
 * since the last look (the shim's own updates re-pointing nodes, remaps)
 * against what they saved (the updates absorbed only because the slices
 * made them identical to what the driver holds: dedup absorbs the others
 * as well). A pipeline bound by the GPU keeps the exec and every variant
 * busy: a new buffer can then only be passed as written and re-pointed
 * later, twice the updates dedup sends (seen on an H200: fanout 0.66x of
 * dedup). Slices that saved nothing while updates still went to the driver
 * (the moving buffers were not worth a slice) only add the translation to
 * each of those. */
static void weigh_slices(struct vr_exec *e)
{
    uint64_t transition = e->c.transition - e->weighed.transition;
    uint64_t rebinds = e->c.rebinds - e->weighed.rebinds;
    uint64_t kept = e->c.xabsorbed - e->weighed.xabsorbed;
    uint64_t forwarded = e->c.forwarded - e->weighed.forwarded;
    e->weighed = e->c;
    uint64_t sp = vr_cost_get(VR_COST_SETPARAMS);
    uint64_t remap = vr_cost_get(VR_COST_MAP) + vr_cost_get(VR_COST_UNMAP) +
                     vr_cost_get(VR_COST_ACCESS);
    uint64_t cost = transition * sp + rebinds * remap, saved = kept * sp;
    /* Two windows in a row: one busy stretch (a loaded machine, a burst of
     * new buffers) is no verdict. */
    e->losing = cost > saved || (kept == 0 && forwarded > 0) ? e->losing + 1 : 0;
    if (e->losing < 2)
        return;
    settle(e);
    if (vr_log_enabled(VR_LEVEL_INFO)) {
        char why[224];
        snprintf(why, sizeof why,
                 "slices cost %llu us (%llu updates, %llu remaps) for %llu us saved, %llu "
                 "updates forwarded, in the last %d launches: the exec goes on without slices",
                 (unsigned long long)(cost / 1000), (unsigned long long)transition,
                 (unsigned long long)rebinds, (unsigned long long)(saved / 1000),
                 (unsigned long long)forwarded, VR_WEIGH_EVERY);
        vr_log_fallback("rebind", why);
    }
}

/* An exec without slices whose every update changes (each node pointed at
 * a new buffer every step) gains nothing from comparing and shadowing its
 * updates and pays for both on each: after two windows in which it absorbed
 * fewer than one update in 8, its updates go straight to the driver, as in
 * mode off, until it compares again (reprobe) or cuGraphExecUpdate reads its
 * nodes again. The shadows go stale meanwhile, so nothing is absorbed (the
 * absorbed path finds no node of a passing exec). */
static void weigh_absorbed(struct vr_exec *e)
{
    uint64_t seen = e->c.seen + e->c.absorbed - e->weighed.seen - e->weighed.absorbed;
    uint64_t kept = e->c.skipped + e->c.absorbed - e->weighed.skipped - e->weighed.absorbed;
    e->weighed = e->c;
    /* An absorbed update saves one SetParams (230 ns on an H200, 1 us in the
     * cost model); a forwarded one costs about 220 instructions more than
     * passing it (scripts/bench-instr: 294 against 72): under one in eight
     * absorbed, passing costs less on any of them. */
    bool probing = e->probing;
    e->probing = false;
    e->losing = seen >= VR_WEIGH_EVERY && kept * 8 < seen ? e->losing + 1 : 0;
    if (!e->losing)
        e->reprobe_after = 0; /* absorbing: a later pass backs off from the start */
    if (e->losing < (probing ? 1 : 2))
        return;
    e->pass = true;
    e->pass_since = e->c.launches;
    e->reprobe_after = !e->reprobe_after ? VR_REPROBE_FIRST
                       : e->reprobe_after < VR_REPROBE_MAX ? 2 * e->reprobe_after
                                                           : VR_REPROBE_MAX;
    if (vr_log_enabled(VR_LEVEL_INFO)) {
        char why[160];
        snprintf(why, sizeof why,
                 "%llu of %llu updates absorbed in the last %d launches: the exec's updates "
                 "pass straight through",
                 (unsigned long long)kept, (unsigned long long)seen,
                 probing ? VR_REPROBE_WINDOW : VR_WEIGH_EVERY);
        vr_log_fallback("setparams", why);
    }
}

/* A passing exec's shadows are stale, and the driver has no query for an
 * exec node's arguments: its nodes are forgotten, so that each one's next
 * update goes to the driver whole and is recorded again, and the windows
 * weigh the updates from there (weigh_absorbed). */
static void reprobe(struct vr_exec *e)
{
    vr_nodes_forget(&e->ns);
    e->pass = false;
    e->probing = true;
    e->losing = 0;
    e->weighed = e->c;
    log_exec_event("exec_reprobe", e);
}

static int launch_locked(struct vr_exec *e, CUstream stream, bool per_thread)
{
    e->c.launches++;
    if (e->c.launches - e->weighed.launches >= (e->probing ? VR_REPROBE_WINDOW : VR_WEIGH_EVERY)) {
        if (e->state == ST_ACTIVE && !e->settled)
            weigh_slices(e);
        else if (e->pass && e->c.launches - e->pass_since >= e->reprobe_after)
            reprobe(e);
        else if ((e->state == ST_DEDUP || e->state == ST_DISABLED) && !e->pass &&
                 !vr_variants_usable(e->vars) && !e->orphan) /* no variant to update */
            weigh_absorbed(e);
    }
    if (e->state == ST_PROFILING && vr_profile_launches(e->prof) >= cfg.profile_launches) {
        if (atomic_load_explicit(&degraded, memory_order_relaxed)) {
            vr_profile_free(e->prof);
            e->prof = NULL;
            e->state = ST_DEDUP;
        } else {
            decide(e);
        }
    }
    if (e->state == ST_ACTIVE)
        return launch_active(e, stream, per_thread);
    /* No slice, no variant: nothing will ask about this launch but the
     * order of a later variant's, which it gets from a new event then. */
    int rc = launch_ordered(e, e->handle, 0, stream, per_thread, VR_TRACK_QUIET);
    if (rc != 0)
        return rc;
    if (e->state == ST_PROFILING)
        vr_profile_observe(e->prof, &e->ns);
    return 0;
}

int vr_exec_launch(CUgraphExec exec, CUstream stream, bool per_thread)
{
    struct vr_exec *e = acquire(exec);
    if (!e) {
        vr_stat_inc(VR_C_launches);
        CUresult r = per_thread ? vr_real.cuGraphLaunch_ptsz(exec, stream)
                                : vr_real.cuGraphLaunch(exec, stream);
        return vr_err_cu(r);
    }
    int rc = launch_locked(e, stream, per_thread);
    vr_mutex_unlock(&e->lock);
    vr_tomb_drain(false);
    return rc;
}

static CUresult upload(CUgraphExec h, CUstream stream, bool per_thread)
{
    return per_thread ? vr_real.cuGraphUpload_ptsz(h, stream) : vr_real.cuGraphUpload(h, stream);
}

/* The driver orders an upload behind the exec's earlier launches, some of
 * which ran as variants: ordered as a launch of the program's exec is. The
 * variants are uploaded too, so their next launches are as ready as the
 * program's exec's would be. */
int vr_exec_upload(CUgraphExec exec, CUstream stream, bool per_thread)
{
    struct vr_exec *e = cfg.mode == VR_MODE_OFF ? NULL : acquire(exec);
    if (!e)
        return vr_err_cu(upload(exec, stream, per_thread));
    /* The shim's own ordering never fails the program's call. */
    if (vr_track_order(&e->t, 0, stream, per_thread) > 0)
        e->c.rebind_waits++;
    CUresult r = upload(e->handle, stream, per_thread);
    if (r == CUDA_SUCCESS)
        vr_variants_upload(e->vars, stream, per_thread);
    int rc = vr_err_cu(r);
    vr_mutex_unlock(&e->lock);
    return rc;
}

/* ---- lifecycle --------------------------------------------------------- */

static void reset_locked(struct vr_exec *e, CUgraph graph)
{
    /* The driver now holds the update graph's parameters: no node reads a
     * slice; the slices go once the last launch is done. */
    drop_slices(e, true);
    vr_profile_free(e->prof);
    e->prof = NULL;
    log_exec_event("exec_reset", e);
    if (e->orphan) {
        e->state = ST_DISABLED; /* its nodes still cannot be named */
        return;
    }
    /* Each update undoes the decision: its slices are made again (a map and
     * a set-access per buffer, 20 us on an H200) and the nodes re-pointed.
     * An exec updated every few launches never earns that back, and dedup
     * absorbs its repeated updates without slices: after two decisions that
     * lived less than VR_BRIEF_DECISION launches, it stays there. */
    uint64_t lived = e->c.launches - e->reset_at;
    e->reset_at = e->c.launches;
    e->brief = lived < VR_BRIEF_DECISION ? e->brief + 1 : 0;
    bool churning = e->brief >= 2;
    e->pass = false; /* the shadows are read again, or the exec passes through anyway */
    e->reprobe_after = 0;
    e->probing = false;
    e->losing = 0;
    e->weighed = e->c;
    if (vr_nodes_refresh(&e->ns, graph) != 0 || alloc_scratch(e) != 0) {
        vr_warn("exec %p: cannot pair the update graph's nodes; the exec passes through",
                (void *)e->handle);
        e->state = ST_OBSERVED;
        for (size_t i = 0; i < e->ns.n; i++)
            vr_node_make_opaque(&e->ns, &e->ns.v[i]);
        return;
    }
    if (churning && e->state != ST_DEDUP) {
        if (e->state != ST_DISABLED)
            vr_stat_inc(VR_C_execs_disabled);
        no_variants(e);
        e->state = ST_DISABLED;
        if (e->brief == 2)
            vr_log_fallback("cuGraphExecUpdate", "updated again within a few launches of each "
                                              "decision: the exec keeps no slices");
        return;
    }
    restart(e);
}

int vr_exec_update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info)
{
    struct vr_exec *e = acquire(exec);
    CUresult r = vr_real.cuGraphExecUpdate_v2(exec, graph, info);
    if (e) {
        if (r == CUDA_SUCCESS)
            reset_locked(e, graph);
        vr_mutex_unlock(&e->lock);
    }
    return vr_err_cu(r);
}

void vr_exec_updated(CUgraphExec exec, CUgraph graph)
{
    struct vr_exec *e = acquire(exec);
    if (e) {
        reset_locked(e, graph);
        vr_mutex_unlock(&e->lock);
    }
}

int vr_exec_set_enabled(CUgraphExec exec, CUgraphNode node, unsigned enabled)
{
    struct vr_exec *e = cfg.mode == VR_MODE_OFF ? NULL : acquire(exec);
    CUresult r = vr_real.cuGraphNodeSetEnabled(exec, node, enabled);
    if (e) {
        if (r == CUDA_SUCCESS && e->vars) {
            struct vr_node *n = vr_nodes_find(&e->ns, node);
            struct vr_var_ctx cx = var_ctx(e);
            vr_variants_set_enabled(e->vars, &cx, n ? (size_t)(n - e->ns.v) : SIZE_MAX, node,
                                    enabled);
        }
        vr_mutex_unlock(&e->lock);
    }
    return vr_err_cu(r);
}

int vr_exec_set_node(CUgraphExec exec, CUgraphNode node, const struct vr_set *set)
{
    struct vr_exec *e = cfg.mode == VR_MODE_OFF ? NULL : acquire(exec);
    CUresult r = vr_set_issue(exec, node, set);
    if (e) {
        if (r == CUDA_SUCCESS && e->vars) {
            struct vr_var_ctx cx = var_ctx(e);
            vr_variants_set_node(e->vars, &cx, node, set);
        }
        vr_mutex_unlock(&e->lock);
    }
    return vr_err_cu(r);
}

int vr_exec_destroy(CUgraphExec exec)
{
    struct vr_exec *e = cfg.mode == VR_MODE_OFF ? NULL : unlink_exec(exec);
    CUresult r = vr_real.cuGraphExecDestroy(exec);
    if (e) {
        vr_mutex_lock(&e->lock);
        e->serial++;
        log_exec_event("exec_destroyed", e);
        free_contents(e);
        retire_record(e);
        vr_mutex_unlock(&e->lock);
        recycle(e);
    }
    vr_tomb_drain(false);
    return vr_err_cu(r);
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
static void each_exec(void (*fn)(struct vr_exec *e, void *arg), void *arg)
{
    struct cached *v;
    size_t n = snapshot(&v);
    for (size_t i = 0; i < n; i++) {
        if (!lock_if_same(&v[i]))
            continue;
        fn(v[i].e, arg);
        vr_mutex_unlock(&v[i].e->lock);
    }
    free(v);
}

static void orphan_if_of(struct vr_exec *e, void *graph)
{
    if (e->graph != graph)
        return;
    e->graph = NULL; /* the handle may name a new graph later */
    e->orphan = true;
    e->serial++; /* out of every thread's absorbed path */
    if (e->state == ST_PROFILING) {
        /* Going active needs its nodes re-pointed at the slices. */
        vr_profile_free(e->prof);
        e->prof = NULL;
        no_variants(e);
        e->state = ST_DISABLED;
        vr_stat_inc(VR_C_execs_disabled);
        vr_log_fallback("cuGraphDestroy", "the exec's graph is destroyed before the "
                                       "decision: its nodes cannot be re-pointed; "
                                       "it passes through");
    }
}

static void stream_destroyed_in(struct vr_exec *e, void *stream)
{
    vr_track_stream_destroyed(&e->t, stream);
}

void vr_exec_stream_destroyed(CUstream stream)
{
    if (cfg.mode == VR_MODE_OFF || !stream || stream == CU_STREAM_LEGACY ||
        stream == CU_STREAM_PER_THREAD)
        return;
    each_exec(stream_destroyed_in, stream);
}

void vr_exec_graph_destroyed(CUgraph graph)
{
    if (cfg.mode == VR_MODE_OFF || !graph)
        return;
    each_exec(orphan_if_of, graph);
}

/* A freed allocation, as vr_exec_forget_alloc tells each exec of it. */
struct freed {
    uint64_t id;
    bool synced;
    CUcontext cur; /* current when the caller synchronized */
};

static void forget_in(struct vr_exec *e, void *arg)
{
    const struct freed *f = arg;
    uint64_t id = f->id;
    bool holds = vr_variants_holds(e->vars, id);
    for (size_t s = 0; e->slices && s < vr_slices_count(e->slices) && !holds; s++)
        holds = vr_slices_current(e->slices, s)->id == id ||
                vr_slices_target(e->slices, s)->id == id;
    /* The free synchronized this exec's context. Only an exec that reads
     * the buffer is told: another thread may have launched another exec
     * since, which the synchronization did not cover. */
    if (holds && f->synced && f->cur && f->cur == e->ctx)
        vr_track_synced(&e->t);
    /* Several slots may hold one buffer (anchors are positions). */
    for (size_t s = 0; e->slices && s < vr_slices_count(e->slices); s++) {
        if (vr_slices_current(e->slices, s)->id != id &&
            vr_slices_target(e->slices, s)->id != id)
            continue;
        if (vr_slices_target(e->slices, s)->id == id) {
            struct vr_slice_bind none = {0};
            retarget(e, s, &none);
            e->retargeted = true;
        }
        /* Unmapped now when nothing can read it, else at a later launch. */
        if (vr_slices_current(e->slices, s)->id == id && exec_idle(e) &&
            remap(e, s) != 0)
            vr_log_fallback("free", "a slice of a freed buffer could not be unmapped yet");
        if (vr_slices_current(e->slices, s)->id != id)
            cancel(e, s);
    }
    if (e->slices) {
        struct vr_var_ctx cx = var_ctx(e);
        vr_variants_forget_alloc(e->vars, &e->t, &cx, id);
    }
}

void vr_exec_forget_alloc(uint64_t id, bool synced)
{
    struct freed f = {id, synced, NULL};
    if (synced)
        vr_real.cuCtxGetCurrent(&f.cur);
    each_exec(forget_in, &f);
}

/* From now on the program's exec may be launched behind the shim's back: a
 * variant launch could not be ordered against such a launch, and a slot
 * retargeted for a variant would never be remapped before it. So every
 * exec's variants go (none is made again) and its pending retargets are
 * given up now, its nodes re-issued to mean what the program asked for
 * (dedup from here on; degraded keeps later SetParams off pending slots).
 * A variant launch still running cannot be ordered before an unseen
 * launch of the program's exec: programs resolve entry points up front. */
static void stop_rebinding_of(struct vr_exec *e, void *unused)
{
    (void)unused;
    stop_rebinding(e);
}

void vr_exec_degrade(const char *why)
{
    if (atomic_exchange(&degraded, true))
        return;
    vr_log_fallback("launch_tracking", why);
    each_exec(stop_rebinding_of, NULL);
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
    each_exec(add_counters_of, &sum);
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
    memset(last_exec, 0, sizeof last_exec);
    last_exec[0].e = &nobody;
    nobody.lock = (vr_mutex)VR_MUTEX_INIT;
}
