/* The README against the code: every setting of src/config.c's table (with
 * its default, also in conf/varemap.conf), every option of `varemap --help`
 * and every knob of simcuda's table is documented, and the sections a new
 * user looks for are there. One added without its documentation fails here. */
#include <criterion/criterion.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

TestSuite(cli_docs, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

static struct vr_buf readme, conf;

static void read_source(const char *rel, struct vr_buf *b)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", vr_env_path("VR_SOURCE_ROOT"), rel);
    cr_assert(vr_read_file(path, b), "cannot read %s", path);
}

/* A copy of the README section under "## heading", up to the next one. */
static char *section(const char *heading)
{
    char want[256];
    snprintf(want, sizeof want, "\n## %s\n", heading);
    const char *s = strstr(readme.p, want);
    cr_assert(s, "README has no section \"## %s\"", heading);
    s += strlen(want);
    const char *e = strstr(s, "\n## ");
    size_t n = e ? (size_t)(e - s) : strlen(s);
    char *copy = strndup(s, n);
    cr_assert(copy);
    return copy;
}

struct setting {
    char name[64];
    char def[32]; /* empty: no default value */
};

/* The settings table of src/config.c: `{ "VAREMAP_X", "default" | NULL, ...`. */
static size_t config_settings(struct setting *out, size_t cap)
{
    struct vr_buf src;
    read_source("src/config.c", &src);
    const char *t = strstr(src.p, "settings[] = {");
    cr_assert(t, "src/config.c: no settings table");
    const char *end = strstr(t, "\n};");
    cr_assert(end);
    size_t n = 0;
    for (const char *s = t; (s = strstr(s, "{ \"VAREMAP_")) && s < end; s++) {
        cr_assert_lt(n, cap);
        struct setting *st = &out[n++];
        cr_assert_eq(sscanf(s, "{ \"%63[A-Z_]\"", st->name), 1);
        const char *d = strchr(s + 3, ',');
        cr_assert(d);
        d++;
        while (*d == ' ')
            d++;
        st->def[0] = '\0';
        if (*d == '"')
            sscanf(d, "\"%31[^\"]\"", st->def);
    }
    vr_buf_free(&src);
    return n;
}

Test(cli_docs, every_setting_is_in_the_readme_and_the_config_file)
{
    read_source("README.md", &readme);
    read_source("conf/varemap.conf", &conf);
    struct setting set[32];
    size_t n = config_settings(set, 32);
    cr_assert_geq(n, 9, "only %zu settings found in src/config.c", n);
    char *modes = section("Modes and settings");
    for (size_t i = 0; i < n; i++) {
        char row[128];
        snprintf(row, sizeof row, "\n| `%s` |", set[i].name);
        const char *r = strstr(modes, row);
        cr_expect(r, "README's settings table has no row for %s", set[i].name);
        if (r && set[i].def[0]) {
            /* the row's last cell is the default */
            const char *eol = strchr(r + 1, '\n');
            size_t len = eol ? (size_t)(eol - r) : strlen(r);
            char cell[64];
            snprintf(cell, sizeof cell, "| `%s` |", set[i].def);
            size_t cl = strlen(cell);
            cr_expect(len > cl && strncmp(r + len - cl, cell, cl) == 0,
                      "README gives %s a default other than %s: %.*s", set[i].name, set[i].def,
                      (int)len - 1, r + 1);
        }
        if (strcmp(set[i].name, "VAREMAP_CONFIG") == 0)
            continue; /* a config file cannot name another */
        char key[64], line[128];
        const char *upper = set[i].name + strlen("VAREMAP_");
        size_t k = 0;
        for (; upper[k] && k + 1 < sizeof key; k++)
            key[k] = (char)tolower((unsigned char)upper[k]);
        key[k] = '\0';
        snprintf(line, sizeof line, "\n%s = %s", key, set[i].def);
        char commented[140];
        snprintf(commented, sizeof commented, "\n#%s = %s", key, set[i].def);
        cr_expect(strstr(conf.p, line) || strstr(conf.p, commented),
                  "conf/varemap.conf has no \"%s = %s\" line", key, set[i].def);
    }
    free(modes);
    vr_buf_free(&conf);
    vr_buf_free(&readme);
}

Test(cli_docs, every_option_of_the_command_is_in_the_readme)
{
    read_source("README.md", &readme);
    struct cli_env e;
    cli_env_init(&e);
    const char *const argv[] = { vr_env_path("VR_VAREMAP"), "--help", NULL };
    struct vr_proc p;
    cli_run("help", argv, &e, &p);
    cr_assert_eq(p.status, 0);
    char *use = section("Using it on a real program");
    size_t n = 0;
    for (const char *s = p.out.p; (s = strstr(s, " --")); s++) {
        char opt[40], want[48];
        if (sscanf(s + 1, "%39[-a-z]", opt) != 1 || strlen(opt) < 3)
            continue;
        snprintf(want, sizeof want, "`%s", opt);
        cr_expect(strstr(use, want), "README's \"Using it on a real program\" lacks %s", opt);
        n++;
    }
    cr_assert_geq(n, 8, "only %zu options in --help:\n%s", n, p.out.p);
    free(use);
    vr_proc_free(&p);
    cli_env_free(&e);
    vr_buf_free(&readme);
}

/* The top README names every knob of simcuda's own table. */
Test(cli_docs, every_simcuda_knob_is_named)
{
    read_source("README.md", &readme);
    struct vr_buf sim;
    read_source("tests/simcuda/README.md", &sim);
    size_t n = 0;
    for (const char *s = sim.p; (s = strstr(s, "\n| `SIMCUDA_")); s++) {
        char knob[64], want[72];
        if (sscanf(s, "\n| `%63[A-Z_]`", knob) != 1)
            continue;
        snprintf(want, sizeof want, "`%s`", knob);
        cr_expect(strstr(readme.p, want), "README does not name %s", knob);
        n++;
    }
    cr_assert_geq(n, 8, "only %zu knobs in tests/simcuda/README.md's table", n);
    vr_buf_free(&sim);
    vr_buf_free(&readme);
}

/* What a new user reads, in this order, and the hook -> exec -> slice ->
 * driver diagram. */
Test(cli_docs, the_readme_has_its_sections)
{
    read_source("README.md", &readme);
    static const char *const heads[] = {
        "The two commands", "Installing", "Using it on a real program", "Modes and settings",
        "The decision log", "How it works", "Benchmarks", "Known limits", "Troubleshooting",
    };
    const char *prev = readme.p;
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "\n## %s\n", heads[i]);
        const char *h = strstr(readme.p, want);
        cr_expect(h, "README has no \"## %s\"", heads[i]);
        cr_expect(!h || h > prev, "README: \"## %s\" is out of order", heads[i]);
        if (h)
            prev = h;
    }
    cr_expect(strstr(readme.p, "SKIP_PROFILED"), "README: no word on XLA's SKIP_PROFILED");
    char *how = section("How it works");
    static const char *const boxes[] = { "\n  hook ", "\n  exec ", "\n  slice ", "\n  driver " };
    const char *at = how;
    for (size_t i = 0; i < sizeof boxes / sizeof boxes[0]; i++) {
        const char *b = strstr(at, boxes[i]);
        cr_expect(b, "the diagram lacks \"%s\" after the previous box", boxes[i] + 3);
        if (b)
            at = b;
    }
    free(how);
    vr_buf_free(&readme);
}
