/* sim_host: page-locked host memory (cuMemHostAlloc, cuMemFreeHost).
 *
 * Host memory is host memory here as on a GPU machine; what the driver adds
 * is that it knows which pointers it handed out: cuMemFreeHost takes only
 * those (cuda.h: "Frees the memory space pointed to by p, which must have
 * been returned by a previous call to cuMemHostAlloc"), anything else is
 * CUDA_ERROR_INVALID_VALUE. Each allocation is its own anonymous mapping, so
 * a use after free faults as it would on a GPU machine.
 */
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>

#include <cuda.h>

#include "sim.h"

struct host_alloc {
    void *p;
    size_t len;
    struct host_alloc *next;
};

static pthread_mutex_t g_host_mu = PTHREAD_MUTEX_INITIALIZER;
static struct host_alloc *g_host;

static const unsigned k_host_flags =
    CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;

/* Assumption (cuda.h is silent): a size of 0 is CUDA_ERROR_INVALID_VALUE, as
 * cuMemAlloc's is. */
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    SIM_ENTER(cuMemHostAlloc);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (!pp || bytesize == 0 || (Flags & ~k_host_flags))
        return CUDA_ERROR_INVALID_VALUE;
    struct host_alloc *a = sim_calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        sim_free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->p = p;
    a->len = bytesize;
    pthread_mutex_lock(&g_host_mu);
    a->next = g_host;
    g_host = a;
    pthread_mutex_unlock(&g_host_mu);
    *pp = p;
    return CUDA_SUCCESS;
}

/* Assumption: freeing needs no current context (the memory is portable
 * between contexts only with CU_MEMHOSTALLOC_PORTABLE, but the pointer names
 * the allocation by itself). */
CUresult cuMemFreeHost(void *p)
{
    SIM_ENTER(cuMemFreeHost);
    SIM_CHECK_INIT();
    struct host_alloc *a = NULL;
    pthread_mutex_lock(&g_host_mu);
    for (struct host_alloc **pa = &g_host; *pa; pa = &(*pa)->next)
        if ((*pa)->p == p && p) {
            a = *pa;
            *pa = a->next;
            break;
        }
    pthread_mutex_unlock(&g_host_mu);
    if (!a)
        return CUDA_ERROR_INVALID_VALUE;
    munmap(a->p, a->len);
    sim_free(a);
    return CUDA_SUCCESS;
}
