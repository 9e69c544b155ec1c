/* Unit tests for config.c: defaults, both sources, precedence, every parser
 * and every warning. Criterion runs each test in its own process, so the
 * fake environment below starts empty in every test. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "config.h"

#define MAX_VARS 16

static struct {
    const char *name;
    const char *value;
} env[MAX_VARS];
static int nenv;

static void setvar(const char *name, const char *value)
{
    cr_assert_lt(nenv, MAX_VARS);
    env[nenv].name = name;
    env[nenv].value = value;
    nenv++;
}

static const char *fake_getenv(const char *name)
{
    for (int i = 0; i < nenv; i++)
        if (strcmp(env[i].name, name) == 0)
            return env[i].value;
    return NULL;
}

static int load(struct vr_config *cfg)
{
    return vr_config_load(cfg, fake_getenv, 4242);
}

/* Writes `text` to a fresh temporary file; the path lives in `path`. */
static void write_conf(char *path, size_t cap, const char *text)
{
    int fd;
    size_t len = strlen(text);

    snprintf(path, cap, "/tmp/varemap-test-conf-XXXXXX");
    fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp: %s", strerror(errno));
    cr_assert_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
}

static void assert_defaults(const struct vr_config *cfg)
{
    cr_assert_eq(cfg->mode, VR_MODE_PROFILED);
    cr_assert_str_eq(cfg->log_path, "");
    cr_assert_eq(cfg->log_level, VR_LEVEL_INFO);
    cr_assert_eq(cfg->profile_launches, 3u);
    cr_assert_eq(cfg->vmm_min_bytes, 1048576u);
    cr_assert_eq(cfg->max_padding, UINT64_C(1) << 30);
    cr_assert_eq(cfg->vmm_cache, UINT64_C(256) << 20);
    cr_assert_eq(cfg->stats, false);
    cr_assert_eq(cfg->cost_measured, false);
    cr_assert_str_eq(cfg->cost_model, "");
}

/* ---- defaults ---- */

Test(config, defaults_with_empty_environment, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    memset(&cfg, 0x5a, sizeof(cfg));
    cr_assert_eq(load(&cfg), 0);
    assert_defaults(&cfg);
    cr_assert_stderr_eq_str("");
}

Test(config, null_getenv_reads_the_process_environment)
{
    struct vr_config cfg;

    cr_assert_eq(setenv("VAREMAP_PROFILE_LAUNCHES", "17", 1), 0);
    cr_assert_eq(setenv("VAREMAP_MODE", "dedup", 1), 0);
    cr_assert_eq(vr_config_load(&cfg, NULL, 1), 0);
    cr_assert_eq(cfg.profile_launches, 17u);
    cr_assert_eq(cfg.mode, VR_MODE_DEDUP);
}

/* ---- every key from the environment ---- */

Test(config, every_key_from_environment, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_MODE", "observe");
    setvar("VAREMAP_LOG", "/tmp/x.jsonl");
    setvar("VAREMAP_LOG_LEVEL", "debug");
    setvar("VAREMAP_PROFILE_LAUNCHES", "7");
    setvar("VAREMAP_VMM_MIN_BYTES", "64K");
    setvar("VAREMAP_MAX_PADDING", "2G");
    setvar("VAREMAP_VMM_CACHE", "0");
    setvar("VAREMAP_STATS", "1");
    setvar("VAREMAP_COST_PRICES", "measured");
    setvar("VAREMAP_COST_MODEL", "/etc/host-cost.conf");
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.cost_measured, true);
    cr_assert_str_eq(cfg.cost_model, "/etc/host-cost.conf");
    cr_assert_eq(cfg.mode, VR_MODE_OBSERVE);
    cr_assert_str_eq(cfg.log_path, "/tmp/x.jsonl");
    cr_assert_eq(cfg.log_level, VR_LEVEL_DEBUG);
    cr_assert_eq(cfg.profile_launches, 7u);
    cr_assert_eq(cfg.vmm_min_bytes, 65536u);
    cr_assert_eq(cfg.max_padding, UINT64_C(2) << 30);
    cr_assert_eq(cfg.vmm_cache, 0u);
    cr_assert_eq(cfg.stats, true);
    cr_assert_stderr_eq_str("");
}

Test(config, every_mode_and_level_name)
{
    static const char *modes[] = { "off", "observe", "dedup", "profiled" };
    static const char *levels[] = { "error", "warn", "info", "debug" };

    for (int i = 0; i < 4; i++) {
        struct vr_config cfg;
        nenv = 0;
        setvar("VAREMAP_MODE", modes[i]);
        setvar("VAREMAP_LOG_LEVEL", levels[i]);
        cr_assert_eq(load(&cfg), 0);
        cr_assert_eq((int)cfg.mode, i, "%s", modes[i]);
        cr_assert_eq((int)cfg.log_level, i, "%s", levels[i]);
        cr_assert_str_eq(vr_mode_name((enum vr_mode)i), modes[i]);
        cr_assert_str_eq(vr_level_name((enum vr_level)i), levels[i]);
    }
    cr_assert_str_eq(vr_mode_name((enum vr_mode)99), "unknown");
    cr_assert_str_eq(vr_level_name((enum vr_level)-1), "unknown");
}

Test(config, names_are_case_insensitive)
{
    struct vr_config cfg;

    setvar("VAREMAP_MODE", "DeDup");
    setvar("VAREMAP_LOG_LEVEL", "ERROR");
    setvar("VAREMAP_STATS", "Yes");
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.mode, VR_MODE_DEDUP);
    cr_assert_eq(cfg.log_level, VR_LEVEL_ERROR);
    cr_assert_eq(cfg.stats, true);
}

Test(config, stats_booleans)
{
    static const struct {
        const char *text;
        bool value;
    } cases[] = {
        { "1", true }, { "true", true }, { "yes", true }, { "on", true },
        { "0", false }, { "false", false }, { "no", false }, { "off", false },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[64];
        struct vr_config cfg;

        /* The file sets the opposite, so a value that is ignored is noticed. */
        write_conf(path, sizeof(path), cases[i].value ? "stats = 0\n" : "stats = 1\n");
        nenv = 0;
        setvar("VAREMAP_CONFIG", path);
        setvar("VAREMAP_STATS", cases[i].text);
        cr_assert_eq(load(&cfg), 0, "%s", cases[i].text);
        cr_assert_eq(cfg.stats, cases[i].value, "%s", cases[i].text);
        unlink(path);
    }
}

Test(config, stats_file_true_env_false)
{
    char path[64];
    struct vr_config cfg;

    write_conf(path, sizeof(path), "stats = on\n");
    setvar("VAREMAP_CONFIG", path);
    setvar("VAREMAP_STATS", "off");
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.stats, false);
    unlink(path);
}

Test(config, stats_bad_values, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_STATS", "2");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.stats, false);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_STATS=2 is not valid "
                            "(0 or 1 (also false/true, no/yes, off/on)); using 0\n");
}

/* Still buffers stay compared unless asked; the yes/no words are STATS's. */
Test(config, slice_still_default_and_yes)
{
    struct vr_config cfg;

    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.slice_still, false);
    setvar("VAREMAP_SLICE_STILL", "Yes");
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.slice_still, true);
}

Test(config, slice_still_bad_value, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_SLICE_STILL", "2");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.slice_still, false);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_SLICE_STILL=2 is not valid "
                            "(0 or 1 (also false/true, no/yes, off/on)); using 0\n");
}

/* The prices are the model's unless asked otherwise; anything but the two
 * names keeps the model's. */
Test(config, cost_prices_values, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_COST_PRICES", "measured");
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.cost_measured, true);
    nenv = 0;
    setvar("VAREMAP_COST_PRICES", "model");
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.cost_measured, false);
    nenv = 0;
    setvar("VAREMAP_COST_PRICES", "fast");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.cost_measured, false);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_COST_PRICES=fast is not valid "
                            "(model or measured); using model\n");
}

/* ---- sizes ---- */

Test(config, parse_size_accepts)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } ok[] = {
        { "0", 0 },
        { "4096", 4096 },
        { "64K", 65536 },
        { "64k", 65536 },
        { "64KiB", 65536 },
        { "64kib", 65536 },
        { "1M", 1048576 },
        { "1m", 1048576 },
        { "1MiB", 1048576 },
        { "1MIB", 1048576 },
        { "2G", UINT64_C(2) << 30 },
        { "2GiB", UINT64_C(2) << 30 },
        { "007", 7 },
        { "18446744073709551615", UINT64_MAX },
        { "17179869183G", UINT64_C(17179869183) << 30 },
    };

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t v = 12345;
        cr_assert_eq(vr_parse_size(ok[i].text, &v), 0, "%s", ok[i].text);
        cr_assert_eq(v, ok[i].bytes, "%s -> %llu", ok[i].text, (unsigned long long)v);
    }
}

Test(config, parse_size_rejects_and_leaves_output_alone)
{
    static const char *bad[] = {
        "", "12X", "-1", "+1", "1.5M", " 1M", "1M ", "1 M", "M", "K1", "1KB", "1MB",
        "1T", "1Gi", "1ki", "0x10", "99999999999G", "18446744073709551616",
        "17179869184G", "18014398509481984K", "1e3",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 12345;
        cr_assert_eq(vr_parse_size(bad[i], &v), -EINVAL, "'%s' accepted", bad[i]);
        cr_assert_eq(v, 12345u, "'%s' wrote the output", bad[i]);
    }
    cr_assert_eq(vr_parse_size(NULL, NULL), -EINVAL);
}

Test(config, zero_sizes_are_allowed, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    /* VMM_MIN_BYTES 0: every allocation is a VMM candidate.
     * MAX_PADDING 0: no padding allowed, so only exact multiples qualify. */
    setvar("VAREMAP_VMM_MIN_BYTES", "0");
    setvar("VAREMAP_MAX_PADDING", "0");
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.vmm_min_bytes, 0u);
    cr_assert_eq(cfg.max_padding, 0u);
    cr_assert_stderr_eq_str("");
}

Test(config, bad_sizes_from_environment_warn, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_VMM_MIN_BYTES", "99999999999G");
    setvar("VAREMAP_MAX_PADDING", "1.5M");
    cr_assert_eq(load(&cfg), 2);
    cr_assert_eq(cfg.vmm_min_bytes, 1048576u);
    cr_assert_eq(cfg.max_padding, UINT64_C(1) << 30);
    cr_assert_stderr_eq_str(
        "varemap: warning: VAREMAP_VMM_MIN_BYTES=99999999999G is not valid "
        "(a byte count with an optional K, M or G suffix); using 1M\n"
        "varemap: warning: VAREMAP_MAX_PADDING=1.5M is not valid "
        "(a byte count with an optional K, M or G suffix); using 1G\n");
}

Test(config, junk_sizes_rejected_through_load, .init = cr_redirect_stderr)
{
    static const char *bad[] = { "12X", "-1", "", "1.5M", "99999999999G" };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vr_config cfg;
        nenv = 0;
        setvar("VAREMAP_VMM_MIN_BYTES", bad[i]);
        setvar("VAREMAP_MAX_PADDING", bad[i]);
        cr_assert_eq(load(&cfg), 2, "'%s'", bad[i]);
        cr_assert_eq(cfg.vmm_min_bytes, 1048576u);
        cr_assert_eq(cfg.max_padding, UINT64_C(1) << 30);
    }
}

/* ---- profile launches ---- */

Test(config, profile_launches_bounds, .init = cr_redirect_stderr)
{
    static const struct {
        const char *text;
        bool ok;
        unsigned value;
    } cases[] = {
        { "1", true, 1 }, { "1000", true, 1000 }, { "0001", true, 1 },
        { "0", false, 3 }, { "1001", false, 3 }, { "-1", false, 3 }, { "", false, 3 },
        { "3K", false, 3 }, { "2.0", false, 3 }, { " 5", false, 3 },
        { "4294967299", false, 3 }, { "99999999999999999999999", false, 3 },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct vr_config cfg;
        nenv = 0;
        setvar("VAREMAP_PROFILE_LAUNCHES", cases[i].text);
        cr_assert_eq(load(&cfg), cases[i].ok ? 0 : 1, "'%s'", cases[i].text);
        cr_assert_eq(cfg.profile_launches, cases[i].value, "'%s'", cases[i].text);
    }
}

Test(config, profile_launches_warning_text, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_PROFILE_LAUNCHES", "1001");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_PROFILE_LAUNCHES=1001 is not valid "
                            "(an integer from 1 to 1000); using 3\n");
}

/* ---- bad values ---- */

Test(config, bad_mode_warns_and_keeps_default, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_MODE", "turbo");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.mode, VR_MODE_PROFILED);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_MODE=turbo is not valid "
                            "(one of off, observe, dedup, profiled); using profiled\n");
}

Test(config, empty_mode_is_bad, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_MODE", "");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.mode, VR_MODE_PROFILED);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_MODE= is not valid "
                            "(one of off, observe, dedup, profiled); using profiled\n");
}

Test(config, bad_level_warns, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_LOG_LEVEL", "warning");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.log_level, VR_LEVEL_INFO);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_LOG_LEVEL=warning is not valid "
                            "(one of error, warn, info, debug); using info\n");
}

Test(config, warning_stays_on_one_line, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_MODE", "a\nb\tc");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_MODE=a?b?c is not valid "
                            "(one of off, observe, dedup, profiled); using profiled\n");
}

Test(config, return_value_counts_warnings, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_MODE", "x");
    setvar("VAREMAP_LOG_LEVEL", "y");
    setvar("VAREMAP_PROFILE_LAUNCHES", "z");
    setvar("VAREMAP_STATS", "w");
    setvar("VAREMAP_VMM_MIN_BYTES", "64K"); /* good: not counted */
    cr_assert_eq(load(&cfg), 4);
    cr_assert_eq(cfg.vmm_min_bytes, 65536u);
}

/* ---- log path ---- */

Test(config, log_path_pid_expansion)
{
    static const struct {
        const char *text;
        const char *path;
    } cases[] = {
        { "/tmp/v-%p.jsonl", "/tmp/v-4242.jsonl" },
        { "/tmp/%p/%p", "/tmp/4242/4242" },
        { "/tmp/100%%", "/tmp/100%" },
        { "/tmp/%%p", "/tmp/%p" },
        { "rel.log", "rel.log" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct vr_config cfg;
        nenv = 0;
        setvar("VAREMAP_LOG", cases[i].text);
        cr_assert_eq(load(&cfg), 0, "%s", cases[i].text);
        cr_assert_str_eq(cfg.log_path, cases[i].path);
    }
}

Test(config, log_path_bad_escape_warns, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_LOG", "/tmp/v-%P.log");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_str_eq(cfg.log_path, "");
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_LOG=/tmp/v-%P.log is not valid "
                            "(a file path shorter than 4096 bytes; %p is the pid, %% a "
                            "percent sign); using no log\n");
}

Test(config, log_path_trailing_percent_and_too_long, .init = cr_redirect_stderr)
{
    static char longpath[VR_PATH_MAX + 8];
    static char fits[VR_PATH_MAX];
    struct vr_config cfg;

    setvar("VAREMAP_LOG", "/tmp/x%");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_str_eq(cfg.log_path, "");

    memset(longpath, 'a', sizeof(longpath) - 1);
    longpath[0] = '/';
    nenv = 0;
    setvar("VAREMAP_LOG", longpath);
    cr_assert_eq(load(&cfg), 1);
    cr_assert_str_eq(cfg.log_path, "");

    /* The expansion is what must fit: 4094 bytes + "%p" grows past it. */
    memset(fits, 'b', sizeof(fits) - 1);
    fits[0] = '/';
    fits[VR_PATH_MAX - 3] = '%';
    fits[VR_PATH_MAX - 2] = 'p';
    nenv = 0;
    setvar("VAREMAP_LOG", fits);
    cr_assert_eq(load(&cfg), 1);

    fits[VR_PATH_MAX - 3] = 'c';
    fits[VR_PATH_MAX - 2] = 'd';
    nenv = 0;
    setvar("VAREMAP_LOG", fits);
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(strlen(cfg.log_path), (size_t)VR_PATH_MAX - 1);
}

Test(config, log_pattern_keeps_the_text_as_written)
{
    struct vr_config cfg;

    setvar("VAREMAP_LOG", "/tmp/v-%p-%%.jsonl");
    cr_assert_eq(load(&cfg), 0);
    cr_assert_str_eq(cfg.log_path, "/tmp/v-4242-%.jsonl");
    cr_assert_str_eq(cfg.log_pattern, "/tmp/v-%p-%%.jsonl");
    cr_assert(vr_path_has_pid(cfg.log_pattern));
    cr_assert_not(vr_path_has_pid("/tmp/%%p"));
    cr_assert_not(vr_path_has_pid("/tmp/x%"));
    cr_assert(vr_path_has_pid("%%%p"));
    cr_assert_not(vr_path_has_pid(""));
}

Test(config, expand_path_bounds)
{
    char out[8];

    cr_assert_eq(vr_expand_path("a%pb", 12345, out, sizeof(out)), 0);
    cr_assert_str_eq(out, "a12345b");
    cr_assert_eq(vr_expand_path("ab%pb", 12345, out, sizeof(out)), -EINVAL);
    cr_assert_eq(vr_expand_path("%p", 0, out, sizeof(out)), 0);
    cr_assert_str_eq(out, "0");
    cr_assert_eq(vr_expand_path("", 1, out, 0), -EINVAL);
    cr_assert_eq(vr_expand_path("%q", 1, out, sizeof(out)), -EINVAL);
}

Test(config, empty_log_is_unset, .init = cr_redirect_stderr)
{
    char path[64];
    struct vr_config cfg;

    setvar("VAREMAP_LOG", "");
    cr_assert_eq(load(&cfg), 0);
    cr_assert_str_eq(cfg.log_path, "");

    /* "Unset" means the file's value stands, as if the variable were absent. */
    write_conf(path, sizeof(path), "log = /tmp/from-file-%p\n");
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 0);
    cr_assert_str_eq(cfg.log_path, "/tmp/from-file-4242");
    unlink(path);
    cr_assert_stderr_eq_str("");
}

/* ---- the file ---- */

Test(config, every_key_from_file, .init = cr_redirect_stderr)
{
    char path[64];
    struct vr_config cfg;

    write_conf(path, sizeof(path),
               "# a comment\n"
               "\n"
               "   \t\n"
               "mode = dedup\n"
               "varemap_log=/tmp/f-%p.jsonl\n"
               "  log_level\t=\terror   \n"
               "VAREMAP_PROFILE_LAUNCHES = 9\r\n"
               "vmm_min_bytes = 2M # inline comment\n"
               "  # indented comment\n"
               "max_padding = 512K\n"
               "stats = yes"); /* no final newline */
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.mode, VR_MODE_DEDUP);
    cr_assert_str_eq(cfg.log_path, "/tmp/f-4242.jsonl");
    cr_assert_eq(cfg.log_level, VR_LEVEL_ERROR);
    cr_assert_eq(cfg.profile_launches, 9u);
    cr_assert_eq(cfg.vmm_min_bytes, 2u << 20);
    cr_assert_eq(cfg.max_padding, 512u << 10);
    cr_assert_eq(cfg.stats, true);
    unlink(path);
    cr_assert_stderr_eq_str("");
}

Test(config, empty_log_in_file_is_not_given, .init = cr_redirect_stderr)
{
    char path[64];
    struct vr_config cfg;

    write_conf(path, sizeof(path), "log =\n");
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 0);
    cr_assert_str_eq(cfg.log_path, "");
    unlink(path);

    /* Like an empty VAREMAP_LOG, it does not replace an earlier path. */
    write_conf(path, sizeof(path), "log = /tmp/first\nlog =   # nothing\n");
    nenv = 0;
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 0);
    cr_assert_str_eq(cfg.log_path, "/tmp/first");
    unlink(path);
    cr_assert_stderr_eq_str("");
}

Test(config, hash_inside_a_value_is_kept)
{
    char path[64];
    struct vr_config cfg;

    write_conf(path, sizeof(path), "log = /tmp/run#3.log\n");
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 0);
    cr_assert_str_eq(cfg.log_path, "/tmp/run#3.log");
    unlink(path);
}

Test(config, later_line_wins_in_file)
{
    char path[64];
    struct vr_config cfg;

    write_conf(path, sizeof(path), "mode = off\nmode = observe\n");
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.mode, VR_MODE_OBSERVE);
    unlink(path);
}

Test(config, env_overrides_file)
{
    char path[64];
    struct vr_config cfg;

    write_conf(path, sizeof(path),
               "mode = dedup\nprofile_launches = 5\nvmm_min_bytes = 4K\nlog = /tmp/a\n");
    setvar("VAREMAP_CONFIG", path);
    setvar("VAREMAP_MODE", "off");
    setvar("VAREMAP_LOG", "/tmp/b");
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.mode, VR_MODE_OFF);
    cr_assert_str_eq(cfg.log_path, "/tmp/b");
    cr_assert_eq(cfg.profile_launches, 5u); /* from the file, env silent */
    cr_assert_eq(cfg.vmm_min_bytes, 4096u);
    unlink(path);
}

Test(config, bad_env_keeps_file_value, .init = cr_redirect_stderr)
{
    char path[64];
    struct vr_config cfg;

    write_conf(path, sizeof(path), "mode = observe\nvmm_min_bytes = 3K\n");
    setvar("VAREMAP_CONFIG", path);
    setvar("VAREMAP_MODE", "fast");
    setvar("VAREMAP_VMM_MIN_BYTES", "12X");
    cr_assert_eq(load(&cfg), 2);
    cr_assert_eq(cfg.mode, VR_MODE_OBSERVE);
    cr_assert_eq(cfg.vmm_min_bytes, 3072u);
    unlink(path);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_MODE=fast is not valid "
                            "(one of off, observe, dedup, profiled); using observe\n"
                            "varemap: warning: VAREMAP_VMM_MIN_BYTES=12X is not valid "
                            "(a byte count with an optional K, M or G suffix); using 3K\n");
}

Test(config, bad_value_in_file_warns_with_variable_name, .init = cr_redirect_stderr)
{
    char path[64];
    struct vr_config cfg;

    write_conf(path, sizeof(path), "mode = sometimes\nprofile_launches = 4\nstats =\n");
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 2);
    cr_assert_eq(cfg.mode, VR_MODE_PROFILED);
    cr_assert_eq(cfg.profile_launches, 4u);
    cr_assert_eq(cfg.stats, false);
    unlink(path);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_MODE=sometimes is not valid "
                            "(one of off, observe, dedup, profiled); using profiled\n"
                            "varemap: warning: VAREMAP_STATS= is not valid "
                            "(0 or 1 (also false/true, no/yes, off/on)); using 0\n");
}

Test(config, unknown_key_and_malformed_lines_warn, .init = cr_redirect_stderr)
{
    char path[64], expect[512];
    struct vr_config cfg;

    write_conf(path, sizeof(path),
               "mode = dedup\n"
               "colour = blue\n"
               "just some words\n"
               " = 5\n"
               "varemap_stats = 1\n");
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 3);
    cr_assert_eq(cfg.mode, VR_MODE_DEDUP);
    cr_assert_eq(cfg.stats, true); /* the rest is still read */
    unlink(path);
    snprintf(expect, sizeof(expect),
             "varemap: warning: %s:2: unknown key 'colour'\n"
             "varemap: warning: %s:3: expected 'key = value'\n"
             "varemap: warning: %s:4: expected 'key = value' (no key)\n",
             path, path, path);
    cr_assert_stderr_eq_str(expect);
}

Test(config, config_key_inside_file_is_ignored, .init = cr_redirect_stderr)
{
    char path[64], other[64], expect[512];
    struct vr_config cfg;

    write_conf(other, sizeof(other), "mode = off\n");
    snprintf(expect, sizeof(expect), "config = %s\nvaremap_config = %s\nmode = dedup\n", other,
             other);
    write_conf(path, sizeof(path), expect);
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 2);
    cr_assert_eq(cfg.mode, VR_MODE_DEDUP);
    unlink(path);
    unlink(other);
    snprintf(expect, sizeof(expect),
             "varemap: warning: %s:1: only the environment can name a config file; ignored "
             "key 'config'\n"
             "varemap: warning: %s:2: only the environment can name a config file; ignored "
             "key 'varemap_config'\n",
             path, path);
    cr_assert_stderr_eq_str(expect);
}

Test(config, unreadable_file_warns_and_continues, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_CONFIG", "/nonexistent-varemap-dir/varemap.conf");
    setvar("VAREMAP_MODE", "dedup");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.mode, VR_MODE_DEDUP);
    cr_assert_eq(cfg.profile_launches, 3u);
    cr_assert_stderr_eq_str("varemap: warning: cannot read config "
                            "/nonexistent-varemap-dir/varemap.conf: No such file or directory\n");
}

Test(config, directory_as_file_warns, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_CONFIG", "/tmp");
    cr_assert_eq(load(&cfg), 1);
    assert_defaults(&cfg);
    cr_assert_stderr_eq_str("varemap: warning: config /tmp is not a regular file; ignored\n");
}

/* ---- files that are not config files ---- */

Test(config, dev_zero_is_refused_at_once, .init = cr_redirect_stderr, .timeout = 10)
{
    struct vr_config cfg;

    setvar("VAREMAP_CONFIG", "/dev/zero");
    setvar("VAREMAP_MODE", "dedup");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.mode, VR_MODE_DEDUP); /* the environment still applies */
    cr_assert_stderr_eq_str("varemap: warning: config /dev/zero is not a regular file; ignored\n");
}

Test(config, fifo_does_not_block, .init = cr_redirect_stderr, .timeout = 10)
{
    char dir[64], fifo[96], expect[512];
    struct vr_config cfg;
    int writer, reader;

    snprintf(dir, sizeof(dir), "/tmp/varemap-test-dir-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    setvar("VAREMAP_CONFIG", fifo);
    /* No writer: a blocking open would wait forever. */
    cr_assert_eq(load(&cfg), 1);
    assert_defaults(&cfg);
    /* A writer that never writes: a blocking read would wait forever. */
    reader = open(fifo, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(reader, 0);
    writer = open(fifo, O_WRONLY);
    cr_assert_geq(writer, 0);
    cr_assert_eq(load(&cfg), 1);
    close(writer);
    close(reader);
    unlink(fifo);
    rmdir(dir);
    snprintf(expect, sizeof(expect),
             "varemap: warning: config %s is not a regular file; ignored\n"
             "varemap: warning: config %s is not a regular file; ignored\n",
             fifo, fifo);
    cr_assert_stderr_eq_str(expect);
}

Test(config, binary_file_warns_a_few_times_only, .init = cr_redirect_stderr)
{
    static char junk[60 * 1024];
    char path[64];
    struct vr_config cfg;
    unsigned x = 12345;
    FILE *f;
    char line[1024];
    int lines = 0, n;

    for (size_t i = 0; i < sizeof(junk); i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (char)(x >> 16);
        if (i % 40 == 39)
            junk[i] = '\n'; /* short lines: one warning each before the fix */
    }
    write_conf(path, sizeof(path), "");
    f = fopen(path, "w");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
    fclose(f);
    setvar("VAREMAP_CONFIG", path);
    setvar("VAREMAP_MODE", "observe");
    n = load(&cfg);
    cr_assert_eq(n, VR_CONFIG_MAX_ERRORS + 1, "%d", n);
    cr_assert_eq(cfg.mode, VR_MODE_OBSERVE);
    unlink(path);

    fflush(stderr);
    f = cr_get_redirected_stderr();
    const char *last = NULL;
    static char prev[1024];
    while (fgets(line, sizeof(line), f)) {
        cr_assert_eq(strncmp(line, "varemap: warning: ", 18), 0, "%s", line);
        lines++;
        strcpy(prev, line);
        last = prev;
    }
    cr_assert_eq(lines, VR_CONFIG_MAX_ERRORS + 1);
    cr_assert_not_null(strstr(last, ": too many errors; the rest of the file is ignored\n"),
                       "%s", last);
}

Test(config, oversized_file_is_refused, .init = cr_redirect_stderr)
{
    static char text[VR_CONFIG_MAX_BYTES + 16];
    char path[64], expect[256];
    struct vr_config cfg;
    size_t n = 0;

    /* Valid lines all the way: the size alone decides. */
    while (n + 13 <= VR_CONFIG_MAX_BYTES)
        n += (size_t)sprintf(text + n, "mode = dedup\n");
    while (n < VR_CONFIG_MAX_BYTES)
        text[n++] = '\n';
    write_conf(path, sizeof(path), text);
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 0, "exactly the limit is accepted");
    cr_assert_eq(cfg.mode, VR_MODE_DEDUP);
    unlink(path);

    text[n++] = '\n';
    write_conf(path, sizeof(path), text);
    nenv = 0;
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 1);
    assert_defaults(&cfg);
    unlink(path);
    snprintf(expect, sizeof(expect), "varemap: warning: config %s is larger than 64 KiB; ignored\n",
             path);
    cr_assert_stderr_eq_str(expect);
}

Test(config, good_lines_after_a_few_bad_ones_still_apply, .init = cr_redirect_stderr)
{
    char path[64];
    struct vr_config cfg;
    char text[512] = "";

    for (int i = 0; i < VR_CONFIG_MAX_ERRORS - 1; i++)
        strcat(text, "nonsense\n");
    strcat(text, "mode = off\n");
    write_conf(path, sizeof(path), text);
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), VR_CONFIG_MAX_ERRORS - 1);
    cr_assert_eq(cfg.mode, VR_MODE_OFF);
    unlink(path);
}

Test(config, empty_config_variable_warns, .init = cr_redirect_stderr)
{
    struct vr_config cfg;

    setvar("VAREMAP_CONFIG", "");
    cr_assert_eq(load(&cfg), 1);
    assert_defaults(&cfg);
    cr_assert_stderr_eq_str("varemap: warning: VAREMAP_CONFIG= is not valid "
                            "(a file path shorter than 4096 bytes); using no config file\n");
}

Test(config, overlong_line_is_skipped, .init = cr_redirect_stderr)
{
    static char text[3 * VR_PATH_MAX];
    char path[64], expect[256];
    struct vr_config cfg;
    size_t n = 0;

    n += (size_t)sprintf(text + n, "mode = observe\nlog = /");
    memset(text + n, 'a', 2 * VR_PATH_MAX + 100);
    n += 2 * VR_PATH_MAX + 100;
    n += (size_t)sprintf(text + n, "\nprofile_launches = 8\n");
    write_conf(path, sizeof(path), text);
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.mode, VR_MODE_OBSERVE);
    cr_assert_str_eq(cfg.log_path, "");
    cr_assert_eq(cfg.profile_launches, 8u);
    unlink(path);
    snprintf(expect, sizeof(expect), "varemap: warning: %s:2: line too long; ignored\n", path);
    cr_assert_stderr_eq_str(expect);
}

Test(config, long_file_spanning_many_reads)
{
    static char text[64 * 1024];
    char path[64];
    struct vr_config cfg;
    size_t n = 0;

    /* Lines straddle the 4 KiB read boundary many times. */
    for (int i = 0; n < sizeof(text) - 64; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "# filler %d\nprofile_launches = %d\n",
                              i, 1 + i % 900);
    n += (size_t)snprintf(text + n, sizeof(text) - n, "profile_launches = 999\n");
    write_conf(path, sizeof(path), text);
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.profile_launches, 999u);
    unlink(path);
}

Test(config, nul_byte_in_line_warns, .init = cr_redirect_stderr)
{
    char path[64];
    struct vr_config cfg;
    int fd;
    static const char text[] = "mode = off\x00junk\nstats = 1\n";

    snprintf(path, sizeof(path), "/tmp/varemap-test-conf-XXXXXX");
    fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.mode, VR_MODE_PROFILED);
    cr_assert_eq(cfg.stats, true);
    unlink(path);
}

/* The shipped conf/varemap.conf must load cleanly and state the defaults.
 * meson compiles with the source path relative to the build directory, and
 * the executable lives at <build>/tests/unit/, so the two together lead back
 * to the source tree whatever the working directory is. */
Test(config, shipped_conf_file_loads_defaults, .init = cr_redirect_stderr)
{
    char exe[VR_PATH_MAX], path[2 * VR_PATH_MAX];
    const char *file = __FILE__;
    const char *slash = strrchr(file, '/');
    struct vr_config cfg;
    ssize_t n;

    cr_assert_not_null(slash);
    if (file[0] == '/') {
        snprintf(path, sizeof(path), "%.*s/../../conf/varemap.conf", (int)(slash - file), file);
    } else {
        n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        cr_assert_gt(n, 0);
        exe[n] = '\0';
        for (int up = 0; up < 3; up++) {
            char *cut = strrchr(exe, '/');
            cr_assert_not_null(cut);
            *cut = '\0';
        }
        snprintf(path, sizeof(path), "%s/%.*s/../../conf/varemap.conf", exe,
                 (int)(slash - file), file);
    }
    cr_assert_eq(access(path, R_OK), 0, "cannot find %s", path);
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 0);
    assert_defaults(&cfg);
    cr_assert_stderr_eq_str("");
}

/* ---- max padding ratio ---- */

Test(config, padding_ratio_default_and_good_values, .init = cr_redirect_stderr)
{
    static const struct {
        const char *text;
        double want;
    } good[] = { { "0.125", 0.125 }, { "1", 1.0 }, { "1.000", 1.0 }, { ".5", 0.5 },
                 { "0.0001", 0.0001 }, { "00.25", 0.25 } };
    struct vr_config cfg;

    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.max_padding_ratio, 0.125);
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        nenv = 0;
        setvar("VAREMAP_MAX_PADDING_RATIO", good[i].text);
        cr_assert_eq(load(&cfg), 0, "'%s'", good[i].text);
        cr_assert_eq(cfg.max_padding_ratio, good[i].want, "'%s'", good[i].text);
    }
    cr_assert_stderr_eq_str("");
}

Test(config, padding_ratio_bad_values_warn_and_keep_default, .init = cr_redirect_stderr)
{
    static const char *bad[] = { "0", "0.0", "1.5", "2", "-0.5", "", ".", "1e-1", "0,5",
                                 "0.5x", " 0.5", "12.5%" };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct vr_config cfg;
        nenv = 0;
        setvar("VAREMAP_MAX_PADDING_RATIO", bad[i]);
        cr_assert_eq(load(&cfg), 1, "'%s'", bad[i]);
        cr_assert_eq(cfg.max_padding_ratio, 0.125, "'%s'", bad[i]);
    }
}

Test(config, padding_ratio_warning_text_and_file_key, .init = cr_redirect_stderr)
{
    char path[64];
    struct vr_config cfg;

    write_conf(path, sizeof(path), "max_padding_ratio = 0.5\n");
    setvar("VAREMAP_CONFIG", path);
    cr_assert_eq(load(&cfg), 0);
    cr_assert_eq(cfg.max_padding_ratio, 0.5);
    setvar("VAREMAP_MAX_PADDING_RATIO", "1.25");
    cr_assert_eq(load(&cfg), 1);
    cr_assert_eq(cfg.max_padding_ratio, 0.5, "a bad environment value keeps the file's");
    unlink(path);
    cr_assert_stderr_eq_str(
        "varemap: warning: VAREMAP_MAX_PADDING_RATIO=1.25 is not valid "
        "(a fraction greater than 0 and at most 1, such as 0.125); using 0.5\n");
}
