/* cost_file: a cost model file read into the shim's priors
 * (VAREMAP_COST_MODEL; cost.h's vr_cost_load).
 *
 * The format is conf/cost-model.conf's, the one scripts/gpu-check's
 * cost_probe prints: "name ns  # source" per line, '#' lines and blank lines
 * ignored. Only the entry points the policy prices are taken; the file's
 * other lines (every call a bench run makes) are skipped without a word.
 * Runs at the shim's start, possibly on a small stack from the first hooked
 * call: no heap, no stdio, the file streamed through fixed buffers, each
 * message one vr_warn line.
 */
#include "cost.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

#define CHUNK 2048
#define LINE_BYTES 512
#define FILE_MAX (256 * 1024)

static bool blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r';
}

/* One line: returns 1 when it priced one of ours, 0 when it is not ours
 * (or a comment), -1 when it names ours with a bad figure. */
static int take_line(const char *path, unsigned lineno, char *line, size_t len)
{
    line[len] = '\0';
    char *s = line;
    while (blank(*s))
        s++;
    if (*s == '#' || *s == '\0')
        return 0;
    char *name = s;
    while (*s && !blank(*s) && *s != '#')
        s++;
    size_t nlen = (size_t)(s - name);
    int which = -1;
    for (int c = 0; c < VR_COST_COUNT && which < 0; c++) {
        const char *e = vr_cost_entry((enum vr_cost)c);
        if (strlen(e) == nlen && memcmp(e, name, nlen) == 0)
            which = c;
    }
    if (which < 0)
        return 0;
    while (blank(*s))
        s++;
    uint64_t ns = 0;
    bool digits = false;
    for (; *s >= '0' && *s <= '9'; s++, digits = true)
        if ((ns = ns * 10 + (uint64_t)(*s - '0')) > VR_COST_MAX_NS)
            break;
    while (blank(*s))
        s++;
    if (!digits || (*s != '\0' && *s != '#') || ns < 1 || ns > VR_COST_MAX_NS) {
        vr_warn("cost model %s:%u: %.*s needs a whole number of ns from 1 to %u; the built-in "
                "figure stays",
                path, lineno, (int)nlen, name, VR_COST_MAX_NS);
        return -1;
    }
    vr_cost_set_prior((enum vr_cost)which, ns);
    return 1;
}

int vr_cost_load(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        char why[128];
        vr_warn("cannot open cost model %s: %s; the built-in prices stay", path,
                strerror_r(e, why, sizeof why));
        return -e;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > FILE_MAX) {
        close(fd);
        vr_warn("cost model %s is not a regular file of at most %d KiB; the built-in prices "
                "stay", path, FILE_MAX / 1024);
        return -EINVAL;
    }
    char chunk[CHUNK], line[LINE_BYTES + 1];
    size_t len = 0, total = 0;
    unsigned lineno = 1;
    int taken = 0;
    for (;;) {
        ssize_t got = read(fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = errno;
            char why[128];
            vr_warn("cannot read cost model %s: %s", path, strerror_r(e, why, sizeof why));
            close(fd);
            return -e;
        }
        if (got == 0 || (total += (size_t)got) > FILE_MAX)
            break; /* the end, or a file that grew after fstat: what was read counts */
        for (ssize_t i = 0; i < got; i++) {
            if (chunk[i] != '\n') {
                if (len < LINE_BYTES)
                    line[len++] = chunk[i]; /* past it, a comment's tail: the head counts */
                continue;
            }
            taken += take_line(path, lineno, line, len) > 0;
            len = 0;
            lineno++;
        }
    }
    close(fd);
    if (len > 0)
        taken += take_line(path, lineno, line, len) > 0;
    return taken;
}
