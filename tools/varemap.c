/* varemap: the command.
 *
 *   varemap [options] [--] PROGRAM [ARGS...]   run a program under the shim
 *   varemap report [--json] LOG...             what decision logs say
 *
 * Only libc at run time: the command must work wherever the library is
 * installed, with nothing else present.
 */
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "run.h"

#ifndef VR_VERSION
#define VR_VERSION "unknown"
#endif

static const char usage_text[] =
    "usage: varemap [options] [--] PROGRAM [ARGS...]\n"
    "       varemap --sim [--mode MODE] [--output FILE]... [--ignore REGEX]...\n"
    "                     [--prices FILE] [--] PROGRAM [ARGS...]\n"
    "       varemap report [--json] LOG...\n"
    "Runs PROGRAM with libvaremap_shim.so preloaded, then prints on stderr what\n"
    "the shim did for each graph exec.\n"
    "  --mode MODE            off, observe, dedup or profiled (VAREMAP_MODE)\n"
    "  --log PATH             write the decision log to PATH, %p = pid (VAREMAP_LOG)\n"
    "  --profile-launches N   launches observed before deciding, 1..1000\n"
    "  --stats                the shim's counter line at exit (VAREMAP_STATS=1)\n"
    "  --shim PATH            the library to preload (else VAREMAP_SHIM, else the\n"
    "                         one installed beside this command)\n"
    "  --quiet                no summary at exit\n"
    "  --sim                  a dry run without a GPU: PROGRAM on the simulated\n"
    "                         driver without, then with the shim, and what the shim\n"
    "                         would save at the cost model's prices; the last line\n"
    "                         on stdout says identical (exit status 0), names the\n"
    "                         first difference (1), or says both runs failed (3)\n"
    "  --output FILE          with --sim: a file PROGRAM writes, compared too\n"
    "  --ignore REGEX         with --sim: lines matching REGEX (POSIX extended) are\n"
    "                         left out of the compare, as diff -I (repeatable)\n"
    "  --prices FILE          with --sim: the cost model to price the savings at, in\n"
    "                         conf/cost-model.conf's format (default: that file's)\n"
    "  --sim-dir DIR          with --sim: where libcuda.so.1 (and libcudart.so.13)\n"
    "                         are (else VAREMAP_SIM_DIR, else the installed ones)\n"
    "  --help, --version\n"
    "Other settings (VAREMAP_CONFIG, VAREMAP_VMM_MIN_BYTES, ...) pass through the\n"
    "environment. Exit status: the program's, 128+N when signal N killed it;\n"
    "2: bad option; 125: varemap failed; 126/127: PROGRAM not runnable/not found;\n"
    "with --sim, 0 identical, 1 differs, 3 both runs failed alike.\n";

static int bad_usage(const char *fmt, const char *arg)
{
    fputs("varemap: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    fputs(usage_text, stderr);
    return RUN_EXIT_USAGE;
}

static bool valid_mode(const char *m)
{
    static const char *const modes[] = { "off", "observe", "dedup", "profiled" };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(m, modes[i]) == 0)
            return true;
    return false;
}

static bool valid_launches(const char *s)
{
    char *end;
    if (*s < '0' || *s > '9')
        return false;
    unsigned long v = strtoul(s, &end, 10);
    return *end == '\0' && v >= 1 && v <= 1000;
}

static int version(void)
{
    char shim[4096], why[8400];
    printf("varemap %s\n", VR_VERSION);
    if (run_find_shim(NULL, shim, sizeof shim, why, sizeof why) == 0)
        printf("shim: %s\n", shim);
    else
        printf("shim: not found (%s)\n", why);
    return 0;
}

/* "--opt value" or "--opt=value". Returns the value, or NULL (after the
 * usage message) when it is missing. */
static const char *value_of(const char *opt, int argc, char **argv, int *i, int *status)
{
    const char *a = argv[*i];
    size_t n = strlen(opt);
    if (a[n] == '=')
        return a + n + 1;
    if (*i + 1 >= argc) {
        *status = bad_usage("%s needs a value", opt);
        return NULL;
    }
    return argv[++*i];
}

static bool is_opt(const char *a, const char *opt)
{
    size_t n = strlen(opt);
    return strncmp(a, opt, n) == 0 && (a[n] == '\0' || a[n] == '=');
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "report") == 0)
        return report_main(argc - 2, argv + 2);

    struct run_opts o = { 0 };
    /* Every --output fits: there are fewer than argc of them. */
    const char **outputs = calloc((size_t)argc, sizeof *outputs);
    if (!outputs) {
        fputs("varemap: out of memory\n", stderr);
        return RUN_EXIT_FAILED;
    }
    o.outputs = outputs;
    /* As many --ignore as --output can be, and compiled as they come. */
    const char **ignores = calloc((size_t)argc, sizeof *ignores);
    regex_t *ignore_res = calloc((size_t)argc, sizeof *ignore_res);
    if (!ignores || !ignore_res) {
        fputs("varemap: out of memory\n", stderr);
        return RUN_EXIT_FAILED;
    }
    o.ignores = ignores;
    o.ignore_res = ignore_res;
    int i = 1, status = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage_text, stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            return version();
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o.quiet = true;
        } else if (!strcmp(a, "--stats")) {
            o.stats = true;
        } else if (is_opt(a, "--mode")) {
            if (!(o.mode = value_of("--mode", argc, argv, &i, &status)))
                return status;
            if (!valid_mode(o.mode))
                return bad_usage("--mode %s: expected off, observe, dedup or profiled", o.mode);
        } else if (is_opt(a, "--log")) {
            if (!(o.log = value_of("--log", argc, argv, &i, &status)))
                return status;
            if (!*o.log)
                return bad_usage("--log needs a path%s", "");
        } else if (is_opt(a, "--profile-launches")) {
            if (!(o.profile_launches = value_of("--profile-launches", argc, argv, &i, &status)))
                return status;
            if (!valid_launches(o.profile_launches))
                return bad_usage("--profile-launches %s: expected a whole number from 1 to 1000",
                                 o.profile_launches);
        } else if (!strcmp(a, "--sim")) {
            o.sim = true;
        } else if (is_opt(a, "--sim-dir")) {
            if (!(o.sim_dir = value_of("--sim-dir", argc, argv, &i, &status)))
                return status;
        } else if (is_opt(a, "--output")) {
            if (!(outputs[o.noutputs] = value_of("--output", argc, argv, &i, &status)))
                return status;
            if (!*outputs[o.noutputs++])
                return bad_usage("--output needs a path%s", "");
        } else if (is_opt(a, "--ignore")) {
            const char *re = value_of("--ignore", argc, argv, &i, &status);
            if (!re)
                return status;
            int rc = regcomp(&ignore_res[o.nignores], re, REG_EXTENDED | REG_NOSUB);
            if (rc != 0) {
                char why[256];
                regerror(rc, &ignore_res[o.nignores], why, sizeof why);
                fprintf(stderr, "varemap: --ignore %s: %s\n", re, why);
                return RUN_EXIT_USAGE;
            }
            ignores[o.nignores++] = re;
        } else if (is_opt(a, "--prices")) {
            if (!(o.prices = value_of("--prices", argc, argv, &i, &status)))
                return status;
            if (!*o.prices)
                return bad_usage("--prices needs a path%s", "");
        } else if (is_opt(a, "--shim")) {
            if (!(o.shim = value_of("--shim", argc, argv, &i, &status)))
                return status;
        } else {
            return bad_usage("unknown option %s", a);
        }
    }
    if (i >= argc)
        return bad_usage("no program given%s", "");
    if (!o.sim && (o.noutputs || o.sim_dir || o.nignores || o.prices))
        return bad_usage("%s only goes with --sim", o.noutputs ? "--output"
                                                    : o.sim_dir ? "--sim-dir"
                                                    : o.nignores ? "--ignore"
                                                                 : "--prices");
    o.argv = argv + i;
    return o.sim ? run_sim(&o) : run_program(&o);
}
