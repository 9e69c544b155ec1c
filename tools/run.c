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
#include <unistd.h>

#include "dlog.h"
#include "report.h"

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

/* <prefix>/<libdir>/libvaremap_shim.so, the prefix being where this
 * program's <bindir> lies. */
static int installed_shim(char *out, size_t cap, char *cand, size_t candcap)
{
    char exe[PATH_MAX];
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
        snprintf(cand, candcap, "%s/%s", VR_LIBDIR, VR_SHIM_NAME);
    else
        snprintf(cand, candcap, "%s/%s/%s", prefix, VR_LIBDIR, VR_SHIM_NAME);
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

static int start_child(char **argv, pid_t *pid, int *exec_err)
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

static int wait_child(pid_t pid, int *status)
{
    for (;;) {
        if (waitpid(pid, status, 0) == pid)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
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

int run_program(const struct run_opts *o)
{
    char shim[PATH_MAX], why[PATH_MAX * 2 + 64];
    if (run_find_shim(o->shim, shim, sizeof shim, why, sizeof why) != 0) {
        fprintf(stderr, "varemap: cannot find %s (%s); pass --shim PATH or set VAREMAP_SHIM\n",
                VR_SHIM_NAME, why);
        return RUN_EXIT_FAILED;
    }
    const char *old = getenv("LD_PRELOAD");
    size_t plen = strlen(shim) + (old ? strlen(old) : 0) + 2;
    char *preload = malloc(plen);
    if (!preload) {
        fputs("varemap: out of memory\n", stderr);
        return RUN_EXIT_FAILED;
    }
    snprintf(preload, plen, "%s%s%s", shim, old && *old ? ":" : "", old && *old ? old : "");
    int bad = set("LD_PRELOAD", preload);
    free(preload);
    if (o->mode)
        bad |= set("VAREMAP_MODE", o->mode);
    if (o->profile_launches)
        bad |= set("VAREMAP_PROFILE_LAUNCHES", o->profile_launches);
    if (o->stats)
        bad |= set("VAREMAP_STATS", "1");
    if (o->log)
        bad |= set("VAREMAP_LOG", o->log);
    if (bad)
        return RUN_EXIT_FAILED;

    /* Which log the summary reads: the user's (only what this run appends),
     * else a private one removed afterwards. */
    char user_log[PATH_MAX * 2] = "", private_dir[PATH_MAX] = "", pattern[PATH_MAX * 4] = "";
    struct snapshot before = { 0 };
    if (!o->quiet) {
        const char *env = getenv("VAREMAP_LOG");
        const char *conf = getenv("VAREMAP_CONFIG");
        if (env && *env)
            snprintf(user_log, sizeof user_log, "%s", env);
        else if (conf && *conf)
            config_log(conf, user_log, sizeof user_log);
        if (user_log[0]) {
            log_glob(user_log, pattern, sizeof pattern);
            snap_take(&before, pattern);
        } else {
            const char *tmp = getenv("TMPDIR");
            snprintf(private_dir, sizeof private_dir, "%s/varemap.XXXXXX",
                     tmp && *tmp ? tmp : "/tmp");
            if (!mkdtemp(private_dir)) {
                fprintf(stderr, "varemap: warning: cannot create a temporary directory for the "
                                "log (%s): no summary\n", strerror(errno));
                private_dir[0] = '\0';
            } else {
                char log[PATH_MAX + 32];
                snprintf(log, sizeof log, "%s/log-%%p.jsonl", private_dir);
                if (set("VAREMAP_LOG", log) != 0) {
                    remove_dir(private_dir);
                    return RUN_EXIT_FAILED;
                }
                snprintf(pattern, sizeof pattern, "%s/log-*.jsonl", private_dir);
            }
        }
    }

    pid_t pid = -1;
    int exec_err = 0;
    int rc = start_child(o->argv, &pid, &exec_err);
    if (rc != 0) {
        fprintf(stderr, "varemap: cannot start %s: %s\n", o->argv[0], strerror(-rc));
        if (private_dir[0])
            remove_dir(private_dir);
        snap_free(&before);
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
    rc = wait_child(pid, &status);
    int code;
    if (rc != 0) {
        fprintf(stderr, "varemap: waiting for %s: %s\n", o->argv[0], strerror(-rc));
        code = RUN_EXIT_FAILED;
    } else if (exec_err) {
        fprintf(stderr, "varemap: cannot run %s: %s\n", o->argv[0], strerror(exec_err));
        code = exec_err == ENOENT ? RUN_EXIT_NOT_FOUND : RUN_EXIT_CANNOT_EXEC;
    } else if (WIFSIGNALED(status)) {
        code = 128 + WTERMSIG(status);
        if (!o->quiet)
            fprintf(stderr, "varemap: %s was killed by signal %d (%s)\n", o->argv[0],
                    WTERMSIG(status), strsignal(WTERMSIG(status)));
    } else {
        code = WEXITSTATUS(status);
    }

    if (!o->quiet && !exec_err && pattern[0]) {
        struct dl_model m = { 0 };
        read_logs(&m, pattern, &before);
        dl_finish(&m);
        report_bad(stderr, &m, "varemap");
        const char *level = getenv("VAREMAP_LOG_LEVEL");
        bool quiet_level = level && (!strcasecmp(level, "error") || !strcasecmp(level, "warn"));
        if (m.events == 0)
            fprintf(stderr, "varemap: no decision log was written: %s made no CUDA driver call "
                            "the shim saw%s\n",
                    o->argv[0], quiet_level ? " (or VAREMAP_LOG_LEVEL is below info)" : "");
        else
            report_brief(stderr, &m,
                         user_log[0] ? "varemap report LOG lists them all"
                                     : "keep the log with --log PATH, then varemap report PATH");
        dl_free(&m);
    }
    if (private_dir[0])
        remove_dir(private_dir);
    snap_free(&before);
    return code;
}
