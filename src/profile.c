/* profile: the observing half (profile.h): the profile's record, made,
 * read at each profiled launch and freed. profile_decide.c decides on it.
 */
#include "profile_internal.h"

#include <errno.h>
#include <stdlib.h>

#include "alloc.h"
#include "ptrindex.h"

int vr_profile_new(struct vr_profile **out, size_t nwords)
{
    struct vr_profile *p = calloc(1, sizeof *p);
    size_t n = nwords ? nwords : 1;
    if (!p)
        return -ENOMEM;
    p->nwords = nwords;
    p->val = calloc(n, sizeof *p->val);
    p->id = calloc(n, sizeof *p->id);
    p->base = calloc(n, sizeof *p->base);
    p->sig = calloc(n, sizeof *p->sig);
    p->size = calloc(n, sizeof *p->size);
    p->prev = calloc(n, sizeof *p->prev);
    p->alt = calloc(n, sizeof *p->alt);
    p->back = calloc(n, 1);
    if (!p->val || !p->id || !p->base || !p->sig || !p->size || !p->prev || !p->alt ||
        !p->back) {
        vr_profile_free(p);
        return -ENOMEM;
    }
    *out = p;
    return 0;
}

void vr_profile_free(struct vr_profile *p)
{
    if (!p)
        return;
    free(p->val);
    free(p->id);
    free(p->base);
    free(p->sig);
    free(p->size);
    free(p->prev);
    free(p->alt);
    free(p->back);
    free(p->loose);
    free(p->why);
    free(p->todo);
    vr_ptrindex_free(&p->idx);
    free(p->reads);
    free(p);
}

void vr_profile_touch(struct vr_profile *p, size_t node)
{
    if (!p->why || node >= p->nnodes)
        return;
    if (!p->why[node])
        p->todo[p->ntodo++] = (uint32_t)node;
    p->why[node] |= READ_SET;
}

unsigned vr_profile_launches(const struct vr_profile *p)
{
    return p->launches;
}

void vr_profile_again(struct vr_profile *p)
{
    p->again = true;
}

bool vr_profile_moved(const struct vr_profile *p)
{
    return p->moved;
}

int vr_profile_find_alloc(uint64_t word, struct vr_alloc_info *a)
{
    if (vr_alloc_find(word, a) == 0 ||
        (word && vr_alloc_find(word - 1, a) == 0 && word == a->base + a->size))
        return 0;
    return -ENOENT;
}

uint64_t vr_profile_alloc_of(uint64_t word, uint64_t *base)
{
    struct vr_alloc_info a;
    if (vr_profile_find_alloc(word, &a) != 0)
        return 0;
    *base = a.base;
    return a.id;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void vr_profile_loose_compact(struct vr_profile *p)
{
    if (p->nloose < 2)
        return;
    qsort(p->loose, p->nloose, sizeof *p->loose, cmp_u64);
    size_t n = 1;
    for (size_t i = 1; i < p->nloose; i++)
        if (p->loose[i] != p->loose[n - 1])
            p->loose[n++] = p->loose[i];
    p->nloose = n;
}

bool vr_profile_loose(const struct vr_profile *p, uint64_t id)
{
    return id && p->nloose && bsearch(&id, p->loose, p->nloose, sizeof id, cmp_u64) != NULL;
}

void vr_profile_loosen(struct vr_profile *p, uint64_t id)
{
    if (!id || p->loose_lost || (p->nloose && p->loose[p->nloose - 1] == id))
        return;
    if (p->nloose == p->caploose) {
        vr_profile_loose_compact(p);
        if (p->nloose * 2 >= p->caploose) {
            size_t cap = p->caploose ? p->caploose * 2 : 16;
            uint64_t *grown = realloc(p->loose, cap * sizeof *grown);
            if (!grown) {
                p->loose_lost = true;
                return;
            }
            p->loose = grown;
            p->caploose = cap;
        }
    }
    p->loose[p->nloose++] = id;
}

uint64_t vr_profile_named_by(struct vr_profile *p, uint64_t v, uint64_t *base, uint64_t *size)
{
    struct vr_alloc_info a, b;
    if (vr_profile_find_alloc(v, &a) != 0)
        return 0;
    /* Only a buffer that may be sliced needs it: a VMM-backed allocation's
     * end lies in its own guard gap (alloc.h), so the one ending here is
     * native, and two native ones are never translated. */
    if (v == a.base && v && a.eligible && vr_alloc_find(v - 1, &b) == 0 && !b.vmm &&
        b.base + b.size == v && b.id != a.id) {
        vr_profile_loosen(p, a.id);
        vr_profile_loosen(p, b.id);
        return 0;
    }
    *base = a.base;
    *size = a.size;
    return a.id;
}

/* A word is an anchor by position: at every profiled launch it pointed at
 * the same offset of an allocation of the same size. The allocation may
 * differ from launch to launch (a buffer replaced every step, from a pool
 * or freshly allocated): positions that saw the same sequence of
 * allocations share one slice, rebound when the program moves them. The
 * sequence is mixed into sig only where the allocation changes, so a node
 * not read again (unchanged) leaves it as reading it would. */
static void observe_node(struct vr_profile *p, const struct vr_node *n, bool first)
{
    if (!n->layout)
        return;
    for (uint32_t k = 0; k < n->layout->nwords; k++) {
        size_t w = n->word0 + k;
        uint64_t v = vr_load_word(n->intended + n->layout->words[k]);
        uint64_t base = 0, size = 0, id = vr_profile_named_by(p, v, &base, &size);
        if (first) {
            p->val[w] = v;
            p->id[w] = id;
            p->base[w] = base;
            p->sig[w] = id;
            p->size[w] = size;
        } else if (!p->id[w]) {
            /* No anchor: whatever it points into cannot be sliced. */
            vr_profile_loosen(p, id);
        } else if (!id || v - base != p->val[w] - p->base[w] || size != p->size[w]) {
            /* No anchor from now on: nor are the allocations it held. */
            vr_profile_loosen(p, p->id[w]);
            vr_profile_loosen(p, p->alt[w]);
            vr_profile_loosen(p, p->prev[w]);
            vr_profile_loosen(p, id);
            p->id[w] = 0;
        } else if (id != p->prev[w]) {
            if (!p->alt[w] && id != p->id[w])
                p->alt[w] = id;
            p->sig[w] = (p->sig[w] ^ id) * UINT64_C(0x9e3779b97f4a7c15) + 1;
            p->moved = true;
            p->back[w] |= id == p->id[w];
        }
        p->prev[w] = id;
    }
}

/* Indexes node i's anchor words by their values now. */
static int index_node(struct vr_profile *p, const struct vr_node *n, uint32_t i)
{
    if (!n->layout)
        return 0;
    for (uint32_t k = 0; k < n->layout->nwords; k++) {
        size_t w = n->word0 + k;
        if (p->id[w] &&
            vr_ptrindex_add(&p->idx, vr_load_word(n->intended + n->layout->words[k]), i) != 0)
            return -ENOMEM;
    }
    return 0;
}

/* Without the bookkeeping every launch reads every node, as it must. */
static void read_all_from_now(struct vr_profile *p)
{
    p->all = true;
    free(p->why);
    free(p->todo);
    p->why = NULL;
    p->todo = NULL;
    p->ntodo = 0;
    vr_ptrindex_free(&p->idx);
    p->indexed = false;
}

static void first_read(struct vr_profile *p, const struct vr_nodes *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        observe_node(p, &ns->v[i], true);
    p->nnodes = ns->n;
    p->why = calloc(ns->n ? ns->n : 1, 1);
    p->todo = malloc((ns->n ? ns->n : 1) * sizeof *p->todo);
    if (!p->why || !p->todo || ns->n > UINT32_MAX)
        read_all_from_now(p);
}

/* Made at the first registry change a later launch sees, from the words as
 * they are: a node not re-set since holds what was last read, a re-set one
 * is read at this launch anyway. A profile that sees no change (the common
 * case) never pays for it. */
static int index_all(struct vr_profile *p, const struct vr_nodes *ns)
{
    int rc = 0;
    for (size_t i = 0; i < ns->n && rc == 0; i++)
        rc = index_node(p, &ns->v[i], (uint32_t)i);
    if (rc == 0)
        rc = vr_ptrindex_seal(&p->idx);
    p->indexed = rc == 0;
    return rc;
}

static void mark_freed(void *arg, uint32_t node)
{
    struct vr_profile *p = arg;
    if (!p->why[node])
        p->todo[p->ntodo++] = node;
    p->why[node] |= READ_FREED;
}

/* A later launch reads the nodes the program re-set since the last read,
 * and the nodes whose anchor words the registry changes concern: a node
 * the program did not re-set may point at a new allocation (a buffer freed
 * and re-allocated at the same address changes no byte of it). Every node
 * when too many changes went by to tell. Returns the nodes read. */
static size_t later_read(struct vr_profile *p, const struct vr_nodes *ns)
{
    struct vr_alloc_range r[VR_ALLOC_CHANGES];
    int nr = vr_alloc_changed_since(p->gen, &p->gen, r);
    bool was_indexed = p->indexed;
    if (nr > 0 && !p->indexed && index_all(p, ns) != 0)
        nr = -ENOMEM;
    for (int k = 0; k < nr; k++)
        vr_ptrindex_find(&p->idx, r[k].lo, r[k].hi, mark_freed, p);
    size_t read = p->ntodo;
    if (nr < 0) {
        for (size_t i = 0; i < ns->n; i++)
            observe_node(p, &ns->v[i], false);
        read = ns->n;
    } else {
        for (size_t t = 0; t < p->ntodo; t++)
            observe_node(p, &ns->v[p->todo[t]], false);
    }
    /* Re-set nodes hold new values: indexed again (an index made at this
     * launch has them already). */
    int rc = 0;
    for (size_t t = 0; t < p->ntodo; t++) {
        uint32_t i = p->todo[t];
        if ((p->why[i] & READ_SET) && was_indexed && rc == 0)
            rc = index_node(p, &ns->v[i], i);
        p->why[i] = 0;
    }
    p->ntodo = 0;
    if (rc == 0)
        rc = vr_ptrindex_seal(&p->idx);
    if (rc != 0 || nr == -ENOMEM)
        read_all_from_now(p);
    return read;
}

void vr_profile_observe(struct vr_profile *p, const struct vr_nodes *ns)
{
    size_t read = ns->n;
    if (p->launches == 0) {
        /* Before reading: a change published later is seen next time. */
        p->gen = vr_alloc_generation();
        first_read(p, ns);
    } else if (p->all || ns->n != p->nnodes) {
        for (size_t i = 0; i < ns->n; i++)
            observe_node(p, &ns->v[i], false);
    } else {
        read = later_read(p, ns);
    }
    if (p->launches == p->capreads) {
        size_t cap = p->capreads ? p->capreads * 2 : 4;
        uint32_t *grown = realloc(p->reads, cap * sizeof *grown);
        if (grown) {
            p->reads = grown;
            p->capreads = cap;
        }
    }
    if (p->launches < p->capreads)
        p->reads[p->launches] = read > UINT32_MAX ? UINT32_MAX : (uint32_t)read;
    p->launches++;
}
