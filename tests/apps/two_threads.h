/* two_threads: what the two-thread capture probes share (capture_threads,
 * capture_mem): a phase both threads step through, so that one thread's
 * calls land while the other holds its capture, and a checksum of one
 * buffer's bytes. Include after vr_check.h. */
#ifndef VR_TWO_THREADS_H
#define VR_TWO_THREADS_H

#include <pthread.h>
#include <stdint.h>

#define N ((unsigned long long)(1u << 19)) /* floats: 2 MiB buffers, VMM-backed under the shim */
#define BYTES (N * sizeof(float))

static pthread_mutex_t phase_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t phase_cv = PTHREAD_COND_INITIALIZER;
static int phase;

static void set_phase(int p)
{
    pthread_mutex_lock(&phase_mu);
    phase = p;
    pthread_cond_broadcast(&phase_cv);
    pthread_mutex_unlock(&phase_mu);
}

static void wait_phase(int p)
{
    pthread_mutex_lock(&phase_mu);
    while (phase < p)
        pthread_cond_wait(&phase_cv, &phase_mu);
    pthread_mutex_unlock(&phase_mu);
}

/* FNV-1a over the buffer's BYTES bytes. */
static uint64_t checksum(CUdeviceptr p)
{
    static float host[N];
    CK(cuMemcpyDtoH(host, p, BYTES));
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)host;
    for (size_t i = 0; i < BYTES; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#endif
