#include "run.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlog.h"
#include "report.h"
#include "savings.h"
#include "simcmp.h"

#ifndef VR_BINDIR
#define VR_BINDIR "bin"
#endif
#ifndef VR_LIBDIR
#define VR_LIBDIR "lib"
#endif
#ifndef VR_SHIM_NAME
#define VR_SHIM_NAME "libvaremap_shim.so"
#endif
#ifndef VR_BUILD_SHIM
#define VR_BUILD_SHIM ""
#endif
#ifndef VR_SIM_SUBDIR
#define VR_SIM_SUBDIR "varemap/sim"
#endif
#ifndef VR_BUILD_SIM
#define VR_BUILD_SIM ""
#endif
#define SIM_DRIVER "libcuda.so.1"

/* ---- finding the shim --------------------------------------------------- */

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void note(char *why, size_t cap, const char *fmt, const char *a)
{
    size_t len = strlen(why);
    if (len < cap)
        snprintf(why + len, cap - len, fmt, a);
}

static int accept_path(const char *path, char *out, size_t cap)
{
    char abs[PATH_MAX];
    if (!is_file(path) || !realpath(path, abs) || strlen(abs) >= cap)
        return -1;
    strcpy(out, abs);
    return 0;
}

/* <prefix>/<libdir>/<rel>, the prefix being where this program's <bindir>
 * lies: what `meson install` put beside the command. */
static int installed_path(const char *rel, char *cand, size_t candcap)
{
    char exe[PATH_MAX];
    if (candcap)
        cand[0] = '\0';
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0'; /* exe is now the directory */
    const char *bindir = VR_BINDIR;
    size_t dl = strlen(exe), bl = strlen(bindir);
    char prefix[PATH_MAX + 8];
    if (bindir[0] != '/' && dl > bl && exe[dl - bl - 1] == '/' && strcmp(exe + dl - bl, bindir) == 0)
        snprintf(prefix, sizeof prefix, "%.*s", (int)(dl - bl - 1), exe);
    else
        snprintf(prefix, sizeof prefix, "%s/..", exe); /* bindir moved: assume one level */
    if (VR_LIBDIR[0] == '/')
        snprintf(cand, candcap, "%s/%s", VR_LIBDIR, rel);
    else
        snprintf(cand, candcap, "%s/%s/%s", prefix, VR_LIBDIR, rel);
    return 0;
}

static int installed_shim(char *out, size_t cap, char *cand, size_t candcap)
{
    if (installed_path(VR_SHIM_NAME, cand, candcap) != 0)
        return -1;
    return accept_path(cand, out, cap);
}

int run_find_shim(const char *explicit_path, char *out, size_t cap, char *why, size_t whycap)
{
    if (whycap)
        why[0] = '\0';
    if (explicit_path) {
        if (accept_path(explicit_path, out, cap) == 0)
            return 0;
        note(why, whycap, "--shim %s: no such file", explicit_path);
        return -1;
    }
    const char *env = getenv("VAREMAP_SHIM");
    if (env && *env) {
        if (accept_path(env, out, cap) == 0)
            return 0;
        note(why, whycap, "VAREMAP_SHIM=%s: no such file", env);
        return -1;
    }
    char cand[PATH_MAX + 64];
    if (installed_shim(out, cap, cand, sizeof cand) == 0)
        return 0;
    note(why, whycap, "not at %s", cand);
    if (VR_BUILD_SHIM[0]) {
        if (accept_path(VR_BUILD_SHIM, out, cap) == 0)
            return 0;
        note(why, whycap, " nor at %s", VR_BUILD_SHIM);
    }
    return -1;
}

/* A directory list (':'-separated) is the simulated driver's when one of
 * its directories holds libcuda.so.1; simcudart beside it is optional, as
 * a build without zstd has none. Writes the list with absolute paths. */
static int accept_sim(const char *dirs, char *out, size_t cap)
{
    char list[PATH_MAX * 2];
    snprintf(list, sizeof list, "%s", dirs);
    size_t len = 0;
    bool driver = false;
    out[0] = '\0';
    for (char *save = NULL, *d = strtok_r(list, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char abs[PATH_MAX], lib[PATH_MAX + 16];
        if (!realpath(d, abs))
            continue;
        snprintf(lib, sizeof lib, "%s/%s", abs, SIM_DRIVER);
        driver |= is_file(lib);
        int w = snprintf(out + len, cap - len, "%s%s", len ? ":" : "", abs);
        if (w < 0 || (size_t)w >= cap - len)
            return -1;
        len += (size_t)w;
    }
    return driver ? 0 : -1;
}

int run_find_sim(const char *explicit_dir, char *out, size_t cap, char *why, size_t whycap)
{
    if (whycap)
        why[0] = '\0';
    if (explicit_dir) {
        if (accept_sim(explicit_dir, out, cap) == 0)
            return 0;
        note(why, whycap, "no " SIM_DRIVER " in --sim-dir %s", explicit_dir);
        return -1;
    }
    const char *env = getenv("VAREMAP_SIM_DIR");
    if (env && *env) {
        if (accept_sim(env, out, cap) == 0)
            return 0;
        note(why, whycap, "no " SIM_DRIVER " in VAREMAP_SIM_DIR=%s", env);
        return -1;
    }
    char cand[PATH_MAX + 64];
    if (installed_path(VR_SIM_SUBDIR, cand, sizeof cand) == 0 && accept_sim(cand, out, cap) == 0)
        return 0;
    note(why, whycap, "no " SIM_DRIVER " in %s", cand[0] ? cand : "the install tree");
    if (VR_BUILD_SIM[0]) {
        if (accept_sim(VR_BUILD_SIM, out, cap) == 0)
            return 0;
        note(why, whycap, " nor in %s", VR_BUILD_SIM);
    }
    return -1;
}

/* ---- the decision log ----------------------------------------------------- */

/* The `log` key of the VAREMAP_CONFIG file, as the shim would read it
 * (keys in any case, with or without the varemap_ prefix; the last wins;
 * '#' starts a comment at the start or after whitespace). */
static bool config_log(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char *line = NULL;
    size_t lcap = 0;
    bool found = false;
    while (getline(&line, &lcap, f) > 0) {
        for (char *p = line; *p; p++) {
            if (*p == '#' && (p == line || isspace((unsigned char)p[-1]))) {
                *p = '\0';
                break;
            }
        }
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *k = line, *v = eq + 1;
        while (isspace((unsigned char)*k))
            k++;
        for (char *e = k + strlen(k); e > k && isspace((unsigned char)e[-1]);)
            *--e = '\0';
        while (isspace((unsigned char)*v))
            v++;
        for (char *e = v + strlen(v); e > v && isspace((unsigned char)e[-1]);)
            *--e = '\0';
        if (strcasecmp(k, "log") != 0 && strcasecmp(k, "varemap_log") != 0)
            continue;
        if (*v == '\0')
            continue; /* empty counts as not given */
        snprintf(out, cap, "%s", v);
        found = true;
    }
    free(line);
    fclose(f);
    return found;
}

/* The log path as a glob: %p matches any pid, %% is a '%'. */
static void log_glob(const char *path, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *s = path; *s && n + 3 < cap; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            out[n++] = '*';
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            out[n++] = '%';
            s++;
        } else {
            if (strchr("*?[\\", *s))
                out[n++] = '\\';
            out[n++] = *s;
        }
    }
    out[n] = '\0';
}

/* Files matching the log before the run, with their sizes: after it only
 * what the run appended is read. */
struct snapshot {
    char **paths;
    off_t *sizes;
    size_t n;
};

static void snap_take(struct snapshot *s, const char *pattern)
{
    glob_t g;
    *s = (struct snapshot){ 0 };
    if (glob(pattern, 0, NULL, &g) != 0)
        return;
    s->paths = calloc(g.gl_pathc ? g.gl_pathc : 1, sizeof *s->paths);
    s->sizes = calloc(g.gl_pathc ? g.gl_pathc : 1, sizeof *s->sizes);
    for (size_t i = 0; s->paths && s->sizes && i < g.gl_pathc; i++) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        s->paths[s->n] = strdup(g.gl_pathv[i]);
        if (!s->paths[s->n])
            break;
        s->sizes[s->n++] = st.st_size;
    }
    globfree(&g);
}

static off_t snap_offset(const struct snapshot *s, const char *path, off_t now)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->paths[i], path) == 0)
            return s->sizes[i] <= now ? s->sizes[i] : 0; /* shrunk: rewritten */
    return 0;
}

static void snap_free(struct snapshot *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->paths[i]);
    free(s->paths);
    free(s->sizes);
}

static void read_logs(struct dl_model *m, const char *pattern, const struct snapshot *before)
{
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0)
        return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        off_t from = snap_offset(before, g.gl_pathv[i], st.st_size);
        if (from < st.st_size)
            dl_read(m, g.gl_pathv[i], from);
    }
    globfree(&g);
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *de;
        char path[PATH_MAX];
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

/* ---- the child ----------------------------------------------------------- */

static volatile sig_atomic_t child_pid;

static void forward(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

/* Terminal signals reach the child from the terminal itself; the ones sent
 * to varemap alone are passed on, so the program decides how it ends. */
static const int forwarded[] = { SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGCONT };
static const int ignored[] = { SIGINT, SIGQUIT };

/* fds[i] >= 0 replaces the child's descriptor i (stdin, stdout, stderr). */
static int start_child(char **argv, const int fds_in[3], pid_t *pid, int *exec_err)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -errno;
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return -e;
    }
    if (p == 0) {
        close(fds[0]);
        for (int i = 0; i < 3; i++)
            if (fds_in[i] >= 0 && dup2(fds_in[i], i) < 0)
                _exit(RUN_EXIT_FAILED);
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(fds[1], &e, sizeof e);
        (void)w;
        _exit(RUN_EXIT_NOT_FOUND);
    }
    close(fds[1]);
    child_pid = p;
    int e = 0;
    ssize_t got;
    do {
        got = read(fds[0], &e, sizeof e);
    } while (got < 0 && errno == EINTR);
    close(fds[0]);
    *exec_err = got == (ssize_t)sizeof e ? e : 0;
    *pid = p;
    return 0;
}

/* A --sim run's progress on stderr, from simcuda's SIMCUDA_PROGRESS line:
 * on a terminal, rewritten in place from the first second on and wiped at
 * the end; elsewhere (a CI log) a line every 10 s once the run has taken
 * 10 s, so a short run prints nothing and a long one shows it goes on. */
struct progress {
    const char *path, *label;
    bool tty;
    unsigned printed;  /* lines (tty: updates) printed */
    double next_s;     /* when the next one is due */
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void progress_show(struct progress *pg, double elapsed)
{
    if (elapsed < pg->next_s)
        return;
    pg->next_s = elapsed + (pg->tty ? 0.5 : 10.0);
    unsigned long long ms = 0, launches = 0, kernels = 0;
    FILE *f = fopen(pg->path, "r");
    bool have = f && fscanf(f, "%llu %llu %llu", &ms, &launches, &kernels) == 3;
    if (f)
        fclose(f);
    char line[256];
    if (have)
        snprintf(line, sizeof line, "varemap: %s: %.0f s, %llu graph launches, %llu kernels so far",
                 pg->label, elapsed, launches, kernels);
    else
        snprintf(line, sizeof line, "varemap: %s: %.0f s (no CUDA work seen yet)", pg->label,
                 elapsed);
    if (pg->tty)
        fprintf(stderr, "\r%-100s", line);
    else
        fprintf(stderr, "%s\n", line);
    fflush(stderr);
    pg->printed++;
}

static int wait_child(pid_t pid, int *status, struct progress *pg)
{
    double t0 = pg ? now_s() : 0;
    for (;;) {
        pid_t w = waitpid(pid, status, pg ? WNOHANG : 0);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return -errno;
        if (w == 0 && pg) {
            struct timespec nap = { 0, 100 * 1000 * 1000 };
            nanosleep(&nap, NULL);
            progress_show(pg, now_s() - t0);
        }
    }
    if (pg && pg->tty && pg->printed)
        fprintf(stderr, "\r%-100s\r", "");
    return 0;
}

/* Runs argv to its end and returns its status as varemap reports it:
 * the exit status, 128+N for signal N (*sig = N), or the command's own
 * codes when it could not start (*exec_err then says why). */
static int run_child(char **argv, const int fds[3], int *sig, int *exec_err, struct progress *pg)
{
    pid_t pid = -1;
    *sig = 0;
    *exec_err = 0;
    int rc = start_child(argv, fds, &pid, exec_err);
    if (rc != 0) {
        fprintf(stderr, "varemap: cannot start %s: %s\n", argv[0], strerror(-rc));
        *exec_err = -rc;
        return RUN_EXIT_FAILED;
    }

    struct sigaction fwd = { .sa_handler = forward, .sa_flags = SA_RESTART };
    struct sigaction ign = { .sa_handler = SIG_IGN };
    sigemptyset(&fwd.sa_mask);
    sigemptyset(&ign.sa_mask);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaction(forwarded[i], &fwd, NULL);
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        sigaction(ignored[i], &ign, NULL);

    int status = 0;
    rc = wait_child(pid, &status, pg);
    child_pid = 0;
    if (rc != 0) {
        fprintf(stderr, "varemap: waiting for %s: %s\n", argv[0], strerror(-rc));
        return RUN_EXIT_FAILED;
    }
    if (*exec_err) {
        fprintf(stderr, "varemap: cannot run %s: %s\n", argv[0], strerror(*exec_err));
        return *exec_err == ENOENT ? RUN_EXIT_NOT_FOUND : RUN_EXIT_CANNOT_EXEC;
    }
    if (WIFSIGNALED(status)) {
        *sig = WTERMSIG(status);
        return 128 + *sig;
    }
    return WEXITSTATUS(status);
}

/* ---- the run ------------------------------------------------------------ */

static int set(const char *name, const char *value)
{
    if (setenv(name, value, 1) != 0) {
        fprintf(stderr, "varemap: cannot set %s: %s\n", name, strerror(errno));
        return -1;
    }
    return 0;
}

/* Prepends `dir` to the list variable `name` (LD_PRELOAD, LD_LIBRARY_PATH). */
static int prepend(const char *name, const char *dir)
{
    const char *old = getenv(name);
    size_t plen = strlen(dir) + (old ? strlen(old) : 0) + 2;
    char *v = malloc(plen);
    if (!v) {
        fputs("varemap: out of memory\n", stderr);
        return -1;
    }
    snprintf(v, plen, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
    int bad = set(name, v);
    free(v);
    return bad;
}

static int shim_env(const struct run_opts *o, const char *shim)
{
    int bad = prepend("LD_PRELOAD", shim);
    if (o->mode)
        bad |= set("VAREMAP_MODE", o->mode);
    if (o->profile_launches)
        bad |= set("VAREMAP_PROFILE_LAUNCHES", o->profile_launches);
    if (o->stats)
        bad |= set("VAREMAP_STATS", "1");
    if (o->log)
        bad |= set("VAREMAP_LOG", o->log);
    return bad;
}

static int find_shim(const struct run_opts *o, char *shim, size_t cap)
{
    char why[PATH_MAX * 2 + 64];
    if (run_find_shim(o->shim, shim, cap, why, sizeof why) == 0)
        return 0;
    fprintf(stderr, "varemap: cannot find %s (%s); pass --shim PATH or set VAREMAP_SHIM\n",
            VR_SHIM_NAME, why);
    return -1;
}

/* Which log the summary reads: the user's (only what this run appends),
 * else a private one removed afterwards. */
struct summary_log {
    char user_log[PATH_MAX * 2], private_dir[PATH_MAX], pattern[PATH_MAX * 4];
    struct snapshot before;
};

static int summary_begin(struct summary_log *l)
{
    memset(l, 0, sizeof *l);
    const char *env = getenv("VAREMAP_LOG");
    const char *conf = getenv("VAREMAP_CONFIG");
    if (env && *env)
        snprintf(l->user_log, sizeof l->user_log, "%s", env);
    else if (conf && *conf)
        config_log(conf, l->user_log, sizeof l->user_log);
    if (l->user_log[0]) {
        log_glob(l->user_log, l->pattern, sizeof l->pattern);
        snap_take(&l->before, l->pattern);
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(l->private_dir, sizeof l->private_dir, "%s/varemap.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(l->private_dir)) {
        fprintf(stderr, "varemap: warning: cannot create a temporary directory for the "
                        "log (%s): no summary\n", strerror(errno));
        l->private_dir[0] = '\0';
        return 0;
    }
    char log[PATH_MAX + 32];
    snprintf(log, sizeof log, "%s/log-%%p.jsonl", l->private_dir);
    if (set("VAREMAP_LOG", log) != 0) {
        remove_dir(l->private_dir);
        l->private_dir[0] = '\0';
        return -1;
    }
    snprintf(l->pattern, sizeof l->pattern, "%s/log-*.jsonl", l->private_dir);
    return 0;
}

/* The decision log's summary (report_brief) of what the run appended. */
static void summary_print(const struct summary_log *l, FILE *f, const char *program)
{
    if (!l->pattern[0])
        return;
    struct dl_model m = { 0 };
    read_logs(&m, l->pattern, &l->before);
    dl_finish(&m);
    report_bad(f, &m, "varemap");
    const char *level = getenv("VAREMAP_LOG_LEVEL");
    bool quiet_level = level && (!strcasecmp(level, "error") || !strcasecmp(level, "warn"));
    if (m.events == 0)
        fprintf(f, "varemap: no decision log was written: %s made no CUDA driver call "
                   "the shim saw%s\n",
                program, quiet_level ? " (or VAREMAP_LOG_LEVEL is below info)" : "");
    else
        report_brief(f, &m,
                     l->user_log[0] ? "varemap report LOG lists them all"
                                    : "keep the log with --log PATH, then varemap report PATH");
    dl_free(&m);
}

static void summary_end(struct summary_log *l)
{
    if (l->private_dir[0])
        remove_dir(l->private_dir);
    snap_free(&l->before);
}

int run_program(const struct run_opts *o)
{
    char shim[PATH_MAX];
    if (find_shim(o, shim, sizeof shim) != 0 || shim_env(o, shim) != 0)
        return RUN_EXIT_FAILED;
    struct summary_log l = { 0 };
    if (!o->quiet && summary_begin(&l) != 0)
        return RUN_EXIT_FAILED;

    static const int inherit[3] = { -1, -1, -1 };
    int sig, exec_err;
    int code = run_child(o->argv, inherit, &sig, &exec_err, NULL);
    if (sig && !o->quiet)
        fprintf(stderr, "varemap: %s was killed by signal %d (%s)\n", o->argv[0], sig,
                strsignal(sig));
    if (!o->quiet && !exec_err)
        summary_print(&l, stderr, o->argv[0]);
    summary_end(&l);
    return code;
}

/* ---- --sim: the same program on simcuda without and with the shim -------- */

/* Copies src to dst (created or truncated); rename would not cross from the
 * program's directory to TMPDIR's file system. */
static int copy_file(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -errno;
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0) {
        int e = errno;
        close(in);
        return -e;
    }
    char buf[65536];
    int rc = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : 0;
            break;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                rc = -errno;
                break;
            }
            off += w;
        }
        if (rc)
            break;
    }
    close(in);
    if (close(out) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

struct sim_run {
    int code, sig;
};

static void describe_status(char *buf, size_t cap, const struct sim_run *r)
{
    if (r->sig)
        snprintf(buf, cap, "killed by signal %d (%s)", r->sig, strsignal(r->sig));
    else
        snprintf(buf, cap, "exit status %d", r->code);
}

/* One run with stdin from /dev/null and stdout/stderr into the scratch
 * directory, so both runs read the same input and the program's output
 * never mixes with the command's. */
static int sim_child(const struct run_opts *o, const char *dir, int n, struct sim_run *r)
{
    char out[PATH_MAX + 32], err[PATH_MAX + 32], stats[PATH_MAX + 32];
    snprintf(out, sizeof out, "%s/stdout-%d", dir, n);
    snprintf(err, sizeof err, "%s/stderr-%d", dir, n);
    /* simcuda's call counts of this run, for what the shim would save */
    snprintf(stats, sizeof stats, "%s/stats-%d.json", dir, n);
    char prog[PATH_MAX + 32];
    snprintf(prog, sizeof prog, "%s/progress-%d", dir, n);
    if (set("SIMCUDA_STATS", stats) != 0 || set("SIMCUDA_PROGRESS", prog) != 0)
        return -1;
    struct progress pg = { .path = prog, .label = n == 1 ? "run 1 of 2 (without the shim)"
                                                         : "run 2 of 2 (with the shim)",
                           .tty = isatty(STDERR_FILENO), .next_s = 0 };
    /* VAREMAP_PROGRESS_S: when the first line is due off a terminal */
    const char *after = getenv("VAREMAP_PROGRESS_S");
    pg.next_s = after && *after ? atof(after) : pg.tty ? 1.0 : 10.0;
    int fds[3] = { open("/dev/null", O_RDONLY | O_CLOEXEC),
                   open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600),
                   open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) };
    int exec_err = -1;
    r->code = RUN_EXIT_FAILED;
    if (fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0)
        r->code = run_child(o->argv, fds, &r->sig, &exec_err, &pg);
    else
        fprintf(stderr, "varemap: --sim: cannot create files in %s: %s\n", dir, strerror(errno));
    for (int i = 0; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return exec_err ? -1 : 0;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* What --sim found in one pair of files: the numbers-only lines and the
 * --ignore that would leave them out, before the verdict. */
static void numbers_note(const char *what, const struct simcmp *c)
{
    printf("varemap: %s: only numbers differ, on %zu line%s; the first, line %zu: \"%s\" "
           "without the shim, \"%s\" with it\n", what, c->number_lines,
           c->number_lines == 1 ? "" : "s", c->ex_line, c->ex_a ? c->ex_a : "",
           c->ex_b ? c->ex_b : "");
    char opts[4096] = "";
    size_t len = 0;
    for (size_t i = 0; i < c->nsuggest; i++) {
        char q[1024];
        simcmp_shell_quote(c->suggest[i], q, sizeof q);
        int w = snprintf(opts + len, sizeof opts - len, "%s--ignore %s", i ? " " : "", q);
        if (w < 0 || (size_t)w >= sizeof opts - len)
            break;
        len += (size_t)w;
    }
    printf("varemap: %s would leave %s out of the compare%s\n", opts,
           c->number_lines == 1 ? "it" : "them",
           c->more_suggest ? " (more lines differ: see the kept files)" : "");
}

/* Compares run 1 (saved in dir) with run 2 (in place); writes the verdict
 * line into `line` and returns 0 when everything agrees, 1 when something
 * differs, RUN_EXIT_BOTH_FAILED when the runs agree on a failure. */
static int sim_compare(const struct run_opts *o, const char *dir, const struct sim_run r[2],
                       char *line, size_t cap)
{
    char s1[128], s2[128];
    describe_status(s1, sizeof s1, &r[0]);
    describe_status(s2, sizeof s2, &r[1]);
    if (r[0].code != r[1].code) {
        snprintf(line, cap, "varemap: differs: %s without the shim, %s with it", s1, s2);
        return 1;
    }
    const char *ign = o->nignores ? " (lines matching --ignore left out)" : "";
    for (size_t k = 0; k <= o->noutputs; k++) {
        char a[PATH_MAX + 32], b[PATH_MAX + 32], what[PATH_MAX + 16];
        if (k == 0) {
            snprintf(a, sizeof a, "%s/stdout-1", dir);
            snprintf(b, sizeof b, "%s/stdout-2", dir);
            snprintf(what, sizeof what, "stdout");
        } else {
            snprintf(a, sizeof a, "%s/output-%zu", dir, k);
            snprintf(b, sizeof b, "%s", o->outputs[k - 1]);
            snprintf(what, sizeof what, "--output %s", o->outputs[k - 1]);
        }
        bool ha = exists(a), hb = exists(b);
        if (!ha && !hb) {
            printf("varemap: warning: neither run wrote %s\n", o->outputs[k - 1]);
            continue;
        }
        if (ha != hb) {
            snprintf(line, cap, "varemap: differs: %s: written only by the run %s the shim", what,
                     ha ? "without" : "with");
            return 1;
        }
        struct simcmp c;
        if (simcmp_files(a, b, o->ignore_res, o->nignores, &c) != 0) {
            snprintf(line, cap, "varemap: differs: %s: cannot be read back", what);
            return 1;
        }
        if (!c.differ) {
            simcmp_free(&c);
            continue;
        }
        if (c.numbers_only)
            numbers_note(what, &c);
        if (o->nignores || c.at < 0)
            snprintf(line, cap, "varemap: differs: %s: first difference at line %zu without the "
                                "shim, line %zu with it%s", what, c.line_a, c.line_b, ign);
        else
            snprintf(line, cap, "varemap: differs: %s: first difference at byte %lld "
                                "(%lld bytes without the shim, %lld with it)", what, c.at,
                     c.len_a, c.len_b);
        simcmp_free(&c);
        return 1;
    }
    if (r[0].code != 0) {
        /* Nothing the shim did can be judged from two runs that failed. */
        snprintf(line, cap, "varemap: both runs failed: %s without and with the shim (stdout and "
                            "%zu --output file%s agree%s); a dry run needs a run that succeeds",
                 s1, o->noutputs, o->noutputs == 1 ? "" : "s", ign);
        return RUN_EXIT_BOTH_FAILED;
    }
    snprintf(line, cap, "varemap: identical: %s, stdout and %zu --output file%s agree without "
                        "and with the shim%s", s1, o->noutputs, o->noutputs == 1 ? "" : "s", ign);
    return 0;
}

/* What the shim would have saved, from both runs' simcuda counts and the
 * decision log of the run with it. */
static void sim_savings(const struct run_opts *o, const char *dir, const struct summary_log *l)
{
    struct prices p;
    char err[256];
    if (prices_load(&p, o->prices, err, sizeof err) != 0) {
        printf("varemap: --prices %s: %s; no savings\n", o->prices ? o->prices : "(built-in)", err);
        prices_free(&p);
        return;
    }
    struct calls c[2];
    bool have[2];
    for (int i = 0; i < 2; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/stats-%d.json", dir, i + 1);
        have[i] = calls_read(&c[i], path) == 0;
    }
    struct dl_model m = { 0 };
    if (l->pattern[0])
        read_logs(&m, l->pattern, &l->before);
    dl_finish(&m);
    savings_print(stdout, &p, have[0] ? &c[0] : NULL, have[1] ? &c[1] : NULL, &m);
    dl_free(&m);
    for (int i = 0; i < 2; i++)
        if (have[i])
            calls_free(&c[i]);
    prices_free(&p);
}

int run_sim(const struct run_opts *o)
{
    char shim[PATH_MAX], sim[PATH_MAX * 2], why[PATH_MAX * 3];
    if (find_shim(o, shim, sizeof shim) != 0)
        return RUN_EXIT_FAILED;
    if (run_find_sim(o->sim_dir, sim, sizeof sim, why, sizeof why) != 0) {
        fprintf(stderr, "varemap: --sim: cannot find the simulated driver (%s); pass --sim-dir DIR "
                        "or set VAREMAP_SIM_DIR\n", why);
        return RUN_EXIT_FAILED;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/varemap-sim.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "varemap: --sim: cannot create a temporary directory: %s\n", strerror(errno));
        return RUN_EXIT_FAILED;
    }
    printf("varemap: --sim: simulated driver from %s\n", sim);
    if (prepend("LD_LIBRARY_PATH", sim) != 0) {
        remove_dir(dir);
        return RUN_EXIT_FAILED;
    }

    /* Both runs start from the files as they were: what existed is saved
     * first and put back after the first run; the first run's outputs are
     * kept in the scratch directory, the second run's stay in place. */
    int code = RUN_EXIT_FAILED;
    bool keep = false;
    struct sim_run r[2] = { { 0, 0 }, { 0, 0 } };
    struct summary_log l = { 0 };
    bool *had = calloc(o->noutputs + 1, sizeof *had);
    if (!had)
        goto out;
    for (size_t k = 0; k < o->noutputs; k++) {
        char saved[PATH_MAX + 32];
        snprintf(saved, sizeof saved, "%s/before-%zu", dir, k + 1);
        had[k] = exists(o->outputs[k]);
        int rc = had[k] ? copy_file(o->outputs[k], saved) : 0;
        if (rc != 0) {
            fprintf(stderr, "varemap: --sim: cannot save %s: %s\n", o->outputs[k], strerror(-rc));
            goto out;
        }
    }
    if (sim_child(o, dir, 1, &r[0]) != 0) {
        code = r[0].code;
        printf("varemap: not compared: %s could not be started (exit status %d)\n", o->argv[0],
               code);
        goto out;
    }
    for (size_t k = 0; k < o->noutputs; k++) {
        char kept[PATH_MAX + 32], saved[PATH_MAX + 32];
        snprintf(kept, sizeof kept, "%s/output-%zu", dir, k + 1);
        snprintf(saved, sizeof saved, "%s/before-%zu", dir, k + 1);
        int rc = exists(o->outputs[k]) ? copy_file(o->outputs[k], kept) : 0;
        if (rc == 0 && !had[k] && exists(o->outputs[k]) && unlink(o->outputs[k]) != 0)
            rc = -errno;
        if (rc == 0 && had[k])
            rc = copy_file(saved, o->outputs[k]);
        if (rc != 0) {
            fprintf(stderr, "varemap: --sim: cannot set %s aside: %s\n", o->outputs[k],
                    strerror(-rc));
            goto out;
        }
    }

    struct run_opts with = *o;
    if (!with.mode)
        with.mode = "profiled"; /* the default, whatever the environment says */
    if (shim_env(&with, shim) != 0 || (!o->quiet && summary_begin(&l) != 0))
        goto out;
    if (sim_child(o, dir, 2, &r[1]) != 0) {
        code = r[1].code;
        printf("varemap: not compared: %s could not be started with the shim (exit status %d)\n",
               o->argv[0], code);
        goto out;
    }
    char s1[128], s2[128];
    describe_status(s1, sizeof s1, &r[0]);
    describe_status(s2, sizeof s2, &r[1]);
    printf("varemap: without the shim: %s\n", s1);
    printf("varemap: with the shim (mode %s): %s\n", with.mode, s2);
    if (!o->quiet) {
        summary_print(&l, stdout, o->argv[0]);
        sim_savings(o, dir, &l);
    }
    char line[PATH_MAX * 2];
    code = sim_compare(o, dir, r, line, sizeof line);
    keep = code != 0;
    if (keep)
        printf("varemap: both runs' stdout and stderr, and the first run's --output files, are "
               "kept in %s\n", dir);
    printf("%s\n", line);
out:
    fflush(stdout);
    summary_end(&l);
    free(had);
    if (!keep)
        remove_dir(dir);
    return code;
}
