/* fuzz target: the configuration parser.
 *
 * The whole input is the config file (written to a memfd and read back
 * through its /proc path, so the file checks run too); its first line is
 * also the value of one environment variable (chosen by the first byte),
 * and goes through the value parsers directly. Beyond not crashing, the
 * loaded struct must satisfy what config.h promises. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_config: check failed: %s at %s:%d\n", #cond,   \
                    __FILE__, __LINE__);                                         \
            abort();                                                             \
        }                                                                        \
    } while (0)

static const char *const names[] = {
    "VAREMAP_MODE", "VAREMAP_LOG", "VAREMAP_LOG_LEVEL", "VAREMAP_PROFILE_LAUNCHES",
    "VAREMAP_VMM_MIN_BYTES", "VAREMAP_MAX_PADDING", "VAREMAP_STATS",
};
#define NNAMES (sizeof names / sizeof names[0])

static char conf_path[64];
static char value[2 * VR_PATH_MAX + 64];
static const char *value_for; /* the variable that gets `value`; NULL: none */

static const char *fake_getenv(const char *name)
{
    if (strcmp(name, "VAREMAP_CONFIG") == 0)
        return conf_path[0] ? conf_path : NULL;
    if (value_for && strcmp(name, value_for) == 0)
        return value;
    return NULL;
}

static int memfd(void)
{
    static int fd = -1;

    if (fd < 0) {
        fd = memfd_create("varemap-fuzz-conf", MFD_CLOEXEC);
        CHECK(fd >= 0);
        snprintf(conf_path, sizeof conf_path, "/proc/self/fd/%d", fd);
    }
    return fd;
}

static void check_config(const struct vr_config *cfg)
{
    char again[VR_PATH_MAX];

    CHECK((unsigned)cfg->mode <= VR_MODE_PROFILED);
    CHECK((unsigned)cfg->log_level <= VR_LEVEL_DEBUG);
    CHECK(cfg->profile_launches >= 1 && cfg->profile_launches <= 1000);
    CHECK(memchr(cfg->log_path, '\0', sizeof cfg->log_path) != NULL);
    CHECK(memchr(cfg->log_pattern, '\0', sizeof cfg->log_pattern) != NULL);
    if (cfg->log_path[0]) {
        /* The path is the pattern's expansion, and an expansion is
         * never a prefix trick: the same pattern expands the same way. */
        CHECK(vr_expand_path(cfg->log_pattern, 4242, again, sizeof again) == 0);
        CHECK(strcmp(again, cfg->log_path) == 0);
    }
}

static void value_parsers(const char *text)
{
    char out[VR_PATH_MAX];
    uint64_t bytes = 777;

    if (vr_parse_size(text, &bytes) != 0)
        CHECK(bytes == 777); /* output written only on success */
    if (vr_expand_path(text, 12345, out, sizeof out) == 0) {
        CHECK(strlen(out) < sizeof out);
        if (!vr_path_has_pid(text))
            CHECK(strlen(out) <= strlen(text));
    }
    (void)vr_path_has_pid(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct vr_config cfg;
    int fd = memfd();
    size_t line = 0;

    CHECK(ftruncate(fd, 0) == 0);
    CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);

    /* The first line (bytes 1.. up to '\n' or NUL) as a variable's value. */
    while (1 + line < size && line < sizeof value - 1 && data[1 + line] != '\n' &&
           data[1 + line] != '\0')
        line++;
    if (size > 0) {
        memcpy(value, data + 1, line);
        value[line] = '\0';
        value_for = data[0] % (NNAMES + 1) < NNAMES ? names[data[0] % (NNAMES + 1)] : NULL;
        value_parsers(value);
    } else {
        value_for = NULL;
    }

    memset(&cfg, 0xa5, sizeof cfg);
    CHECK(vr_config_load(&cfg, fake_getenv, 4242) >= 0);
    check_config(&cfg);
    return 0;
}
