#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void cli_env_set(struct cli_env *e, const char *fmt, ...)
{
    char *entry;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&entry, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    const char *eq = strchr(entry, '=');
    size_t klen = eq ? (size_t)(eq - entry) + 1 : strlen(entry);
    for (size_t i = 0; i < e->n; i++) {
        if (strncmp(e->v[i], entry, klen) == 0) {
            free(e->v[i]);
            e->v[i] = entry;
            return;
        }
    }
    if (e->n + 1 >= sizeof e->v / sizeof e->v[0])
        abort();
    e->v[e->n++] = entry;
    e->v[e->n] = NULL;
}

const char *cli_tmpdir(void)
{
    return vr_tmp_path("tmp");
}

void cli_env_init(struct cli_env *e)
{
    *e = (struct cli_env){ .n = 0 };
    const char *path = getenv("PATH");
    cli_env_set(e, "PATH=%s", path && *path ? path : "/usr/bin:/bin");
    cli_env_set(e, "LD_LIBRARY_PATH=%s", vr_env_path("VR_SIMCUDA_DIR"));
    cli_env_set(e, "VR_PTX=%s", vr_env_path("VR_PTX"));
    /* The suite's kernel path and the scenarios' kernel extent
     * (tests/e2e/meson.build), passed on as the e2e harness does: without
     * VR_EXTENT the interpreted kernels cover every byte of every buffer. */
    const char *kernels = getenv("SIMCUDA_KERNELS");
    if (kernels)
        cli_env_set(e, "SIMCUDA_KERNELS=%s", kernels);
    const char *extent = getenv("VR_EXTENT");
    if (extent)
        cli_env_set(e, "VR_EXTENT=%s", extent);
    mkdir(cli_tmpdir(), 0700);
    cli_env_set(e, "TMPDIR=%s", cli_tmpdir());
    const char *asan = getenv("ASAN_OPTIONS");
    cli_env_set(e, "ASAN_OPTIONS=%s%sverify_asan_link_order=0:detect_leaks=0", asan ? asan : "",
                asan && *asan ? ":" : "");
    const char *ubsan = getenv("UBSAN_OPTIONS");
    if (ubsan)
        cli_env_set(e, "UBSAN_OPTIONS=%s", ubsan);
}

void cli_env_free(struct cli_env *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    e->n = 0;
}

const char *cli_app(const char *name)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s", vr_env_path("VR_APPS_DIR"), name);
    static char buf[8][1024];
    static unsigned next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s", rel);
    return b;
}

void cli_run(const char *tag, const char *const *argv, const struct cli_env *e, struct vr_proc *p)
{
    int rc = vr_spawn(tag, (char *const *)argv, e->v, strchr(argv[0], '/') == NULL, p);
    if (rc != 0) {
        fprintf(stderr, "cli: cannot start %s: %s\n", argv[0], strerror(-rc));
        abort();
    }
}

size_t cli_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

bool cli_has_row(const struct vr_buf *text, const char *want)
{
    const char *p = text->p, *end = text->p + text->len;
    char line[4096];
    while (p && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        size_t o = 0;
        bool space = false;
        for (size_t i = 0; i < len && o + 2 < sizeof line; i++) {
            char c = p[i];
            if (c == ' ' || c == '\t') {
                space = o > 0;
                continue;
            }
            if (space)
                line[o++] = ' ';
            space = false;
            line[o++] = c;
        }
        line[o] = '\0';
        if (strcmp(line, want) == 0)
            return true;
        p = nl ? nl + 1 : end;
    }
    return false;
}

void cli_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cli: cannot write %s: %s\n", path, strerror(errno));
        abort();
    }
}
