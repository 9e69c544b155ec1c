#include "dlog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A command-line tool: running out of memory ends it with one line. */
static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fputs("varemap: out of memory\n", stderr);
        exit(125);
    }
    return q;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

static void count(struct dl_counts *c, const char *name, uint64_t by)
{
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->v[i].name, name) == 0) {
            c->v[i].n += by;
            return;
        }
    }
    c->v = xrealloc(c->v, (c->n + 1) * sizeof *c->v);
    c->v[c->n++] = (struct dl_count){ xstrdup(name), by };
}

static void counts_free(struct dl_counts *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].name);
    free(c->v);
    *c = (struct dl_counts){ 0 };
}

bool dl_verdict_selected(const char *verdict)
{
    return strcmp(verdict, "selected") == 0;
}

/* Moves the member `key` out of `obj` (the line is freed afterwards). */
static void take(struct vj *obj, const char *key, struct vj *dst)
{
    vj_free(dst);
    for (size_t i = obj->n; i-- > 0;) {
        if (strcmp(obj->keys[i], key) == 0) {
            *dst = obj->items[i];
            obj->items[i] = (struct vj){ 0 };
            return;
        }
    }
}

static void set_str(char **dst, const struct vj *obj, const char *key)
{
    const char *s;
    if (vj_get_str(obj, key, &s)) {
        free(*dst);
        *dst = xstrdup(s);
    }
}

/* ---- grouping ---------------------------------------------------------- */

static struct dl_proc *proc_for(struct dl_model *m, uint64_t pid, const char *path, double ts)
{
    for (size_t i = m->nprocs; i-- > 0;) {
        if (m->procs[i].pid != pid)
            continue;
        if (!m->procs[i].has_summary)
            return &m->procs[i];
        break; /* it exited: this pid is a new process */
    }
    m->procs = xrealloc(m->procs, (m->nprocs + 1) * sizeof *m->procs);
    struct dl_proc *p = &m->procs[m->nprocs++];
    *p = (struct dl_proc){ .pid = pid, .log = xstrdup(path), .first_ts = ts };
    return p;
}

static struct dl_exec *exec_new(struct dl_proc *p, const char *handle)
{
    p->execs = xrealloc(p->execs, (p->nexecs + 1) * sizeof *p->execs);
    struct dl_exec *e = &p->execs[p->nexecs++];
    *e = (struct dl_exec){ .handle = xstrdup(handle) };
    return e;
}

/* The live exec with this handle, or a new one (the log may start late). */
static struct dl_exec *exec_for(struct dl_proc *p, const char *handle)
{
    for (size_t i = p->nexecs; i-- > 0;) {
        if (strcmp(p->execs[i].handle, handle) != 0)
            continue;
        if (!p->execs[i].destroyed)
            return &p->execs[i];
        break;
    }
    return exec_new(p, handle);
}

static void add_counters(struct dl_exec *e, const struct vj *ev)
{
    uint64_t v;
    e->counted = true;
    if (vj_get_u64(ev, "setparams_seen", &v))
        e->c.seen += v;
    if (vj_get_u64(ev, "setparams_skipped", &v))
        e->c.skipped += v;
    if (vj_get_u64(ev, "setparams_forwarded", &v))
        e->c.forwarded += v;
    if (vj_get_u64(ev, "transition_updates", &v))
        e->c.transition += v;
    if (vj_get_u64(ev, "launches", &v))
        e->c.launches += v;
    if (vj_get_u64(ev, "rebinds", &v))
        e->c.rebinds += v;
    if (vj_get_u64(ev, "rebind_waits", &v))
        e->c.rebind_waits += v;
}

static void on_decision(struct dl_exec *e, struct vj *ev)
{
    e->decisions++;
    set_str(&e->state, ev, "state");
    bool obs = false;
    e->observe = vj_get_bool(ev, "observe", &obs) && obs;
    vj_get_u64(ev, "launches", &e->profiled_launches);
    vj_get_u64(ev, "reserved_bytes", &e->reserved_bytes);
    take(ev, "candidates", &e->candidates);
    take(ev, "costs_ns", &e->costs);
    take(ev, "unstable", &e->unstable);
    counts_free(&e->verdicts);
    e->selected = e->rejected = 0;
    if (e->candidates.type != VJ_ARR)
        return;
    for (size_t i = 0; i < e->candidates.n; i++) {
        const char *verdict = "unknown";
        vj_get_str(&e->candidates.items[i], "verdict", &verdict);
        count(&e->verdicts, verdict, 1);
        if (dl_verdict_selected(verdict))
            e->selected++;
        else
            e->rejected++;
    }
}

static void on_event(struct dl_model *m, struct vj *ev, const char *event, uint64_t pid,
                     const char *path)
{
    double ts = 0;
    vj_get_num(ev, "ts", &ts);
    struct dl_proc *p = proc_for(m, pid, path, ts);
    p->events++;
    const char *handle = NULL;
    bool has_exec = vj_get_str(ev, "exec", &handle);

    if (strcmp(event, "start") == 0) {
        p->started = true;
        set_str(&p->mode, ev, "mode");
        vj_get_u64(ev, "profile_launches", &p->profile_launches);
        vj_get_i64(ev, "driver_version", &p->driver_version);
        vj_get_bool(ev, "vmm_supported", &p->vmm_supported);
    } else if (strcmp(event, "summary") == 0) {
        p->has_summary = true;
        vj_free(&p->summary);
        p->summary = *ev;
        *ev = (struct vj){ 0 };
    } else if (strcmp(event, "fallback") == 0) {
        const char *what = "?", *reason = "?";
        vj_get_str(ev, "what", &what);
        vj_get_str(ev, "reason", &reason);
        size_t n = strlen(what) + strlen(reason) + 3;
        char *key = xrealloc(NULL, n);
        snprintf(key, n, "%s: %s", what, reason);
        count(&p->fallbacks, key, 1);
        free(key);
    } else if (has_exec && strcmp(event, "exec_instantiated") == 0) {
        struct dl_exec *old = exec_for(p, handle);
        struct dl_exec *e = old->instantiated || old->decisions ? exec_new(p, handle) : old;
        if (e != old)
            old->destroyed = true; /* the driver reused a handle we never saw go */
        e->instantiated = true;
        vj_get_u64(ev, "kernel_nodes", &e->kernel_nodes);
        vj_get_u64(ev, "opaque_nodes", &e->opaque_nodes);
    } else if (has_exec && strcmp(event, "profile_decision") == 0) {
        on_decision(exec_for(p, handle), ev);
    } else if (has_exec && strcmp(event, "slice_rebind") == 0) {
        struct dl_exec *e = exec_for(p, handle);
        bool waited = false;
        e->rebind_events++;
        if (vj_get_bool(ev, "waited", &waited) && waited)
            e->rebinds_waited++;
    } else if (has_exec && strcmp(event, "exec_reset") == 0) {
        struct dl_exec *e = exec_for(p, handle);
        add_counters(e, ev);
        e->resets++;
        free(e->state);
        e->state = NULL; /* profiling again */
    } else if (has_exec && strcmp(event, "exec_destroyed") == 0) {
        struct dl_exec *e = exec_for(p, handle);
        add_counters(e, ev);
        e->destroyed = true;
    } else if (has_exec && strcmp(event, "setparams_forwarded") == 0) {
        const char *why = "unknown";
        vj_get_str(ev, "reason", &why);
        count(&exec_for(p, handle)->forward_reasons, why, 1);
    }
    /* Any other event: counted for the process, nothing more. */
}

/* ---- files ------------------------------------------------------------- */

static void bad(struct dl_model *m, struct dl_file *f, size_t line, const char *why)
{
    m->bads = xrealloc(m->bads, (m->nbads + 1) * sizeof *m->bads);
    m->bads[m->nbads++] = (struct dl_bad){ xstrdup(f->path), line, xstrdup(why) };
    f->bad++;
}

static void read_line(struct dl_model *m, struct dl_file *f, size_t lineno, char *text,
                      size_t len, bool complete)
{
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        len--;
    size_t start = 0;
    while (start < len && (text[start] == ' ' || text[start] == '\t'))
        start++;
    if (start == len)
        return; /* blank */
    char err[200];
    struct vj ev;
    if (vj_parse(text, len, &ev, err, sizeof err) != 0) {
        char why[260];
        snprintf(why, sizeof why, "%s%s", complete ? "" : "truncated (no newline): ", err);
        bad(m, f, lineno, why);
        return;
    }
    const char *event;
    uint64_t pid;
    if (ev.type != VJ_OBJ)
        bad(m, f, lineno, "not a JSON object");
    else if (!vj_get_str(&ev, "event", &event))
        bad(m, f, lineno, "no \"event\" string");
    else if (!vj_get_u64(&ev, "pid", &pid))
        bad(m, f, lineno, "no \"pid\" number");
    else {
        char *name = xstrdup(event);
        on_event(m, &ev, name, pid, f->path);
        free(name);
        f->lines++;
        m->events++;
    }
    vj_free(&ev);
}

int dl_read(struct dl_model *m, const char *path, off_t from)
{
    m->files = xrealloc(m->files, (m->nfiles + 1) * sizeof *m->files);
    struct dl_file *f = &m->files[m->nfiles++];
    *f = (struct dl_file){ .path = xstrdup(path) };
    FILE *in = fopen(path, "rb");
    if (!in) {
        f->err = errno;
        return -f->err;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    off_t at = 0;
    ssize_t n;
    errno = 0;
    while ((n = getline(&line, &cap, in)) > 0) {
        lineno++;
        off_t begin = at;
        at += n;
        if (begin < from)
            continue;
        read_line(m, f, lineno, line, (size_t)n, line[n - 1] == '\n');
    }
    int rc = ferror(in) ? (errno ? errno : EIO) : 0;
    free(line);
    fclose(in);
    f->err = rc;
    return -rc;
}

static int by_time(const void *a, const void *b)
{
    const struct dl_proc *x = a, *y = b;
    if (x->first_ts != y->first_ts)
        return x->first_ts < y->first_ts ? -1 : 1;
    return 0;
}

void dl_finish(struct dl_model *m)
{
    /* qsort is not stable: break ties by the original order. */
    for (size_t i = 1; i < m->nprocs; i++) {
        struct dl_proc p = m->procs[i];
        size_t j = i;
        while (j > 0 && by_time(&m->procs[j - 1], &p) > 0) {
            m->procs[j] = m->procs[j - 1];
            j--;
        }
        m->procs[j] = p;
    }
}

void dl_free(struct dl_model *m)
{
    for (size_t i = 0; i < m->nprocs; i++) {
        struct dl_proc *p = &m->procs[i];
        for (size_t j = 0; j < p->nexecs; j++) {
            struct dl_exec *e = &p->execs[j];
            free(e->handle);
            free(e->state);
            vj_free(&e->candidates);
            vj_free(&e->costs);
            vj_free(&e->unstable);
            counts_free(&e->verdicts);
            counts_free(&e->forward_reasons);
        }
        free(p->execs);
        free(p->log);
        free(p->mode);
        counts_free(&p->fallbacks);
        vj_free(&p->summary);
    }
    free(m->procs);
    for (size_t i = 0; i < m->nfiles; i++)
        free(m->files[i].path);
    free(m->files);
    for (size_t i = 0; i < m->nbads; i++) {
        free(m->bads[i].file);
        free(m->bads[i].why);
    }
    free(m->bads);
    *m = (struct dl_model){ 0 };
}

uint64_t dl_summary_u64(const struct dl_proc *p, const char *key)
{
    uint64_t v = 0;
    if (p->has_summary)
        vj_get_u64(&p->summary, key, &v);
    return v;
}
