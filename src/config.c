/* config: the settings table and the three sources that feed it (the
 * value syntax shared by all settings is config_text.c).
 *
 * This runs inside a preloaded library, possibly from the first hooked call
 * on a thread with a small stack, so it uses no stdio and no heap: the file
 * is streamed through fixed buffers on the stack, and every message goes
 * through vr_warn (one write(2) per line).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "assert.h"
#include "config_text.h"
#include "log.h"

/* The conf file keys drop this prefix or keep it, so the table stores it once. */
#define PREFIX "VAREMAP_"
#define PREFIX_LEN (sizeof(PREFIX) - 1)

/* A line holds a key, '=', and a path that may double in length before %
 * expansion ("%%" -> "%"), so the limit is twice a path plus room for the key. */
#define LINE_MAX_BYTES (2 * VR_PATH_MAX + 64)
#define READ_CHUNK 4096

struct load {
    struct vr_config *cfg;
    pid_t pid;
    char config_path[VR_PATH_MAX]; /* VAREMAP_CONFIG; "" = no file */
    int warnings;
    int warnings_before_file;
};

struct setting {
    const char *name;   /* the environment variable */
    const char *def;    /* parsed by `parse` like any other value; NULL: none */
    const char *expect; /* what a valid value looks like, for the warning */
    int (*parse)(struct load *ld, const char *text);
    void (*show)(const struct load *ld, char *buf, size_t cap);
    bool empty_is_unset; /* "" means "not given" rather than a bad value */
    bool env_only;       /* cannot be set from the conf file */
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- parsers: write into the config only when the whole value is good ---- */

static int parse_mode(struct load *ld, const char *text)
{
    int i = vr_mode_find(text);
    if (i < 0)
        return i;
    ld->cfg->mode = (enum vr_mode)i;
    return 0;
}

static int parse_level(struct load *ld, const char *text)
{
    int i = vr_level_find(text);
    if (i < 0)
        return i;
    ld->cfg->log_level = (enum vr_level)i;
    return 0;
}

static int parse_log(struct load *ld, const char *text)
{
    char path[VR_PATH_MAX];
    size_t len = strlen(text);
    int rc;

    if (len >= sizeof(ld->cfg->log_pattern))
        return -EINVAL;
    rc = vr_expand_path(text, ld->pid, path, sizeof(path));
    if (rc < 0)
        return rc;
    memcpy(ld->cfg->log_path, path, strlen(path) + 1);
    memcpy(ld->cfg->log_pattern, text, len + 1);
    return 0;
}

static int parse_launches(struct load *ld, const char *text)
{
    const char *s = text;
    uint64_t v;

    if (vr_text_digits(&s, &v) < 0 || *s != '\0' || v < 1 || v > 1000)
        return -EINVAL;
    ld->cfg->profile_launches = (unsigned)v;
    return 0;
}

static int parse_variants(struct load *ld, const char *text)
{
    const char *s = text;
    uint64_t v;

    if (vr_text_digits(&s, &v) < 0 || *s != '\0' || v > 16)
        return -EINVAL;
    ld->cfg->variants = (unsigned)v;
    return 0;
}

static int parse_vmm_min(struct load *ld, const char *text)
{
    uint64_t v;
    int rc = vr_parse_size(text, &v);

    if (rc < 0)
        return rc;
    ld->cfg->vmm_min_bytes = v;
    return 0;
}

static int parse_max_padding(struct load *ld, const char *text)
{
    uint64_t v;
    int rc = vr_parse_size(text, &v);

    if (rc < 0)
        return rc;
    ld->cfg->max_padding = v;
    return 0;
}

static int parse_vmm_cache(struct load *ld, const char *text)
{
    uint64_t v;
    int rc = vr_parse_size(text, &v);

    if (rc < 0)
        return rc;
    ld->cfg->vmm_cache = v;
    return 0;
}

/* A plain decimal fraction ("0.125", ".5", "1"): no sign, exponent or
 * locale-dependent radix, so "1e-1" and "0,5" are refused, not guessed. */
static int parse_ratio(struct load *ld, const char *text)
{
    const char *s = text;
    uint64_t num = 0, den = 1;
    bool digits = false;

    for (; *s >= '0' && *s <= '9'; s++, digits = true)
        if ((num = num * 10 + (uint64_t)(*s - '0')) > 1)
            return -EINVAL;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++, digits = true)
            if (den < UINT64_C(1000000000000000)) { /* further digits are below double's precision */
                num = num * 10 + (uint64_t)(*s - '0');
                den *= 10;
            }
    if (!digits || *s != '\0' || num == 0 || num > den)
        return -EINVAL;
    ld->cfg->max_padding_ratio = (double)num / (double)den;
    return 0;
}

/* The one reading of a yes/no setting. */
static int parse_bool(bool *out, const char *text)
{
    static const char *const yes[] = { "1", "true", "yes", "on" };
    static const char *const no[] = { "0", "false", "no", "off" };

    if (vr_text_find(yes, COUNT(yes), text) >= 0)
        *out = true;
    else if (vr_text_find(no, COUNT(no), text) >= 0)
        *out = false;
    else
        return -EINVAL;
    return 0;
}

static int parse_stats(struct load *ld, const char *text)
{
    return parse_bool(&ld->cfg->stats, text);
}

static int parse_slice_still(struct load *ld, const char *text)
{
    return parse_bool(&ld->cfg->slice_still, text);
}

static int parse_cost_prices(struct load *ld, const char *text)
{
    static const char *const names[] = { "model", "measured" };
    int i = vr_text_find(names, COUNT(names), text);

    if (i < 0)
        return -EINVAL;
    ld->cfg->cost_measured = i == 1;
    return 0;
}

static int parse_cost_model(struct load *ld, const char *text)
{
    size_t len = strlen(text);

    if (len >= sizeof(ld->cfg->cost_model))
        return -EINVAL;
    memcpy(ld->cfg->cost_model, text, len + 1);
    return 0;
}

static int parse_config(struct load *ld, const char *text)
{
    size_t len = strlen(text);

    if (len == 0 || len >= sizeof(ld->config_path))
        return -EINVAL;
    memcpy(ld->config_path, text, len + 1);
    return 0;
}

/* ---- show: the value a setting keeps, for the "using ..." part ---- */

static void show_mode(const struct load *ld, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", vr_mode_name(ld->cfg->mode));
}

static void show_level(const struct load *ld, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", vr_level_name(ld->cfg->log_level));
}

static void show_log(const struct load *ld, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ld->cfg->log_path[0] ? ld->cfg->log_path : "no log");
}

static void show_launches(const struct load *ld, char *buf, size_t cap)
{
    snprintf(buf, cap, "%u", ld->cfg->profile_launches);
}

static void show_variants(const struct load *ld, char *buf, size_t cap)
{
    snprintf(buf, cap, "%u", ld->cfg->variants);
}

/* Shown the way the defaults are written ("1M", "1G") when exact. */
static void show_size(uint64_t v, char *buf, size_t cap)
{
    static const char units[] = "GMK";
    for (unsigned i = 0; i < 3; i++) {
        unsigned shift = 30 - 10 * i;
        if (v != 0 && (v & ((UINT64_C(1) << shift) - 1)) == 0) {
            snprintf(buf, cap, "%" PRIu64 "%c", v >> shift, units[i]);
            return;
        }
    }
    snprintf(buf, cap, "%" PRIu64, v);
}

static void show_vmm_min(const struct load *ld, char *buf, size_t cap)
{
    show_size(ld->cfg->vmm_min_bytes, buf, cap);
}

static void show_max_padding(const struct load *ld, char *buf, size_t cap)
{
    show_size(ld->cfg->max_padding, buf, cap);
}

static void show_vmm_cache(const struct load *ld, char *buf, size_t cap)
{
    show_size(ld->cfg->vmm_cache, buf, cap);
}

/* Fixed point by hand: "%g" would print the locale's radix character. */
static void show_ratio(const struct load *ld, char *buf, size_t cap)
{
    uint64_t micro = (uint64_t)(ld->cfg->max_padding_ratio * 1e6 + 0.5);
    char frac[8];
    int n = snprintf(frac, sizeof frac, "%06" PRIu64, micro % 1000000);

    while (n > 1 && frac[n - 1] == '0')
        frac[--n] = '\0';
    snprintf(buf, cap, "%" PRIu64 ".%s", micro / 1000000, frac);
}

static void show_stats(const struct load *ld, char *buf, size_t cap)
{
    snprintf(buf, cap, "%d", ld->cfg->stats ? 1 : 0);
}

static void show_slice_still(const struct load *ld, char *buf, size_t cap)
{
    snprintf(buf, cap, "%d", ld->cfg->slice_still ? 1 : 0);
}

static void show_cost_prices(const struct load *ld, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ld->cfg->cost_measured ? "measured" : "model");
}

static void show_cost_model(const struct load *ld, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ld->cfg->cost_model[0] ? ld->cfg->cost_model : "the built-in prices");
}

static void show_config(const struct load *ld, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ld->config_path[0] ? ld->config_path : "no config file");
}

/* THE table: every setting, its default and how it is read. */
static const struct setting settings[] = {
    { "VAREMAP_MODE", "profiled", "one of off, observe, dedup, profiled",
      parse_mode, show_mode, false, false },
    { "VAREMAP_LOG", "", "a file path shorter than 4096 bytes; %p is the pid, %% a percent sign",
      parse_log, show_log, true, false },
    { "VAREMAP_LOG_LEVEL", "info", "one of error, warn, info, debug",
      parse_level, show_level, false, false },
    { "VAREMAP_PROFILE_LAUNCHES", "3", "an integer from 1 to 1000",
      parse_launches, show_launches, false, false },
    { "VAREMAP_VARIANTS", "4", "an integer from 0 to 16 (0 or 1: no variants)",
      parse_variants, show_variants, false, false },
    { "VAREMAP_VMM_MIN_BYTES", "1M", "a byte count with an optional K, M or G suffix",
      parse_vmm_min, show_vmm_min, false, false },
    { "VAREMAP_MAX_PADDING", "1G", "a byte count with an optional K, M or G suffix",
      parse_max_padding, show_max_padding, false, false },
    { "VAREMAP_MAX_PADDING_RATIO", "0.125", "a fraction greater than 0 and at most 1, such as 0.125",
      parse_ratio, show_ratio, false, false },
    { "VAREMAP_VMM_CACHE", "256M", "a byte count with an optional K, M or G suffix (0: no cache)",
      parse_vmm_cache, show_vmm_cache, false, false },
    { "VAREMAP_STATS", "0", "0 or 1 (also false/true, no/yes, off/on)",
      parse_stats, show_stats, false, false },
    { "VAREMAP_SLICE_STILL", "0", "0 or 1 (also false/true, no/yes, off/on)",
      parse_slice_still, show_slice_still, false, false },
    { "VAREMAP_COST_PRICES", "model", "model or measured",
      parse_cost_prices, show_cost_prices, false, false },
    { "VAREMAP_COST_MODEL", "", "a file path shorter than 4096 bytes",
      parse_cost_model, show_cost_model, true, false },
    { "VAREMAP_CONFIG", NULL, "a file path shorter than 4096 bytes",
      parse_config, show_config, false, true },
};

/* A warning is one line, so a value carrying a newline or other control
 * character is quoted with '?' in its place. Both buffers stay well below
 * what vr_warn writes in one line anyway. */
static void printable(const char *text, char *out, size_t cap)
{
    size_t n = 0;

    for (; *text && n + 1 < cap; text++, n++)
        out[n] = ((unsigned char)*text < 0x20 || *text == 0x7f) ? '?' : *text;
    out[n] = '\0';
}

static void apply(struct load *ld, const struct setting *s, const char *text)
{
    char shown[1024], kept[1024];

    if (s->parse(ld, text) == 0)
        return;
    printable(text, shown, sizeof(shown));
    s->show(ld, kept, sizeof(kept));
    vr_warn("%s=%s is not valid (%s); using %s", s->name, shown, s->expect, kept);
    ld->warnings++;
}

static const struct setting *find_key(const char *key)
{
    for (size_t i = 0; i < COUNT(settings); i++) {
        const char *name = settings[i].name;
        if (vr_text_eq_nocase(key, name) || vr_text_eq_nocase(key, name + PREFIX_LEN))
            return &settings[i];
    }
    return NULL;
}

static void file_warn(struct load *ld, unsigned lineno, const char *what, const char *key)
{
    char shown[256];

    if (key) {
        printable(key, shown, sizeof(shown));
        vr_warn("%s:%u: %s '%s'", ld->config_path, lineno, what, shown);
    } else
        vr_warn("%s:%u: %s", ld->config_path, lineno, what);
    ld->warnings++;
}

static void file_line(struct load *ld, char *line, size_t len, unsigned lineno)
{
    char *key, *value;
    const char *bad = vr_text_key_value(line, len, &key, &value);
    const struct setting *s;

    if (bad) {
        file_warn(ld, lineno, bad, NULL);
        return;
    }
    if (!key)
        return;
    s = find_key(key);
    if (!s) {
        file_warn(ld, lineno, "unknown key", key);
        return;
    }
    if (s->env_only) {
        file_warn(ld, lineno, "only the environment can name a config file; ignored key", key);
        return;
    }
    if (*value == '\0' && s->empty_is_unset)
        return;
    apply(ld, s, value);
}

/* Opens the file without blocking (a FIFO with no writer would otherwise
 * hang the program's first CUDA call) and accepts only a regular file of
 * sane size: /dev/zero would never end and a device may act on a read.
 * Returns the descriptor, or -1 after one warning. */
static int open_config(struct load *ld)
{
    struct stat st;
    int fd;

    do {
        fd = open(ld->config_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0 || fstat(fd, &st) != 0) {
        char why[128];
        int err = errno;
        if (fd >= 0)
            close(fd);
        vr_warn("cannot read config %s: %s", ld->config_path, strerror_r(err, why, sizeof(why)));
        ld->warnings++;
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > VR_CONFIG_MAX_BYTES) {
        close(fd);
        if (!S_ISREG(st.st_mode))
            vr_warn("config %s is not a regular file; ignored", ld->config_path);
        else
            vr_warn("config %s is larger than %d KiB; ignored", ld->config_path,
                    VR_CONFIG_MAX_BYTES / 1024);
        ld->warnings++;
        return -1;
    }
    return fd;
}

/* A file that is not text (or not ours) would warn on nearly every line. */
static bool too_many_errors(struct load *ld, unsigned lineno)
{
    if (ld->warnings - ld->warnings_before_file < VR_CONFIG_MAX_ERRORS)
        return false;
    vr_warn("%s:%u: too many errors; the rest of the file is ignored", ld->config_path, lineno);
    ld->warnings++;
    return true;
}

static void read_file(struct load *ld)
{
    char chunk[READ_CHUNK];
    char line[LINE_MAX_BYTES + 1];
    size_t len = 0, total = 0;
    bool too_long = false;
    unsigned lineno = 1;
    int fd = open_config(ld);

    if (fd < 0)
        return;
    ld->warnings_before_file = ld->warnings;
    for (;;) {
        ssize_t got = read(fd, chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            char why[128];
            vr_warn("cannot read config %s: %s", ld->config_path,
                    strerror_r(errno, why, sizeof(why)));
            ld->warnings++;
            /* Lines already applied stay applied: the load never undoes a
             * good value, it only reports. */
            close(fd);
            return;
        }
        if (got == 0)
            break;
        total += (size_t)got;
        if (total > VR_CONFIG_MAX_BYTES) { /* it grew after fstat */
            vr_warn("config %s is larger than %d KiB; the rest is ignored", ld->config_path,
                    VR_CONFIG_MAX_BYTES / 1024);
            ld->warnings++;
            close(fd);
            return;
        }
        for (ssize_t i = 0; i < got; i++) {
            if (chunk[i] != '\n') {
                if (len < LINE_MAX_BYTES)
                    line[len++] = chunk[i];
                else
                    too_long = true;
                continue;
            }
            if (too_long)
                file_warn(ld, lineno, "line too long; ignored", NULL);
            else
                file_line(ld, line, len, lineno);
            len = 0;
            too_long = false;
            if (too_many_errors(ld, lineno)) {
                close(fd);
                return;
            }
            lineno++;
        }
    }
    close(fd);
    if (too_long)
        file_warn(ld, lineno, "line too long; ignored", NULL);
    else if (len > 0)
        file_line(ld, line, len, lineno);
}

/* secure_getenv: a set-user-ID program must not let its caller choose which
 * file the shim reads or appends to. */
static const char *real_getenv(const char *name)
{
    return secure_getenv(name);
}

int vr_config_load(struct vr_config *cfg, vr_getenv_fn getenv_fn, pid_t pid)
{
    struct load ld = { .cfg = cfg, .pid = pid, .config_path = "", .warnings = 0 };
    const struct setting *conf = find_key("VAREMAP_CONFIG");

    if (!getenv_fn)
        getenv_fn = real_getenv;

    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < COUNT(settings); i++)
        if (settings[i].def)
            (void)settings[i].parse(&ld, settings[i].def);

    const char *path = getenv_fn(conf->name);
    if (path) {
        apply(&ld, conf, path);
        if (ld.config_path[0])
            read_file(&ld);
    }

    for (size_t i = 0; i < COUNT(settings); i++) {
        const struct setting *s = &settings[i];
        const char *v;

        if (s == conf)
            continue;
        v = getenv_fn(s->name);
        if (!v || (*v == '\0' && s->empty_is_unset))
            continue;
        apply(&ld, s, v);
    }
    return ld.warnings;
}
