/* The library half of ctor_race: its constructor runs inside the program's
 * dlopen, so this thread holds the loader's lock. It starts a thread whose
 * first driver call reaches the shim while that dlopen is in progress, waits
 * until the thread is blocked (in the shim's first-time setup, which needs
 * the loader), then makes a driver call itself. A shim that serializes its
 * setup behind a lock held across dlopen deadlocks here. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#define VR_CTOR_EXPORT __attribute__((visibility("default")))

static pthread_t thread;
static volatile pid_t thread_tid;
static CUresult thread_rc = CUDA_ERROR_UNKNOWN, ctor_rc = CUDA_ERROR_UNKNOWN;
static int thread_blocked, thread_done;

static CUresult ask(const char *symbol)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CUresult r = cuGetProcAddress_v2(symbol, &fn, 12000, 0, &st);
    return r == CUDA_SUCCESS && !fn ? CUDA_ERROR_UNKNOWN : r;
}

static void *first_call(void *arg)
{
    (void)arg;
    __atomic_store_n(&thread_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    thread_rc = ask("cuDriverGetVersion");
    __atomic_store_n(&thread_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* 'S' in /proc/self/task/TID/stat: the thread sleeps (on the loader's lock
 * or on a lock of the shim). */
static int sleeping(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

__attribute__((constructor)) static void start(void)
{
    if (pthread_create(&thread, NULL, first_call, NULL) != 0)
        return;
    struct timespec tick = {0, 1000000};
    pid_t tid;
    while (!(tid = __atomic_load_n(&thread_tid, __ATOMIC_ACQUIRE)))
        nanosleep(&tick, NULL);
    /* Up to 2 s for the thread to block; with a shim that never makes it
     * wait it may finish first, which proves nothing either way. */
    for (int i = 0; i < 2000 && !sleeping(tid) && !__atomic_load_n(&thread_done, __ATOMIC_ACQUIRE);
         i++)
        nanosleep(&tick, NULL);
    thread_blocked = sleeping(tid);
    struct timespec settle = {0, 20000000};
    nanosleep(&settle, NULL);
    ctor_rc = ask("cuInit");
}

/* Joins the thread; fills the two results. */
VR_CTOR_EXPORT int vr_ctor_race_join(int *blocked, int *ctor_result, int *thread_result)
{
    int rc = pthread_join(thread, NULL);
    *blocked = thread_blocked;
    *ctor_result = (int)ctor_rc;
    *thread_result = (int)thread_rc;
    return rc;
}
