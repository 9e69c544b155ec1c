/* `meson install --destdir`: the full set where a distribution puts it,
 * and the installed command running a scenario with the installed library. */
#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

TestSuite(cli_install, .init = vr_tmp_setup, .fini = vr_tmp_teardown, .timeout = 240);

static char dest[PATH_MAX];

/* <destdir><absolute install dir>/<name> */
static const char *installed(const char *dir_var, const char *name)
{
    static char buf[8][PATH_MAX * 2];
    static unsigned next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s%s%s%s", dest, vr_env_path(dir_var), *name ? "/" : "", name);
    return b;
}

static void same_file(const char *a, const char *b)
{
    struct vr_buf x, y;
    cr_assert(vr_read_file(a, &x), "cannot read %s", a);
    cr_assert(vr_read_file(b, &y), "cannot read %s", b);
    cr_assert(x.len == y.len && memcmp(x.p, y.p, x.len) == 0, "%s differs from %s", a, b);
    vr_buf_free(&x);
    vr_buf_free(&y);
}

static void install(struct cli_env *e)
{
    snprintf(dest, sizeof dest, "%s", vr_tmp_path("dest"));
    const char *meson = getenv("VR_MESON");
    const char *const argv[] = { meson && *meson ? meson : "meson", "install", "-C",
                                 vr_env_path("VR_BUILD_ROOT"), "--no-rebuild", "--destdir", dest,
                                 NULL };
    struct vr_proc p;
    cli_run("install", argv, e, &p);
    cr_assert_eq(p.status, 0, "meson install failed:\n%s\n%s", p.out.p, p.err.p);
    vr_proc_free(&p);
}

Test(cli_install, installs_the_full_set_and_the_command_runs_a_scenario)
{
    struct cli_env e;
    cli_env_init(&e);
    install(&e);

    const char *lib = installed("VR_LIBDIR", "libvaremap_shim.so");
    const char *cmd = installed("VR_BINDIR", "varemap");
    const char *pc = installed("VR_LIBDIR", "pkgconfig/varemap.pc");
    char src[PATH_MAX];
    struct stat st;
    cr_assert_eq(stat(lib, &st), 0, "no %s", lib);
    cr_assert_eq(stat(cmd, &st), 0, "no %s", cmd);
    cr_assert(S_ISREG(st.st_mode) && (st.st_mode & 0111), "%s is not a program", cmd);
    cr_assert_eq(stat(pc, &st), 0, "no %s", pc);
    snprintf(src, sizeof src, "%s/include/varemap/varemap.h", vr_env_path("VR_SOURCE_ROOT"));
    same_file(installed("VR_INCLUDEDIR", "varemap/varemap.h"), src);
    snprintf(src, sizeof src, "%s/conf/varemap.conf", vr_env_path("VR_SOURCE_ROOT"));
    same_file(installed("VR_SYSCONFDIR", "varemap.conf"), src);

    /* The command needs nothing but libc (and a sanitizer's runtime in
     * those builds), and no build-tree run path. */
    const char *const re[] = { "readelf", "-d", cmd, NULL };
    struct vr_proc p;
    cli_run("readelf", re, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    for (const char *s = p.out.p; (s = strstr(s, "(NEEDED)")); s++) {
        const char *lb = strchr(s, '[');
        cr_assert(lb);
        cr_assert(!strncmp(lb, "[libc.so.6]", 11) || !strncmp(lb, "[libasan", 8) ||
                      !strncmp(lb, "[libubsan", 9) || !strncmp(lb, "[libm.so", 8),
                  "unexpected dependency %.40s", lb);
    }
    cr_assert_null(strstr(p.out.p, vr_env_path("VR_BUILD_ROOT")), "build path in:\n%s", p.out.p);
    vr_proc_free(&p);

    /* pkg-config: where the shim is for preloading, and the include path. */
    char pcdir[PATH_MAX * 2];
    snprintf(pcdir, sizeof pcdir, "%s", installed("VR_LIBDIR", "pkgconfig"));
    cli_env_set(&e, "PKG_CONFIG_PATH=%s", pcdir);
    const char *const pv[] = { "pkg-config", "--variable=shim", "varemap", NULL };
    cli_run("pkgvar", pv, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    char want[PATH_MAX * 2];
    snprintf(want, sizeof want, "%s/libvaremap_shim.so\n", vr_env_path("VR_LIBDIR"));
    cr_assert_str_eq(p.out.p, want);
    vr_proc_free(&p);
    const char *const pf[] = { "pkg-config", "--cflags", "--libs", "varemap", NULL };
    cli_run("pkgflags", pf, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    if (strcmp(vr_env_path("VR_INCLUDEDIR"), "/usr/include") != 0) {
        snprintf(want, sizeof want, "-I%s", vr_env_path("VR_INCLUDEDIR"));
        cr_assert(strstr(p.out.p, want), "no %s in: %s", want, p.out.p);
    }
    cr_assert_null(strstr(p.out.p, "-l"), "nothing to link: %s", p.out.p);
    vr_proc_free(&p);

    /* A program compiles against the installed header. */
    const char *c = vr_tmp_path("uses_header.c");
    cli_write(c, "#include <varemap/varemap.h>\n"
                 "int main(void) { struct varemap_stats s; return varemap_get_stats(&s, sizeof s) != 0 &&\n"
                 "    VAREMAP_STATS_VERSION == 1; }\n");
    char inc[PATH_MAX * 2];
    snprintf(inc, sizeof inc, "-I%s", installed("VR_INCLUDEDIR", ""));
    const char *const cc[] = { "cc", "-std=c11", "-Wall", "-Werror", "-fsyntax-only", inc, c, NULL };
    cli_run("cc", cc, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    vr_proc_free(&p);

    /* The installed command finds the library installed beside it. */
    char shim_real[PATH_MAX];
    cr_assert(realpath(lib, shim_real));
    const char *const v[] = { cmd, "--version", NULL };
    cli_run("iversion", v, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    snprintf(want, sizeof want, "varemap %s\nshim: %s\n", vr_env_path("VR_VERSION"), shim_real);
    cr_assert_str_eq(p.out.p, want);
    vr_proc_free(&p);

    const char *const pre[] = { cmd, "--quiet", "printenv", "LD_PRELOAD", NULL };
    cli_run("ipreload", pre, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    snprintf(want, sizeof want, "%s\n", shim_real);
    cr_assert_str_eq(p.out.p, want);
    vr_proc_free(&p);

    /* A scenario through the installed command: same bytes as without the
     * shim, the installed shim preloaded, a summary at exit. */
    static const char *const args[] = { "--pattern", "mixed", "--steps", "16", "--bytes", "2097152",
                                        NULL };
    struct vr_run plain;
    cr_assert_eq(vr_run_app("iplain", "graph_linked", args, 0, NULL, &plain), 0);
    cr_assert_eq(plain.proc.status, 0, "%s", plain.proc.err.p);
    char app[PATH_MAX];
    snprintf(app, sizeof app, "%s/graph_linked", vr_env_path("VR_APPS_DIR"));
    const char *out = vr_tmp_path("installed.bin"), *log = vr_tmp_path("installed.jsonl");
    const char *const run[] = { cmd, "--log", log, "--", app, "--out", out, args[0], args[1],
                                args[2], args[3], args[4], args[5], NULL };
    cli_run("irun", run, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    cr_assert_str_eq(p.out.p, plain.proc.out.p);
    struct vr_buf bytes;
    cr_assert(vr_read_file(out, &bytes));
    cr_assert(bytes.len == plain.bytes.len && bytes.len > 0 &&
              memcmp(bytes.p, plain.bytes.p, bytes.len) == 0, "output bytes differ");
    vr_buf_free(&bytes);
    cr_assert_eq(vr_count_lines(&p.err, "varemap: pid "), 1, "%s", p.err.p);
    cr_assert(strstr(p.err.p, ", mode profiled: "), "%s", p.err.p);
    cr_assert(strstr(p.err.p, ": active; buffers "), "%s", p.err.p);
    struct vr_buf lb;
    cr_assert(vr_read_file(log, &lb));
    uint64_t skipped;
    cr_assert(vr_summary(&lb, "setparams_skipped", &skipped));
    cr_assert_gt(skipped, 0, "the installed shim absorbed nothing");
    vr_buf_free(&lb);
    vr_proc_free(&p);

    /* --sim finds the simulated driver and runtime installed beside it,
     * with nothing on LD_LIBRARY_PATH. */
    const char *simdir = installed("VR_LIBDIR", "varemap/sim");
    char lib_path[PATH_MAX * 3];
    snprintf(lib_path, sizeof lib_path, "%s/libcuda.so.1", simdir);
    cr_assert_eq(stat(lib_path, &st), 0, "no %s", lib_path);
    snprintf(lib_path, sizeof lib_path, "%s/libcudart.so.13", simdir);
    cr_assert_eq(stat(lib_path, &st), 0, "no %s", lib_path);
    char sim_real[PATH_MAX];
    cr_assert(realpath(simdir, sim_real));
    cli_env_set(&e, "LD_LIBRARY_PATH=");
    const char *const sim[] = { cmd, "--sim", "--output", out, "--", app, "--out", out, args[0],
                                args[1], args[2], args[3], args[4], args[5], NULL };
    cli_run("isim", sim, &e, &p);
    cr_assert_eq(p.status, 0, "%s\n%s", p.out.p, p.err.p);
    snprintf(want, sizeof want, "varemap: --sim: simulated driver from %s\n", sim_real);
    cr_assert(strncmp(p.out.p, want, strlen(want)) == 0, "want %s in:\n%s", want, p.out.p);
    cr_assert(strstr(p.out.p, " node updates absorbed ("), "%s", p.out.p);
    size_t n = p.out.len;
    while (n > 0 && p.out.p[n - 1] == '\n')
        n--;
    const char *last = p.out.p + n;
    while (last > p.out.p && last[-1] != '\n')
        last--;
    cr_assert(strstr(last, "identical"), "last line: %s", last);
    vr_proc_free(&p);
    cli_env_set(&e, "LD_LIBRARY_PATH=%s", vr_env_path("VR_SIMCUDA_DIR"));

    const char *const rep[] = { cmd, "report", log, NULL };
    cli_run("ireport", rep, &e, &p);
    cr_assert_eq(p.status, 0, "%s", p.err.p);
    cr_assert(strstr(p.out.p, "varemap report: 1 log, 1 process, "), "%s", p.out.p);
    vr_proc_free(&p);

    vr_run_free(&plain);
    cli_env_free(&e);
}
