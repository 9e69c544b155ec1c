/* SIMCUDA_PROGRESS=path: while the process runs, one line at path,
 * rewritten in place four times a second: "ELAPSED_MS GRAPH_LAUNCHES
 * KERNELS\n" (milliseconds since the library loaded; cuGraphLaunch calls;
 * kernels run, host versions and interpreted, graph nodes included), each a
 * fixed-width field, so a reader never sees half of two lines; written once
 * more at exit. For a tool
 * that shows a long run's progress (`varemap --sim`). A thread of its own
 * reads counters simcuda keeps anyway: nothing is added to any call's path,
 * and nothing runs when the knob is unset. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "ptx.h"
#include "sim.h"

/* sim_core.c's exported counters (simcuda-only, README "Call counters"). */
const char *simcuda_entry_name(int i);
unsigned long long simcuda_entry_calls(int i);

static struct timespec g_t0;

static uint64_t graph_launches(void)
{
    uint64_t n = 0;
    for (int i = 0; simcuda_entry_name(i); i++)
        if (!strcmp(simcuda_entry_name(i), "cuGraphLaunch") ||
            !strcmp(simcuda_entry_name(i), "cuGraphLaunch_ptsz"))
            n += simcuda_entry_calls(i);
    return n;
}

static int g_fd = -1;
static pid_t g_pid;

static int progress_write(int fd)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t ms = (uint64_t)(now.tv_sec - g_t0.tv_sec) * 1000 +
                  (uint64_t)((now.tv_nsec - g_t0.tv_nsec) / 1000000);
    uint64_t kernels, tins;
    ptx_totals(&kernels, &tins);
    kernels += sim_kernel_host_runs();
    char line[80];
    int n = snprintf(line, sizeof line, "%20llu %20llu %20llu\n", (unsigned long long)ms,
                     (unsigned long long)graph_launches(), (unsigned long long)kernels);
    return n > 0 && pwrite(fd, line, (size_t)n, 0) < 0 ? -1 : 0;
}

static void *progress_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    for (;;) {
        struct timespec nap = { 0, 250 * 1000 * 1000 };
        nanosleep(&nap, NULL);
        if (progress_write(fd) != 0)
            break;
    }
    return NULL;
}

/* The last counts, so that a run shorter than a tick still says what it did
 * (only the process that opened the file: not a forked child). */
__attribute__((destructor)) static void progress_dtor(void)
{
    if (g_fd >= 0 && getpid() == g_pid)
        progress_write(g_fd);
}

__attribute__((constructor)) static void progress_ctor(void)
{
    clock_gettime(CLOCK_MONOTONIC, &g_t0);
    const char *path = getenv("SIMCUDA_PROGRESS");
    if (!path || !*path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    g_fd = fd;
    g_pid = getpid();
    pthread_attr_t a;
    pthread_t th;
    if (pthread_attr_init(&a) != 0)
        return;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_create(&th, &a, progress_main, (void *)(intptr_t)fd); /* else: at exit only */
    pthread_attr_destroy(&a);
}
