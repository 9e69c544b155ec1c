#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

unsigned vr_spawn_timeout_s;

bool vr_read_file(const char *path, struct vr_buf *b)
{
    *b = (struct vr_buf){ 0 };
    FILE *f = fopen(path, "rb");
    if (!f) {
        b->p = calloc(1, 1);
        return false;
    }
    size_t cap = 4096;
    char *p = malloc(cap);
    size_t len = 0, got;
    while (p && (got = fread(p + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len == 1) {
            char *q = realloc(p, cap * 2);
            if (!q)
                free(p);
            p = q;
            cap *= 2;
        }
    }
    bool ok = p && !ferror(f);
    fclose(f);
    if (!p) {
        b->p = calloc(1, 1);
        return false;
    }
    p[len] = '\0';
    b->p = p;
    b->len = len;
    return ok;
}

void vr_buf_free(struct vr_buf *b)
{
    free(b->p);
    *b = (struct vr_buf){ 0 };
}

const char *vr_env_path(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "harness: %s is not set (run the suite through meson test)\n", name);
        abort();
    }
    return v;
}

/* ---- scratch directory ---- */

static char tmp_dir[512];
struct path_node {
    struct path_node *next;
    char path[];
};
static struct path_node *paths;

void vr_tmp_setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/vr_e2e.XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmp_dir)) {
        perror("harness: mkdtemp");
        abort();
    }
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    remove(path);
    return 0;
}

void vr_tmp_teardown(void)
{
    if (tmp_dir[0] && !getenv("VR_KEEP_TMP"))
        nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    else if (tmp_dir[0])
        fprintf(stderr, "harness: kept %s\n", tmp_dir);
    while (paths) {
        struct path_node *n = paths;
        paths = n->next;
        free(n);
    }
    tmp_dir[0] = '\0';
}

const char *vr_tmp_path(const char *name)
{
    if (!tmp_dir[0]) {
        fprintf(stderr, "harness: vr_tmp_setup was not called\n");
        abort();
    }
    size_t n = strlen(tmp_dir) + strlen(name) + 2;
    struct path_node *p = malloc(sizeof *p + n);
    if (!p)
        abort();
    snprintf(p->path, n, "%s/%s", tmp_dir, name);
    p->next = paths;
    paths = p;
    return p->path;
}

static const char *tmp_fmt(const char *tag, const char *suffix)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", tag, suffix);
    return vr_tmp_path(name);
}

/* ---- processes ---- */

int vr_spawn(const char *tag, char *const argv[], char *const env[], bool search,
             struct vr_proc *p)
{
    *p = (struct vr_proc){ .status = -1 };
    const char *out = tmp_fmt(tag, "stdout");
    const char *err = tmp_fmt(tag, "stderr");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = search ? posix_spawnp(&pid, argv[0], &fa, NULL, argv, env)
                    : posix_spawn(&pid, argv[0], &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        vr_read_file(out, &p->out);
        vr_read_file(err, &p->err);
        return -rc;
    }
    int st;
    /* With a limit, polled: no signal handler of the test process is involved. */
    struct timespec nap = { 0, 2 * 1000 * 1000 };
    unsigned long naps = 0, limit = vr_spawn_timeout_s * 500ul;
    for (;;) {
        pid_t got = waitpid(pid, &st, vr_spawn_timeout_s && !p->timed_out ? WNOHANG : 0);
        if (got == pid)
            break;
        if (got < 0 && errno != EINTR)
            return -errno;
        if (got == 0 && naps++ >= limit) {
            kill(pid, SIGKILL);
            p->timed_out = true;
        } else if (got == 0) {
            nanosleep(&nap, NULL);
        }
    }
    p->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    vr_read_file(out, &p->out);
    vr_read_file(err, &p->err);
    return 0;
}

void vr_proc_free(struct vr_proc *p)
{
    vr_buf_free(&p->out);
    vr_buf_free(&p->err);
}

struct strv {
    char *v[96];
    size_t n;
};

static void strv_add(struct strv *s, const char *str)
{
    if (s->n + 1 >= sizeof s->v / sizeof s->v[0]) {
        fprintf(stderr, "harness: too many arguments\n");
        abort();
    }
    s->v[s->n] = strdup(str);
    if (!s->v[s->n])
        abort();
    s->v[++s->n] = NULL;
}

/* Replaces an existing NAME= entry, so the test's own entries win. */
static void env_set(struct strv *s, const char *entry)
{
    const char *eq = strchr(entry, '=');
    size_t klen = eq ? (size_t)(eq - entry) + 1 : strlen(entry);
    for (size_t i = 0; i < s->n; i++) {
        if (!strncmp(s->v[i], entry, klen)) {
            free(s->v[i]);
            s->v[i] = strdup(entry);
            if (!s->v[i])
                abort();
            return;
        }
    }
    strv_add(s, entry);
}

static void env_set2(struct strv *s, const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 2;
    char *e = malloc(n);
    if (!e)
        abort();
    snprintf(e, n, "%s=%s", name, value);
    env_set(s, e);
    free(e);
}

static void strv_free(struct strv *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    s->n = 0;
}

static void base_env(struct strv *e)
{
    /* SIMCUDA_KERNELS: a run of the suites can choose how the standard
     * kernels run (host versions, to compare timings); VR_EXTENT: how much
     * of each buffer the graph_* scenarios' kernels cover (meson.build). */
    static const char *const keep[] = { "PATH", "HOME", "TMPDIR", "UBSAN_OPTIONS",
                                        "LSAN_OPTIONS", "MSAN_OPTIONS", "SIMCUDA_KERNELS",
                                        "VR_EXTENT" };
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        const char *v = getenv(keep[i]);
        if (v)
            env_set2(e, keep[i], v);
    }
    /* Under -Db_sanitize=address the preloaded shim comes before libasan in
     * the library list; that is the point of the exercise, not an error. */
    const char *asan = getenv("ASAN_OPTIONS");
    char opt[1024];
    snprintf(opt, sizeof opt, "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    env_set2(e, "ASAN_OPTIONS", opt);
}

static bool parse_final(struct vr_run *r)
{
    const char *s = r->proc.out.p;
    if (!s)
        return false;
    const char *line = strstr(s, "steps=");
    const char *next;
    while (line && (next = strstr(line + 1, "\nsteps=")) != NULL)
        line = next + 1;
    if (!line)
        return false;
    return sscanf(line, "steps=%llu launches=%llu setparams=%llu checksum=%39s", &r->steps,
                  &r->launches, &r->setparams, r->checksum) == 4;
}

const char *const *vr_shim_env;

int vr_run_app(const char *tag, const char *app, const char *const *args, unsigned flags,
               const char *const *env, struct vr_run *r)
{
    *r = (struct vr_run){ 0 };
    const char *bin = tmp_fmt(tag, "bin");
    const char *map = tmp_fmt(tag, "map");
    const char *log = tmp_fmt(tag, "log");
    const char *stats = tmp_fmt(tag, "stats");
    unlink(bin), unlink(map), unlink(log), unlink(stats);

    char path[1024];
    snprintf(path, sizeof path, "%s/%s", vr_env_path("VR_APPS_DIR"), app);
    struct strv argv = { .n = 0 }, e = { .n = 0 };
    strv_add(&argv, path);
    bool is_scenario = strncmp(app, "graph_", 6) == 0;
    if (is_scenario) {
        strv_add(&argv, "--out");
        strv_add(&argv, bin);
        strv_add(&argv, "--map");
        strv_add(&argv, map);
    }
    for (size_t i = 0; args && args[i]; i++)
        strv_add(&argv, args[i]);

    base_env(&e);
    env_set2(&e, "LD_LIBRARY_PATH", vr_env_path("VR_SIMCUDA_DIR"));
    env_set2(&e, "VR_PTX", vr_env_path("VR_PTX"));
    env_set2(&e, "SIMCUDA_STATS", stats);
    if (flags & VR_RUN_SHIM) {
        env_set2(&e, "LD_PRELOAD", vr_env_path("VR_SHIM"));
        /* The suites' 1 MiB buffers carry 1 MiB of padding on simcuda's 2 MiB
         * granularity; they stay VMM-backed unless a test names a ratio. */
        env_set2(&e, "VAREMAP_MAX_PADDING_RATIO", "1");
        if (!(flags & VR_RUN_NOLOG))
            env_set2(&e, "VAREMAP_LOG", log);
        for (size_t i = 0; vr_shim_env && vr_shim_env[i]; i++)
            env_set(&e, vr_shim_env[i]);
    }
    for (size_t i = 0; env && env[i]; i++)
        env_set(&e, env[i]);

    int rc = vr_spawn(tag, argv.v, e.v, false, &r->proc);
    strv_free(&argv);
    strv_free(&e);
    vr_read_file(bin, &r->bytes);
    vr_read_file(map, &r->map);
    vr_read_file(log, &r->log);
    vr_read_file(stats, &r->stats);
    r->parsed = parse_final(r);
    return rc;
}

void vr_run_free(struct vr_run *r)
{
    vr_proc_free(&r->proc);
    vr_buf_free(&r->bytes);
    vr_buf_free(&r->map);
    vr_buf_free(&r->log);
    vr_buf_free(&r->stats);
}

/* ---- text ---- */

/* Calls fn for each line (without its '\n') until it returns false. */
static void each_line(const struct vr_buf *t, bool (*fn)(const char *, size_t, void *), void *arg)
{
    const char *p = t->p, *end = t->p + t->len;
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (!fn(p, len, arg))
            return;
        p = nl ? nl + 1 : end;
    }
}

struct prefix_ctx {
    const char *const *needles;
    const char *prefix;
    size_t count;
};

static bool count_prefix(const char *line, size_t len, void *arg)
{
    struct prefix_ctx *c = arg;
    size_t n = strlen(c->prefix);
    if (len >= n && !memcmp(line, c->prefix, n))
        c->count++;
    return true;
}

size_t vr_count_lines(const struct vr_buf *text, const char *prefix)
{
    struct prefix_ctx c = { .prefix = prefix };
    each_line(text, count_prefix, &c);
    return c.count;
}

static bool count_with(const char *line, size_t len, void *arg)
{
    struct prefix_ctx *c = arg;
    for (size_t i = 0; c->needles[i]; i++)
        if (!memmem(line, len, c->needles[i], strlen(c->needles[i])))
            return true;
    c->count++;
    return true;
}

size_t vr_count_lines_with(const struct vr_buf *text, const char *const *needles)
{
    struct prefix_ctx c = { .needles = needles };
    each_line(text, count_with, &c);
    return c.count;
}

/* ---- JSON ---- */

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
        p++;
    return p;
}

/* Start of the value of "key" (after the colon), or NULL. */
static const char *json_value(const char *line, size_t len, const char *key)
{
    char pat[128];
    int n = snprintf(pat, sizeof pat, "\"%s\"", key);
    if (n < 0 || (size_t)n >= sizeof pat)
        return NULL;
    const char *p = line, *end = line + len;
    while (p < end) {
        const char *hit = memmem(p, (size_t)(end - p), pat, (size_t)n);
        if (!hit)
            return NULL;
        const char *v = skip_ws(hit + n, end);
        if (v < end && *v == ':')
            return skip_ws(v + 1, end);
        p = hit + 1;
    }
    return NULL;
}

/* Digits at p (hex and 0x allowed with base 0); chars consumed, 0 if none. */
static size_t parse_u64(const char *p, const char *end, int base, uint64_t *v)
{
    char tmp[40];
    size_t n = 0;
    while (p + n < end && n + 1 < sizeof tmp &&
           ((p[n] >= '0' && p[n] <= '9') || (base == 0 && strchr("xXabcdefABCDEF", p[n]))))
        n++;
    if (n == 0)
        return 0;
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    char *stop;
    errno = 0;
    unsigned long long x = strtoull(tmp, &stop, base);
    if (errno || *stop)
        return 0;
    *v = x;
    return n;
}

bool vr_json_u64(const char *line, size_t len, const char *key, uint64_t *v)
{
    const char *p = json_value(line, len, key), *end = line + len;
    if (!p || p >= end)
        return false;
    if (*p == '"') {
        const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
        size_t n = q ? parse_u64(p + 1, q, 0, v) : 0;
        return n && p + 1 + n == q;
    }
    size_t n = parse_u64(p, end, 10, v);
    /* 1.5 or 1e3 is not a counter */
    return n && (p + n == end || !strchr(".eE", p[n]));
}

bool vr_json_str(const char *line, size_t len, const char *key, char *out, size_t cap)
{
    const char *p = json_value(line, len, key), *end = line + len;
    if (!p || p >= end || *p != '"' || cap == 0)
        return false;
    const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
    if (!q || (size_t)(q - p - 1) >= cap)
        return false;
    memcpy(out, p + 1, (size_t)(q - p - 1));
    out[q - p - 1] = '\0';
    return true;
}

struct event_ctx {
    const char *event;
    size_t nth, seen;
    const char *line;
    size_t len;
};

static bool match_event(const char *line, size_t len, void *arg)
{
    struct event_ctx *c = arg;
    char ev[64];
    if (!vr_json_str(line, len, "event", ev, sizeof ev) || strcmp(ev, c->event))
        return true;
    if (c->seen++ == c->nth) {
        c->line = line;
        c->len = len;
        return false;
    }
    return true;
}

size_t vr_log_count(const struct vr_buf *log, const char *event)
{
    struct event_ctx c = { .event = event, .nth = (size_t)-1 };
    each_line(log, match_event, &c);
    return c.seen;
}

const char *vr_log_event(const struct vr_buf *log, const char *event, size_t nth, size_t *len)
{
    struct event_ctx c = { .event = event, .nth = nth };
    each_line(log, match_event, &c);
    if (len)
        *len = c.len;
    return c.line;
}

uint64_t vr_log_sum(const struct vr_buf *log, const char *event, const char *key)
{
    uint64_t sum = 0, v;
    size_t len;
    const char *line;
    for (size_t i = 0; (line = vr_log_event(log, event, i, &len)) != NULL; i++)
        if (vr_json_u64(line, len, key, &v))
            sum += v;
    return sum;
}

bool vr_summary(const struct vr_buf *log, const char *key, uint64_t *v)
{
    size_t n = vr_log_count(log, "summary"), len;
    if (n == 0)
        return false;
    const char *line = vr_log_event(log, "summary", n - 1, &len);
    return line && vr_json_u64(line, len, key, v);
}

long vr_candidates(const char *line, size_t len, struct vr_cand *c, size_t cap)
{
    const char *end = line + len;
    const char *p = json_value(line, len, "candidates");
    if (!p || p >= end || *p != '[')
        return -1;
    long n = 0;
    p++;
    for (;;) {
        p = skip_ws(p, end);
        if (p < end && *p == ',')
            p = skip_ws(p + 1, end);
        if (p >= end)
            return -1;
        if (*p == ']')
            return n;
        if (*p != '{')
            return -1;
        const char *q = memchr(p, '}', (size_t)(end - p));
        if (!q)
            return -1;
        struct vr_cand k = { 0 };
        size_t olen = (size_t)(q - p + 1);
        if (!vr_json_u64(p, olen, "ptr", &k.ptr) || !vr_json_u64(p, olen, "size", &k.size) ||
            !vr_json_u64(p, olen, "anchors", &k.anchors) ||
            !vr_json_str(p, olen, "verdict", k.verdict, sizeof k.verdict))
            return -1;
        if ((size_t)n < cap)
            c[n] = k;
        n++;
        p = q + 1;
    }
}

uint64_t vr_sim_calls(const struct vr_buf *stats, const char *name)
{
    uint64_t v = 0;
    if (!stats->p || !vr_json_u64(stats->p, stats->len, name, &v))
        return 0;
    return v;
}

bool vr_sim_ok(const struct vr_buf *stats)
{
    return stats->p && json_value(stats->p, stats->len, "calls") != NULL;
}

struct map_ctx {
    const char *name, *role;
    uint64_t *ptrs;
    size_t cap, n;
};

static bool map_line(const char *line, size_t len, void *arg)
{
    struct map_ctx *c = arg;
    char l[256], name[64], role[64];
    unsigned long long ptr, size;
    if (len >= sizeof l)
        return true;
    memcpy(l, line, len);
    l[len] = '\0';
    if (sscanf(l, "buf %63s %llx %llu %63s", name, &ptr, &size, role) != 4)
        return true;
    if ((c->name && strcmp(c->name, name)) || (c->role && strcmp(c->role, role)))
        return true;
    if (c->n < c->cap)
        c->ptrs[c->n] = ptr;
    c->n++;
    return true;
}

size_t vr_map_ptrs(const struct vr_buf *map, const char *name, const char *role, uint64_t *ptrs,
                   size_t cap)
{
    struct map_ctx c = { .name = name, .role = role, .ptrs = ptrs, .cap = cap };
    each_line(map, map_line, &c);
    return c.n;
}
