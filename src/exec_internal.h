/* exec_internal: the exec layer's private header: the record of one exec,
 * its states, and the inlines the hot paths need in every file of the layer
 * (exec.c, exec_table.c, setparams.c, remap.c, launch.c). Nothing outside
 * the layer includes it.
 *
 * Every function declared here that takes a struct vr_exec requires its
 * lock held (VR_RANK_EXEC) unless it says otherwise.
 */
#ifndef VR_EXEC_INTERNAL_H
#define VR_EXEC_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <cuda.h>

#include "assert.h"
#include "config.h"
#include "driver.h"
#include "exec.h"
#include "lock.h"
#include "lockrank.h"
#include "log.h"
#include "node.h"
#include "policy.h"
#include "profile.h"
#include "slice.h"
#include "track.h"
#include "variant.h"

/* Everything the layer shares is hidden: declared so, its variables are
 * read by one RIP-relative access on the hot paths, not through the GOT. */
#pragma GCC visibility push(hidden)

extern struct vr_config vr_ex_cfg;
/* Launches or updates may bypass the shim (vr_exec_degrade). */
extern atomic_bool vr_ex_degraded;

/* The states of an exec (exec.c's diagram); every change goes through
 * vr_ex_set_state, which keeps execs_active and execs_disabled. */
enum vr_ex_state {
    ST_PROFILING, /* the profile runs; updates deduplicated */
    ST_ACTIVE,    /* slices: anchors translated, remapped at idle launches */
    ST_DEDUP,     /* dedup from the start (mode dedup, degraded, no profile) */
    ST_DISABLED,  /* dedup after a decision against slices or after giving them
                   * up (settled, churning, orphaned): counted in execs_disabled */
    ST_GONE,      /* destroyed or stale: the record's contents are freed */
    /* Last, so that vr_ex_forwards_all is one compare on the forwarded path. */
    ST_OBSERVED,  /* mode observe, decided: profiled and logged, all forwarded */
    ST_OPAQUE,    /* the update graph's nodes could not be paired: every node
                   * opaque, every update forwarded */
};

/* How a dedup exec (ST_DEDUP, ST_DISABLED) treats its updates: compared
 * with the shadows, passed straight to the driver (the shadows unkept), or
 * compared again on a short window (launch.c's weigh_absorbed). */
enum vr_ex_cmp {
    CMP_COMPARE,
    CMP_PASS, /* no slices and nothing absorbed for two windows */
    CMP_PROBE, /* reprobed: one losing window of VR_REPROBE_WINDOW sends it back */
};

/* The states in which every update goes to the driver as it came. */
static inline bool vr_ex_forwards_all(enum vr_ex_state s)
{
    return s >= ST_OBSERVED;
}

/* Counted under the exec's lock, summed on demand: no shared cache line is
 * written on the hot path. */
struct counters {
    uint64_t seen, skipped, forwarded, transition, launches, rebinds, rebind_waits;
    uint64_t absorbed; /* on the absorbed path: seen and skipped, one add */
    uint64_t xabsorbed; /* skipped because the slices made a changed update what the
                         * driver holds (a moved buffer): what dedup would have sent */
    struct vr_remap_tally remaps; /* the rebinds' slots mapped anew (the variants' too),
                                   * and their cuMemSetAccess calls */
};

struct vr_exec {
    vr_mutex lock;
    uint64_t serial;       /* changes whenever the record stops being this exec */
    /* What a cached serial must equal for the absorbed path to compare:
     * serial, or its complement while the exec passes (CMP_PASS), so the
     * path tests both in one compare. Kept by vr_ex_rekey and vr_ex_set_cmp. */
    uint64_t absorb_key;
    CUgraphExec handle;
    struct vr_exec *next;  /* table chain, or the free list */
    enum vr_ex_state state;
    CUcontext ctx;         /* current at instantiation */
    CUgraph graph;         /* instantiated from: its nodes name this exec's nodes */
    /* The program destroyed that graph: the program's calls naming the
     * exec's nodes get the driver's answer for a destroyed graph's node
     * (CUDA_ERROR_INVALID_VALUE) from the shim, while the graph itself is
     * kept (vr_ex_keep_graph) so the shim still names them. */
    bool orphan;
    bool graph_lost;       /* orphan, and the graph could not be kept: destroyed
                            * for real, no node can change any more */
    uint64_t reset_at;     /* c.launches at the last cuGraphExecUpdate */
    unsigned brief;        /* updates in a row that came too soon after the last */
    bool settled;          /* slices cost more than they saved: no new binding */
    enum vr_ex_cmp cmp;
    uint64_t pass_since;   /* c.launches when it began to pass */
    uint32_t reprobe_after; /* launches of passing before the next reprobe; 0: none yet
                            * since the exec last absorbed */
    unsigned losing;       /* weighings in a row that found compares not absorbing */
    struct vr_slice_ledger ledger; /* the slices' windows since they were made */
    /* Decided against slices (DISABLED): what its forwarded updates cost
     * since the decision (at c.launches decided_at), from c.forwarded as it
     * was at the last launch (noted); the wait before the next profile
     * again; those made; whether the profile running is one. */
    struct vr_dedup_ledger dledger;
    uint64_t noted, decided_at;
    uint32_t reprofile_wait;
    unsigned reprofiles;
    unsigned movers;       /* buffers the last profile saw move (vr_decision.moving) */
    bool reprofiling;
    struct counters weighed; /* the counters at the last weighing */

    struct vr_nodes ns;
    /* The exec's current graph (graph_rec.h): topology, node types and the
     * other nodes' parameters; its kernel nodes pair with ns's in order,
     * whose fields and intended arguments are the truth for them. NULL: not
     * known (every update is forwarded). Stale: a non-kernel setter changed
     * the exec since (the next update is forwarded and reads it again). */
    struct vr_grec *rec;
    bool rec_stale;
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

/* After any change of e->serial (absorb_key); e->cmp changes only through
 * vr_ex_set_cmp. */
static inline void vr_ex_rekey(struct vr_exec *e)
{
    e->absorb_key = e->cmp == CMP_PASS ? ~e->serial : e->serial;
}

static inline void vr_ex_set_cmp(struct vr_exec *e, enum vr_ex_cmp cmp)
{
    e->cmp = cmp;
    vr_ex_rekey(e);
}

/* The execs this thread used last, most recent first (vr_thread, driver.h):
 * a thread replaying one exec (or alternating between a few) never touches
 * the table. A record's serial changes whenever it stops being that exec
 * (destroy, a stale handle, recycling), so a matching serial under the
 * record's lock proves the entry current. */
#define cached vr_exec_cached
#define vr_ex_last_exec (vr_thread.last_exec)

/* What the first entry points at before any exec: never current (its serial
 * is no cached one's, and its absorb_key neither a cached serial nor its
 * complement), so the absorbed path needs no NULL test. */
extern struct vr_exec vr_ex_nobody;

/* An exec's lock with the rank witness beside it (lockrank.h; nothing at
 * the default check level). */
static inline void vr_ex_lock(struct vr_exec *e)
{
    vr_mutex_lock(&e->lock);
    vr_rank_take(VR_RANK_EXEC);
}

static inline void vr_ex_unlock(struct vr_exec *e)
{
    vr_rank_drop(VR_RANK_EXEC);
    vr_mutex_unlock(&e->lock);
}

/* ---- exec_table.c ---- */
struct vr_exec *vr_ex_acquire_slow(CUgraphExec h);
/* Unlinks h's record from the table (unlocked), or NULL. */
struct vr_exec *vr_ex_unlink_exec(CUgraphExec h);
struct vr_exec *vr_ex_new_record(void);
void vr_ex_insert_exec(struct vr_exec *e, CUgraphExec handle);
void vr_ex_retire_record(struct vr_exec *e);
/* e unlocked. */
void vr_ex_recycle(struct vr_exec *e);
/* The graphs the program destroyed that live execs still need (exec.c):
 * one more exec needs g (0, or -ENOMEM: not kept); one exec less (true:
 * it was the last, g is no longer kept and the caller destroys it);
 * whether g is kept; at exit, every kept graph handed out (the table
 * emptied; *out malloc'd, NULL when none could be). Memory only (POOL). */
int vr_ex_keep_graph(CUgraph g);
bool vr_ex_unkeep_graph(CUgraph g);
bool vr_ex_graph_kept(CUgraph g);
size_t vr_ex_take_kept(CUgraph **out);
/* fn on every live exec, each under its own lock; called with none held. */
void vr_ex_each_exec(void (*fn)(struct vr_exec *e, void *arg), void *arg);

/* Returns the live record of h locked, or NULL. */
static inline struct vr_exec *vr_ex_acquire(CUgraphExec h)
{
    struct cached c = vr_ex_last_exec[0];
    if (__builtin_expect(c.handle == h && c.e != NULL, 1)) {
        vr_mutex_lock(&c.e->lock);
        if (__builtin_expect(c.e->serial == c.serial, 1)) {
            vr_rank_take(VR_RANK_EXEC);
            return c.e;
        }
        vr_mutex_unlock(&c.e->lock);
    }
    return vr_ex_acquire_slow(h);
}

/* ---- exec.c ---- */
void vr_ex_begin_exec_event(struct vr_jw *w, char *buf, size_t cap, const char *event,
                            CUgraphExec exec);
void vr_ex_log_exec_event(const char *event, const struct vr_exec *e);
void vr_ex_decide(struct vr_exec *e);
/* The one way an exec changes state: keeps the counters, logs at debug. */
void vr_ex_set_state(struct vr_exec *e, enum vr_ex_state to);
void vr_ex_settle(struct vr_exec *e);
/* The driver took an update: slices go, the shadows are read again from
 * `graph` and the exec profiles afresh (or stays passing, opaque, ...). */
void vr_ex_reset(struct vr_exec *e, CUgraph graph);

/* ---- exec_reprofile.c ---- */
/* At a launch of a DISABLED exec whose updates were forwarded since the
 * last: the ledger notes them and, where it shows slices paid, the exec
 * profiles again (PROFILING, vr_profile_again). */
void vr_ex_ledger_launch(struct vr_exec *e);
/* A decision was taken (vr_ex_decide): the ledger starts afresh, and a
 * profile again that decided against slices doubles the wait. */
void vr_ex_ledger_decided(struct vr_exec *e, bool active);
/* Whether the running profile decides at this launch. */
static inline bool vr_ex_profile_done(const struct vr_exec *e)
{
    unsigned n = vr_profile_launches(e->prof);
    return e->reprofiling
               ? vr_policy_reprofile_done(n, vr_ex_cfg.profile_launches, vr_profile_moved(e->prof))
               : n >= vr_ex_cfg.profile_launches;
}
/* Whether a DISABLED exec's forwarded updates are to be noted: inline, one
 * compare at every launch. */
static inline bool vr_ex_ledger_due(const struct vr_exec *e)
{
    return e->state == ST_DISABLED && e->c.forwarded != e->noted;
}

/* ---- setparams.c ---- */
void vr_ex_unvary(struct vr_exec *e);
/* A SetParams of the exec's own node, on the full path (as a program's
 * call after the absorbed path declined it); e's lock held and kept. */
int vr_ex_setparams_locked(struct vr_exec *e, CUgraphNode node, enum vr_sp_entry entry,
                           const void *params);

/* ---- remap.c ---- */
/* Every change of a slot's target goes through these (the nodes that may
 * read it are re-checked at the next fix). */
int vr_ex_retarget(struct vr_exec *e, size_t s, const struct vr_slice_bind *b);
void vr_ex_cancel(struct vr_exec *e, size_t s);
int vr_ex_remap(struct vr_exec *e, size_t s);
void vr_ex_bury_after(void *owner, struct vr_slices *sl, uint64_t last);
void vr_ex_drop_slices(struct vr_exec *e, bool freeze);
void vr_ex_translate_node(struct vr_exec *e, const struct vr_node *n, const uint8_t *src,
                          uint8_t *dst, bool setparams);
CUresult vr_ex_reissue(struct vr_exec *e, struct vr_node *n);
int vr_ex_fix_nodes(struct vr_exec *e);
void vr_ex_cancel_all(struct vr_exec *e);
int vr_ex_apply_pending(struct vr_exec *e);
void vr_ex_transition(struct vr_exec *e);
int vr_ex_index_anchors(struct vr_exec *e, size_t nslots);
/* The exec checker (VR_ASSERT_EXPENSIVE): every installed anchor word of an
 * active exec is the intended word or a slice address whose slot maps the
 * same byte (now, or once its pending remap is made). */
bool vr_ex_check(const struct vr_exec *e);

static inline struct vr_var_ctx var_ctx(struct vr_exec *e)
{
    return (struct vr_var_ctx){&e->ns, e->anchor_slot, e->slot_back, e->slices, e->xlat, e->kp,
                               vr_ex_bury_after, e, &e->c.transition, &e->c.rebinds,
                               &e->c.remaps};
}

/* True when the program's exec's last launch is known complete. Asks the
 * driver at most once between launches; a failed query means "not
 * complete". */
static inline bool exec_idle(struct vr_exec *e)
{
    return vr_track_complete(&e->t, e->v0_last);
}

/* Whether a slot may be retargeted while the program's exec is busy: a
 * variant may hold the new target at the next launch. */
static inline bool may_vary(const struct vr_exec *e)
{
    return vr_variants_usable(e->vars);
}

#pragma GCC visibility pop

/* The tests the absorbed path (absorb.c) and the full path share. */
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

/* Whether a same_call update of e needs no decoding: its fields stay the
 * node's, only its arguments are new (observe mode forwards everything as it
 * came). */
static inline bool direct_same_call(const struct vr_exec *e)
{
    return vr_ex_cfg.mode != VR_MODE_OBSERVE && !e->graph_lost && !vr_ex_forwards_all(e->state);
}

static inline bool direct(const struct vr_exec *e, const struct vr_node *n,
                          enum vr_sp_entry entry, const void *params)
{
    return direct_same_call(e) && same_call(n, entry, params);
}

/* What the absorbed path hands over when it found the node but cannot
 * absorb (setparams.c): the exec's lock held, dropped there. */
CUresult vr_exec_pass_v1(struct vr_exec *e, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1 *p);
CUresult vr_exec_pass_v2(struct vr_exec *e, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2 *p);
CUresult vr_exec_pass_node(struct vr_exec *e, CUgraphNode node, CUgraphNodeParams *p);
CUresult vr_exec_direct_v1(struct vr_exec *e, struct vr_node *n, const CUDA_KERNEL_NODE_PARAMS_v1 *p);
CUresult vr_exec_direct_v2(struct vr_exec *e, struct vr_node *n, const CUDA_KERNEL_NODE_PARAMS_v2 *p);
CUresult vr_exec_direct_node(struct vr_exec *e, struct vr_node *n, CUgraphNodeParams *p);
/* The same, for an exec without slices and a layout without units under 4
 * bytes (the compare was exact and found a difference). */
CUresult vr_exec_forward_v1(struct vr_exec *e, struct vr_node *n, const CUDA_KERNEL_NODE_PARAMS_v1 *p);
CUresult vr_exec_forward_v2(struct vr_exec *e, struct vr_node *n, const CUDA_KERNEL_NODE_PARAMS_v2 *p);
CUresult vr_exec_forward_node(struct vr_exec *e, struct vr_node *n, CUgraphNodeParams *p);

#endif
