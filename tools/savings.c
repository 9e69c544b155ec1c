#include "savings.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "prices_builtin.h" /* vr_builtin_prices: conf/cost-model.conf's lines */

/* ---- prices ---------------------------------------------------------------- */

static int prices_add(struct prices *p, const char *name, size_t len, uint64_t ns)
{
    char **names = realloc(p->names, (p->n + 1) * sizeof *names);
    if (!names)
        return -1;
    p->names = names;
    uint64_t *v = realloc(p->ns, (p->n + 1) * sizeof *v);
    if (!v)
        return -1;
    p->ns = v;
    if (!(p->names[p->n] = strndup(name, len)))
        return -1;
    p->ns[p->n++] = ns;
    return 0;
}

/* Lines "name ns  # comment"; blank and '#' lines skipped. A line of
 * another shape is an error naming it, as a price silently lost would
 * change the answer. */
static int prices_parse(struct prices *p, const char *text, char *err, size_t errcap)
{
    size_t lineno = 0;
    for (const char *s = text; *s;) {
        const char *end = strchr(s, '\n');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        lineno++;
        const char *c = memchr(s, '#', n);
        size_t m = c ? (size_t)(c - s) : n;
        size_t i = 0;
        while (i < m && isspace((unsigned char)s[i]))
            i++;
        if (i < m) {
            size_t name = i;
            while (i < m && !isspace((unsigned char)s[i]))
                i++;
            size_t name_len = i - name;
            while (i < m && isspace((unsigned char)s[i]))
                i++;
            uint64_t ns = 0;
            size_t digits = 0;
            while (i < m && isdigit((unsigned char)s[i]) && ns < UINT64_MAX / 10) {
                ns = ns * 10 + (uint64_t)(s[i++] - '0');
                digits++;
            }
            while (i < m && isspace((unsigned char)s[i]))
                i++;
            if (!digits || i < m) {
                snprintf(err, errcap, "line %zu: expected \"name ns\"", lineno);
                return -1;
            }
            if (prices_add(p, s + name, name_len, ns) != 0) {
                snprintf(err, errcap, "out of memory");
                return -1;
            }
        }
        s += n + (end ? 1 : 0);
    }
    return 0;
}

int prices_load(struct prices *p, const char *path, char *err, size_t errcap)
{
    memset(p, 0, sizeof *p);
    if (!path) {
        snprintf(p->source, sizeof p->source, "the built-in model, conf/cost-model.conf: an H200's");
        for (size_t i = 0; vr_builtin_prices[i]; i++)
            if (prices_parse(p, vr_builtin_prices[i], err, errcap) != 0)
                return -1;
        return 0;
    }
    snprintf(p->source, sizeof p->source, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errcap, "%s", strerror(errno));
        return -1;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    int rc = mem ? 0 : -1;
    char buf[8192];
    size_t got;
    while (mem && (got = fread(buf, 1, sizeof buf, f)) > 0)
        if (fwrite(buf, 1, got, mem) != got)
            rc = -1;
    if (ferror(f))
        rc = -1;
    fclose(f);
    if (mem)
        fclose(mem);
    if (rc != 0) {
        snprintf(err, errcap, "cannot read it");
        free(text);
        return -1;
    }
    rc = prices_parse(p, text, err, errcap);
    free(text);
    return rc;
}

void prices_free(struct prices *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->names[i]);
    free(p->names);
    free(p->ns);
    memset(p, 0, sizeof *p);
}

/* The price of an entry point; false when the model has none. */
static bool price_of(const struct prices *p, const char *name, uint64_t *ns)
{
    for (size_t i = p->n; i-- > 0;) /* the last line wins */
        if (strcmp(p->names[i], name) == 0) {
            *ns = p->ns[i];
            return true;
        }
    return false;
}

static uint64_t price_or0(const struct prices *p, const char *name)
{
    uint64_t ns = 0;
    return price_of(p, name, &ns) ? ns : 0;
}

/* ---- call counts ------------------------------------------------------------- */

int calls_read(struct calls *c, const char *stats_path)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(stats_path, "r");
    if (!f)
        return -errno;
    char *text = NULL;
    size_t cap = 0;
    ssize_t len = getdelim(&text, &cap, '\0', f);
    fclose(f);
    if (len <= 0) {
        free(text);
        return -EINVAL;
    }
    struct vj root;
    char err[128];
    int rc = vj_parse(text, (size_t)len, &root, err, sizeof err);
    free(text);
    if (rc != 0)
        return -EINVAL;
    const struct vj *calls = vj_get(&root, "calls");
    rc = -EINVAL;
    if (calls && calls->type == VJ_OBJ) {
        c->names = calloc(calls->n ? calls->n : 1, sizeof *c->names);
        c->n = calloc(calls->n ? calls->n : 1, sizeof *c->n);
        rc = c->names && c->n ? 0 : -ENOMEM;
        for (size_t i = 0; rc == 0 && i < calls->n; i++) {
            if (!calls->items[i].is_u64)
                continue;
            if (!(c->names[c->count] = strdup(calls->keys[i]))) {
                rc = -ENOMEM;
                break;
            }
            c->n[c->count++] = calls->items[i].u64;
        }
    }
    vj_free(&root);
    if (rc != 0)
        calls_free(c);
    return rc;
}

void calls_free(struct calls *c)
{
    for (size_t i = 0; i < c->count; i++)
        free(c->names[i]);
    free(c->names);
    free(c->n);
    memset(c, 0, sizeof *c);
}

static uint64_t calls_of(const struct calls *c, const char *name)
{
    for (size_t i = 0; i < c->count; i++)
        if (strcmp(c->names[i], name) == 0)
            return c->n[i];
    return 0;
}

/* ---- the lines ----------------------------------------------------------------- */

/* "12.3 us" or "4.56 ms" for ns (negative: as is). */
static void human_ns(char *out, size_t cap, double ns)
{
    double a = ns < 0 ? -ns : ns;
    if (a >= 1e9)
        snprintf(out, cap, "%.2f s", ns / 1e9);
    else if (a >= 1e6)
        snprintf(out, cap, "%.2f ms", ns / 1e6);
    else
        snprintf(out, cap, "%.2f us", ns / 1e3);
}

static void saved_or_spent(char *out, size_t cap, double ns)
{
    char h[32];
    human_ns(h, sizeof h, ns < 0 ? -ns : ns);
    snprintf(out, cap, "%s %s", h, ns < 0 ? "spent" : "saved");
}

struct contrib {
    const char *name;
    int64_t calls;
    double ns;
};

static int by_weight(const void *a, const void *b)
{
    double x = ((const struct contrib *)a)->ns, y = ((const struct contrib *)b)->ns;
    x = x < 0 ? -x : x;
    y = y < 0 ? -y : y;
    return (x < y) - (x > y);
}

static void per_exec(FILE *f, const struct prices *p, const struct dl_model *m)
{
    uint64_t sp = price_or0(p, "cuGraphExecKernelNodeSetParams_v2");
    uint64_t remap = price_or0(p, "cuMemUnmap") + price_or0(p, "cuMemMap") +
                     price_or0(p, "cuMemSetAccess");
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct dl_proc *pr = &m->procs[i];
        for (size_t j = 0; j < pr->nexecs; j++) {
            const struct dl_exec *e = &pr->execs[j];
            if (!e->counted || e->c.launches == 0)
                continue;
            double l = (double)e->c.launches;
            double ns = (double)e->c.skipped * (double)sp - (double)e->c.rebinds * (double)remap;
            char s[64];
            saved_or_spent(s, sizeof s, ns / l);
            fprintf(f, "varemap:   exec %s (pid %" PRIu64 "): %.1f node updates absorbed per "
                       "launch, %.2f remaps; %s per launch over %" PRIu64 " launches\n",
                    e->handle, pr->pid, (double)e->c.skipped / l, (double)e->c.rebinds / l, s,
                    e->c.launches);
        }
    }
}

void savings_print(FILE *f, const struct prices *p, const struct calls *without,
                   const struct calls *with, const struct dl_model *m)
{
    if (!without || !with)
        return; /* simcuda never loaded (no CUDA program): nothing to price */
    fprintf(f, "varemap: what the shim would save at the cost model's prices (%s):\n", p->source);
    per_exec(f, p, m);
    /* Every entry point either run called, each delta priced. */
    size_t cap = without->count + with->count, n = 0;
    struct contrib *v = calloc(cap ? cap : 1, sizeof *v);
    if (!v)
        return;
    const struct calls *both[2] = { without, with };
    int64_t calls = 0;
    double ns = 0;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < both[k]->count; i++) {
            const char *name = both[k]->names[i];
            bool seen = false;
            for (size_t j = 0; j < n && !seen; j++)
                seen = strcmp(v[j].name, name) == 0;
            if (seen)
                continue;
            int64_t d = (int64_t)calls_of(without, name) - (int64_t)calls_of(with, name);
            if (d == 0)
                continue;
            v[n].name = name;
            v[n].calls = d;
            v[n].ns = (double)d * (double)price_or0(p, name);
            calls += d;
            ns += v[n].ns;
            n++;
        }
    uint64_t launches = calls_of(with, "cuGraphLaunch") + calls_of(with, "cuGraphLaunch_ptsz");
    char s[64];
    saved_or_spent(s, sizeof s, ns);
    fprintf(f, "varemap:   in all: %" PRId64 " driver calls avoided, %s", calls, s);
    if (launches) {
        char pl[64];
        saved_or_spent(pl, sizeof pl, ns / (double)launches);
        fprintf(f, "; per graph launch (%" PRIu64 "): %.1f calls avoided, %s", launches,
                (double)calls / (double)launches, pl);
    }
    fputc('\n', f);
    qsort(v, n, sizeof *v, by_weight);
    for (size_t i = 0; i < n && i < 4 && v[i].ns != 0; i++) {
        char h[64];
        saved_or_spent(h, sizeof h, v[i].ns);
        fprintf(f, "varemap:     %s: %" PRId64 " %s calls with the shim, %s\n", v[i].name,
                v[i].calls < 0 ? -v[i].calls : v[i].calls, v[i].calls < 0 ? "more" : "fewer", h);
    }
    free(v);
}
